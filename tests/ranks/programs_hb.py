"""Programs of the happens-before tests (test_races_hb.py): pairs of a racy
program and its correct twin, as alike as possible, in which what orders a
read after a write is subtler than "a wait after the notify": the value a
cell held before the notify, a counter's modification order, the waiter's
own updates of its cell, and tasks that share a plain (non-window) output.

Every program has the same host program (``main_of``) and chip signature:

    x    [XR, S] FP32   this rank's input rows
    y    [YR, S] FP32   this rank's output rows (untouched rows keep SENTINEL)
    win  [WR, S] FP32   data window             (buffer ``wbuf``)
    sig  [1, 1]  INT32  the one signal cell     (buffer ``sbuf``)
    k    INT32          the call's number (1 for a one-shot call)

(1a) Set 0 into a fresh cell.  Each rank pushes a row into the next rank's
     window and announces it with a Set of 0; the next rank waits for Eq 0
     and reads.  A fresh cell already reads 0, so the wait may pass before
     the push lands: on the chip the reader may get the window's old contents.
     The notify does not order anything even when the waiter happens to look
     after it, because the waiter's condition did not need it.  Twin: Set 1,
     wait Eq 1.
(1b) A Set flag reused across calls on kept windows.  Each call a rank
     pushes a row to the next rank and Sets the next rank's flag to 1; the
     next rank waits Ge 1 and reads.  From the second call on the flag is
     already 1 when the call starts (kept windows), so the wait passes at
     once, before this call's push.  Twin: the k-th call Sets the flag to k
     and waits for Ge k.
(2a) Two producers count into one cell with different weights: rank 1 adds
     2, rank 2 adds 1, rank 0 waits Ge 2 and reads both rows.  When rank 1's
     add lands first the count reads 2 before rank 2 has stored, so rank 2's
     row may be read before it lands -- whichever order this run's adds took
     effect in, the program is racy (and rank 1's row never is: every way to
     reach 2 includes rank 1's add).  Twin: Ge 3.
(2b) Two producers Set one cell to 1; rank 0 waits Eq 1 and reads both rows.
     The first Set makes the condition true; the second adds nothing to it,
     so the second producer's row is unordered -- and either producer may be
     second.  Twin: each adds 1, rank 0 waits Ge 2.
(3)  The hand-written self-clearing credit barrier, around a ring, for
     ROUNDS rounds: push round r's row into row r of the next rank's window,
     add +1 to the next rank's cell, wait for Ge 1 on the own cell, add -1 to
     it (take the credit), read row r.  Correct: the waiter's own r earlier
     -1s come before its wait, so the value it sees already counts them, and
     Ge 1 then needs r + 1 credits from the previous rank -- round r's +1,
     which follows round r's push, among them -- even when the cell has not
     dropped below 1 since the first credit (the previous rank a round
     ahead).  (A single reused row would be racy: a rank a round ahead
     overwrites it.)  Racy twin: the +1 comes before the push, so the credit
     can be seen before the row lands.
(3b) An asynchronous put published before its event is waited: each rank
     issues a pld.tensor.put_async of a row into the next rank's window,
     works, notifies the next rank (Set 1) and only then waits the event; the
     next rank waits Eq 1 and reads.  The transfer may land any time until
     the event's wait, so the notify can publish a row that is not there yet
     (on the CPU it lands at the wait: the reader usually reads old data).
     Twin: wait the event, then notify.
(4a) Two tasks of a manual scope write overlapping rows of the plain output
     ``y`` with no dependency between them: they run on different cores in
     either order, so the overlapping row ends with either task's data.
     Twin: the second task has ``deps=[first]``.
(4b) The two blocks of one ``pl.spmd`` task write overlapping rows of ``y``
     (blocks of a task are independent).  Twin: disjoint rows.

Timing: on shared memory the waiter in (1a), (1b) usually looks at its cell
before the peer's notify, and a checker that orders a wait after "the notify
that made the condition true" would then report the race by luck.  The
programs therefore give the reader some local work (SPIN additions into a
row of y) between its push and its wait, so the common interleaving is the
one in which the notify has already landed -- the one such a checker misses.
Likewise rank 1 in (2a) works before it pushes, so rank 2's add usually lands
first; and in (3) the odd ranks work between their credit and their wait, so
the even rank before them is usually a round ahead (the cell reads 2, then 1
after the waiter's own -1: Ge 1 has held since the first credit).

The accesses a racy form's report must name are tagged with ``# <marker>``
comments; ``Case.racy_pairs`` gives the pairs of (rank, line) sides a report
must contain one of (in either order; where the modification order decides
which producer is left unordered, either is accepted), ``Case.never`` the
(rank, line) sides no reported race may name.  ``Case.reference`` is the
numpy result of the twin; racy forms always complete, and only which output
elements they write is checked (``Case.written``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld

from programs_prims import line_of

NR = pl.dynamic("NR")
S = 64              # elements of a row
XR = 8              # input rows per rank
YR = 8              # output rows per rank
WR = 4              # rows of the data window
WORK = YR - 1       # the row of x a rank works on, and of y it leaves the result in
SPIN = 300          # additions of a rank's local work (a few ms)
ROUNDS = 4          # rounds of the credit barrier (rows of win and y they use)
SENTINEL = -12345.0  # what the caller's outputs hold before a call

SET, ADD = pld.NotifyOp.Set, pld.NotifyOp.AtomicAdd
EQ, GE = pld.WaitCmp.Eq, pld.WaitCmp.Ge
CORE = pl.Level.CORE_GROUP

X = pl.Tensor[[XR, S], pl.FP32]
Y = pl.Out[pl.Tensor[[YR, S], pl.FP32]]
WIN = pl.InOut[pld.DistributedTensor[[WR, S], pl.FP32]]
SIG = pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]
K = pl.Scalar[pl.INT32]


def chip_of(kernel):
    """The chip orchestration of a kernel case: one kernel call."""
    @pl.jit
    def chip(x: X, y: Y, win: WIN, sig: SIG, k: K):
        return kernel(x, y, win, sig, k)
    return chip


def main_of(chip):
    """The host program of every case: two windows, one dispatch per rank."""
    @pl.jit.host
    def main(xs: pl.Tensor[[NR, XR, S], pl.FP32], ys: pl.Out[pl.Tensor[[NR, YR, S], pl.FP32]],
             k: K):
        wbuf = pld.alloc_window_buffer([WR, S], dtype=pl.FP32)
        sbuf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            chip(xs[r], ys[r], pld.window(wbuf, [WR, S], dtype=pl.FP32),
                 pld.window(sbuf, [1, 1], dtype=pl.INT32), k, device=r)
        return ys
    return main


def inputs(n: int, seed: int = 0) -> np.ndarray:
    """Small integer-valued inputs (exact in FP32 whatever is added)."""
    return np.random.default_rng(seed + n).integers(-9, 10, (n, XR, S)).astype(np.float32)


def untouched(n: int) -> np.ndarray:
    return np.full((n, YR, S), SENTINEL, np.float32)


def ring(xs, rows) -> np.ndarray:
    """Rank r's x ``rows`` as the next rank receives them."""
    return np.roll(xs[:, rows], 1, axis=0)


