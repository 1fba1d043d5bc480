"""Messages between the controller and the rank workers (over the launcher's
channel, one per rank).  Exit codes of a worker process.

On the wire a message is the pickle of ``(tag, *fields)``: pickling the
dataclass itself costs several times more (a class lookup by module path and
the frozen ``__init__`` protocol on every load), and a dispatch is one
message, so it is paid per dispatch.  For the same reason the window and
host-tensor descriptors among a dispatch's arguments travel as plain tuples
with their element type spelled as a string (an ``np.dtype`` pickles through
its reduce protocol, several µs each way): a prepared call's encode + decode
went from about 20 µs to 4 µs per rank.  ``send`` / ``receive`` are the only
places that know this.  The messages are plain slotted dataclasses, not
frozen ones: a frozen dataclass's ``__init__`` sets each field through
``object.__setattr__``, about three times the cost, paid for every dispatch
by the controller and again by the rank.  Nothing changes a message once
built."""
from __future__ import annotations

import os
import pickle
import struct
from dataclasses import dataclass, fields
from multiprocessing.connection import Connection

import numpy as np

from .values import HostRef, WindowBuffer, WindowRef

# exit codes of a rank worker
EXIT_OK = 0              # told to shut down
EXIT_FAILED = 1          # a dispatch raised (reported with a Failed message first)
EXIT_DISCONNECTED = 2    # the controller went away
EXIT_ABORTED = 3         # the controller aborted the call while this rank waited


# ---------------------------------------------------------------- to a worker
@dataclass(slots=True)
class LoadImage:
    """A specialisation compiled after the worker was started."""

    image: object


@dataclass(slots=True)
class Dispatch:
    """Run function ``fname`` of image ``image_key``: this rank's dispatch
    number ``seq``, after each (rank, seq) of ``deps`` has completed."""

    image_key: int
    fname: str
    seq: int
    args: tuple
    deps: tuple
    loc: int


@dataclass(slots=True)
class EndRun:
    """No more dispatches in this run: report it finished (``ControlPlane.finish_run``)
    once the queue is drained.
    ``keep_windows``: the run's windows are persistent (a prepared worker's),
    so the rank keeps them mapped for the next run."""

    keep_windows: bool = False


@dataclass(slots=True)
class Batch:
    """Several messages to one rank, in order, sent as one."""

    messages: tuple


@dataclass(slots=True)
class Shutdown:
    """Exit once the queue is drained."""


@dataclass(slots=True)
class BeginRun:
    """What the run about to start asks of each rank beyond its dispatches,
    sent before its first one and only when it asks anything: ``settings``,
    the run's checkers and artefacts (``rank.artefacts.DfxSettings``: traces,
    dumps, the race check's log, an explored run's plan), or None; ``knobs``,
    the rank-side knobs of the run's config (``config.RankKnobs``) when they
    differ from those the ranks run with, or None."""

    settings: object
    knobs: object = None


@dataclass(slots=True)
class Renumbered:
    """The dispatches a recorded run sent to one rank, sent again
    (``controller/plans.py``): ``body`` is their encoded ``Batch``, the same
    bytes every time, which a rank decodes once and keeps; each dispatch's
    number is shifted by ``shift``, and those of the dispatches it depends
    on by the shift of their rank (``dep_shifts``: ((rank, shift), ...)).
    A rank receives the renumbered dispatches, never this message."""

    body: bytes
    shift: int
    dep_shifts: tuple


# ---------------------------------------------------------------- from a worker
# (a finished run is not a message: ``ControlPlane.finish_run``)
@dataclass(slots=True)
class Failed:
    """A dispatch raised: what the controller reports, in user terms."""

    rank: int
    fname: str
    summary: str
    text: str
    error_type: str
    error_code: str | None
    span: object


@dataclass(slots=True)
class Disconnected:
    """Not sent: what a worker's reader queues when the channel closes."""


# ---------------------------------------------------------------- run artefacts over the channel
@dataclass(frozen=True)
class Files:
    """Run artefacts a rank wrote where process 0 cannot read them (an MPI
    process on another node): ``files`` is ((path relative to ``root``,
    bytes), ...), to be written under ``root`` (process 0's ``dfx_outputs``)
    before the rank is seen finished or gone."""

    root: str
    files: tuple


