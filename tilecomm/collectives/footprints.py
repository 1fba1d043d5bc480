"""What each collective reads and writes, and where it synchronises, as one
rank runs it (``algorithms.py``) -- for a race check, which must see a
collective's accesses to peers' copies and order them like the barriers the
call really passes, no more.

A footprint is the call's steps in order: ``("read" | "write", view,
member, lo, hi)`` -- flat elements [lo, hi) of member ``member``'s copy of
window ``view`` -- and ``("barrier", lane, generation)``, one generation of
the call's credit barrier (every member arrives before any leaves).  Where
each collective synchronises:

* allreduce: per lane, ready barrier, then this rank's slice read from every
  copy and written to every copy, then done barrier;
* reduce_scatter: barrier, row ``me`` read from every copy and written into
  this rank's, barrier;
* broadcast: barrier (the root's data is staged), non-roots copy the root's
  copy into their own, barrier (so the root may overwrite its copy after);
* allgather / all_to_all / all_to_all_v: this rank's row (block) written into
  every member's copy *before* the only barrier -- a member that still
  reads its target from earlier work races with a peer's entry;
* barrier: one generation.

A window operand read as plain input (a HOST call's ``local_data`` /
``input`` / ``send_counts``) is a read of this rank's whole copy before the
first barrier.
"""
from __future__ import annotations

from .algorithms import HOST_TILE
from .data import split


def _size(view) -> int:
    return int(view.local.size)


def _inputs(*operands) -> list:
    """Reads of this rank's copy of each window operand read as plain input."""
    return [("read", x, x.rank, 0, _size(x)) for x in operands if hasattr(x, "buffer")]


def _each(kind, view, lo, hi) -> list:
    return [(kind, view, m, lo, hi) for m in range(view.nranks)]


def allreduce(target, signal, op, mode, core_num, host) -> list:
    n, me = target.nranks, target.rank
    if n == 1:
        return []
    item = target.local.dtype.itemsize
    lanes = int(core_num) if host else 1
    steps = []
    for lane in range(lanes):
        lo, hi = split(_size(target), lanes, lane, item, HOST_TILE) if lanes > 1 else \
            (0, _size(target))
        a, b = split(hi - lo, n, me, item)
        steps += [("barrier", lane, 1), *_each("read", target, lo + a, lo + b),
                  *_each("write", target, lo + a, lo + b), ("barrier", lane, 2)]
    return steps


def reduce_scatter(target, signal, op, host) -> list:
    n, me = signal.nranks, signal.rank
    if n == 1:
        return []
    size = _size(target) // n
    return [("barrier", 0, 1), *_each("read", target, me * size, (me + 1) * size),
            ("write", target, me, me * size, (me + 1) * size), ("barrier", 0, 2)]


def barrier(signal, host) -> list:
    return [("barrier", 0, 1)]


def broadcast(target, signal, root, host) -> list:
    me, root = signal.rank, int(root)
    copy = [] if me == root else [("read", target, root, 0, _size(target)),
                                  ("write", target, me, 0, _size(target))]
    return [("barrier", 0, 1), *copy, ("barrier", 0, 2)]


def _rows_out(target, signal) -> list:
    n, me = signal.nranks, signal.rank
    size = _size(target) // n
    return _each("write", target, me * size, (me + 1) * size)


def allgather(local_data, target, signal, host) -> list:
    return [*_inputs(local_data), *_rows_out(target, signal), ("barrier", 0, 1)]


def all_to_all(input, target, signal, host) -> list:
    return [*_inputs(input), *_rows_out(target, signal), ("barrier", 0, 1)]


def all_to_all_v(input, target, signal, send_counts, recv_counts, host) -> list:
    me = signal.rank
    # this rank's count lands in element (me, 0) / (me,) of every member's recv_counts
    cols = recv_counts.shape[1] if len(recv_counts.shape) == 2 else 1
    counts = _each("write", recv_counts, me * cols, me * cols + 1)
    return [*_inputs(input, send_counts), *counts, *_rows_out(target, signal),
            ("barrier", 0, 1)]


__all__ = ["allgather", "allreduce", "all_to_all", "all_to_all_v", "barrier", "broadcast",
           "reduce_scatter"]
