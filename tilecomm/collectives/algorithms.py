"""The collectives, as one rank runs them.

Each function takes the rank (a ``protocol.RankLink``), window views and
plain arrays, and the span id of the call (``loc``: where a blocked rank is
reported).  What each call costs on the hot path is resolved once per call
site and view and cached on the view (``WindowView.plans``): signal cell
handles, and where peer memory is mapped, the array views of every piece.

Allreduce (mesh and ring) is a reduce-scatter followed by an all-gather done
in place: after the ready barrier, rank r alone reads slice r of every
member's copy, reduces it (in rank order 0..N-1, so every element is
computed once and identically everywhere) and writes the result into slice
r of every copy.  No other rank reads or writes slice r in between, so no
barrier is needed between reading and writing; the second barrier tells
every rank that every slice has landed.  Every element is read once and
written once per member -- the least memory traffic an allreduce can have.
"""
from __future__ import annotations

import numpy as np

from ..errors import RuntimeFault
from ..transport.base import NOTIFY_SET
from .data import CHUNK_BYTES, FlatWindow, chunks, split
from .names import COLLECTIVES, collective_id
from .protocol import CreditBarrier

# ids in the order of ``names.NAMES``
ALLREDUCE, BARRIER, BROADCAST, ALLGATHER, REDUCE_SCATTER, ALL_TO_ALL, ALL_TO_ALL_V = (
    collective_id(n) for n in COLLECTIVES)

# ReduceOp -> the numpy ufunc that combines two operands
REDUCE = {0: np.add, 1: np.maximum, 2: np.minimum, 3: np.multiply}
# HOST allreduce lanes split the data in tiles of this many elements
HOST_TILE = 256


def _fault(msg, code="TC503", hint=None):
    return RuntimeFault(msg, code=code, hint=hint)


def _flat(link, view) -> FlatWindow:
    f = view.plans.get("flat")
    if f is None:
        f = view.plans["flat"] = FlatWindow(link.transport, view)
    return f


def _local(x) -> np.ndarray:
    """The array of a plain tensor or of this rank's copy of a window."""
    return getattr(x, "local", x)


def _barrier(link, signal, name, coll, loc, generations, *, lane=0,
             ring=False) -> CreditBarrier:
    key = ("barrier", loc, lane, ring)
    b = signal.plans.get(key)
    if b is None:
        b = signal.plans[key] = CreditBarrier(link, signal, name, coll, loc, generations,
                                              lane=lane, ring=ring)
    return b


def _cached(view, key, build, *args):
    """The plan of one call site on these views, ``build(*args)`` the first
    time: checks and lookups run once per dispatch, not per call (a kernel
    loop calls the same site many times)."""
    p = view.plans.get(key)
    if p is None:
        p = view.plans[key] = build(*args)
    return p


def _check_domain(name, signal, *windows):
    """Every window operand of one call belongs to the signal's comm domain."""
    devs = signal.buffer.devices
    for w in windows:
        if w is not None and w.buffer.devices != devs:
            raise _fault(f"{name}: window '{w.buffer.name}' belongs to the comm domain "
                         f"{list(w.buffer.devices)} but signal '{signal.buffer.name}' to "
                         f"{list(devs)}; one collective runs on one domain",
                         hint="pass every window of the call to the same dispatches")


def _check_mesh_signal(name, signal, lanes=1):
    n, shape = signal.nranks, signal.shape
    if shape[0] < n or len(shape) == 2 and shape[1] < lanes:
        want = f"[{n}]" if len(shape) == 1 else f"[{n}, {max(lanes, 1)}]"
        raise _fault(f"{name}: signal '{signal.buffer.name}' has shape {list(shape)}, too small "
                     f"for a comm domain of {n} rank(s); it needs at least {want}",
                     code="TC502", hint="size the signal [pld.world_size(), 1] (or the domain "
                     "size)")


def _check_ring_signal(name, signal, extra_row):
    n = signal.nranks
    # one rank has no ring rounds, but a signal cannot have a zero-size
    # dimension: [1, 1] then
    rows = max(1, 2 * (n - 1) + (1 if extra_row else 0))
    if tuple(signal.shape) != (rows, n):
        raise _fault(f"{name} mode=\"ring\": signal '{signal.buffer.name}' has shape "
                     f"{list(signal.shape)}; a ring over {n} rank(s) needs [{rows}, {n}]",
                     code="TC502", hint="the ring signal is [2*(NR-1), NR] in a kernel and "
                     "[2*(NR-1)+1, NR] in a HOST orchestrator")