# ---------------------------------------------------------------- (1a) Set 0
@pl.jit.incore
def set_zero_racy(x: X, y: Y, win: WIN, sig: SIG, k: K):
    ctx = pld.get_comm_ctx(win)
    nxt = (pld.rank(ctx) + 1) % pld.nranks(ctx)
    pld.tile.remote_store(pl.load(x, [0, 0], [1, S]), win, nxt, [0, 0])  # zero-store
    pld.system.notify(sig, nxt, [0, 0], 0, op=SET)
    w = pl.load(x, [WORK, 0], [1, S])
    for i in pl.range(SPIN):
        w = pl.add(w, 1.0)
    y = pl.store(w, [WORK, 0], y)
    pld.system.wait(sig, [0, 0], 0, cmp=EQ)
    y = pl.store(pl.load(win, [0, 0], [1, S]), [0, 0], y)  # zero-load
    return y


@pl.jit.incore
def set_zero_twin(x: X, y: Y, win: WIN, sig: SIG, k: K):
    ctx = pld.get_comm_ctx(win)
    nxt = (pld.rank(ctx) + 1) % pld.nranks(ctx)
    pld.tile.remote_store(pl.load(x, [0, 0], [1, S]), win, nxt, [0, 0])
    pld.system.notify(sig, nxt, [0, 0], 1, op=SET)
    w = pl.load(x, [WORK, 0], [1, S])
    for i in pl.range(SPIN):
        w = pl.add(w, 1.0)
    y = pl.store(w, [WORK, 0], y)
    pld.system.wait(sig, [0, 0], 1, cmp=EQ)
    y = pl.store(pl.load(win, [0, 0], [1, S]), [0, 0], y)
    return y