# ---------------------------------------------------------------- the wire
_KINDS = (LoadImage, Dispatch, EndRun, Shutdown, Failed, Batch, BeginRun, Files, Renumbered)
_TAG = {cls: tag for tag, cls in enumerate(_KINDS)}
_FIELDS = {cls: tuple(f.name for f in fields(cls)) for cls in _KINDS}
_BATCH = _TAG[Batch]
_DISPATCH = _TAG[Dispatch]
_END_RUN = _TAG[EndRun]
_RENUMBERED = _TAG[Renumbered]
# how many recorded bodies a rank keeps decoded (see ``decode``)
BODY_MEMO = 64
# argument descriptors of a dispatch: the first element of their wire tuple
# (a plain tuple argument that starts with a string is wrapped, so it can never
# be taken for one)
_WINDOW_ARG, _HOST_ARG, _PLAIN_ARG = "\0w", "\0h", "\0p"


def _wire_dtype(dt):
    # a builtin numpy type round-trips through its string; others (bfloat16 of
    # ml_dtypes, structured types) are pickled as they are
    return dt.str if isinstance(dt, np.dtype) and dt.isbuiltin == 1 else dt


def _local_dtype(x):
    return np.dtype(x) if type(x) is str else x


def _encode_arg(a):
    t = type(a)
    if t is WindowRef:
        # kept on the (immutable) descriptor: a replayed call (plans.py) or a
        # window passed to every rank sends the same one again and again
        memo = a.__dict__
        wire = memo.get("_wire")
        if wire is None:
            b = a.buffer
            wire = memo["_wire"] = (_WINDOW_ARG, b.id, b.name, b.nbytes, b.devices, b.segments,
                                    a.shape, _wire_dtype(a.dtype))
        return wire
    if t is HostRef:
        return (_HOST_ARG, a.segment, a.offset, a.shape, a.strides, _wire_dtype(a.dtype), a.base)
    if t is tuple and a and type(a[0]) is str:
        return (_PLAIN_ARG, a)
    return a


# how many window descriptors a rank keeps decoded (see ``receive``); fresh
# windows bring new ones every run, so the table is emptied when full
WINDOW_MEMO = 256


def _decode_arg(x, windows):
    if type(x) is tuple and x and type(x[0]) is str:
        if x[0] == _WINDOW_ARG:
            if windows is None:
                return WindowRef(WindowBuffer(*x[1:6]), x[6], _local_dtype(x[7]))
            ref = windows.get(x)
            if ref is None:
                if len(windows) >= WINDOW_MEMO:
                    windows.clear()
                ref = windows[x] = WindowRef(WindowBuffer(*x[1:6]), x[6], _local_dtype(x[7]))
            return ref
        if x[0] == _HOST_ARG:
            return HostRef(*x[1:5], _local_dtype(x[5]), x[6])
        if x[0] == _PLAIN_ARG:
            return x[1]
    return x


def _encode(msg) -> tuple:
    # the messages of every call first, each spelled out (list comprehensions,
    # not generators: a fraction of their cost on one- and two-element tuples)
    t = type(msg)
    if t is Dispatch:
        return (_DISPATCH, msg.image_key, msg.fname, msg.seq,
                tuple([_encode_arg(a) for a in msg.args]), msg.deps, msg.loc)
    if t is Batch:
        return (_BATCH, tuple([_encode(m) for m in msg.messages]))
    if t is EndRun:
        return (_END_RUN, msg.keep_windows)
    if t is Renumbered:
        return (_RENUMBERED, msg.body, msg.shift, msg.dep_shifts)
    return (_TAG[t], *[getattr(msg, f) for f in _FIELDS[t]])


def _decode(wire: tuple, windows=None, bodies=None):
    tag = wire[0]
    if tag == _DISPATCH:
        _, key, fname, seq, args, deps, loc = wire
        return Dispatch(key, fname, seq, tuple([_decode_arg(a, windows) for a in args]), deps,
                        loc)
    if tag == _BATCH:
        out = []
        for m in wire[1]:
            one = _decode(m, windows, bodies)
            if type(one) is Batch:           # a Renumbered: its dispatches, in its place
                out.extend(one.messages)
            else:
                out.append(one)
        return Batch(tuple(out))
    if tag == _END_RUN:
        return EndRun(wire[1])
    if tag == _RENUMBERED:
        return Batch(_renumbered(wire[1], wire[2], wire[3], windows, bodies))
    return _KINDS[tag](*wire[1:])