def _rows(name, view, n, what):
    """(rows, row length) of a [NR, SIZE] operand, NR checked against the domain."""
    a = _local(view)
    if a.ndim < 1 or a.shape[0] != n:
        raise _fault(f"{name}: {what} has shape {list(a.shape)}; its first dimension must be the "
                     f"comm domain's {n} rank(s)", code="TC502")
    return a.shape[0], a.size // a.shape[0]


# ------------------------------------------------------------------ reduce
class ReducePlan:
    """Reduce elements [lo, hi) over every member and write the result to the
    members in ``dests`` (all of them for allreduce, this rank for
    reduce_scatter)."""

    __slots__ = ("data", "ufunc", "pieces", "lo", "hi", "dests", "scratch", "acc")

    def __init__(self, data: FlatWindow, ufunc, lo, hi, dests):
        self.data, self.ufunc, self.lo, self.hi, self.dests = data, ufunc, lo, hi, dests
        me, item = data.me, data.dtype.itemsize
        step = max(1, min(hi - lo, CHUNK_BYTES // item))
        # ranks 0 and 1 may reduce straight into their own copy: their own slice
        # is consumed by the first ufunc call, before anything overwrites it
        in_place = me < 2
        self.acc = None if in_place else np.empty(step, data.dtype)
        self.pieces = None
        if data.direct is not None:
            self.pieces = []
            for a, b in chunks(lo, hi, item):
                ins = [d[a:b] for d in data.direct]
                acc = ins[me] if in_place else self.acc[:b - a]
                outs = [data.direct[m][a:b] for m in dests if not (m == me and in_place)]
                self.pieces.append((ins, acc, outs))
            self.scratch = None
        else:
            self.scratch = np.empty((data.n, step), data.dtype)

    def run(self):
        ufunc = self.ufunc
        if self.pieces is not None:
            for ins, acc, outs in self.pieces:
                ufunc(ins[0], ins[1], out=acc)
                for x in ins[2:]:
                    ufunc(acc, x, out=acc)
                for o in outs:
                    o[...] = acc         # same dtype and shape: cheaper than np.copyto
            return
        data, me = self.data, self.data.me
        for a, b in chunks(self.lo, self.hi, data.dtype.itemsize):
            ins = [data.read(m, a, b, self.scratch[m]) for m in range(data.n)]
            acc = ins[me] if self.acc is None else self.acc[:b - a]
            ufunc(ins[0], ins[1], out=acc)
            for x in ins[2:]:
                ufunc(acc, x, out=acc)
            for m in self.dests:
                if m != me or self.acc is not None:
                    data.write(m, a, b, acc)


def _reduce_plan(link, target, key, ufunc, lo, hi, dests) -> ReducePlan:
    p = target.plans.get(key)
    if p is None:
        p = target.plans[key] = ReducePlan(_flat(link, target), ufunc, lo, hi, dests)
    return p


class Steps:
    """A call as its steps: per signal lane, enter, then alternate barrier
    generations and work (``work[i]`` runs between generations i and i+1;
    ``None`` is nothing), then the epilogue."""

    __slots__ = ("lanes",)

    def __init__(self, lanes):
        self.lanes = lanes              # [(CreditBarrier, [work before gen 1, after gen 1, ...])]

    def run(self, *args):
        """``args``: the call's operands that may change from call to call at one
        site (a plain input tensor); every work step receives them."""
        for bar, work in self.lanes:
            bar.enter()
            for g, w in enumerate(work):
                if w is not None:
                    w(*args)
                bar.sync(g)
            bar.finish()


    def issue(self, *args):
        """The split-phase form of ``run`` (``defer=True``), for a call of one
        lane whose work all comes before its only barrier generation
        (allgather, all_to_all, barrier): enter, the work, this rank's
        arrivals.  Returns the barrier; its ``arrive`` result is what the
        caller must see before the call is complete, and its ``finish`` (the
        epilogue) must run once it has."""
        (bar, work), = self.lanes
        if len(work) != 1:
            raise AssertionError("issue() needs a call of one barrier generation")
        bar.enter_deferred()
        if work[0] is not None:
            work[0](*args)
        return bar


class AllreduceSteps:
    """An allreduce call: per lane, the ready barrier, this rank's slice reduced
    into every copy, the done barrier, the epilogue (written out: this is the
    hot path of small allreduces)."""

    __slots__ = ("lanes",)

    def __init__(self, lanes):
        self.lanes = lanes              # [(CreditBarrier, ReducePlan)]

    def run(self):
        for bar, plan in self.lanes:
            bar.enter()
            bar.sync(0)                  # every member's data is staged
            plan.run()                   # this rank's slice, into every copy
            bar.sync(1)                  # every slice has landed everywhere
            bar.finish()


def allreduce(link, target, signal, op, mode, core_num, loc, host):
    plans = target.plans
    p = plans.get((loc, signal))
    if p is None:
        p = plans[(loc, signal)] = _allreduce_plan(link, target, signal, op, mode, core_num,
                                                   loc, host)
    p.run()
    return target


def _allreduce_plan(link, target, signal, op, mode, core_num, loc, host):
    name = "pld.tensor.allreduce"
    _check_domain(name, signal, target)
    ring = mode == "ring"
    lanes = int(core_num) if host else 1
    if ring:
        _check_ring_signal(name, signal, host)
    else:
        _check_mesh_signal(name, signal, lanes)
    data = _flat(link, target)
    n, me = data.n, data.me
    if n == 1:
        return AllreduceSteps([])
    ufunc = REDUCE[int(op)]
    item = data.dtype.itemsize
    steps = []
    for lane in range(lanes):
        lo, hi = split(data.size, lanes, lane, item, HOST_TILE) if lanes > 1 else (0, data.size)
        a, b = split(hi - lo, n, me, item)
        plan = ReducePlan(data, ufunc, lo + a, lo + b, range(n))
        steps.append((_barrier(link, signal, name, ALLREDUCE, loc, 2, lane=lane, ring=ring),
                      plan))
    return AllreduceSteps(steps)


def reduce_scatter(link, target, signal, op, loc, host):
    _cached(target, ("reduce_scatter", loc, signal), _reduce_scatter_plan,
            link, target, signal, op, loc).run()
    return target


def _reduce_scatter_plan(link, target, signal, op, loc):
    name = "pld.tensor.reduce_scatter"
    _check_domain(name, signal, target)
    _check_mesh_signal(name, signal)
    n, me = signal.nranks, signal.rank
    _, size = _rows(name, target, n, "target")
    if n == 1:
        return Steps([])
    plan = ReducePlan(_flat(link, target), REDUCE[int(op)], me * size, (me + 1) * size, (me,))
    bar = _barrier(link, signal, name, REDUCE_SCATTER, loc, 2)
    # generation 1: every member staged its rows; only this rank reads or
    # writes row me; generation 2: nobody still reads a peer's copy
    return Steps([(bar, [None, plan.run])])


# ------------------------------------------------------------------ movement
def barrier(link, signal, loc, host):
    _cached(signal, ("barrier", loc), _barrier_plan, link, signal, loc).run()
    return signal


def _barrier_plan(link, signal, loc):
    name = "pld.tensor.barrier"
    _check_mesh_signal(name, signal)
    return Steps([(_barrier(link, signal, name, BARRIER, loc, 1), [None])])


def broadcast(link, target, signal, root, loc, host):
    _cached(target, ("broadcast", loc, signal), _broadcast_plan,
            link, target, signal, root, loc).run()
    return target


def issue_broadcast(link, target, signal, root, loc):
    """``broadcast(..., defer=True)`` in a kernel: this rank arrives at the
    first generation (the root's data is staged) and returns; once every
    rank has, a non-root copies the root's data and arrives at the second,
    and once every rank has done that the call is complete -- the same two
    generations as the blocking call, so the root may overwrite its copy as
    soon as its TaskId completes.  Returns (the barrier, the first
    generation's conditions, the work before the second)."""
    steps = _cached(target, ("broadcast", loc, signal), _broadcast_plan,
                    link, target, signal, root, loc)
    (bar, work), = steps.lanes
    bar.enter_deferred()
    return bar, bar.arrive(0), work[1]


def _broadcast_plan(link, target, signal, root, loc):
    name = "pld.tensor.broadcast"
    _check_domain(name, signal, target)
    _check_mesh_signal(name, signal)
    n = signal.nranks
    root = int(root)
    if not 0 <= root < n:
        raise _fault(f"{name}: root {root} is not a rank of the comm domain of {n} rank(s)",
                     code="TC501", hint="root is a rank index within the window's comm domain")
    data = _flat(link, target)
    fetch = None if data.me == root else (lambda: _fetch(data, root, data.local))
    bar = _barrier(link, signal, name, BROADCAST, loc, 2)
    # generation 1: the root has staged its data; non-roots copy it; a second
    # generation, so that the root may overwrite its copy as soon as it
    # returns: every reader is done with it by then
    return Steps([(bar, [None, fetch])])


def _fetch(data: FlatWindow, member: int, dst: np.ndarray) -> None:
    if data.direct is not None:
        np.copyto(dst, data.direct[member])
    else:
        data.transport.get(data.handles[member], (slice(0, data.size),), dst)


def _deliver(data: FlatWindow, lo: int, hi: int, parts) -> None:
    """Elements [lo, hi) of member m's copy become ``parts[m]`` (this rank's
    own copy by a local copy, the peers' through the transport)."""
    for m, part in enumerate(parts):
        if m == data.me:
            np.copyto(data.local[lo:hi], part)
        else:
            data.write(m, lo, hi, part)


def allgather(link, local_data, target, signal, loc, host):
    _cached(target, ("allgather", loc, signal), _exchange_plan, "pld.tensor.allgather",
            ALLGATHER, _same_row_for_all, link, local_data, target, signal, loc, host).run(
        _local(local_data))
    return target


def issue_allgather(link, local_data, target, signal, loc):
    """``allgather(..., defer=True)`` in a kernel: the rows go out and this
    rank arrives; returns (the barrier, the conditions left to see)."""
    bar = _cached(target, ("allgather", loc, signal), _exchange_plan, "pld.tensor.allgather",
                  ALLGATHER, _same_row_for_all, link, local_data, target, signal, loc,
                  False).issue(_local(local_data))
    return bar, bar.arrive(0)


def issue_all_to_all(link, input, target, signal, loc):
    """``all_to_all(..., defer=True)`` in a kernel (as ``issue_allgather``)."""
    bar = _cached(target, ("all_to_all", loc, signal), _exchange_plan, "pld.tensor.all_to_all",
                  ALL_TO_ALL, _row_per_member, link, input, target, signal, loc,
                  False).issue(_local(input))
    return bar, bar.arrive(0)


def issue_barrier(link, signal, loc):
    """``barrier(..., defer=True)`` in a kernel (as ``issue_allgather``)."""
    bar = _cached(signal, ("barrier", loc), _barrier_plan, link, signal, loc).issue()
    return bar, bar.arrive(0)


def all_to_all(link, input, target, signal, loc, host):
    _cached(target, ("all_to_all", loc, signal), _exchange_plan, "pld.tensor.all_to_all",
            ALL_TO_ALL, _row_per_member, link, input, target, signal, loc, host).run(
        _local(input))
    return target


def _same_row_for_all(name, src, n, size):
    """allgather: every member gets this rank's single row."""
    src = src.reshape(-1)
    if src.size != size:
        raise _fault(f"{name}: local_data has {src.size} elements but a row of target has "
                     f"{size}", code="TC502")
    return [src] * n


def _row_per_member(name, src, n, size):
    """all_to_all: member m gets row m of the input."""
    _rows(name, src, n, "input")
    return np.ascontiguousarray(src.reshape(n, -1))


def _exchange_plan(name, coll, rows_for, link, source, target, signal, loc, host):
    """allgather / all_to_all: row ``me`` of member m's target becomes
    ``rows_for(...)[m]``; the rows go out first, then one barrier generation
    tells every rank that every row has landed."""
    _check_domain(name, signal, target, source if host else None)
    _check_mesh_signal(name, signal)
    n, me = signal.nranks, signal.rank
    _, size = _rows(name, target, n, "target")
    data = _flat(link, target)
    lo, hi = me * size, (me + 1) * size

    def push(src):
        _deliver(data, lo, hi, rows_for(name, src, n, size))

    return Steps([(_barrier(link, signal, name, coll, loc, 1), [push])])


def sent_rows(count, cap: int) -> int:
    """Rows all_to_all_v moves for a send count: the count clamped to
    ``[0, MAX_RECV]``."""
    return min(max(int(count), 0), cap)


def a2av_blocks(nranks: int, core_num: int) -> int:
    """AIV blocks a HOST all_to_all_v asking for ``core_num`` launches: all of
    them below the rank count, else a whole multiple of it (each block serves
    the same number of peers)."""
    return core_num if core_num < nranks else (core_num // nranks) * nranks


def all_to_all_v(link, input, target, signal, send_counts, recv_counts, core_num, loc, host):
    # the plan holds recv_counts' cells: it is part of the key
    _cached(target, ("all_to_all_v", loc, signal, recv_counts), _all_to_all_v_plan,
            link, input, target, signal, send_counts, recv_counts, core_num, loc, host).run(
        _local(input), _local(send_counts))
    return target


def issue_all_to_all_v(link, input, target, signal, send_counts, recv_counts, loc):
    """``all_to_all_v(..., defer=True)`` in a kernel (as ``issue_allgather``;
    the counts are published with their rows, before this rank's arrival)."""
    bar = _cached(target, ("all_to_all_v", loc, signal, recv_counts), _all_to_all_v_plan,
                  link, input, target, signal, send_counts, recv_counts, 1, loc, False).issue(
        _local(input), _local(send_counts))
    return bar, bar.arrive(0)


def _all_to_all_v_plan(link, input, target, signal, send_counts, recv_counts, core_num, loc,
                       host):
    name = "pld.tensor.all_to_all_v"
    _check_domain(name, signal, target, recv_counts, input if host else None,
                  send_counts if host and hasattr(send_counts, "buffer") else None)
    _check_mesh_signal(name, signal)
    n, me = signal.nranks, signal.rank
    blocks = a2av_blocks(n, int(core_num))
    stride = signal.shape[1] if len(signal.shape) == 2 else 1
    if stride < blocks:
        raise _fault(f"{name}: core_num={core_num} launches {blocks} AIV block(s) on a "
                     f"{n}-rank comm domain, but signal '{signal.buffer.name}' has "
                     f"{stride} column(s) (shape {list(signal.shape)}): each block needs its "
                     f"own", hint=f"size the signal [NR, stride] with stride >= {blocks}")
    # the blocks split the peers between them on the chip; the rows and counts
    # they move are the same as one block's, so the CPU moves them at once
    t = _local(target)
    if t.shape[0] % n:
        raise _fault(f"{name}: target has {t.shape[0]} rows, not a multiple of the comm domain's "
                     f"{n} rank(s)", code="TC502")
    cap = t.shape[0] // n                # MAX_RECV rows per source
    row = t.size // t.shape[0]
    block = cap * row
    if recv_counts.shape[0] < n:
        raise _fault(f"{name}: recv_counts needs one entry per rank of the {n}-rank comm "
                     f"domain; it has {recv_counts.shape[0]}", code="TC502")
    data = _flat(link, target)
    set_cell = link.transport.signal
    offs = (me, 0) if len(recv_counts.shape) == 2 else (me,)
    cells = [link.cell_of(recv_counts, d, offs, name) for d in range(n)]
    lo = me * block

    def push(src, counts):
        src, counts = src.reshape(-1), counts.reshape(-1)
        if src.size != t.size or counts.size < n:
            raise _fault(f"{name}: input has {src.size} elements (target {t.size}) and "
                         f"send_counts {counts.size} (domain {n}); input is [NR*MAX_RECV, SIZE] "
                         f"and send_counts [NR]", code="TC502")
        blocks = src.reshape(n, block)
        for dest in range(n):
            # the count is clamped to [0, MAX_RECV] on both sides: the receiver
            # reads the clamped value, and only that many rows move (the self
            # slot too); the rows past it keep what the target held
            k = sent_rows(counts[dest], cap)
            set_cell(cells[dest], NOTIFY_SET, k)                 # a count, not a credit
            if not k:
                continue
            part = blocks[dest, :k * row]
            if dest == me:
                np.copyto(data.local[lo:lo + k * row], part)
            else:
                data.write(dest, lo, lo + k * row, part)

    return Steps([(_barrier(link, signal, name, ALL_TO_ALL_V, loc, 1), [push])])
