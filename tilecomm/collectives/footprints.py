"""What each collective reads and writes, and where it synchronises, as one
rank runs it *on the chip* -- the algorithm the reference describes for the
InCore composite and the HOST builtin, not tilecomm's own (``algorithms.py``
moves the same bytes but may synchronise more).  The race check orders a
collective's accesses by these, so an access the chip leaves unordered is
reported even where tilecomm's implementation happens to order it.

A footprint is the call's steps in order: ``("read" | "write", view,
member, lo, hi)`` -- flat elements [lo, hi) of member ``member``'s copy of
window ``view`` -- and ``("barrier", lane, generation, cells)``, one
generation of the call's credit barrier (every member arrives before any
leaves); ``cells[src]`` is the signal cell (its offsets) where domain rank
``src``'s arrival lands in each member's copy, so the check can tell when a
stray notify into that cell lets a member leave before ``src`` arrived.
Where each collective synchronises on the chip:

* allreduce (mesh; InCore composite and HOST builtin, per lane): ready
  barrier, every member's copy of the lane's range read and reduced, a
  barrier, then this rank's own copy stored -- *after* the last barrier, so
  a peer that reads this rank's result later needs a synchronisation of its
  own;  ring (InCore): the same shape; ring (HOST): a final barrier row
  after the stores;
* reduce_scatter: ready barrier, row ``me`` read from every copy, the
  read-complete barrier, row ``me`` stored into this rank's copy after it;
* broadcast: a barrier (the root's data is staged), then non-roots read the
  root's copy into their own -- no barrier after it, so a root that
  overwrites its copy after the call races with a slow reader;
* allgather / all_to_all / all_to_all_v: this rank's row (block) written into
  every member's copy *before* the only barrier -- a member that still
  reads its target from earlier work races with a peer's entry; all_to_all_v
  writes only the rows its (clamped) send count moves;
* barrier: one generation.

A window operand read as plain input (a HOST call's ``local_data`` /
``input`` / ``send_counts``) is a read of this rank's whole copy before the
first barrier.
"""
from __future__ import annotations

from .algorithms import HOST_TILE, sent_rows
from .data import split
from .protocol import mesh_offsets


def _size(view) -> int:
    return int(view.local.size)


def _inputs(*operands) -> list:
    """Reads of this rank's copy of each window operand read as plain input."""
    return [("read", x, x.rank, 0, _size(x)) for x in operands if hasattr(x, "buffer")]


def _each(kind, view, lo, hi) -> list:
    return [(kind, view, m, lo, hi) for m in range(view.nranks)]


def _barrier(signal, lane: int, gen: int, ring: bool = False) -> tuple:
    """Generation ``gen`` of the credit barrier on ``signal``'s lane ``lane``
    (ring: row ``gen - 1``, one column per source)."""
    n = signal.nranks
    cells = tuple((gen - 1, src) if ring else mesh_offsets(len(signal.shape), src, lane)
                  for src in range(n))
    return ("barrier", lane, gen, cells)


def allreduce(target, signal, op, mode, core_num, host) -> list:
    n, me = target.nranks, target.rank
    if n == 1:
        return []
    ring = mode == "ring"
    item = target.local.dtype.itemsize
    lanes = int(core_num) if host else 1
    steps = []
    for lane in range(lanes):
        lo, hi = split(_size(target), lanes, lane, item, HOST_TILE) if lanes > 1 else \
            (0, _size(target))
        if lo == hi and lanes > 1:
            steps.append(_barrier(signal, lane, 1, ring))       # a lane without data
            continue
        steps += [_barrier(signal, lane, 1, ring), *_each("read", target, lo, hi),
                  _barrier(signal, lane, 2, ring), ("write", target, me, lo, hi)]
        if ring and host:                     # the HOST ring's final barrier row
            steps.append(_barrier(signal, lane, 3, ring))
    return steps


def reduce_scatter(target, signal, op, host) -> list:
    n, me = signal.nranks, signal.rank
    if n == 1:
        return []
    size = _size(target) // n
    return [_barrier(signal, 0, 1), *_each("read", target, me * size, (me + 1) * size),
            _barrier(signal, 0, 2), ("write", target, me, me * size, (me + 1) * size)]


def barrier(signal, host) -> list:
    return [_barrier(signal, 0, 1)]


def broadcast(target, signal, root, host) -> list:
    me, root = signal.rank, int(root)
    copy = [] if me == root else [("read", target, root, 0, _size(target)),
                                  ("write", target, me, 0, _size(target))]
    return [_barrier(signal, 0, 1), *copy]


def _rows_out(target, signal) -> list:
    n, me = signal.nranks, signal.rank
    size = _size(target) // n
    return _each("write", target, me * size, (me + 1) * size)


def allgather(local_data, target, signal, host) -> list:
    return [*_inputs(local_data), *_rows_out(target, signal), _barrier(signal, 0, 1)]


def all_to_all(input, target, signal, host) -> list:
    return [*_inputs(input), *_rows_out(target, signal), _barrier(signal, 0, 1)]


def all_to_all_v(input, target, signal, send_counts, recv_counts, core_num, host) -> list:
    n, me = signal.nranks, signal.rank
    # this rank's count lands in element (me, 0) / (me,) of every member's recv_counts
    cols = recv_counts.shape[1] if len(recv_counts.shape) == 2 else 1
    counts = _each("write", recv_counts, me * cols, me * cols + 1)
    # block ``me`` of member m's target: only the first sent_rows(count) rows move
    rows = target.local.shape[0]
    row, cap = _size(target) // rows, rows // n
    sent = getattr(send_counts, "local", send_counts).reshape(-1)
    lo = me * cap * row
    blocks = [("write", target, m, lo, lo + sent_rows(sent[m] if m < sent.size else 0, cap) * row)
              for m in range(n)]
    return [*_inputs(input, send_counts), *counts,
            *(b for b in blocks if b[4] > b[3]), _barrier(signal, 0, 1)]


__all__ = ["allgather", "allreduce", "all_to_all", "all_to_all_v", "barrier", "broadcast",
           "reduce_scatter"]
