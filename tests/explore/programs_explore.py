"""Protocols of the exploration tests (test_explore.py): four bugs that an
ordinary run usually passes, each beside its correct twin.

Every program has one host program shape: a data window ``win`` [R, S]
FP32 and a signal window ``sig`` [4, 4] INT32 per rank, each rank's
input rows ``x`` and output rows ``y``; ``reference(x)`` is what a correct
run leaves in ``y``.  The kernels are small on purpose: exploration is for
protocols of a few steps per rank.
"""

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld

NR = pl.dynamic("NR")
S = 8                # elements of a row
R = 4                # rows of the data window, of x and of y
ROUNDS = 2           # rounds of the round-counter protocols

SET, ADD = pld.NotifyOp.Set, pld.NotifyOp.AtomicAdd
EQ, GE = pld.WaitCmp.Eq, pld.WaitCmp.Ge

X = pl.Tensor[[R, S], pl.FP32]
Y = pl.Out[pl.Tensor[[R, S], pl.FP32]]
WIN = pl.InOut[pld.DistributedTensor[[R, S], pl.FP32]]
SIG = pl.InOut[pld.DistributedTensor[[4, 4], pl.INT32]]


def main_of(kernel):
    """The host program of every protocol: one dispatch per rank."""
    @pl.jit
    def chip(x: X, y: Y, win: WIN, sig: SIG):
        return kernel(x, y, win, sig)

    @pl.jit.host
    def main(xs: pl.Tensor[[NR, R, S], pl.FP32], ys: pl.Out[pl.Tensor[[NR, R, S], pl.FP32]]):
        wbuf = pld.alloc_window_buffer([R, S], dtype=pl.FP32)
        sbuf = pld.alloc_window_buffer([4, 4], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            chip(xs[r], ys[r], pld.window(wbuf, [R, S], dtype=pl.FP32),
                 pld.window(sbuf, [4, 4], dtype=pl.INT32), device=r)
        return ys
    return main


# ---------------------------------------------------------------- 1. Eq on a shared counter
# Every rank but 0 adds 1 to rank 0's counter; rank 0 waits for each arrival
# in turn.  With Eq, two adds that land before rank 0's first check leave
# the counter at 2, and "== 1" never holds again.

def counter_kernel(cmp):
    @pl.jit.incore
    def counter(x: X, y: Y, win: WIN, sig: SIG) -> pl.Tensor[[R, S], pl.FP32]:
        ctx = pld.get_comm_ctx(sig)
        me = pld.rank(ctx)
        n = pld.nranks(ctx)
        if me == 0:
            for k in pl.range(1, n):
                pld.system.wait(sig, offsets=[0, 0], expected=k, cmp=cmp)
        else:
            pld.system.notify(sig, peer=0, offsets=[0, 0], value=1, op=ADD)
        y = pl.store(pl.load(x, [0, 0], [R, S]), [0, 0], y)
        return y
    return counter


def counter_reference(xs):
    return xs.copy()


# ---------------------------------------------------------------- 2. Set overwrites a flag
# Rank 0 sends rank 1 two rows through one slot of rank 1's window,
# publishing each with Set on one flag.  The consumer waits ">= k" for the
# k-th: when the second row (and Set 2) lands before the consumer read the
# first, it reads the second row twice.  The twin waits for the consumer's
# acknowledgement before it overwrites the slot.

def handshake_kernel(acked: bool):
    @pl.jit.incore
    def handshake(x: X, y: Y, win: WIN, sig: SIG) -> pl.Tensor[[R, S], pl.FP32]:
        ctx = pld.get_comm_ctx(sig)
        me = pld.rank(ctx)
        if me == 0:
            for k in pl.range(2):
                if acked:
                    if k > 0:
                        pld.system.wait(sig, offsets=[1, 0], expected=k, cmp=GE)
                row = pl.load(x, [k, 0], [1, S])
                pld.tile.remote_store(row, win, peer=1, offsets=[0, 0])
                pld.system.notify(sig, peer=1, offsets=[0, 0], value=k + 1, op=SET)
        if me == 1:
            for k in pl.range(2):
                pld.system.wait(sig, offsets=[0, 0], expected=k + 1, cmp=GE)
                got = pl.load(win, [0, 0], [1, S])
                y = pl.store(got, [k, 0], y)
                if acked:
                    pld.system.notify(sig, peer=0, offsets=[1, 0], value=k + 1, op=SET)
        return y
    return handshake


def handshake_reference(xs):
    ys = np.zeros_like(xs)
    ys[1, 0:2] = xs[0, 0:2]
    return ys


# ---------------------------------------------------------------- 3. a round counter reset
# Each round every rank adds 1 to each peer's cell of its own row, waits for
# the peers' adds on its row, then sets its row back to 0 for the next
# round.  A rank that finishes its round and adds for the next one before a
# slower peer has reset lands its add before that reset, which wipes it:
# the slow peer then waits for it forever.  The twin never resets: round k
# waits for ">= k".

def rounds_kernel(reset: bool):
    @pl.jit.incore
    def rounds(x: X, y: Y, win: WIN, sig: SIG) -> pl.Tensor[[R, S], pl.FP32]:
        ctx = pld.get_comm_ctx(sig)
        me = pld.rank(ctx)
        n = pld.nranks(ctx)
        for k in pl.range(ROUNDS):
            for p in pl.range(n):
                if p != me:
                    pld.system.notify(sig, peer=p, offsets=[0, me], value=1, op=ADD)
            for p in pl.range(n):
                if p != me:
                    if reset:
                        pld.system.wait(sig, offsets=[0, p], expected=1, cmp=GE)
                    else:
                        pld.system.wait(sig, offsets=[0, p], expected=k + 1, cmp=GE)
            if reset:
                for p in pl.range(n):
                    if p != me:
                        pld.system.notify(sig, peer=me, offsets=[0, p], value=0, op=SET)
        y = pl.store(pl.load(x, [0, 0], [R, S]), [0, 0], y)
        return y
    return rounds


def rounds_reference(xs):
    return xs.copy()


# ---------------------------------------------------------------- 4. a read before the wait
# Each rank stores its first row into the next rank's window and notifies
# it; each reads what its predecessor stored.  On one branch (the last rank)
# the read comes before the wait.

def ring_kernel(early_last: bool):
    @pl.jit.incore
    def ring(x: X, y: Y, win: WIN, sig: SIG) -> pl.Tensor[[R, S], pl.FP32]:
        ctx = pld.get_comm_ctx(sig)
        me = pld.rank(ctx)
        n = pld.nranks(ctx)
        nxt = (me + 1) % n
        pld.tile.remote_store(pl.load(x, [0, 0], [1, S]), win, peer=nxt, offsets=[0, 0])
        pld.system.notify(sig, peer=nxt, offsets=[0, 0], value=1, op=SET)
        if early_last and me == n - 1:
            got = pl.load(win, [0, 0], [1, S])
            pld.system.wait(sig, offsets=[0, 0], expected=1, cmp=GE)
        else:
            pld.system.wait(sig, offsets=[0, 0], expected=1, cmp=GE)
            got = pl.load(win, [0, 0], [1, S])
        y = pl.store(got, [0, 0], y)
        return y
    return ring


def ring_reference(xs):
    ys = np.zeros_like(xs)
    ys[:, 0] = np.roll(xs[:, 0], 1, axis=0)
    return ys


# name -> (the buggy program, its twin, reference, world of the bug, kind the bug fails with)
PROTOCOLS = {
    "eq_counter": (lambda: main_of(counter_kernel(EQ)), lambda: main_of(counter_kernel(GE)),
                   counter_reference, 3, "deadlock"),
    "set_overwrite": (lambda: main_of(handshake_kernel(False)),
                      lambda: main_of(handshake_kernel(True)), handshake_reference, 2, "race"),
    "round_reset": (lambda: main_of(rounds_kernel(True)), lambda: main_of(rounds_kernel(False)),
                    rounds_reference, 2, "deadlock"),
    "read_before_wait": (lambda: main_of(ring_kernel(True)), lambda: main_of(ring_kernel(False)),
                         ring_reference, 2, "race"),
}


def inputs(n: int) -> tuple:
    """(xs, ys) of one call on ``n`` ranks: distinct rows, zeroed outputs."""
    xs = (np.arange(n * R * S, dtype=np.float32).reshape(n, R, S) + 1.0)
    return xs, np.zeros_like(xs)


# ---------------------------------------------------------------- collectives and tasks
def collective_main(mode: str, n: int):
    """Each rank's first input row, summed over the ranks by
    ``pld.tensor.allreduce(mode=)`` into the first output row."""
    rows, cols = (max(1, 2 * (n - 1)), n) if mode == "ring" else (n, 1)

    @pl.jit.incore
    def reduce(x: X, y: Y, data: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
               sig: pl.InOut[pld.DistributedTensor[[rows, cols], pl.INT32]]):
        data = pl.store(pl.load(x, [0, 0], [1, S]), [0, 0], data)
        data = pld.tensor.allreduce(data, sig, op=pld.ReduceOp.Sum, mode=mode)
        y = pl.store(pl.load(data, [0, 0], [1, S]), [0, 0], y)
        return y

    @pl.jit
    def chip(x: X, y: Y, data: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
             sig: pl.InOut[pld.DistributedTensor[[rows, cols], pl.INT32]]):
        return reduce(x, y, data, sig)

    @pl.jit.host
    def main(xs: pl.Tensor[[NR, R, S], pl.FP32], ys: pl.Out[pl.Tensor[[NR, R, S], pl.FP32]]):
        dbuf = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
        sbuf = pld.alloc_window_buffer([rows, cols], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            chip(xs[r], ys[r], pld.window(dbuf, [1, S], dtype=pl.FP32),
                 pld.window(sbuf, [rows, cols], dtype=pl.INT32), device=r)
        return ys
    return main


def collective_reference(xs):
    ys = np.zeros_like(xs)
    ys[:, 0] = xs[:, 0].sum(axis=0)
    return ys


@pl.jit.incore
def send(x: X, win: WIN, sig: SIG):
    ctx = pld.get_comm_ctx(sig)
    nxt = (pld.rank(ctx) + 1) % pld.nranks(ctx)
    pld.tile.remote_store(pl.load(x, [0, 0], [1, S]), win, peer=nxt, offsets=[0, 0])
    pld.system.notify(sig, peer=nxt, offsets=[0, 0], value=1, op=SET)


@pl.jit.incore
def receive(y: Y, win: WIN, sig: SIG) -> pl.Tensor[[R, S], pl.FP32]:
    pld.system.wait(sig, offsets=[0, 0], expected=1, cmp=GE)
    y = pl.store(pl.load(win, [0, 0], [1, S]), [0, 0], y)
    return y


@pl.jit
def send_then_receive(x: X, y: Y, win: WIN, sig: SIG):
    send(x, win, sig)
    return receive(y, win, sig)


@pl.jit
def deferred(x: X, y: Y, win: WIN, sig: SIG):
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="waiter") as tid:
        pld.system.defer_wait(signal=sig, offsets=[0, 0], expected=1, cmp=GE)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="consumer", deps=[tid]):
        y = pl.store(pl.load(win, [0, 0], [1, S]), [0, 0], y)
    return y