def ring_row_reference(xs):
    """Rank r's y row 0 is its left neighbour's x row 0 (also (1b) per call)."""
    want = untouched(len(xs))
    want[:, 0] = ring(xs, 0)
    want[:, WORK] = xs[:, WORK] + SPIN
    return want


def set_zero_pairs(n):
    return [{(0, line_of(set_zero_racy, "zero-store")), (1, line_of(set_zero_racy, "zero-load"))}]


# ---------------------------------------------------------------- (1b) kept flag
@pl.jit.incore
def kept_flag_racy(x: X, y: Y, win: WIN, sig: SIG, k: K):
    ctx = pld.get_comm_ctx(win)
    nxt = (pld.rank(ctx) + 1) % pld.nranks(ctx)
    pld.tile.remote_store(pl.load(x, [0, 0], [1, S]), win, nxt, [0, 0])  # kept-store
    pld.system.notify(sig, nxt, [0, 0], 1, op=SET)
    w = pl.load(x, [WORK, 0], [1, S])
    for i in pl.range(SPIN):
        w = pl.add(w, 1.0)
    y = pl.store(w, [WORK, 0], y)
    pld.system.wait(sig, [0, 0], 1, cmp=GE)
    y = pl.store(pl.load(win, [0, 0], [1, S]), [0, 0], y)  # kept-load
    return y


@pl.jit.incore
def kept_flag_twin(x: X, y: Y, win: WIN, sig: SIG, k: K):
    ctx = pld.get_comm_ctx(win)
    nxt = (pld.rank(ctx) + 1) % pld.nranks(ctx)
    pld.tile.remote_store(pl.load(x, [0, 0], [1, S]), win, nxt, [0, 0])
    pld.system.notify(sig, nxt, [0, 0], k, op=SET)
    w = pl.load(x, [WORK, 0], [1, S])
    for i in pl.range(SPIN):
        w = pl.add(w, 1.0)
    y = pl.store(w, [WORK, 0], y)
    pld.system.wait(sig, [0, 0], k, cmp=GE)
    y = pl.store(pl.load(win, [0, 0], [1, S]), [0, 0], y)
    return y


def kept_flag_pairs(n):
    return [{(0, line_of(kept_flag_racy, "kept-store")), (1, line_of(kept_flag_racy, "kept-load"))}]


KEPT_FLAG_RACY = main_of(chip_of(kept_flag_racy))
KEPT_FLAG_TWIN = main_of(chip_of(kept_flag_twin))


# ---------------------------------------------------------------- (2a) weighted counts
@pl.jit.incore
def weighted_racy(x: X, y: Y, win: WIN, sig: SIG, k: K):
    ctx = pld.get_comm_ctx(win)
    me = pld.rank(ctx)
    if me == 1:
        w = pl.load(x, [WORK, 0], [1, S])
        for i in pl.range(SPIN):
            w = pl.add(w, 1.0)
        y = pl.store(w, [WORK, 0], y)
        pld.tile.remote_store(pl.load(x, [0, 0], [1, S]), win, 0, [1, 0])  # add2-store
        pld.system.notify(sig, 0, [0, 0], 2, op=ADD)
    if me == 2:
        pld.tile.remote_store(pl.load(x, [0, 0], [1, S]), win, 0, [2, 0])  # add1-store
        pld.system.notify(sig, 0, [0, 0], 1, op=ADD)
    if me == 0:
        pld.system.wait(sig, [0, 0], 2, cmp=GE)
        y = pl.store(pl.load(win, [1, 0], [2, S]), [0, 0], y)  # weighted-load
    return y


