"""The pld.tensor.* collectives as InCore composites, against numpy, at every
world size and on both transports:

* allreduce, mesh and ring, FP32 and FP16, Sum / Max / Min / Prod, on [1, N]
  streams of 1, 17, 4097 and 65537 elements and on a 2-D target reduced as
  one stream, in the rebind idiom and as a bare statement;
* broadcast from every root, allgather, reduce_scatter (the rows a rank does
  not own keep what the caller staged), all_to_all;
* all_to_all_v with counts of 0, within MAX_RECV and above it (received
  counts clamped, the valid rows delivered);
* barrier orders window writes before it against reads after it, for local
  writes read remotely and remote writes read locally;
* a kernel a chip calls twice in one dispatch, on the same windows, works on
  each call's own operands;
* the signal reads all zero once the last collective on it has returned."""
import functools

import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld

from programs_collectives import (GRID, SLOTS, STREAM_SIZES, a2av_counts, check_a2av,
                                  check_reduced, reduce_inputs)
from programs_prims import WORLD_SIZES, config_for

NR = pl.dynamic("NR")
NP = {pl.FP32: np.float32, pl.FP16: np.float16}


# --------------------------------------------------------------- allreduce matrix
def _allreduce_kernel(DT, MODE, SIG, R, C):
    """One kernel per target shape [R, C]: the five slots of programs_collectives
    in turn, on one data window and one signal."""

    @pl.jit.incore
    def allreduce_slots(xs: pl.Tensor[[SLOTS * R, C], DT],
                        out: pl.Out[pl.Tensor[[SLOTS * R, C], DT]],
                        data: pl.InOut[pld.DistributedTensor[[R, C], DT]],
                        sig: pl.InOut[pld.DistributedTensor[SIG, pl.INT32]]):
        # rebind idiom
        data = pl.store(pl.load(xs, [0, 0], [R, C]), [0, 0], data)
        data = pld.tensor.allreduce(data, sig, op=pld.ReduceOp.Sum, mode=MODE)
        out = pl.store(pl.load(data, [0, 0], [R, C]), [0, 0], out)
        # bare statements: the window is updated in place all the same
        pl.store(pl.load(xs, [R, 0], [R, C]), [0, 0], data)
        pld.tensor.allreduce(data, sig, op=pld.ReduceOp.Max, mode=MODE)
        out = pl.store(pl.load(data, [0, 0], [R, C]), [R, 0], out)
        data = pl.store(pl.load(xs, [2 * R, 0], [R, C]), [0, 0], data)
        data = pld.tensor.allreduce(data, sig, op=pld.ReduceOp.Min, mode=MODE)
        out = pl.store(pl.load(data, [0, 0], [R, C]), [2 * R, 0], out)
        pl.store(pl.load(xs, [3 * R, 0], [R, C]), [0, 0], data)
        pld.tensor.allreduce(data, sig, op=pld.ReduceOp.Prod, mode=MODE)
        out = pl.store(pl.load(data, [0, 0], [R, C]), [3 * R, 0], out)
        data = pl.store(pl.load(xs, [4 * R, 0], [R, C]), [0, 0], data)
        data = pld.tensor.allreduce(data, sig, mode=MODE)          # Sum is the default
        out = pl.store(pl.load(data, [0, 0], [R, C]), [4 * R, 0], out)
        return out

    @pl.jit
    def allreduce_chip(xs: pl.Tensor[[SLOTS * R, C], DT],
                       out: pl.Out[pl.Tensor[[SLOTS * R, C], DT]],
                       data: pl.InOut[pld.DistributedTensor[[R, C], DT]],
                       sig: pl.InOut[pld.DistributedTensor[SIG, pl.INT32]]):
        return allreduce_slots(xs, out, data, sig)

    return allreduce_chip


def ring_signal(nr: int) -> list:
    """[2*(NR-1), NR]; a rank alone has no ring rounds, and a window cannot
    have a zero-size dimension, so its ring signal is [1, 1]."""
    return [max(1, 2 * (nr - 1)), nr]