# ---------------------------------------------------------------- a rank's task order
# Two tasks of a manual scope hand a row over through a plain intermediate
# tensor: "produce" copies x into it, "consume" copies it into y.  Without
# deps= the chip may run consume first (its cores take ready tasks in any
# order) and y gets the tensor's zeros; the twin has consume depend on
# produce.  Nothing here is window memory: only the order of the rank's
# tasks decides.
@pl.jit
def handover_missing_dep(x: X, y: Y, win: WIN, sig: SIG):
    tmp = pl.create_tensor([1, S], dtype=pl.FP32)
    with pl.manual_scope():
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="produce"):
            tmp = pl.store(pl.load(x, [0, 0], [1, S]), [0, 0], tmp)
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="consume"):
            y = pl.store(pl.load(tmp, [0, 0], [1, S]), [0, 0], y)
    return y


@pl.jit
def handover_with_dep(x: X, y: Y, win: WIN, sig: SIG):
    tmp = pl.create_tensor([1, S], dtype=pl.FP32)
    with pl.manual_scope():
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="produce") as produced:
            tmp = pl.store(pl.load(x, [0, 0], [1, S]), [0, 0], tmp)
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="consume", deps=[produced]):
            y = pl.store(pl.load(tmp, [0, 0], [1, S]), [0, 0], y)
    return y