@pl.jit.incore
def weighted_twin(x: X, y: Y, win: WIN, sig: SIG, k: K):
    ctx = pld.get_comm_ctx(win)
    me = pld.rank(ctx)
    if me == 1:
        w = pl.load(x, [WORK, 0], [1, S])
        for i in pl.range(SPIN):
            w = pl.add(w, 1.0)
        y = pl.store(w, [WORK, 0], y)
        pld.tile.remote_store(pl.load(x, [0, 0], [1, S]), win, 0, [1, 0])
        pld.system.notify(sig, 0, [0, 0], 2, op=ADD)
    if me == 2:
        pld.tile.remote_store(pl.load(x, [0, 0], [1, S]), win, 0, [2, 0])
        pld.system.notify(sig, 0, [0, 0], 1, op=ADD)
    if me == 0:
        pld.system.wait(sig, [0, 0], 3, cmp=GE)
        y = pl.store(pl.load(win, [1, 0], [2, S]), [0, 0], y)
    return y


def weighted_reference(xs):
    want = untouched(len(xs))
    want[0, 0:2] = xs[1:3, 0]
    want[1, WORK] = xs[1, WORK] + SPIN
    return want


def weighted_pairs(n):
    return [{(2, line_of(weighted_racy, "add1-store")),
             (0, line_of(weighted_racy, "weighted-load"))}]


def weighted_never(n):
    # every modification order that reaches 2 contains rank 1's add
    return {(1, line_of(weighted_racy, "add2-store"))}


# ---------------------------------------------------------------- (2b) two Sets
@pl.jit.incore
def two_sets_racy(x: X, y: Y, win: WIN, sig: SIG, k: K):
    ctx = pld.get_comm_ctx(win)
    me = pld.rank(ctx)
    if me == 1 or me == 2:
        pld.tile.remote_store(pl.load(x, [0, 0], [1, S]), win, 0, [me, 0])  # set-store
        pld.system.notify(sig, 0, [0, 0], 1, op=SET)
    if me == 0:
        pld.system.wait(sig, [0, 0], 1, cmp=EQ)
        y = pl.store(pl.load(win, [1, 0], [2, S]), [0, 0], y)  # set-load
    return y


@pl.jit.incore
def two_sets_twin(x: X, y: Y, win: WIN, sig: SIG, k: K):
    ctx = pld.get_comm_ctx(win)
    me = pld.rank(ctx)
    if me == 1 or me == 2:
        pld.tile.remote_store(pl.load(x, [0, 0], [1, S]), win, 0, [me, 0])
        pld.system.notify(sig, 0, [0, 0], 1, op=ADD)
    if me == 0:
        pld.system.wait(sig, [0, 0], 2, cmp=GE)
        y = pl.store(pl.load(win, [1, 0], [2, S]), [0, 0], y)
    return y


def two_sets_reference(xs):
    want = untouched(len(xs))
    want[0, 0:2] = xs[1:3, 0]
    return want


def two_sets_pairs(n):
    # the producer whose Set lands second is the one left unordered: either
    store, load = line_of(two_sets_racy, "set-store"), line_of(two_sets_racy, "set-load")
    return [{(p, store), (0, load)} for p in (1, 2)]


# ---------------------------------------------------------------- (3) credit barrier
@pl.jit.incore
def credit_racy(x: X, y: Y, win: WIN, sig: SIG, k: K):
    ctx = pld.get_comm_ctx(win)
    me = pld.rank(ctx)
    nxt = (me + 1) % pld.nranks(ctx)
    w = pl.load(x, [WORK, 0], [1, S])
    for r in pl.range(ROUNDS):
        pld.system.notify(sig, nxt, [0, 0], 1, op=ADD)
        pld.tile.remote_store(pl.load(x, [r, 0], [1, S]), win, nxt, [r, 0])  # credit-store
        for i in pl.range(me % 2 * SPIN):
            w = pl.add(w, 1.0)
        pld.system.wait(sig, [0, 0], 1, cmp=GE)
        pld.system.notify(sig, me, [0, 0], -1, op=ADD)
        y = pl.store(pl.load(win, [r, 0], [1, S]), [r, 0], y)  # credit-load
    y = pl.store(w, [WORK, 0], y)
    return y


