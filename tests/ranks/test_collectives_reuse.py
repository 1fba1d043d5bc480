"""One signal window serves any number of collective calls, because every
call leaves its cells at zero (the credit barrier is self-clearing):

* back-to-back calls on one signal; a mixed sequence barrier -> all_to_all
  -> all_to_all -> barrier -> allreduce on one signal; calls inside a kernel
  ``for`` loop and in both branches of rank-uniform ``if`` statements;
* the same across several dispatches of one host program, followed by a
  HOST builtin on the signal the kernels used, and across several calls of
  a prepared worker;
* after every call the signal reads all zero (read while a barrier on a
  second signal keeps every peer out of the next call).

And the other side of the contract: a signal a hand-rolled notify has
written is refused when a collective starts on it (TC507), naming the cell,
its value and the function that notifies into it."""
import re

import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.errors import RankFailure

from programs_prims import WORLD_SIZES, config_for

NR = pl.dynamic("NR")
S = 129
ITER = 4                    # loop iterations inside the kernel
ROUNDS = 3                  # dispatches of the kernel per host call
OUT = 5 + ITER              # output slots per dispatch
CHECKS = 3 + ITER           # signal snapshots per dispatch


@pl.jit.incore
def reuse_kernel(a: pl.Tensor[[1, S], pl.FP32], m: pl.Tensor[[1, S], pl.FP32],
                 rows1: pl.Tensor[[NR, S], pl.FP32], rows2: pl.Tensor[[NR, S], pl.FP32],
                 xs: pl.Tensor[[ITER, S], pl.FP32],
                 out: pl.Out[pl.Tensor[[OUT, NR, S], pl.FP32]],
                 cells: pl.Out[pl.Tensor[[CHECKS, NR, 1], pl.INT32]],
                 data: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
                 t1: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
                 t2: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
                 sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
                 gate: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    # Each snapshot of sig is followed by a barrier on gate: until every rank
    # has taken its snapshot no peer can enter the next call on sig and
    # pre-credit a cell, so a snapshot must read exactly 0.
    # back to back, nothing in between
    data = pl.store(pl.load(a, [0, 0], [1, S]), [0, 0], data)
    data = pld.tensor.allreduce(data, sig)
    data = pld.tensor.allreduce(data, sig)
    pld.tensor.allreduce(data, sig)
    pl.store(pl.load(data, [0, 0], [1, S]), [0, 0, 0], out)
    pl.store(pl.load(sig, [0, 0], [NR, 1]), [0, 0, 0], cells)
    pld.tensor.barrier(gate)
    # mixed collectives in sequence on one signal
    sig = pld.tensor.barrier(sig)
    t1 = pld.tensor.all_to_all(rows1, t1, sig)
    pld.tensor.all_to_all(rows2, t2, sig)
    pld.tensor.barrier(sig)
    pl.store(pl.load(m, [0, 0], [1, S]), [0, 0], data)
    data = pld.tensor.allreduce(data, sig, op=pld.ReduceOp.Max)
    pl.store(pl.load(t1, [0, 0], [NR, S]), [1, 0, 0], out)
    pl.store(pl.load(t2, [0, 0], [NR, S]), [2, 0, 0], out)
    pl.store(pl.load(data, [0, 0], [1, S]), [3, 0, 0], out)
    pl.store(pl.load(sig, [0, 0], [NR, 1]), [1, 0, 0], cells)
    gate = pld.tensor.barrier(gate)
    # in a loop, in both branches of a rank-uniform if
    for i in pl.range(ITER):
        pl.store(pl.load(xs, [i, 0], [1, S]), [0, 0], data)
        if i % 2 == 0:
            data = pld.tensor.allreduce(data, sig, op=pld.ReduceOp.Sum)
        else:
            pld.tensor.broadcast(data, sig, root=0)
        pl.store(pl.load(data, [0, 0], [1, S]), [4 + i, 0, 0], out)
        pl.store(pl.load(sig, [0, 0], [NR, 1]), [2 + i, 0, 0], cells)
        pld.tensor.barrier(gate)
    # and a loop with nothing between the calls: a fast rank runs into its next
    # call while a slow one is still in the previous
    for i in pl.range(ITER):
        if i % 2 == 0:
            data = pld.tensor.allreduce(data, sig)
        else:
            pld.tensor.barrier(sig)
    pl.store(pl.load(data, [0, 0], [1, S]), [4 + ITER, 0, 0], out)
    pl.store(pl.load(sig, [0, 0], [NR, 1]), [2 + ITER, 0, 0], cells)
    pld.tensor.barrier(gate)
    return out


@pl.jit
def reuse_chip(a: pl.Tensor[[1, S], pl.FP32], m: pl.Tensor[[1, S], pl.FP32],
               rows1: pl.Tensor[[NR, S], pl.FP32], rows2: pl.Tensor[[NR, S], pl.FP32],
               xs: pl.Tensor[[ITER, S], pl.FP32],
               out: pl.Out[pl.Tensor[[OUT, NR, S], pl.FP32]],
               cells: pl.Out[pl.Tensor[[CHECKS, NR, 1], pl.INT32]],
               data: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
               t1: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
               t2: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
               sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
               gate: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    return reuse_kernel(a, m, rows1, rows2, xs, out, cells, data, t1, t2, sig, gate)


@pl.jit.incore
def final_kernel(last: pl.Out[pl.Tensor[[1, S], pl.FP32]],
                 cells: pl.Out[pl.Tensor[[2, NR, 1], pl.INT32]],
                 data: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
                 sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
                 gate: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    pl.store(pl.load(data, [0, 0], [1, S]), [0, 0], last)
    pl.store(pl.load(sig, [0, 0], [NR, 1]), [0, 0, 0], cells)
    pl.store(pl.load(gate, [0, 0], [NR, 1]), [1, 0, 0], cells)
    return last


@pl.jit
def final_chip(last: pl.Out[pl.Tensor[[1, S], pl.FP32]],
               cells: pl.Out[pl.Tensor[[2, NR, 1], pl.INT32]],
               data: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
               sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
               gate: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    return final_kernel(last, cells, data, sig, gate)


@pl.jit.host
def reuse_main(a: pl.Tensor[[NR, ROUNDS, 1, S], pl.FP32], m: pl.Tensor[[NR, ROUNDS, 1, S], pl.FP32],
               rows1: pl.Tensor[[NR, ROUNDS, NR, S], pl.FP32],
               rows2: pl.Tensor[[NR, ROUNDS, NR, S], pl.FP32],
               xs: pl.Tensor[[NR, ROUNDS, ITER, S], pl.FP32],
               out: pl.Out[pl.Tensor[[NR, ROUNDS, OUT, NR, S], pl.FP32]],
               cells: pl.Out[pl.Tensor[[NR, ROUNDS, CHECKS, NR, 1], pl.INT32]],
               last: pl.Out[pl.Tensor[[NR, 1, S], pl.FP32]],
               final: pl.Out[pl.Tensor[[NR, 2, NR, 1], pl.INT32]]):
    data = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
    t1 = pld.alloc_window_buffer([NR, S], dtype=pl.FP32)
    t2 = pld.alloc_window_buffer([NR, S], dtype=pl.FP32)
    sig = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    gate = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for rd in pl.range(ROUNDS):
        for r in pl.range(pld.world_size()):
            reuse_chip(a[r][rd], m[r][rd], rows1[r][rd], rows2[r][rd], xs[r][rd], out[r][rd],
                       cells[r][rd], pld.window(data, [1, S], dtype=pl.FP32),
                       pld.window(t1, [NR, S], dtype=pl.FP32),
                       pld.window(t2, [NR, S], dtype=pl.FP32),
                       pld.window(sig, [NR, 1], dtype=pl.INT32),
                       pld.window(gate, [NR, 1], dtype=pl.INT32), device=r)
    # a HOST builtin on the signal the kernels used ([ws, 1] is a valid HOST
    # allreduce signal); data is the same on every rank by now
    pld.tensor.allreduce(pld.window(data, [1, S], dtype=pl.FP32),
                         pld.window(sig, [NR, 1], dtype=pl.INT32))
    for r in pl.range(pld.world_size()):
        final_chip(last[r], final[r], pld.window(data, [1, S], dtype=pl.FP32),
                   pld.window(sig, [NR, 1], dtype=pl.INT32),
                   pld.window(gate, [NR, 1], dtype=pl.INT32), device=r)
    return out


def reuse_args(n, seed):
    rng = np.random.default_rng(seed)
    small = lambda *shape: rng.integers(-3, 4, shape).astype(np.float32)   # noqa: E731
    args = [small(n, ROUNDS, 1, S), rng.standard_normal((n, ROUNDS, 1, S)).astype(np.float32),
            small(n, ROUNDS, n, S), small(n, ROUNDS, n, S), small(n, ROUNDS, ITER, S)]
    outs = [np.full((n, ROUNDS, OUT, n, S), np.nan, np.float32),
            np.full((n, ROUNDS, CHECKS, n, 1), -1, np.int32),
            np.full((n, 1, S), np.nan, np.float32), np.full((n, 2, n, 1), -1, np.int32)]
    return args, outs


def check_reuse(args, outs):
    a, m, rows1, rows2, xs = args
    out, cells, last, final = outs
    n = a.shape[0]
    for r in range(n):
        for rd in range(ROUNDS):
            got = out[r, rd]
            what = f"rank {r} dispatch {rd}"
            # three Sums in a row: the sum, then n times it, then n * n times it
            np.testing.assert_array_equal(got[0, 0], n * n * a[:, rd, 0].sum(0), what)
            np.testing.assert_array_equal(got[1], rows1[:, rd, r, :], what)
            np.testing.assert_array_equal(got[2], rows2[:, rd, r, :], what)
            np.testing.assert_array_equal(got[3, 0], m[:, rd, 0].max(0), what)
            for i in range(ITER):
                want = xs[:, rd, i].sum(0) if i % 2 == 0 else xs[0, rd, i]
                np.testing.assert_array_equal(got[4 + i, 0], want, f"{what} iteration {i}")
            # the last broadcast, summed over the ranks once per even iteration
            runs = n ** ((ITER + 1) // 2)
            np.testing.assert_array_equal(got[4 + ITER, 0], runs * xs[0, rd, ITER - 1], what)
        # and the HOST allreduce after the last dispatch sums it once more
        np.testing.assert_array_equal(last[r, 0], n * runs * xs[0, ROUNDS - 1, ITER - 1])
    np.testing.assert_array_equal(cells, 0)
    np.testing.assert_array_equal(final, 0)


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_one_signal_for_every_call_of_a_host_program(n):
    args, outs = reuse_args(n, 7000 + n)
    reuse_main(*args, *outs, config=config_for(n))
    check_reuse(args, outs)


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_one_signal_across_calls_of_a_prepared_worker(n):
    args, outs = reuse_args(n, 7100 + n)
    compiled = reuse_main.compile(*args, *outs, config=config_for(n))
    rt = compiled.prepare()
    try:
        for call in range(3):
            args, outs = reuse_args(n, 7200 + 10 * n + call)
            rt(*args, *outs)
            check_reuse(args, outs)
    finally:
        rt.close()
    assert rt.closed


# --------------------------------------------------------------- dirty signals
BIG = [n for n in WORLD_SIZES if n > 1]     # with a rank alone no cell is ever read


@pl.jit.incore
def set_then_barrier(out: pl.Out[pl.Tensor[[1, 1], pl.INT32]],
                     sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    ctx = pld.get_comm_ctx(sig)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    # a hand-rolled handshake with Set: afterwards every cell a peer writes
    # holds 5 on every rank, before any rank enters the collective
    for p in pl.range(n):
        if p != me:
            pld.system.notify(sig, p, [me, 0], 5, op=pld.NotifyOp.Set)
    for s in pl.range(n):
        if s != me:
            pld.system.wait(sig, [s, 0], 5, cmp=pld.WaitCmp.Ge)
    pld.tensor.barrier(sig)
    out = pl.store(pl.load(sig, [0, 0], [1, 1]), [0, 0], out)
    return out


@pl.jit
def set_chip(out: pl.Out[pl.Tensor[[1, 1], pl.INT32]],
             sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    return set_then_barrier(out, sig)


@pl.jit.host
def set_main(outs: pl.Out[pl.Tensor[[NR, 1, 1], pl.INT32]]):
    handshake = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        set_chip(outs[r], pld.window(handshake, [NR, 1], dtype=pl.INT32), device=r)
    return outs


@pl.jit.incore
def stray_credit(out: pl.Out[pl.Tensor[[1, 1], pl.INT32]],
                 sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
                 go: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
    me = pld.rank(pld.get_comm_ctx(sig))
    # rank 1 leaves one credit in its cell of rank 0's signal and enters the
    # barrier only once rank 0 has come out of its own: so when rank 0 starts
    # its barrier the cell holds exactly 1 and rank 1 has made no collective
    # call -- the credit cannot be rank 1's arrival.  Unchecked, it would let
    # rank 0 through the barrier alone.
    if me == 1:
        pld.system.notify(sig, 0, [1, 0], 1, op=pld.NotifyOp.AtomicAdd)
        pld.system.wait(go, [0, 0], 1, cmp=pld.WaitCmp.Ge)
    if me == 0:
        pld.system.wait(sig, [1, 0], 1, cmp=pld.WaitCmp.Ge)
    pld.tensor.barrier(sig)
    if me == 0:
        pld.system.notify(go, 1, [0, 0], 1, op=pld.NotifyOp.Set)
    out = pl.store(pl.load(sig, [0, 0], [1, 1]), [0, 0], out)
    return out


@pl.jit
def stray_chip(out: pl.Out[pl.Tensor[[1, 1], pl.INT32]],
               sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
               go: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
    return stray_credit(out, sig, go)


@pl.jit.host
def stray_main(outs: pl.Out[pl.Tensor[[NR, 1, 1], pl.INT32]]):
    leftover = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    go = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        stray_chip(outs[r], pld.window(leftover, [NR, 1], dtype=pl.INT32),
                   pld.window(go, [1, 1], dtype=pl.INT32), device=r)
    return outs


def dirty_failure(main, n):
    outs = np.full((n, 1, 1), -1, np.int32)
    with pytest.raises(RankFailure) as ei:
        main(outs, config=config_for(n, deadlock_timeout_s=5))
    np.testing.assert_array_equal(outs, -1)          # a failed call leaves outputs alone
    e = ei.value
    del ei                                           # the traceback holds mapped windows
    assert e.error_code == "TC507", str(e)
    return e, str(e)


@pytest.mark.parametrize("n", BIG)
def test_hand_rolled_set_on_a_collective_signal_is_refused(n):
    e, text = dirty_failure(set_main, n)
    # whichever rank gets there first: every rank finds every peer's cell at 5
    hit = re.search(r"pld\.tensor\.barrier: signal cell handshake\[(\d+), 0\] on rank (\d+) "
                    r"holds 5 when the collective starts", text)
    assert hit, text
    src, rank = int(hit.group(1)), int(hit.group(2))
    assert src != rank and rank == e.rank
    # the function dispatched to run the notify, or the kernel it sits in
    assert re.search(r"hand-rolled pld\.system\.notify into window 'handshake' comes from "
                     r"(set_chip|set_then_barrier)\b", text), text


@pytest.mark.parametrize("n", BIG)
def test_a_stray_credit_is_not_taken_for_a_peers_arrival(n):
    e, text = dirty_failure(stray_main, n)
    assert e.rank == 0
    assert "signal cell leftover[1, 0] on rank 0 holds 1 when the collective starts" in text, text
    assert re.search(r"hand-rolled pld\.system\.notify into window 'leftover' comes from "
                     r"(stray_chip|stray_credit)\b", text), text
