"""Programs of the race-detection tests (test_races.py): pairs of a racy
program and its safe twin, as alike as possible, and what to expect of each.

Every program has the same host program (``main_of``) and chip signature, so a
case is one kernel (or one chip orchestration, for the task cases) per form:

    x    [XR, S] FP32   this rank's input rows
    y    [YR, S] FP32   this rank's output rows (untouched rows keep the caller's)
    win  [WR, S] FP32   data window            (buffer ``wbuf``)
    sig  [8, 4]  INT32  hand-rolled signals    (buffer ``sbuf``)
    red  [1, S]  FP32   a collective's target  (buffer ``rbuf``)
    csig [NR, 1] INT32  a collective's signal  (buffer ``cbuf``)

The accesses a racy form's report must name are tagged with ``# <marker>``
comments; ``Case.racy_pairs`` gives them as alternatives of {(rank, line),
(rank, line)} sets (the report's order of the two accesses is not fixed, and
where the modification order of a counter decides which producer is left
unordered, either one is accepted).  ``Case.reference`` is the numpy result of
the safe form.  Racy forms always complete; their data is not checked (a
detector only needs a race to be possible), only which output elements they
write."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld

from programs_prims import line_of

NR = pl.dynamic("NR")
S = 64              # elements of a row (4 cache lines: an allreduce gives every rank a slice)
XR = 4              # input rows per rank
YR = 16             # output rows per rank
WR = 8              # rows of the data window
ROUNDS = 3          # rounds of the collective-reuse case
DB_ROUNDS = 4       # rounds of the double-buffering case
SENTINEL = -12345.0  # what the caller's outputs hold before a call

SET, ADD = pld.NotifyOp.Set, pld.NotifyOp.AtomicAdd
GE = pld.WaitCmp.Ge
ATOMIC_ADD = pld.AtomicType.Add
CORE = pl.Level.CORE_GROUP

X = pl.Tensor[[XR, S], pl.FP32]
Y = pl.Out[pl.Tensor[[YR, S], pl.FP32]]
WIN = pl.InOut[pld.DistributedTensor[[WR, S], pl.FP32]]
SIG = pl.InOut[pld.DistributedTensor[[8, 4], pl.INT32]]
RED = pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]]
CSIG = pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]


def chip_of(kernel):
    """The chip orchestration of a kernel case: one kernel call."""
    @pl.jit
    def chip(x: X, y: Y, win: WIN, sig: SIG, red: RED, csig: CSIG):
        return kernel(x, y, win, sig, red, csig)
    return chip


def main_of(chip):
    """The host program of every case: four windows, one dispatch per rank."""
    @pl.jit.host
    def main(xs: pl.Tensor[[NR, XR, S], pl.FP32], ys: pl.Out[pl.Tensor[[NR, YR, S], pl.FP32]]):
        wbuf = pld.alloc_window_buffer([WR, S], dtype=pl.FP32)
        sbuf = pld.alloc_window_buffer([8, 4], dtype=pl.INT32)
        rbuf = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
        cbuf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            chip(xs[r], ys[r], pld.window(wbuf, [WR, S], dtype=pl.FP32),
                 pld.window(sbuf, [8, 4], dtype=pl.INT32),
                 pld.window(rbuf, [1, S], dtype=pl.FP32),
                 pld.window(cbuf, [NR, 1], dtype=pl.INT32), device=r)
        return ys
    return main


def inputs(n: int, seed: int = 0) -> np.ndarray:
    """Small integer-valued inputs: sums in any order are exact."""
    return np.random.default_rng(seed + n).integers(-9, 10, (n, XR, S)).astype(np.float32)


def untouched(n: int) -> np.ndarray:
    return np.full((n, YR, S), SENTINEL, np.float32)


# =============================================================== precision cases
# ---------------------------------------------------------------- (1) regions
# every rank pushes into rank 0's window, then counts itself in; rank 0 waits
# for all n and reads the window.  Safe: one row each (disjoint).  Racy: two
# rows each, so rank r's second row is rank r + 1's first.
@pl.jit.incore
def regions_safe(x: X, y: Y, win: WIN, sig: SIG, red: RED, csig: CSIG):
    ctx = pld.get_comm_ctx(win)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    pld.tile.remote_store(pl.load(x, [0, 0], [1, S]), win, 0, [me, 0])  # region
    pld.system.notify(sig, 0, [0, 0], 1, op=ADD)
    if me == 0:
        pld.system.wait(sig, [0, 0], n, cmp=GE)
        pl.store(pl.load(win, [0, 0], [WR, S]), [0, 0], y)
    return y


@pl.jit.incore
def regions_racy(x: X, y: Y, win: WIN, sig: SIG, red: RED, csig: CSIG):
    ctx = pld.get_comm_ctx(win)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    pld.tile.remote_store(pl.load(x, [0, 0], [2, S]), win, 0, [me, 0])  # region
    pld.system.notify(sig, 0, [0, 0], 1, op=ADD)
    if me == 0:
        pld.system.wait(sig, [0, 0], n, cmp=GE)
        pl.store(pl.load(win, [0, 0], [WR, S]), [0, 0], y)
    return y


def regions_reference(xs):
    n = len(xs)
    want = untouched(n)
    want[0, :WR] = 0
    want[0, :n] = xs[:, 0]
    return want


def regions_pairs(n):
    line = line_of(regions_racy, "region")
    return [{(0, line), (1, line)}]


# ---------------------------------------------------------------- (2) chain
# rank 0 pushes into the last rank's window, then a chain of Set notifies runs
# 0 -> 1 -> ... -> n-1, and the last rank reads: ordered transitively.  Racy:
# rank 1 forwards (or, at 2 ranks, reads) without waiting for rank 0.
@pl.jit.incore
def chain_safe(x: X, y: Y, win: WIN, sig: SIG, red: RED, csig: CSIG):
    ctx = pld.get_comm_ctx(win)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    if me == 0:
        pld.tile.remote_store(pl.load(x, [0, 0], [1, S]), win, n - 1, [0, 0])  # chain-store
        pld.system.notify(sig, 1, [0, 0], 1, op=SET)
    else:
        pld.system.wait(sig, [0, 0], 1, cmp=GE)
        if me < n - 1:
            pld.system.notify(sig, me + 1, [0, 0], 1, op=SET)
        else:
            pl.store(pl.load(win, [0, 0], [1, S]), [0, 0], y)  # chain-load
    return y


@pl.jit.incore
def chain_racy(x: X, y: Y, win: WIN, sig: SIG, red: RED, csig: CSIG):
    ctx = pld.get_comm_ctx(win)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    if me == 0:
        pld.tile.remote_store(pl.load(x, [0, 0], [1, S]), win, n - 1, [0, 0])  # chain-store
        pld.system.notify(sig, 1, [0, 0], 1, op=SET)
    else:
        if me != 1:
            pld.system.wait(sig, [0, 0], 1, cmp=GE)
        if me < n - 1:
            pld.system.notify(sig, me + 1, [0, 0], 1, op=SET)
        else:
            pl.store(pl.load(win, [0, 0], [1, S]), [0, 0], y)  # chain-load
    return y


def chain_reference(xs):
    n = len(xs)
    want = untouched(n)
    want[n - 1, 0] = xs[0, 0]
    return want


def chain_pairs(n):
    return [{(0, line_of(chain_racy, "chain-store")), (n - 1, line_of(chain_racy, "chain-load"))}]


# ---------------------------------------------------------------- (3) atomics
# every rank adds one element into rank 0's win[0, 0] (atomic remote_store),
# then counts itself in; rank 0 waits for all n.  Racy: rank 1's push is a
# plain store.
@pl.jit.incore
def atomics_safe(x: X, y: Y, win: WIN, sig: SIG, red: RED, csig: CSIG):
    ctx = pld.get_comm_ctx(win)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    t = pl.load(x, [0, 0], [1, 1])
    if me == 1:
        pld.tile.remote_store(t, win, 0, [0, 0], atomic=ATOMIC_ADD)  # one-add
    else:
        pld.tile.remote_store(t, win, 0, [0, 0], atomic=ATOMIC_ADD)  # many-add
    pld.system.notify(sig, 0, [0, 0], 1, op=ADD)
    if me == 0:
        pld.system.wait(sig, [0, 0], n, cmp=GE)
        pl.store(pl.load(win, [0, 0], [1, S]), [0, 0], y)
    return y


@pl.jit.incore
def atomics_racy(x: X, y: Y, win: WIN, sig: SIG, red: RED, csig: CSIG):
    ctx = pld.get_comm_ctx(win)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    t = pl.load(x, [0, 0], [1, 1])
    if me == 1:
        pld.tile.remote_store(t, win, 0, [0, 0])  # one-add
    else:
        pld.tile.remote_store(t, win, 0, [0, 0], atomic=ATOMIC_ADD)  # many-add
    pld.system.notify(sig, 0, [0, 0], 1, op=ADD)
    if me == 0:
        pld.system.wait(sig, [0, 0], n, cmp=GE)
        pl.store(pl.load(win, [0, 0], [1, S]), [0, 0], y)
    return y


def atomics_reference(xs):
    want = untouched(len(xs))
    want[0, 0] = 0
    want[0, 0, 0] = xs[:, 0, 0].sum()
    return want


def atomics_pairs(n):
    return [{(1, line_of(atomics_racy, "one-add")), (0, line_of(atomics_racy, "many-add"))}]


# ---------------------------------------------------------------- (4) rounds
# per round: push into the next rank's row 0, a barrier, read the own row 0,
# then an allreduce on the same signal.  The barrier orders a round's push
# before its read; the allreduce orders the read before the next round's push
# into the same row.  Racy: the push comes after the barrier.
@pl.jit.incore
def rounds_safe(x: X, y: Y, win: WIN, sig: SIG, red: RED, csig: CSIG):
    ctx = pld.get_comm_ctx(win)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    nxt = (me + 1) % n
    for k in pl.range(ROUNDS):
        pld.tile.remote_store(pl.load(x, [k, 0], [1, S]), win, nxt, [0, 0])  # ring-put
        pld.tensor.barrier(csig)
        pl.store(pl.load(win, [0, 0], [1, S]), [k, 0], y)  # ring-read
        pl.store(pl.load(x, [k, 0], [1, S]), [0, 0], red)
        pld.tensor.allreduce(red, csig)
        pl.store(pl.load(red, [0, 0], [1, S]), [XR + k, 0], y)
    return y


@pl.jit.incore
def rounds_racy(x: X, y: Y, win: WIN, sig: SIG, red: RED, csig: CSIG):
    ctx = pld.get_comm_ctx(win)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    nxt = (me + 1) % n
    for k in pl.range(ROUNDS):
        pld.tensor.barrier(csig)
        pld.tile.remote_store(pl.load(x, [k, 0], [1, S]), win, nxt, [0, 0])  # ring-put
        pl.store(pl.load(win, [0, 0], [1, S]), [k, 0], y)  # ring-read
        pl.store(pl.load(x, [k, 0], [1, S]), [0, 0], red)
        pld.tensor.allreduce(red, csig)
        pl.store(pl.load(red, [0, 0], [1, S]), [XR + k, 0], y)
    return y


def rounds_reference(xs):
    n = len(xs)
    want = untouched(n)
    want[:, :ROUNDS] = np.roll(xs[:, :ROUNDS], 1, axis=0)
    want[:, XR:XR + ROUNDS] = xs[:, :ROUNDS].sum(axis=0)
    return want


def rounds_pairs(n):
    return [{(0, line_of(rounds_racy, "ring-put")), (1, line_of(rounds_racy, "ring-read"))}]


# ---------------------------------------------------------------- (5) double buffering
# every rank p >= 1 streams DB_ROUNDS rows through two slots of rank 0's window
# (rows 2(p-1), 2(p-1)+1); per slot a "full" counter at rank 0 (sig[p, slot])
# and an "empty" counter back at the producer (sig[0, slot]).  Racy: the
# producer does not wait for the slot to be empty before refilling it.
@pl.jit.incore
def dbuf_safe(x: X, y: Y, win: WIN, sig: SIG, red: RED, csig: CSIG):
    ctx = pld.get_comm_ctx(win)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    if me == 0:
        for k in pl.range(DB_ROUNDS):
            for p in pl.range(1, n):
                pld.system.wait(sig, [p, k % 2], k // 2 + 1, cmp=GE)
                t = pl.load(win, [2 * (p - 1) + k % 2, 0], [1, S])  # dbuf-load
                pl.store(t, [(p - 1) * DB_ROUNDS + k, 0], y)
                pld.system.notify(sig, p, [0, k % 2], 1, op=ADD)
    else:
        for k in pl.range(DB_ROUNDS):
            if k >= 2:
                pld.system.wait(sig, [0, k % 2], k // 2, cmp=GE)
            t = pl.load(x, [k, 0], [1, S])
            pld.tile.remote_store(t, win, 0, [2 * (me - 1) + k % 2, 0])  # dbuf-store
            pld.system.notify(sig, 0, [me, k % 2], 1, op=ADD)
    return y


@pl.jit.incore
def dbuf_racy(x: X, y: Y, win: WIN, sig: SIG, red: RED, csig: CSIG):
    ctx = pld.get_comm_ctx(win)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    if me == 0:
        for k in pl.range(DB_ROUNDS):
            for p in pl.range(1, n):
                pld.system.wait(sig, [p, k % 2], k // 2 + 1, cmp=GE)
                t = pl.load(win, [2 * (p - 1) + k % 2, 0], [1, S])  # dbuf-load
                pl.store(t, [(p - 1) * DB_ROUNDS + k, 0], y)
                pld.system.notify(sig, p, [0, k % 2], 1, op=ADD)
    else:
        for k in pl.range(DB_ROUNDS):
            t = pl.load(x, [k, 0], [1, S])
            pld.tile.remote_store(t, win, 0, [2 * (me - 1) + k % 2, 0])  # dbuf-store
            pld.system.notify(sig, 0, [me, k % 2], 1, op=ADD)
    return y


def dbuf_reference(xs):
    n = len(xs)
    want = untouched(n)
    for p in range(1, n):
        want[0, (p - 1) * DB_ROUNDS:p * DB_ROUNDS] = xs[p, :DB_ROUNDS]
    return want


def dbuf_pairs(n):
    return [{(1, line_of(dbuf_racy, "dbuf-store")), (0, line_of(dbuf_racy, "dbuf-load"))}]


# ---------------------------------------------------------------- (6a) task pipeline, deps=
# three tasks of a manual scope: produce (writes win row 0), transform (reads
# row 0, writes row 1), emit (reads row 1): ordered by deps= only.  Racy:
# transform has no deps=.
@pl.jit
def pipeline_safe(x: X, y: Y, win: WIN, sig: SIG, red: RED, csig: CSIG):
    with pl.manual_scope():
        with pl.at(level=CORE, name_hint="produce") as produced:
            win = pl.store(pl.add(pl.load(x, [0, 0], [1, S]), 1.0), [0, 0], win)  # produce
        with pl.at(level=CORE, name_hint="transform", deps=[produced]) as transformed:
            win = pl.store(pl.mul(pl.load(win, [0, 0], [1, S]), 2.0), [1, 0], win)  # transform
        with pl.at(level=CORE, name_hint="emit", deps=[transformed]):
            y = pl.store(pl.load(win, [1, 0], [1, S]), [0, 0], y)
    return y


@pl.jit
def pipeline_racy(x: X, y: Y, win: WIN, sig: SIG, red: RED, csig: CSIG):
    with pl.manual_scope():
        with pl.at(level=CORE, name_hint="produce"):
            win = pl.store(pl.add(pl.load(x, [0, 0], [1, S]), 1.0), [0, 0], win)  # produce
        with pl.at(level=CORE, name_hint="transform") as transformed:
            win = pl.store(pl.mul(pl.load(win, [0, 0], [1, S]), 2.0), [1, 0], win)  # transform
        with pl.at(level=CORE, name_hint="emit", deps=[transformed]):
            y = pl.store(pl.load(win, [1, 0], [1, S]), [0, 0], y)
    return y


def pipeline_reference(xs):
    want = untouched(len(xs))
    want[:, 0] = (xs[:, 0] + 1) * 2
    return want


def pipeline_pairs(n):
    return [{(0, line_of(pipeline_racy, "produce")), (0, line_of(pipeline_racy, "transform"))}]


# ---------------------------------------------------------------- (6b) task pipeline, defer_wait
# the reference's deferred-completion pattern around a ring: a waiter task
# defers on the signal, a consumer task deps=[waiter] reads the payload, the
# publisher task (submitted last) pushes to the next rank and notifies.
# Racy: the consumer has no deps=.
@pl.jit
def deferred_safe(x: X, y: Y, win: WIN, sig: SIG, red: RED, csig: CSIG):
    with pl.manual_scope():
        with pl.at(level=CORE, name_hint="waiter", allow_early_resolve=False) as waited:
            pld.system.defer_wait(sig, [0, 0], 1, cmp=GE)
        with pl.at(level=CORE, name_hint="consumer", deps=[waited]):
            y = pl.store(pl.load(win, [0, 0], [1, S]), [0, 0], y)  # dw-consume
        with pl.at(level=CORE, name_hint="publisher"):
            ctx = pld.get_comm_ctx(win)
            nxt = (pld.rank(ctx) + 1) % pld.nranks(ctx)
            pld.tile.remote_store(pl.load(x, [0, 0], [1, S]), win, nxt, [0, 0])  # dw-publish
            pld.system.notify(sig, nxt, [0, 0], 1, op=SET)
    return y


@pl.jit
def deferred_racy(x: X, y: Y, win: WIN, sig: SIG, red: RED, csig: CSIG):
    with pl.manual_scope():
        with pl.at(level=CORE, name_hint="waiter", allow_early_resolve=False):
            pld.system.defer_wait(sig, [0, 0], 1, cmp=GE)
        with pl.at(level=CORE, name_hint="consumer"):
            y = pl.store(pl.load(win, [0, 0], [1, S]), [0, 0], y)  # dw-consume
        with pl.at(level=CORE, name_hint="publisher"):
            ctx = pld.get_comm_ctx(win)
            nxt = (pld.rank(ctx) + 1) % pld.nranks(ctx)
            pld.tile.remote_store(pl.load(x, [0, 0], [1, S]), win, nxt, [0, 0])  # dw-publish
            pld.system.notify(sig, nxt, [0, 0], 1, op=SET)
    return y


def ring_reference(xs):
    """Rank r's y row 0 is its left neighbour's x row 0."""
    want = untouched(len(xs))
    want[:, 0] = np.roll(xs[:, 0], 1, axis=0)
    return want


def deferred_pairs(n):
    return [{(0, line_of(deferred_racy, "dw-publish")), (1, line_of(deferred_racy, "dw-consume"))}]


# =============================================================== recall cases
# ---------------------------------------------------------------- notify before store
# ring: push to the next rank, Set its flag; wait for the own flag and read.
# Racy: the flag is set before the push.
@pl.jit.incore
def notify_first_safe(x: X, y: Y, win: WIN, sig: SIG, red: RED, csig: CSIG):
    ctx = pld.get_comm_ctx(win)
    nxt = (pld.rank(ctx) + 1) % pld.nranks(ctx)
    pld.tile.remote_store(pl.load(x, [0, 0], [1, S]), win, nxt, [0, 0])  # nbs-store
    pld.system.notify(sig, nxt, [0, 0], 1, op=SET)
    pld.system.wait(sig, [0, 0], 1, cmp=GE)
    pl.store(pl.load(win, [0, 0], [1, S]), [0, 0], y)  # nbs-load
    return y


@pl.jit.incore
def notify_first_racy(x: X, y: Y, win: WIN, sig: SIG, red: RED, csig: CSIG):
    ctx = pld.get_comm_ctx(win)
    nxt = (pld.rank(ctx) + 1) % pld.nranks(ctx)
    pld.system.notify(sig, nxt, [0, 0], 1, op=SET)
    pld.tile.remote_store(pl.load(x, [0, 0], [1, S]), win, nxt, [0, 0])  # nbs-store
    pld.system.wait(sig, [0, 0], 1, cmp=GE)
    pl.store(pl.load(win, [0, 0], [1, S]), [0, 0], y)  # nbs-load
    return y


def notify_first_pairs(n):
    return [{(0, line_of(notify_first_racy, "nbs-store")),
             (1, line_of(notify_first_racy, "nbs-load"))}]


# ---------------------------------------------------------------- wrong cell
# ring: a "hello" on cell [0, 1] first, then the push and the data flag on
# cell [0, 0].  Racy: the reader waits on the hello cell.
@pl.jit.incore
def wrong_cell_safe(x: X, y: Y, win: WIN, sig: SIG, red: RED, csig: CSIG):
    ctx = pld.get_comm_ctx(win)
    nxt = (pld.rank(ctx) + 1) % pld.nranks(ctx)
    pld.system.notify(sig, nxt, [0, 1], 1, op=SET)
    pld.tile.remote_store(pl.load(x, [0, 0], [1, S]), win, nxt, [0, 0])  # cell-store
    pld.system.notify(sig, nxt, [0, 0], 1, op=SET)
    pld.system.wait(sig, [0, 0], 1, cmp=GE)
    pl.store(pl.load(win, [0, 0], [1, S]), [0, 0], y)  # cell-load
    return y


@pl.jit.incore
def wrong_cell_racy(x: X, y: Y, win: WIN, sig: SIG, red: RED, csig: CSIG):
    ctx = pld.get_comm_ctx(win)
    nxt = (pld.rank(ctx) + 1) % pld.nranks(ctx)
    pld.system.notify(sig, nxt, [0, 1], 1, op=SET)
    pld.tile.remote_store(pl.load(x, [0, 0], [1, S]), win, nxt, [0, 0])  # cell-store
    pld.system.notify(sig, nxt, [0, 0], 1, op=SET)
    pld.system.wait(sig, [0, 1], 1, cmp=GE)
    pl.store(pl.load(win, [0, 0], [1, S]), [0, 0], y)  # cell-load
    return y


def wrong_cell_pairs(n):
    return [{(0, line_of(wrong_cell_racy, "cell-store")),
             (1, line_of(wrong_cell_racy, "cell-load"))}]


# ---------------------------------------------------------------- too-low threshold
# two slots of rank 0's window, slot j filled by rank 1 + j % (n - 1) (both by
# rank 1 at 2 ranks), each fill counted into one AtomicAdd counter; rank 0
# waits for the count and reads both slots.  Racy: Ge 1 instead of Ge 2.
@pl.jit.incore
def threshold_safe(x: X, y: Y, win: WIN, sig: SIG, red: RED, csig: CSIG):
    ctx = pld.get_comm_ctx(win)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    for j in pl.range(2):
        if me == 1 + j % (n - 1):
            pld.tile.remote_store(pl.load(x, [j, 0], [1, S]), win, 0, [j, 0])  # tl-store
            pld.system.notify(sig, 0, [0, 0], 1, op=ADD)
    if me == 0:
        pld.system.wait(sig, [0, 0], 2, cmp=GE)
        pl.store(pl.load(win, [0, 0], [2, S]), [0, 0], y)  # tl-load
    return y


@pl.jit.incore
def threshold_racy(x: X, y: Y, win: WIN, sig: SIG, red: RED, csig: CSIG):
    ctx = pld.get_comm_ctx(win)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    for j in pl.range(2):
        if me == 1 + j % (n - 1):
            pld.tile.remote_store(pl.load(x, [j, 0], [1, S]), win, 0, [j, 0])  # tl-store
            pld.system.notify(sig, 0, [0, 0], 1, op=ADD)
    if me == 0:
        pld.system.wait(sig, [0, 0], 1, cmp=GE)
        pl.store(pl.load(win, [0, 0], [2, S]), [0, 0], y)  # tl-load
    return y


def threshold_reference(xs):
    n = len(xs)
    want = untouched(n)
    for j in range(2):
        want[0, j] = xs[1 + j % (n - 1), j]
    return want


def threshold_pairs(n):
    # which producer the count of 1 leaves unordered is the counter's
    # modification order: either (at 2 ranks rank 1's second fill)
    store, load = line_of(threshold_racy, "tl-store"), line_of(threshold_racy, "tl-load")
    return [{(p, store), (0, load)} for p in sorted({1, 1 + 1 % (n - 1)})]


# ---------------------------------------------------------------- WAR reuse
# ring, one slot reused for two rounds: push round 0, flag; read it, ack to
# the producer; (wait for the ack;) push round 1 into the same slot, flag;
# read it.  Racy: no wait for the ack, so round 1 may overwrite the slot
# while the next rank still reads round 0.
@pl.jit.incore
def war_safe(x: X, y: Y, win: WIN, sig: SIG, red: RED, csig: CSIG):
    ctx = pld.get_comm_ctx(win)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    nxt = (me + 1) % n
    prev = (me + n - 1) % n
    pld.tile.remote_store(pl.load(x, [0, 0], [1, S]), win, nxt, [0, 0])
    pld.system.notify(sig, nxt, [0, 0], 1, op=ADD)
    pld.system.wait(sig, [0, 0], 1, cmp=GE)
    pl.store(pl.load(win, [0, 0], [1, S]), [0, 0], y)  # war-read0
    pld.system.notify(sig, prev, [0, 1], 1, op=ADD)
    pld.system.wait(sig, [0, 1], 1, cmp=GE)
    pld.tile.remote_store(pl.load(x, [1, 0], [1, S]), win, nxt, [0, 0])  # war-store1
    pld.system.notify(sig, nxt, [0, 0], 1, op=ADD)
    pld.system.wait(sig, [0, 0], 2, cmp=GE)
    pl.store(pl.load(win, [0, 0], [1, S]), [1, 0], y)
    return y


@pl.jit.incore
def war_racy(x: X, y: Y, win: WIN, sig: SIG, red: RED, csig: CSIG):
    ctx = pld.get_comm_ctx(win)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    nxt = (me + 1) % n
    prev = (me + n - 1) % n
    pld.tile.remote_store(pl.load(x, [0, 0], [1, S]), win, nxt, [0, 0])
    pld.system.notify(sig, nxt, [0, 0], 1, op=ADD)
    pld.system.wait(sig, [0, 0], 1, cmp=GE)
    pl.store(pl.load(win, [0, 0], [1, S]), [0, 0], y)  # war-read0
    pld.system.notify(sig, prev, [0, 1], 1, op=ADD)
    pld.tile.remote_store(pl.load(x, [1, 0], [1, S]), win, nxt, [0, 0])  # war-store1
    pld.system.notify(sig, nxt, [0, 0], 1, op=ADD)
    pld.system.wait(sig, [0, 0], 2, cmp=GE)
    pl.store(pl.load(win, [0, 0], [1, S]), [1, 0], y)
    return y


def war_reference(xs):
    want = untouched(len(xs))
    want[:, 0:2] = np.roll(xs[:, 0:2], 1, axis=0)
    return want


def war_pairs(n):
    return [{(0, line_of(war_racy, "war-store1")), (1, line_of(war_racy, "war-read0"))}]


# ---------------------------------------------------------------- atomic vs plain
# ranks >= 1 add one element into rank 0's win[0, 0] atomically and count
# themselves in; rank 0 waits for them, then updates the element with a plain
# read-modify-write.  Racy: rank 0 updates before it waits.
@pl.jit.incore
def mixed_safe(x: X, y: Y, win: WIN, sig: SIG, red: RED, csig: CSIG):
    ctx = pld.get_comm_ctx(win)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    if me == 0:
        pld.system.wait(sig, [0, 0], n - 1, cmp=GE)
        pl.write(win, [0, 0], pl.read(win, [0, 0]) + 100.0)  # plain-one
        pl.store(pl.load(win, [0, 0], [1, S]), [0, 0], y)
    else:
        t = pl.load(x, [0, 0], [1, 1])
        pld.tile.remote_store(t, win, 0, [0, 0], atomic=ATOMIC_ADD)  # atomic-one
        pld.system.notify(sig, 0, [0, 0], 1, op=ADD)
    return y


@pl.jit.incore
def mixed_racy(x: X, y: Y, win: WIN, sig: SIG, red: RED, csig: CSIG):
    ctx = pld.get_comm_ctx(win)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    if me == 0:
        pl.write(win, [0, 0], pl.read(win, [0, 0]) + 100.0)  # plain-one
        pld.system.wait(sig, [0, 0], n - 1, cmp=GE)
        pl.store(pl.load(win, [0, 0], [1, S]), [0, 0], y)
    else:
        t = pl.load(x, [0, 0], [1, 1])
        pld.tile.remote_store(t, win, 0, [0, 0], atomic=ATOMIC_ADD)  # atomic-one
        pld.system.notify(sig, 0, [0, 0], 1, op=ADD)
    return y


def mixed_reference(xs):
    want = untouched(len(xs))
    want[0, 0] = 0
    want[0, 0, 0] = xs[1:, 0, 0].sum() + 100
    return want


def mixed_pairs(n):
    return [{(0, line_of(mixed_racy, "plain-one")), (1, line_of(mixed_racy, "atomic-one"))}]


# ---------------------------------------------------------------- put during a collective
# task "reduce" allreduces red (then a barrier: every rank has read its
# result), task "poke" has rank 1 put its x row 1 into rank 0's red, task
# "after" (a barrier, then read red) follows both.  Racy: "poke" has no
# deps=, so rank 1's put may land while rank 0 is inside the allreduce.
@pl.jit
def during_safe(x: X, y: Y, win: WIN, sig: SIG, red: RED, csig: CSIG):
    with pl.manual_scope():
        with pl.at(level=CORE, name_hint="reduce") as reduced:
            red = pl.store(pl.load(x, [0, 0], [1, S]), [0, 0], red)
            red = pld.tensor.allreduce(red, csig)  # ar-call
            y = pl.store(pl.load(red, [0, 0], [1, S]), [0, 0], y)
            pld.tensor.barrier(csig)
        with pl.at(level=CORE, name_hint="poke", deps=[reduced]) as poked:
            if pld.rank(pld.get_comm_ctx(red)) == 1:
                pld.tensor.put(red, 0, x, [0, 0], [1, 0], [1, S])  # ar-put
        with pl.at(level=CORE, name_hint="after", deps=[reduced, poked]):
            pld.tensor.barrier(csig)
            y = pl.store(pl.load(red, [0, 0], [1, S]), [1, 0], y)
    return y


@pl.jit
def during_racy(x: X, y: Y, win: WIN, sig: SIG, red: RED, csig: CSIG):
    with pl.manual_scope():
        with pl.at(level=CORE, name_hint="reduce") as reduced:
            red = pl.store(pl.load(x, [0, 0], [1, S]), [0, 0], red)
            red = pld.tensor.allreduce(red, csig)  # ar-call
            y = pl.store(pl.load(red, [0, 0], [1, S]), [0, 0], y)
            pld.tensor.barrier(csig)
        with pl.at(level=CORE, name_hint="poke") as poked:
            if pld.rank(pld.get_comm_ctx(red)) == 1:
                pld.tensor.put(red, 0, x, [0, 0], [1, 0], [1, S])  # ar-put
        with pl.at(level=CORE, name_hint="after", deps=[reduced, poked]):
            pld.tensor.barrier(csig)
            y = pl.store(pl.load(red, [0, 0], [1, S]), [1, 0], y)
    return y


def during_reference(xs):
    want = untouched(len(xs))
    want[:, 0:2] = xs[:, 0].sum(axis=0)
    want[0, 1] = xs[1, 1]
    return want


def during_pairs(n):
    return [{(1, line_of(during_racy, "ar-put")), (0, line_of(during_racy, "ar-call"))}]


# ---------------------------------------------------------------- two writer tasks
# two tasks of a manual scope write the same window row; a third reads it.
# Racy: the second writer has no deps= on the first.
@pl.jit
def writers_safe(x: X, y: Y, win: WIN, sig: SIG, red: RED, csig: CSIG):
    with pl.manual_scope():
        with pl.at(level=CORE, name_hint="first") as first:
            win = pl.store(pl.load(x, [0, 0], [1, S]), [0, 0], win)  # waw-first
        with pl.at(level=CORE, name_hint="second", deps=[first]) as second:
            win = pl.store(pl.load(x, [1, 0], [1, S]), [0, 0], win)  # waw-second
        with pl.at(level=CORE, name_hint="emit", deps=[first, second]):
            y = pl.store(pl.load(win, [0, 0], [1, S]), [0, 0], y)
    return y


@pl.jit
def writers_racy(x: X, y: Y, win: WIN, sig: SIG, red: RED, csig: CSIG):
    with pl.manual_scope():
        with pl.at(level=CORE, name_hint="first") as first:
            win = pl.store(pl.load(x, [0, 0], [1, S]), [0, 0], win)  # waw-first
        with pl.at(level=CORE, name_hint="second") as second:
            win = pl.store(pl.load(x, [1, 0], [1, S]), [0, 0], win)  # waw-second
        with pl.at(level=CORE, name_hint="emit", deps=[first, second]):
            y = pl.store(pl.load(win, [0, 0], [1, S]), [0, 0], y)
    return y


def writers_reference(xs):
    want = untouched(len(xs))
    want[:, 0] = xs[:, 1]
    return want


def writers_pairs(n):
    return [{(0, line_of(writers_racy, "waw-first")), (0, line_of(writers_racy, "waw-second"))}]


# =============================================================== the table
@dataclass(frozen=True)
class Case:
    name: str
    safe: object                  # host program of the safe form
    racy: object                  # host program of the racy form
    reference: Callable           # xs -> expected ys of the safe form
    racy_pairs: Callable          # n -> [ {(rank, line), (rank, line)}, ... ] (any one)
    buffer: str                   # the window buffer the expected race is on
    owner: Callable               # n -> whose copy of it


def _case(name, safe, racy, reference, pairs, buffer, owner, kernel=True):
    wrap = (lambda k: main_of(chip_of(k))) if kernel else main_of
    whose = owner if callable(owner) else (lambda n: owner)
    return Case(name, wrap(safe), wrap(racy), reference, pairs, buffer, whose)


PRECISION = [
    _case("disjoint_regions", regions_safe, regions_racy, regions_reference, regions_pairs,
          "wbuf", 0),
    _case("notify_chain", chain_safe, chain_racy, chain_reference, chain_pairs, "wbuf",
          lambda n: n - 1),
    _case("atomic_adds", atomics_safe, atomics_racy, atomics_reference, atomics_pairs, "wbuf", 0),
    _case("collective_rounds", rounds_safe, rounds_racy, rounds_reference, rounds_pairs,
          "wbuf", 1),
    _case("double_buffering", dbuf_safe, dbuf_racy, dbuf_reference, dbuf_pairs, "wbuf", 0),
    _case("task_deps", pipeline_safe, pipeline_racy, pipeline_reference, pipeline_pairs,
          "wbuf", 0, kernel=False),
    _case("deferred_wait", deferred_safe, deferred_racy, ring_reference, deferred_pairs,
          "wbuf", 1, kernel=False),
]

RECALL = [
    _case("notify_before_store", notify_first_safe, notify_first_racy, ring_reference,
          notify_first_pairs, "wbuf", 1),
    _case("wrong_cell", wrong_cell_safe, wrong_cell_racy, ring_reference, wrong_cell_pairs,
          "wbuf", 1),
    _case("low_threshold", threshold_safe, threshold_racy, threshold_reference,
          threshold_pairs, "wbuf", 0),
    _case("war_reuse", war_safe, war_racy, war_reference, war_pairs, "wbuf", 1),
    _case("atomic_vs_plain", mixed_safe, mixed_racy, mixed_reference, mixed_pairs, "wbuf", 0),
    _case("put_during_allreduce", during_safe, during_racy, during_reference, during_pairs,
          "rbuf", 0, kernel=False),
    _case("overlapping_tasks", writers_safe, writers_racy, writers_reference, writers_pairs,
          "wbuf", 0, kernel=False),
]

CASES = {c.name: c for c in PRECISION + RECALL}


# =============================================================== one switchable ring
# (test_race_config.py and the MPI backend's race script): rank r pushes its
# row into rank r + 1's window and notifies it; with ``early`` 1 the notify
# comes before the push.  y gets 2 * x whatever the order (a result the call
# writes back deterministically, race or not); got gets what arrived.
RS = 8
RW = pld.DistributedTensor[[1, RS], pl.FP32]
RSIG = pld.DistributedTensor[[1, 1], pl.INT32]
RROW = pl.Tensor[[1, RS], pl.FP32]


@pl.jit.incore
def ring_kernel(x: RROW, y: pl.Out[RROW], got: pl.Out[RROW], win: pl.InOut[RW],
                sig: pl.InOut[RSIG], early: pl.Scalar[pl.INT32]) -> RROW:
    ctx = pld.get_comm_ctx(win)
    nxt = (pld.rank(ctx) + 1) % pld.nranks(ctx)
    t = pl.load(x, [0, 0], [1, RS])
    if early == 1:
        pld.system.notify(sig, nxt, [0, 0], 1, op=SET)
        pld.tile.remote_store(t, win, nxt, [0, 0])  # ring-store
    else:
        pld.tile.remote_store(t, win, nxt, [0, 0])
        pld.system.notify(sig, nxt, [0, 0], 1, op=SET)
    pld.system.wait(sig, [0, 0], 1, cmp=GE)
    got = pl.store(pl.load(win, [0, 0], [1, RS]), [0, 0], got)  # ring-load
    y = pl.store(pl.mul(t, 2.0), [0, 0], y)
    return y


@pl.jit
def ring_chip(x: RROW, y: pl.Out[RROW], got: pl.Out[RROW], win: pl.InOut[RW],
              sig: pl.InOut[RSIG], early: pl.Scalar[pl.INT32]):
    return ring_kernel(x, y, got, win, sig, early)


@pl.jit.host
def ring_main(xs: pl.Tensor[[NR, 1, RS], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, RS], pl.FP32]],
              gots: pl.Out[pl.Tensor[[NR, 1, RS], pl.FP32]], early: pl.Scalar[pl.INT32]):
    wb = pld.alloc_window_buffer([1, RS], dtype=pl.FP32)
    sb = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        ring_chip(xs[r], ys[r], gots[r], pld.window(wb, [1, RS], dtype=pl.FP32),
                  pld.window(sb, [1, 1], dtype=pl.INT32), early, device=r)
    return ys


def ring_inputs(n: int) -> tuple:
    """(xs, ys, gots) of ``ring_main`` on ``n`` ranks."""
    xs = np.arange(n * RS, dtype=np.float32).reshape(n, 1, RS) + 1
    return xs, np.zeros_like(xs), np.zeros_like(xs)


def ring_race_lines(n: int) -> set:
    """The (rank, line) of both sides of the early ring's races."""
    return {(r, line_of(ring_kernel, m)) for r in range(n) for m in ("ring-store", "ring-load")}


def reported_lines(err) -> set:
    """The (rank, line) of both accesses of every race in ``err``."""
    return {(a.rank, int(a.line.rsplit(":", 1)[1])) for r in err.races for a in (r.first, r.second)}