@pl.jit.incore
def credit_twin(x: X, y: Y, win: WIN, sig: SIG, k: K):
    ctx = pld.get_comm_ctx(win)
    me = pld.rank(ctx)
    nxt = (me + 1) % pld.nranks(ctx)
    w = pl.load(x, [WORK, 0], [1, S])
    for r in pl.range(ROUNDS):
        pld.tile.remote_store(pl.load(x, [r, 0], [1, S]), win, nxt, [r, 0])
        pld.system.notify(sig, nxt, [0, 0], 1, op=ADD)
        for i in pl.range(me % 2 * SPIN):
            w = pl.add(w, 1.0)
        pld.system.wait(sig, [0, 0], 1, cmp=GE)
        pld.system.notify(sig, me, [0, 0], -1, op=ADD)
        y = pl.store(pl.load(win, [r, 0], [1, S]), [r, 0], y)
    y = pl.store(w, [WORK, 0], y)
    return y


def credit_reference(xs):
    n = len(xs)
    want = untouched(n)
    want[:, :ROUNDS] = ring(xs, slice(0, ROUNDS))
    want[:, WORK] = xs[:, WORK] + (ROUNDS * SPIN * (np.arange(n) % 2))[:, None]
    return want


def credit_pairs(n):
    return [{(0, line_of(credit_racy, "credit-store")), (1, line_of(credit_racy, "credit-load"))}]


# ---------------------------------------------------------------- (3b) async put published early
@pl.jit.incore
def async_racy(x: X, y: Y, win: WIN, sig: SIG, k: K):
    ctx = pld.get_comm_ctx(win)
    nxt = (pld.rank(ctx) + 1) % pld.nranks(ctx)
    sess = pld.system.async_session()
    evt = pld.tensor.put_async(win, nxt, x, sess, [0, 0], [0, 0], [1, S])  # async-put
    w = pl.load(x, [WORK, 0], [1, S])
    for i in pl.range(SPIN):
        w = pl.add(w, 1.0)
    y = pl.store(w, [WORK, 0], y)
    pld.system.notify(sig, nxt, [0, 0], 1, op=SET)
    pld.system.wait_async_event(evt, sess)
    pld.system.wait(sig, [0, 0], 1, cmp=EQ)
    y = pl.store(pl.load(win, [0, 0], [1, S]), [0, 0], y)  # async-load
    return y


@pl.jit.incore
def async_twin(x: X, y: Y, win: WIN, sig: SIG, k: K):
    ctx = pld.get_comm_ctx(win)
    nxt = (pld.rank(ctx) + 1) % pld.nranks(ctx)
    sess = pld.system.async_session()
    evt = pld.tensor.put_async(win, nxt, x, sess, [0, 0], [0, 0], [1, S])
    w = pl.load(x, [WORK, 0], [1, S])
    for i in pl.range(SPIN):
        w = pl.add(w, 1.0)
    y = pl.store(w, [WORK, 0], y)
    pld.system.wait_async_event(evt, sess)
    pld.system.notify(sig, nxt, [0, 0], 1, op=SET)
    pld.system.wait(sig, [0, 0], 1, cmp=EQ)
    y = pl.store(pl.load(win, [0, 0], [1, S]), [0, 0], y)
    return y


def async_pairs(n):
    return [{(0, line_of(async_racy, "async-put")), (1, line_of(async_racy, "async-load"))}]


# ---------------------------------------------------------------- (4a) two writer tasks
@pl.jit
def tasks_racy(x: X, y: Y, win: WIN, sig: SIG, k: K):
    with pl.manual_scope():
        with pl.at(level=CORE, name_hint="first"):
            y = pl.store(pl.load(x, [0, 0], [2, S]), [0, 0], y)  # task-first
        with pl.at(level=CORE, name_hint="second"):
            y = pl.store(pl.load(x, [2, 0], [2, S]), [1, 0], y)  # task-second
    return y