@functools.lru_cache(maxsize=None)
def make_allreduce(DT, MODE, NR):
    """The allreduce matrix for one dtype and mode.  A ring signal
    [2*(NR-1), NR] needs the rank count as a constant (NR an int); mesh runs
    with NR dynamic."""
    SIG = ring_signal(NR) if MODE == "ring" else [NR, 1]
    s1, s17, s4097, s65537 = (_allreduce_kernel(DT, MODE, SIG, 1, c) for c in STREAM_SIZES)
    GR, GC = GRID
    grid = _allreduce_kernel(DT, MODE, SIG, GR, GC)

    @pl.jit.incore
    def read_signal(sig_out: pl.Out[pl.Tensor[SIG, pl.INT32]],
                    sig: pl.InOut[pld.DistributedTensor[SIG, pl.INT32]]):
        sig_out = pl.store(pl.load(sig, [0, 0], SIG), [0, 0], sig_out)
        return sig_out

    @pl.jit
    def read_chip(sig_out: pl.Out[pl.Tensor[SIG, pl.INT32]],
                  sig: pl.InOut[pld.DistributedTensor[SIG, pl.INT32]]):
        return read_signal(sig_out, sig)

    @pl.jit.host
    def allreduce_main(x1: pl.Tensor[[NR, SLOTS, 1], DT], x17: pl.Tensor[[NR, SLOTS, 17], DT],
                       x4097: pl.Tensor[[NR, SLOTS, 4097], DT],
                       x65537: pl.Tensor[[NR, SLOTS, 65537], DT],
                       xg: pl.Tensor[[NR, SLOTS * GR, GC], DT],
                       o1: pl.Out[pl.Tensor[[NR, SLOTS, 1], DT]],
                       o17: pl.Out[pl.Tensor[[NR, SLOTS, 17], DT]],
                       o4097: pl.Out[pl.Tensor[[NR, SLOTS, 4097], DT]],
                       o65537: pl.Out[pl.Tensor[[NR, SLOTS, 65537], DT]],
                       og: pl.Out[pl.Tensor[[NR, SLOTS * GR, GC], DT]],
                       sigs: pl.Out[pl.Tensor[[NR] + SIG, pl.INT32]]):
        d1 = pld.alloc_window_buffer([1, 1], dtype=DT)
        d17 = pld.alloc_window_buffer([1, 17], dtype=DT)
        d4097 = pld.alloc_window_buffer([1, 4097], dtype=DT)
        d65537 = pld.alloc_window_buffer([1, 65537], dtype=DT)
        dg = pld.alloc_window_buffer([GR, GC], dtype=DT)
        sb = pld.alloc_window_buffer(SIG, dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            s1(x1[r], o1[r], pld.window(d1, [1, 1], dtype=DT),
               pld.window(sb, SIG, dtype=pl.INT32), device=r)
            s17(x17[r], o17[r], pld.window(d17, [1, 17], dtype=DT),
                pld.window(sb, SIG, dtype=pl.INT32), device=r)
            s4097(x4097[r], o4097[r], pld.window(d4097, [1, 4097], dtype=DT),
                  pld.window(sb, SIG, dtype=pl.INT32), device=r)
            s65537(x65537[r], o65537[r], pld.window(d65537, [1, 65537], dtype=DT),
                   pld.window(sb, SIG, dtype=pl.INT32), device=r)
            grid(xg[r], og[r], pld.window(dg, [GR, GC], dtype=DT),
                 pld.window(sb, SIG, dtype=pl.INT32), device=r)
            # no collective on the signal follows: its cells are final here
            read_chip(sigs[r], pld.window(sb, SIG, dtype=pl.INT32), device=r)
        return og

    return allreduce_main


ALLREDUCE_CASES = [pytest.param(dt, mode, n, id=f"{dt.name}-{mode}-{n}")
                   for dt in (pl.FP32, pl.FP16) for mode in ("mesh", "ring") for n in WORLD_SIZES]


@pytest.mark.parametrize("dt,mode,n", ALLREDUCE_CASES)
def test_allreduce_matrix(dt, mode, n):
    main = make_allreduce(dt, mode, n if mode == "ring" else NR)
    sig_shape = ring_signal(n) if mode == "ring" else [n, 1]
    dtype = NP[dt]
    rng = np.random.default_rng([n, dt is pl.FP16, mode == "ring"])
    streams = [reduce_inputs(rng, n, 1, c, dtype) for c in STREAM_SIZES]
    grid = reduce_inputs(rng, n, *GRID, dtype)
    outs = [np.full_like(x, np.nan) for x in streams + [grid]]
    sigs = np.full([n] + list(sig_shape), -1, np.int32)
    main(*streams, grid, *outs, sigs, config=config_for(n))
    for x, o, c in zip(streams, outs, STREAM_SIZES):
        check_reduced(o, x, 1, f"[1, {c}]")
    check_reduced(outs[-1], grid, GRID[0], f"{list(GRID)}")
    np.testing.assert_array_equal(sigs, 0)


# --------------------------------------------------------------- data movement
S = 1031                    # a row: not a multiple of a cache line or a tile
ROOTS = 4                   # broadcast is tried from every root of the largest world
ROUNDS = 3


@pl.jit.incore
def movement_kernel(x: pl.Tensor[[1, S], pl.FP32], rows: pl.Tensor[[NR, S], pl.FP32],
                    hx: pl.Tensor[[1, S], pl.FP16],
                    bc: pl.Out[pl.Tensor[[ROOTS, 2, S], pl.FP32]],
                    hbc: pl.Out[pl.Tensor[[1, S], pl.FP16]],
                    moved: pl.Out[pl.Tensor[[3, NR, S], pl.FP32]],
                    data: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
                    hdata: pl.InOut[pld.DistributedTensor[[1, S], pl.FP16]],
                    gathered: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
                    exchanged: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
                    scattered: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
                    sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    n = pld.nranks(pld.get_comm_ctx(sig))
    # broadcast from every root: each rank stages its own rows (x, 2x) first,
    # so a rank that kept its own data would show it
    t = pl.load(x, [0, 0], [1, S])
    pl.store(t, [0, 0], data)
    pl.store(pl.mul(t, 2.0), [1, 0], data)
    data = pld.tensor.broadcast(data, sig, root=0)
    pl.store(pl.load(data, [0, 0], [2, S]), [0, 0, 0], bc)
    if n > 1:
        pl.store(t, [0, 0], data)
        pl.store(pl.mul(t, 2.0), [1, 0], data)
        pld.tensor.broadcast(data, sig, root=1)
        pl.store(pl.load(data, [0, 0], [2, S]), [1, 0, 0], bc)
    if n > 2:
        pl.store(t, [0, 0], data)
        pl.store(pl.mul(t, 2.0), [1, 0], data)
        data = pld.tensor.broadcast(data, sig, root=2)
        pl.store(pl.load(data, [0, 0], [2, S]), [2, 0, 0], bc)
    if n > 3:
        pl.store(t, [0, 0], data)
        pl.store(pl.mul(t, 2.0), [1, 0], data)
        pld.tensor.broadcast(data, sig, root=3)
        pl.store(pl.load(data, [0, 0], [2, S]), [3, 0, 0], bc)
    # an FP16 payload moves unchanged
    pl.store(pl.load(hx, [0, 0], [1, S]), [0, 0], hdata)
    hdata = pld.tensor.broadcast(hdata, sig, root=0)
    hbc = pl.store(pl.load(hdata, [0, 0], [1, S]), [0, 0], hbc)
    # each collective writes a window of its own, so no extra barrier is needed
    # between reading one result and the next collective
    gathered = pld.tensor.allgather(x, gathered, sig)
    pl.store(pl.load(gathered, [0, 0], [NR, S]), [0, 0, 0], moved)
    pld.tensor.all_to_all(rows, exchanged, sig)
    pl.store(pl.load(exchanged, [0, 0], [NR, S]), [1, 0, 0], moved)
    pl.store(pl.load(rows, [0, 0], [NR, S]), [0, 0], scattered)
    scattered = pld.tensor.reduce_scatter(scattered, sig, op=pld.ReduceOp.Sum)
    pl.store(pl.load(scattered, [0, 0], [NR, S]), [2, 0, 0], moved)
    return moved


@pl.jit
def movement_chip(x: pl.Tensor[[1, S], pl.FP32], rows: pl.Tensor[[NR, S], pl.FP32],
                  hx: pl.Tensor[[1, S], pl.FP16],
                  bc: pl.Out[pl.Tensor[[ROOTS, 2, S], pl.FP32]],
                  hbc: pl.Out[pl.Tensor[[1, S], pl.FP16]],
                  moved: pl.Out[pl.Tensor[[3, NR, S], pl.FP32]],
                  data: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
                  hdata: pl.InOut[pld.DistributedTensor[[1, S], pl.FP16]],
                  gathered: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
                  exchanged: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
                  scattered: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
                  sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    return movement_kernel(x, rows, hx, bc, hbc, moved, data, hdata, gathered, exchanged,
                           scattered, sig)


@pl.jit.incore
def ordering_kernel(vals: pl.Tensor[[ROUNDS, S], pl.FP32],
                    seen: pl.Out[pl.Tensor[[ROUNDS, NR, S], pl.FP32]],
                    inboxes: pl.Out[pl.Tensor[[ROUNDS, 1, S], pl.FP32]],
                    sig_out: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
                    box: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
                    inbox: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
                    sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    ctx = pld.get_comm_ctx(sig)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    for k in pl.range(ROUNDS):
        v = pl.load(vals, [k, 0], [1, S])
        # a local write every peer reads, and a remote write its target reads
        pl.store(v, [0, 0], box)
        pld.tile.remote_store(v, inbox, (me + 1) % n, [0, 0])
        pld.tensor.barrier(sig)
        for p in pl.range(n):
            pl.store(pld.tile.remote_load(box, peer=p, offsets=[0, 0], shape=[1, S]),
                     [k, p, 0], seen)
        pl.store(pl.load(inbox, [0, 0], [1, S]), [k, 0, 0], inboxes)
        # and nobody overwrites box or inbox before every peer has read them
        sig = pld.tensor.barrier(sig)
    sig_out = pl.store(pl.load(sig, [0, 0], [NR, 1]), [0, 0], sig_out)
    return seen


@pl.jit
def ordering_chip(vals: pl.Tensor[[ROUNDS, S], pl.FP32],
                  seen: pl.Out[pl.Tensor[[ROUNDS, NR, S], pl.FP32]],
                  inboxes: pl.Out[pl.Tensor[[ROUNDS, 1, S], pl.FP32]],
                  sig_out: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
                  box: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
                  inbox: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
                  sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    return ordering_kernel(vals, seen, inboxes, sig_out, box, inbox, sig)


@pl.jit.host
def movement_main(xs: pl.Tensor[[NR, 1, S], pl.FP32], rows: pl.Tensor[[NR, NR, S], pl.FP32],
                  hxs: pl.Tensor[[NR, 1, S], pl.FP16],
                  vals: pl.Tensor[[NR, ROUNDS, S], pl.FP32],
                  bcs: pl.Out[pl.Tensor[[NR, ROOTS, 2, S], pl.FP32]],
                  hbcs: pl.Out[pl.Tensor[[NR, 1, S], pl.FP16]],
                  moved: pl.Out[pl.Tensor[[NR, 3, NR, S], pl.FP32]],
                  seen: pl.Out[pl.Tensor[[NR, ROUNDS, NR, S], pl.FP32]],
                  inboxes: pl.Out[pl.Tensor[[NR, ROUNDS, 1, S], pl.FP32]],
                  sigs: pl.Out[pl.Tensor[[NR, NR, 1], pl.INT32]]):
    data = pld.alloc_window_buffer([2, S], dtype=pl.FP32)
    hdata = pld.alloc_window_buffer([1, S], dtype=pl.FP16)
    gathered = pld.alloc_window_buffer([NR, S], dtype=pl.FP32)
    exchanged = pld.alloc_window_buffer([NR, S], dtype=pl.FP32)
    scattered = pld.alloc_window_buffer([NR, S], dtype=pl.FP32)
    box = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
    inbox = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
    sig = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        movement_chip(xs[r], rows[r], hxs[r], bcs[r], hbcs[r], moved[r],
                      pld.window(data, [2, S], dtype=pl.FP32),
                      pld.window(hdata, [1, S], dtype=pl.FP16),
                      pld.window(gathered, [NR, S], dtype=pl.FP32),
                      pld.window(exchanged, [NR, S], dtype=pl.FP32),
                      pld.window(scattered, [NR, S], dtype=pl.FP32),
                      pld.window(sig, [NR, 1], dtype=pl.INT32), device=r)
        # the same signal again, in the next dispatch
        ordering_chip(vals[r], seen[r], inboxes[r], sigs[r],
                      pld.window(box, [1, S], dtype=pl.FP32),
                      pld.window(inbox, [1, S], dtype=pl.FP32),
                      pld.window(sig, [NR, 1], dtype=pl.INT32), device=r)
    return moved


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_movement_collectives_and_barrier_ordering(n):
    rng = np.random.default_rng(1000 + n)
    xs = rng.integers(-50, 50, (n, 1, S)).astype(np.float32)
    rows = rng.integers(-50, 50, (n, n, S)).astype(np.float32)
    hxs = rng.standard_normal((n, 1, S)).astype(np.float16)
    vals = rng.standard_normal((n, ROUNDS, S)).astype(np.float32)
    bcs = np.full((n, ROOTS, 2, S), np.nan, np.float32)
    hbcs = np.full((n, 1, S), np.nan, np.float16)
    moved = np.full((n, 3, n, S), np.nan, np.float32)
    seen = np.full((n, ROUNDS, n, S), np.nan, np.float32)
    inboxes = np.full((n, ROUNDS, 1, S), np.nan, np.float32)
    sigs = np.full((n, n, 1), -1, np.int32)
    movement_main(xs, rows, hxs, vals, bcs, hbcs, moved, seen, inboxes, sigs,
                  config=config_for(n))
    for r in range(n):
        for root in range(ROOTS):
            if root < n:
                np.testing.assert_array_equal(bcs[r, root, 0], xs[root, 0], f"rank {r} root {root}")
                np.testing.assert_array_equal(bcs[r, root, 1], 2 * xs[root, 0])
            else:                               # that broadcast was not called
                assert np.isnan(bcs[r, root]).all()
        np.testing.assert_array_equal(hbcs[r], hxs[0])
        np.testing.assert_array_equal(moved[r, 0], xs[:, 0, :], f"allgather on rank {r}")
        np.testing.assert_array_equal(moved[r, 1], rows[:, r, :], f"all_to_all on rank {r}")
        want = rows[r].copy()                   # rows r does not own: as staged
        want[r] = rows[:, r, :].sum(0)
        np.testing.assert_array_equal(moved[r, 2], want, f"reduce_scatter on rank {r}")
        for k in range(ROUNDS):
            np.testing.assert_array_equal(seen[r, k], vals[:, k, :], f"rank {r} round {k}")
            np.testing.assert_array_equal(inboxes[r, k, 0], vals[(r - 1) % n, k],
                                          f"rank {r} inbox round {k}")
    np.testing.assert_array_equal(sigs, 0)


# --------------------------------------------------------------- all_to_all_v
CAP = 3                     # MAX_RECV rows per source
V = 19                      # row length
VROUNDS = 3


@functools.lru_cache(maxsize=None)
def make_a2av(NR):
    """all_to_all_v needs the rank count as a compile-time constant."""

    @pl.jit.incore
    def a2av_kernel(in0: pl.Tensor[[NR * CAP, V], pl.FP32], in1: pl.Tensor[[NR * CAP, V], pl.FP32],
                    in2: pl.Tensor[[NR * CAP, V], pl.FP32],
                    c0: pl.Tensor[[NR], pl.INT32], c1: pl.Tensor[[NR], pl.INT32],
                    c2: pl.Tensor[[NR, 1], pl.INT32],
                    out: pl.Out[pl.Tensor[[VROUNDS, NR * CAP, V], pl.FP32]],
                    got: pl.Out[pl.Tensor[[VROUNDS, NR, 1], pl.INT32]],
                    sig_out: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
                    target: pl.InOut[pld.DistributedTensor[[NR * CAP, V], pl.FP32]],
                    sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
                    recv: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
        # three rounds into one target and one recv_counts window: a barrier
        # after reading keeps the next round's pushes out until every rank has read
        target = pld.tensor.all_to_all_v(in0, target, sig, c0, recv)
        pl.store(pl.load(target, [0, 0], [NR * CAP, V]), [0, 0, 0], out)
        pl.store(pl.load(recv, [0, 0], [NR, 1]), [0, 0, 0], got)
        sig = pld.tensor.barrier(sig)
        pld.tensor.all_to_all_v(in1, target, sig, c1, recv)
        pl.store(pl.load(target, [0, 0], [NR * CAP, V]), [1, 0, 0], out)
        pl.store(pl.load(recv, [0, 0], [NR, 1]), [1, 0, 0], got)
        pld.tensor.barrier(sig)
        target = pld.tensor.all_to_all_v(in2, target, sig, c2, recv)
        pl.store(pl.load(target, [0, 0], [NR * CAP, V]), [2, 0, 0], out)
        pl.store(pl.load(recv, [0, 0], [NR, 1]), [2, 0, 0], got)
        pld.tensor.barrier(sig)
        sig_out = pl.store(pl.load(sig, [0, 0], [NR, 1]), [0, 0], sig_out)
        return out

    @pl.jit
    def a2av_chip(in0: pl.Tensor[[NR * CAP, V], pl.FP32], in1: pl.Tensor[[NR * CAP, V], pl.FP32],
                  in2: pl.Tensor[[NR * CAP, V], pl.FP32],
                  c0: pl.Tensor[[NR], pl.INT32], c1: pl.Tensor[[NR], pl.INT32],
                  c2: pl.Tensor[[NR, 1], pl.INT32],
                  out: pl.Out[pl.Tensor[[VROUNDS, NR * CAP, V], pl.FP32]],
                  got: pl.Out[pl.Tensor[[VROUNDS, NR, 1], pl.INT32]],
                  sig_out: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
                  target: pl.InOut[pld.DistributedTensor[[NR * CAP, V], pl.FP32]],
                  sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
                  recv: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
        return a2av_kernel(in0, in1, in2, c0, c1, c2, out, got, sig_out, target, sig, recv)

    @pl.jit.host
    def a2av_main(in0: pl.Tensor[[NR, NR * CAP, V], pl.FP32],
                  in1: pl.Tensor[[NR, NR * CAP, V], pl.FP32],
                  in2: pl.Tensor[[NR, NR * CAP, V], pl.FP32],
                  c0: pl.Tensor[[NR, NR], pl.INT32], c1: pl.Tensor[[NR, NR], pl.INT32],
                  c2: pl.Tensor[[NR, NR, 1], pl.INT32],
                  outs: pl.Out[pl.Tensor[[NR, VROUNDS, NR * CAP, V], pl.FP32]],
                  gots: pl.Out[pl.Tensor[[NR, VROUNDS, NR, 1], pl.INT32]],
                  sigs: pl.Out[pl.Tensor[[NR, NR, 1], pl.INT32]]):
        target = pld.alloc_window_buffer([NR * CAP, V], dtype=pl.FP32)
        sig = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
        recv = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            a2av_chip(in0[r], in1[r], in2[r], c0[r], c1[r], c2[r], outs[r], gots[r], sigs[r],
                      pld.window(target, [NR * CAP, V], dtype=pl.FP32),
                      pld.window(sig, [NR, 1], dtype=pl.INT32),
                      pld.window(recv, [NR, 1], dtype=pl.INT32), device=r)
        return outs

    return a2av_main


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_all_to_all_v_counts_zero_within_and_above_max_recv(n):
    rng = np.random.default_rng(2000 + n)
    counts = a2av_counts(n, VROUNDS, CAP)
    sent = counts.ravel()
    assert (sent == 0).any() and (sent > CAP).any() and ((sent > 0) & (sent <= CAP)).any()
    ins = [rng.standard_normal((n, n * CAP, V)).astype(np.float32) for _ in range(VROUNDS)]
    outs = np.full((n, VROUNDS, n * CAP, V), np.nan, np.float32)
    gots = np.full((n, VROUNDS, n, 1), -7, np.int32)
    sigs = np.full((n, n, 1), -1, np.int32)
    make_a2av(n)(*ins, counts[0], counts[1], counts[2][:, :, None], outs, gots, sigs,
                 config=config_for(n))
    for k in range(VROUNDS):
        check_a2av(ins[k], counts[k], outs[:, k], gots[:, k], CAP, f"round {k}")
    np.testing.assert_array_equal(sigs, 0)


# --------------------------------------------------------------- one kernel, two calls
@pl.jit.incore
def twice_kernel(x: pl.Tensor[[1, S], pl.FP32], rows: pl.Tensor[[NR, S], pl.FP32],
                 out: pl.Out[pl.Tensor[[3, NR, S], pl.FP32]],
                 data: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
                 gathered: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
                 exchanged: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
                 sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    data = pl.store(pl.load(x, [0, 0], [1, S]), [0, 0], data)
    data = pld.tensor.allreduce(data, sig, op=pld.ReduceOp.Max)
    pl.store(pl.load(data, [0, 0], [1, S]), [0, 0, 0], out)
    gathered = pld.tensor.allgather(x, gathered, sig)
    pl.store(pl.load(gathered, [0, 0], [NR, S]), [1, 0, 0], out)
    exchanged = pld.tensor.all_to_all(rows, exchanged, sig)
    pl.store(pl.load(exchanged, [0, 0], [NR, S]), [2, 0, 0], out)
    # the next call's pushes must not land before every rank has read these
    pld.tensor.barrier(sig)
    return out


@pl.jit.incore
def twice_signal(sig_out: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
                 sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    sig_out = pl.store(pl.load(sig, [0, 0], [NR, 1]), [0, 0], sig_out)
    return sig_out


@pl.jit
def twice_chip(x1: pl.Tensor[[1, S], pl.FP32], x2: pl.Tensor[[1, S], pl.FP32],
               rows1: pl.Tensor[[NR, S], pl.FP32], rows2: pl.Tensor[[NR, S], pl.FP32],
               out1: pl.Out[pl.Tensor[[3, NR, S], pl.FP32]],
               out2: pl.Out[pl.Tensor[[3, NR, S], pl.FP32]],
               sig_out: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
               data: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
               gathered: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
               exchanged: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
               sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    # the same call sites twice in one dispatch, on the same windows, with
    # other inputs and outputs the second time
    twice_kernel(x1, rows1, out1, data, gathered, exchanged, sig)
    twice_kernel(x2, rows2, out2, data, gathered, exchanged, sig)
    return twice_signal(sig_out, sig)


@pl.jit.host
def twice_main(x1: pl.Tensor[[NR, 1, S], pl.FP32], x2: pl.Tensor[[NR, 1, S], pl.FP32],
               rows1: pl.Tensor[[NR, NR, S], pl.FP32], rows2: pl.Tensor[[NR, NR, S], pl.FP32],
               out1: pl.Out[pl.Tensor[[NR, 3, NR, S], pl.FP32]],
               out2: pl.Out[pl.Tensor[[NR, 3, NR, S], pl.FP32]],
               sigs: pl.Out[pl.Tensor[[NR, NR, 1], pl.INT32]]):
    data = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
    gathered = pld.alloc_window_buffer([NR, S], dtype=pl.FP32)
    exchanged = pld.alloc_window_buffer([NR, S], dtype=pl.FP32)
    sig = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        twice_chip(x1[r], x2[r], rows1[r], rows2[r], out1[r], out2[r], sigs[r],
                   pld.window(data, [1, S], dtype=pl.FP32),
                   pld.window(gathered, [NR, S], dtype=pl.FP32),
                   pld.window(exchanged, [NR, S], dtype=pl.FP32),
                   pld.window(sig, [NR, 1], dtype=pl.INT32), device=r)
    return out1


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_one_kernel_called_twice_in_a_dispatch_uses_each_calls_operands(n):
    rng = np.random.default_rng(2200 + n)
    xs = [rng.standard_normal((n, 1, S)).astype(np.float32) for _ in range(2)]
    rows = [rng.standard_normal((n, n, S)).astype(np.float32) for _ in range(2)]
    outs = [np.full((n, 3, n, S), np.nan, np.float32) for _ in range(2)]
    sigs = np.full((n, n, 1), -1, np.int32)
    twice_main(*xs, *rows, *outs, sigs, config=config_for(n))
    for x, rw, out in zip(xs, rows, outs):
        for r in range(n):
            np.testing.assert_array_equal(out[r, 0, 0], x[:, 0].max(0), f"allreduce on rank {r}")
            np.testing.assert_array_equal(out[r, 1], x[:, 0, :], f"allgather on rank {r}")
            np.testing.assert_array_equal(out[r, 2], rw[:, r, :], f"all_to_all on rank {r}")
    np.testing.assert_array_equal(sigs, 0)


@functools.lru_cache(maxsize=None)
def make_a2av_twice(NR):
    """A chip that runs one all_to_all_v kernel twice on the same target and
    signal, with its own send counts and recv_counts window each time."""

    @pl.jit.incore
    def exchange(inp: pl.Tensor[[NR * CAP, V], pl.FP32], counts: pl.Tensor[[NR], pl.INT32],
                 target: pl.InOut[pld.DistributedTensor[[NR * CAP, V], pl.FP32]],
                 sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
                 recv: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
        target = pld.tensor.all_to_all_v(inp, target, sig, counts, recv)
        return target

    @pl.jit.incore
    def collect(out: pl.Out[pl.Tensor[[NR * CAP, V], pl.FP32]],
                got: pl.Out[pl.Tensor[[2, NR, 1], pl.INT32]],
                target: pl.InOut[pld.DistributedTensor[[NR * CAP, V], pl.FP32]],
                recv1: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
                recv2: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
        pl.store(pl.load(recv1, [0, 0], [NR, 1]), [0, 0, 0], got)
        pl.store(pl.load(recv2, [0, 0], [NR, 1]), [1, 0, 0], got)
        out = pl.store(pl.load(target, [0, 0], [NR * CAP, V]), [0, 0], out)
        return out

    @pl.jit
    def a2av_twice_chip(in1: pl.Tensor[[NR * CAP, V], pl.FP32],
                        in2: pl.Tensor[[NR * CAP, V], pl.FP32],
                        c1: pl.Tensor[[NR], pl.INT32], c2: pl.Tensor[[NR], pl.INT32],
                        out: pl.Out[pl.Tensor[[NR * CAP, V], pl.FP32]],
                        got: pl.Out[pl.Tensor[[2, NR, 1], pl.INT32]],
                        target: pl.InOut[pld.DistributedTensor[[NR * CAP, V], pl.FP32]],
                        sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
                        recv1: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
                        recv2: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
        # a sender's second pushes follow its first into the same rows and cells,
        # and the second call's barrier has every rank's second pushes landed
        exchange(in1, c1, target, sig, recv1)
        exchange(in2, c2, target, sig, recv2)
        return collect(out, got, target, recv1, recv2)

    @pl.jit.host
    def a2av_twice_main(in1: pl.Tensor[[NR, NR * CAP, V], pl.FP32],
                        in2: pl.Tensor[[NR, NR * CAP, V], pl.FP32],
                        c1: pl.Tensor[[NR, NR], pl.INT32], c2: pl.Tensor[[NR, NR], pl.INT32],
                        outs: pl.Out[pl.Tensor[[NR, NR * CAP, V], pl.FP32]],
                        gots: pl.Out[pl.Tensor[[NR, 2, NR, 1], pl.INT32]]):
        target = pld.alloc_window_buffer([NR * CAP, V], dtype=pl.FP32)
        sig = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
        recv1 = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
        recv2 = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            a2av_twice_chip(in1[r], in2[r], c1[r], c2[r], outs[r], gots[r],
                            pld.window(target, [NR * CAP, V], dtype=pl.FP32),
                            pld.window(sig, [NR, 1], dtype=pl.INT32),
                            pld.window(recv1, [NR, 1], dtype=pl.INT32),
                            pld.window(recv2, [NR, 1], dtype=pl.INT32), device=r)
        return outs

    return a2av_twice_main


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_all_to_all_v_counts_land_in_each_calls_own_recv_counts(n):
    rng = np.random.default_rng(2100 + n)
    counts = a2av_counts(n, 2, CAP)
    in1, in2 = (rng.standard_normal((n, n * CAP, V)).astype(np.float32) for _ in range(2))
    outs = np.full((n, n * CAP, V), np.nan, np.float32)
    gots = np.full((n, 2, n, 1), -7, np.int32)
    make_a2av_twice(n)(in1, in2, counts[0], counts[1], outs, gots, config=config_for(n))
    for r in range(n):
        for s in range(n):
            assert gots[r, 0, s, 0] == min(counts[0, s, r], CAP), f"rank {r} first call, from {s}"
    check_a2av(in2, counts[1], outs, gots[:, 1], CAP, "second call")