def _renumbered(body: bytes, shift: int, dep_shifts: tuple, windows, bodies) -> tuple:
    recorded = bodies.get(body) if bodies is not None else None
    if recorded is None:
        recorded = _decode(pickle.loads(body), windows).messages
        if bodies is not None:
            if len(bodies) >= BODY_MEMO:
                bodies.clear()
            bodies[body] = recorded
    if not shift and not any(s for _, s in dep_shifts):
        return recorded                      # the recorded run's own numbers
    shifts = dict(dep_shifts)
    out = []
    for m in recorded:
        if type(m) is Dispatch:
            deps = m.deps
            if deps:
                deps = tuple([(r, s + shifts[r]) for r, s in deps])
            m = Dispatch(m.image_key, m.fname, m.seq + shift, m.args, deps, m.loc)
        out.append(m)
    return tuple(out)


def encode(msg) -> bytes:
    """The bytes of a message on the wire."""
    return pickle.dumps(_encode(msg), pickle.HIGHEST_PROTOCOL)


def decode(data: bytes, windows: dict | None = None, bodies: dict | None = None):
    """The message of ``data``.  ``windows``: a table the caller keeps from
    message to message, in which equal window descriptors decode to one
    shared (immutable) ``WindowRef`` -- a prepared worker's persistent
    windows come back in every call, and a lookup of their wire tuple costs
    a fraction of building the descriptor and its dtype again.  ``bodies``:
    likewise the decoded messages of each ``Renumbered`` body seen."""
    return _decode(pickle.loads(data), windows, bodies)


# ``multiprocessing.connection.Connection``'s framing, spoken directly on a
# pipe's descriptor where the connection is one: a big-endian int32 length
# (-1, then a uint64 length, above 2 GiB), then the bytes.  Its own methods
# cost about a microsecond more per message (a buffer object and two reads
# per receive), on the path of every call.
_LENGTH = struct.Struct("!i")
_LONG_LENGTH = struct.Struct("!Q")
_ONE_WRITE = 16384            # shorter messages go out in one write with their length
_READ = 65536                 # bytes a FrameReader asks for at least per read


def send(conn, msg) -> None:
    """Send a message over a ``multiprocessing`` connection."""
    data = encode(msg)
    if type(conn) is not Connection or len(data) > _ONE_WRITE:
        conn.send_bytes(data)
        return
    fd = conn.fileno()                       # OSError once the connection is closed
    frame = _LENGTH.pack(len(data)) + data
    sent = os.write(fd, frame)
    if sent < len(frame):                    # a pipe whose buffer filled part way
        rest = memoryview(frame)[sent:]
        while rest:
            rest = rest[os.write(fd, rest):]


class FrameReader:
    """Messages read off a ``multiprocessing`` connection's descriptor a
    buffer at a time: one read usually brings a whole message (or several),
    which ``Connection.recv_bytes`` reads in two.  Only one reader may use a
    connection at a time, and nothing else may read it."""

    def __init__(self, conn):
        self._fd = conn.fileno()
        self._buf = bytearray()

    def complete(self) -> bool:
        """Whether a whole message is buffered (nothing is read)."""
        return self._frame() is not None

    def _frame(self):
        """(start, end) of the first buffered message, or None if incomplete."""
        buf = self._buf
        if len(buf) < 4:
            return None
        n = _LENGTH.unpack_from(buf)[0]
        start = 4
        if n == -1:
            if len(buf) < 12:
                return None
            n = _LONG_LENGTH.unpack_from(buf, 4)[0]
            start = 12
        return (start, start + n) if len(buf) >= start + n else None

    def receive(self, windows: dict | None = None, bodies: dict | None = None):
        """The next message (``decode``), reading as much as it takes
        (EOFError once the channel closed)."""
        while True:
            frame = self._frame()
            if frame is not None:
                start, end = frame
                data = bytes(self._buf[start:end])
                del self._buf[:end]
                return decode(data, windows, bodies)
            chunk = os.read(self._fd, _READ)
            if not chunk:
                raise EOFError
            self._buf += chunk


def receive(conn, windows: dict | None = None, bodies: dict | None = None):
    """The next message from a connection (EOFError / OSError when it closed);
    ``windows`` and ``bodies`` as in ``decode``."""
    return decode(conn.recv_bytes(), windows, bodies)
