"""Typed effects of primitives.  Code generation reads them (a WAIT reports
where it blocks); a task scheduler, the protocol lint and the rank's
recorder (``runtime/rank/recorder.py``) read them to order and check
accesses.

``Effect`` is an op's coarse kind of effect.  ``Touch`` says, operand by
operand, which memory an op reads or writes at run time: the recorder
generates each op's recording wrapper from its record's touches, so every
sink (tracing, race checking, exploration) sees every access an op makes,
with its exact region."""
import enum
from typing import Callable, NamedTuple


class Effect(enum.Enum):
    READ = "read"                  # reads local memory (a tensor or this rank's window copy)
    WRITE = "write"                # writes local memory
    REMOTE_READ = "remote_read"    # reads a peer's window copy
    REMOTE_WRITE = "remote_write"  # writes a peer's window copy
    SIGNAL = "signal"              # sets / adds a signal cell that a WAIT may be blocked on
    WAIT = "wait"                  # blocks until a signal cell reaches a value
    ALLOC = "alloc"                # allocates memory (a window buffer, an intermediate tensor)


# the effects a Touch may have
TOUCH_EFFECTS = (Effect.READ, Effect.WRITE, Effect.REMOTE_READ, Effect.REMOTE_WRITE)


class Touch(NamedTuple):
    """One operand's memory that an op reads or writes when it runs.

    ``region(*using)`` gives what is touched, computed from the call's
    arguments (the implementation's parameters named in ``using``): for a
    local touch the ndarray view of the operand's memory, for a remote one
    the index into the peer's copy (``peer`` names the parameter with the
    peer).  ``region`` None: the whole operand, when it is an array (a
    scalar operand touches no memory).  A write is atomic when the
    parameter ``atomic`` is true (an AtomicAdd store)."""

    param: str
    effect: Effect
    region: Callable | None = None
    using: tuple = ()
    atomic: str | None = None
    peer: str | None = None

    @property
    def remote(self) -> bool:
        return self.effect in (Effect.REMOTE_READ, Effect.REMOTE_WRITE)

    @property
    def writes(self) -> bool:
        return self.effect in (Effect.WRITE, Effect.REMOTE_WRITE)

    def params(self) -> tuple:
        """Every implementation parameter the touch reads."""
        return (self.param,) + tuple(self.using) + tuple(p for p in (self.atomic, self.peer) if p)


def reads(param, region=None, using=()):
    return Touch(param, Effect.READ, region, tuple(using))


def writes(param, region=None, using=(), atomic=None):
    return Touch(param, Effect.WRITE, region, tuple(using), atomic)


def remote_reads(param, region, using, peer="peer"):
    return Touch(param, Effect.REMOTE_READ, region, tuple(using), None, peer)


def remote_writes(param, region, using, peer="peer", atomic=None):
    return Touch(param, Effect.REMOTE_WRITE, region, tuple(using), atomic, peer)


__all__ = ["Effect", "TOUCH_EFFECTS", "Touch", "reads", "remote_reads", "remote_writes",
           "writes"]