def handover_reference(xs):
    ys = np.zeros_like(xs)
    ys[:, 0] = xs[:, 0]
    return ys


def host_of(chip):
    @pl.jit.host
    def main(xs: pl.Tensor[[NR, R, S], pl.FP32], ys: pl.Out[pl.Tensor[[NR, R, S], pl.FP32]]):
        wbuf = pld.alloc_window_buffer([R, S], dtype=pl.FP32)
        sbuf = pld.alloc_window_buffer([4, 4], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            chip(xs[r], ys[r], pld.window(wbuf, [R, S], dtype=pl.FP32),
                 pld.window(sbuf, [4, 4], dtype=pl.INT32), device=r)
        return ys
    return main


@pl.jit.incore
def overrun(x: X, y: Y, win: WIN, sig: SIG) -> pl.Tensor[[R, S], pl.FP32]:
    ctx = pld.get_comm_ctx(sig)
    me = pld.rank(ctx)
    pld.system.notify(sig, peer=(me + 1) % pld.nranks(ctx), offsets=[0, 0], value=1, op=SET)
    pld.system.wait(sig, offsets=[0, 0], expected=1, cmp=GE)
    # the row after the window's last: out of bounds on the rank that gets here
    pld.tile.remote_store(pl.load(x, [0, 0], [1, S]), win, peer=0, offsets=[R + me - 1, 0])
    return y


@pl.jit
def overrun_chip(x: X, y: Y, win: WIN, sig: SIG):
    return overrun(x, y, win, sig)


@pl.jit
def gated_tasks(x: X, y: Y, win: WIN, sig: SIG):
    """Two tasks of one rank that must run at once: ``produce`` waits for a
    gate that ``release``, submitted after it and independent of it, opens."""
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="produce"):
        pld.system.wait(sig, offsets=[0, 0], expected=1, cmp=GE)
        y = pl.store(pl.load(x, [0, 0], [1, S]), [0, 0], y)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="release"):
        pld.system.notify(sig, peer=pld.rank(pld.get_comm_ctx(sig)), offsets=[0, 0], value=1,
                          op=SET)
    return y


@pl.jit
def deferred_barrier(x: X, y: Y, win: WIN, sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="arrive") as tid:
        pld.tensor.barrier(sig, defer=True)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="consumer", deps=[tid]):
        y = pl.store(pl.load(win, [0, 0], [1, S]), [0, 0], y)
    return y


@pl.jit.host
def deferred_barrier_main(xs: pl.Tensor[[NR, R, S], pl.FP32],
                          ys: pl.Out[pl.Tensor[[NR, R, S], pl.FP32]]):
    wbuf = pld.alloc_window_buffer([R, S], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        deferred_barrier(xs[r], ys[r], pld.window(wbuf, [R, S], dtype=pl.FP32),
                         pld.window(sbuf, [NR, 1], dtype=pl.INT32), device=r)
    return ys
