"""Messages between the controller and the rank workers (over the launcher's
channel, one per rank; pickled).  Exit codes of a worker process."""
from __future__ import annotations

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
    """No more dispatches in this run: report Done once the queue is drained."""


@dataclass(frozen=True)
class Shutdown:
    """Exit once the queue is drained."""


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