@pl.jit
def tasks_twin(x: X, y: Y, win: WIN, sig: SIG, k: K):
    with pl.manual_scope():
        with pl.at(level=CORE, name_hint="first") as first:
            y = pl.store(pl.load(x, [0, 0], [2, S]), [0, 0], y)
        with pl.at(level=CORE, name_hint="second", deps=[first]):
            y = pl.store(pl.load(x, [2, 0], [2, S]), [1, 0], y)
    return y


def tasks_reference(xs):
    want = untouched(len(xs))
    want[:, 0] = xs[:, 0]
    want[:, 1:3] = xs[:, 2:4]          # the second task wrote row 1 last
    return want


def tasks_pairs(n):
    # every rank's y has the race; rank 0's is the one asked for
    return [{(0, line_of(tasks_racy, "task-first")), (0, line_of(tasks_racy, "task-second"))}]


# ---------------------------------------------------------------- (4b) two spmd blocks
@pl.jit
def blocks_racy(x: X, y: Y, win: WIN, sig: SIG, k: K):
    with pl.spmd(2, name_hint="blocks"):
        b = pl.get_block_idx()
        y = pl.store(pl.load(x, [2 * b, 0], [2, S]), [b, 0], y)  # block-store
    return y


@pl.jit
def blocks_twin(x: X, y: Y, win: WIN, sig: SIG, k: K):
    with pl.spmd(2, name_hint="blocks"):
        b = pl.get_block_idx()
        y = pl.store(pl.load(x, [2 * b, 0], [2, S]), [2 * b, 0], y)
    return y


def blocks_racy_reference(xs):
    """What the racy form writes: rows 0..2 (row 1 by both blocks)."""
    want = untouched(len(xs))
    want[:, 0:3] = 0
    return want


def blocks_reference(xs):
    want = untouched(len(xs))
    want[:, 0:4] = xs[:, 0:4]
    return want


def blocks_pairs(n):
    # both sides are rank 0's block-store line (blocks 0 and 1)
    line = line_of(blocks_racy, "block-store")
    return [((0, line), (0, line))]


# =============================================================== the table
@dataclass(frozen=True)
class Case:
    name: str
    safe: object                  # host program of the twin
    racy: object                  # host program of the racy form
    reference: Callable           # xs -> expected ys of the twin
    written: Callable             # xs -> an array whose non-SENTINEL elements the racy form writes
    racy_pairs: Callable          # n -> [pair of (rank, line), ...] (any one)
    never: Callable               # n -> {(rank, line)} no reported race may name
    buffer: str | None            # the window buffer the expected race is on (None: plain)
    owner: Callable               # n -> whose copy of it
    worlds: tuple                 # world sizes the shape allows
    runs: int                     # runs of each form (more where timing could decide)


def _case(name, safe, racy, reference, pairs, buffer, owner, worlds, runs=3, kernel=True,
          written=None, never=lambda n: set()):
    wrap = (lambda k: main_of(chip_of(k))) if kernel else main_of
    whose = owner if callable(owner) else (lambda n: owner)
    return Case(name, wrap(safe), wrap(racy), reference, written or reference, pairs, never,
                buffer, whose, tuple(worlds), runs)


CASES = {c.name: c for c in [
    _case("set_zero_fresh_cell", set_zero_twin, set_zero_racy, ring_row_reference,
          set_zero_pairs, "wbuf", 1, (2, 3, 4)),
    _case("weighted_counts", weighted_twin, weighted_racy, weighted_reference, weighted_pairs,
          "wbuf", 0, (3, 4), never=weighted_never),
    _case("two_sets", two_sets_twin, two_sets_racy, two_sets_reference, two_sets_pairs,
          "wbuf", 0, (3, 4)),
    _case("credit_barrier", credit_twin, credit_racy, credit_reference, credit_pairs,
          "wbuf", 1, (2, 3, 4)),
    _case("async_put_published_early", async_twin, async_racy, ring_row_reference, async_pairs,
          "wbuf", 1, (2, 3, 4)),
    _case("overlapping_tasks", tasks_twin, tasks_racy, tasks_reference, tasks_pairs,
          None, None, (1, 2, 3), runs=1, kernel=False),
    _case("overlapping_blocks", blocks_twin, blocks_racy, blocks_reference, blocks_pairs,
          None, None, (1, 2, 3), runs=1, kernel=False, written=blocks_racy_reference),
]}
