"""Typed effects of primitives.  Code generation reads them (a WAIT reports
where it blocks); a task scheduler and a race detector read them to order and
check accesses."""
import enum


class Effect(enum.Enum):
    READ = "read"                  # reads local memory (a tensor or this rank's window copy)
    WRITE = "write"                # writes local memory
    REMOTE_READ = "remote_read"    # reads a peer's window copy
    REMOTE_WRITE = "remote_write"  # writes a peer's window copy
    SIGNAL = "signal"              # sets / adds a signal cell that a WAIT may be blocked on
    WAIT = "wait"                  # blocks until a signal cell reaches a value
    ALLOC = "alloc"                # allocates memory (a window buffer, an intermediate tensor)


__all__ = ["Effect"]
