"""Messages between the controller and the rank workers (over the launcher's
channel, one per rank).  Exit codes of a worker process.

On the wire a message is the pickle of ``(tag, *fields)``: pickling the
dataclass itself costs several times more (a class lookup by module path and
the frozen ``__init__`` protocol on every load), and a dispatch is one
message, so it is paid per dispatch.  ``send`` / ``receive`` are the only
places that know this."""
from __future__ import annotations

import pickle
from dataclasses import dataclass

# exit codes of a rank worker
EXIT_OK = 0              # told to shut down
EXIT_FAILED = 1          # a dispatch raised (reported with a Failed message first)
EXIT_DISCONNECTED = 2    # the controller went away
EXIT_ABORTED = 3         # the controller aborted the call while this rank waited


# ---------------------------------------------------------------- to a worker
@dataclass(frozen=True)
class LoadImage:
    """A specialisation compiled after the worker was started."""

    image: object


@dataclass(frozen=True)
class Dispatch:
    """Run function ``fname`` of image ``image_key``: this rank's dispatch
    number ``seq``, after each (rank, seq) of ``deps`` has completed."""

    image_key: int
    fname: str
    seq: int
    args: tuple
    deps: tuple
    loc: int


@dataclass(frozen=True)
class EndRun:
    """No more dispatches in this run: report Done once the queue is drained.
    ``keep_windows``: the run's windows are persistent (a prepared worker's),
    so the rank keeps them mapped for the next run."""

    keep_windows: bool = False


@dataclass(frozen=True)
class Batch:
    """Several messages to one rank, in order, sent as one."""

    messages: tuple


@dataclass(frozen=True)
class Shutdown:
    """Exit once the queue is drained."""


@dataclass(frozen=True)
class BeginRun:
    """The run about to start writes run artefacts (``artefacts.DfxSettings``);
    sent only then, before its first dispatch."""

    settings: object


# ---------------------------------------------------------------- from a worker
@dataclass(frozen=True)
class Done:
    rank: int


@dataclass(frozen=True)
class Failed:
    """A dispatch raised: what the controller reports, in user terms."""

    rank: int
    fname: str
    summary: str
    text: str
    error_type: str
    error_code: str | None
    span: object


@dataclass(frozen=True)
class Disconnected:
    """Not sent: what a worker's reader queues when the channel closes."""


# ---------------------------------------------------------------- the wire
_KINDS = (LoadImage, Dispatch, EndRun, Shutdown, Done, Failed, Batch, BeginRun)
_TAG = {cls: tag for tag, cls in enumerate(_KINDS)}
_BATCH = _TAG[Batch]


def _encode(msg) -> tuple:
    # a frozen dataclass without slots keeps its fields in __dict__, in order
    if type(msg) is Batch:
        return (_BATCH, tuple(_encode(m) for m in msg.messages))
    return (_TAG[type(msg)], *msg.__dict__.values())


def _decode(wire: tuple):
    tag, *fields = wire
    if tag == _BATCH:
        return Batch(tuple(_decode(m) for m in fields[0]))
    return _KINDS[tag](*fields)


def send(conn, msg) -> None:
    """Send a message over a ``multiprocessing`` connection."""
    conn.send_bytes(pickle.dumps(_encode(msg), pickle.HIGHEST_PROTOCOL))


def receive(conn):
    """The next message from a connection (EOFError / OSError when it closed)."""
    return _decode(pickle.loads(conn.recv_bytes()))
