"""Collective forms beyond Sum and round sizes:

* reduce_scatter by Max, Min and Prod in a kernel (and by every op as a HOST
  builtin on the CPU profile): row r of rank r is the reduction of every
  rank's row r, the other rows keep what the caller staged;
* the HOST ring allreduce at element counts that divide into no rank count
  or tile (1, 17, 4097, 65537).
"""
import functools

import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.errors import DataRaceError, RankFailure

from programs_prims import WORLD_SIZES, config_for

NR = pl.dynamic("NR")
S = 40
OPS = {"Max": (pld.ReduceOp.Max, np.max), "Min": (pld.ReduceOp.Min, np.min),
       "Prod": (pld.ReduceOp.Prod, np.prod), "Sum": (pld.ReduceOp.Sum, np.sum)}


def _rows(rng, n, op):
    if op == "Prod":                       # exact products: small factors
        return rng.choice([-2.0, -1.0, 0.5, 1.0, 2.0], (n, n, S)).astype(np.float32)
    return rng.integers(-50, 50, (n, n, S)).astype(np.float32)


def _want(rows, ufunc):
    n = rows.shape[0]
    want = rows.copy()
    for r in range(n):
        want[r, r] = ufunc(rows[:, r], axis=0)
    return want


@functools.lru_cache(maxsize=None)
def make_incore_rs(rop):
    @pl.jit.incore
    def rs_kernel(rows: pl.Tensor[[NR, S], pl.FP32], out: pl.Out[pl.Tensor[[NR, S], pl.FP32]],
                  t: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
                  sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
        pl.store(pl.load(rows, [0, 0], [NR, S]), [0, 0], t)
        t = pld.tensor.reduce_scatter(t, sig, op=rop)
        out = pl.store(pl.load(t, [0, 0], [NR, S]), [0, 0], out)
        return out

    @pl.jit
    def rs_chip(rows: pl.Tensor[[NR, S], pl.FP32], out: pl.Out[pl.Tensor[[NR, S], pl.FP32]],
                t: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
                sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
        return rs_kernel(rows, out, t, sig)

    @pl.jit.host
    def rs_main(rows: pl.Tensor[[NR, NR, S], pl.FP32],
                outs: pl.Out[pl.Tensor[[NR, NR, S], pl.FP32]]):
        tb = pld.alloc_window_buffer([NR, S], dtype=pl.FP32)
        sb = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            rs_chip(rows[r], outs[r], pld.window(tb, [NR, S], dtype=pl.FP32),
                    pld.window(sb, [NR, 1], dtype=pl.INT32), device=r)
        return outs

    return rs_main


@pytest.mark.parametrize("op", ["Max", "Min", "Prod"])
@pytest.mark.parametrize("n", WORLD_SIZES)
def test_incore_reduce_scatter_by_max_min_prod(n, op):
    rop, ufunc = OPS[op]
    rows = _rows(np.random.default_rng(sum(map(ord, op)) + n), n, op)
    outs = np.full_like(rows, np.nan)
    make_incore_rs(rop)(rows, outs, config=config_for(n))
    np.testing.assert_array_equal(outs, _want(rows, ufunc))


@functools.lru_cache(maxsize=None)
def make_host_rs(rop):
    @pl.jit.incore
    def stage_kernel(x: pl.Tensor[[NR, S], pl.FP32],
                     t: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]]):
        t = pl.store(pl.load(x, [0, 0], [NR, S]), [0, 0], t)
        return t

    @pl.jit
    def stage(x: pl.Tensor[[NR, S], pl.FP32], t: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]]):
        return stage_kernel(x, t)

    @pl.jit.incore
    def drain_kernel(o: pl.Out[pl.Tensor[[NR, S], pl.FP32]],
                     t: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]]):
        o = pl.store(pl.load(t, [0, 0], [NR, S]), [0, 0], o)
        return o

    @pl.jit
    def drain(o: pl.Out[pl.Tensor[[NR, S], pl.FP32]],
              t: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]]):
        return drain_kernel(o, t)

    @pl.jit.host
    def host_rs(rows: pl.Tensor[[NR, NR, S], pl.FP32], outs: pl.Out[pl.Tensor[[NR, NR, S], pl.FP32]]):
        tb = pld.alloc_window_buffer([NR, S], dtype=pl.FP32)
        for r in pl.range(pld.world_size()):
            stage(rows[r], pld.window(tb, [NR, S], dtype=pl.FP32), device=r)
        pld.reduce_scatter(pld.window(tb, [NR, S], dtype=pl.FP32), op=rop)
        for r in pl.range(pld.world_size()):
            drain(outs[r], pld.window(tb, [NR, S], dtype=pl.FP32), device=r)
        return outs

    return host_rs


@pytest.mark.parametrize("op", ["Max", "Min", "Prod"])
@pytest.mark.parametrize("n", [1, 3])
def test_host_reduce_scatter_by_every_op_on_the_cpu(n, op):
    rop, ufunc = OPS[op]
    rows = _rows(np.random.default_rng(sum(map(ord, op)) + 10 * n), n, op)
    outs = np.full_like(rows, np.nan)
    make_host_rs(rop)(rows, outs, config=config_for(n))
    np.testing.assert_array_equal(outs, _want(rows, ufunc))


# --------------------------------------------------------------- HOST ring, ragged sizes
@functools.lru_cache(maxsize=None)
def make_ring(NRc, E):
    RS = [max(1, 2 * (NRc - 1) + 1), NRc]

    @pl.jit.incore
    def stage_kernel(x: pl.Tensor[[1, E], pl.FP32], w: pl.InOut[pld.DistributedTensor[[1, E], pl.FP32]]):
        w = pl.store(pl.load(x, [0, 0], [1, E]), [0, 0], w)
        return w

    @pl.jit
    def stage(x: pl.Tensor[[1, E], pl.FP32], w: pl.InOut[pld.DistributedTensor[[1, E], pl.FP32]]):
        return stage_kernel(x, w)

    @pl.jit.incore
    def drain_kernel(o: pl.Out[pl.Tensor[[1, E], pl.FP32]],
                     w: pl.InOut[pld.DistributedTensor[[1, E], pl.FP32]],
                     s_out: pl.Out[pl.Tensor[RS, pl.INT32]],
                     s: pl.InOut[pld.DistributedTensor[RS, pl.INT32]]):
        pl.store(pl.load(s, [0, 0], RS), [0, 0], s_out)
        o = pl.store(pl.load(w, [0, 0], [1, E]), [0, 0], o)
        return o

    @pl.jit
    def drain(o: pl.Out[pl.Tensor[[1, E], pl.FP32]],
              w: pl.InOut[pld.DistributedTensor[[1, E], pl.FP32]],
              s_out: pl.Out[pl.Tensor[RS, pl.INT32]],
              s: pl.InOut[pld.DistributedTensor[RS, pl.INT32]]):
        return drain_kernel(o, w, s_out, s)

    @pl.jit.host
    def ring_main(xs: pl.Tensor[[NRc, 1, E], pl.FP32], outs: pl.Out[pl.Tensor[[NRc, 1, E], pl.FP32]],
                  sigs: pl.Out[pl.Tensor[[NRc] + RS, pl.INT32]]):
        wb = pld.alloc_window_buffer([1, E], dtype=pl.FP32)
        sb = pld.alloc_window_buffer(RS, dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            stage(xs[r], pld.window(wb, [1, E], dtype=pl.FP32), device=r)
        pld.tensor.allreduce(pld.window(wb, [1, E], dtype=pl.FP32),
                             pld.window(sb, RS, dtype=pl.INT32), mode="ring")
        for r in pl.range(pld.world_size()):
            drain(outs[r], pld.window(wb, [1, E], dtype=pl.FP32), sigs[r],
                  pld.window(sb, RS, dtype=pl.INT32), device=r)
        return outs

    return ring_main


@pytest.mark.parametrize("size", [1, 17, 4097, 65537])
@pytest.mark.parametrize("n", WORLD_SIZES)
def test_host_ring_allreduce_at_ragged_sizes(n, size):
    rng = np.random.default_rng(size + n)
    xs = rng.integers(-100, 100, (n, 1, size)).astype(np.float32)
    outs = np.full_like(xs, np.nan)
    rs = [max(1, 2 * (n - 1) + 1), n]
    sigs = np.full([n] + rs, -1, np.int32)
    make_ring(n, size)(xs, outs, sigs, config=config_for(n))
    np.testing.assert_array_equal(outs, np.broadcast_to(xs.sum(0), xs.shape))
    np.testing.assert_array_equal(sigs, 0)             # the signal cleared itself


# --------------------------------------------------------------- all_to_all_v counts
CAP = 3
W = 5


def _counts(n):
    """Per (src, dest): negative, 0, within, exactly MAX_RECV and above it,
    each on some pair (the self slot included)."""
    cycle = np.array([-4, 0, 1, CAP, CAP + 5, 2, -1], np.int32)
    return cycle[np.arange(n * n).reshape(n, n) % len(cycle)]


def _check_counts(n, xs, counts, outs, gots, before):
    for r in range(n):
        for s in range(n):
            k = min(max(int(counts[s, r]), 0), CAP)
            assert gots[r, s, 0] == k, (r, s, counts[s, r], gots[r, s, 0])
            blk = slice(s * CAP, (s + 1) * CAP)
            np.testing.assert_array_equal(outs[r, blk][:k], xs[s, r * CAP:r * CAP + k])
            # rows not sent keep what the target held before the call
            np.testing.assert_array_equal(outs[r, blk][k:], before[r, blk][k:],
                                          err_msg=f"rank {r} block from {s} past {k}")


@functools.lru_cache(maxsize=None)
def make_a2av_counts(NRc):
    RC = NRc * CAP

    @pl.jit.incore
    def a2av_kernel(x: pl.Tensor[[RC, W], pl.FP32], counts: pl.Tensor[[NRc], pl.INT32],
                    pre: pl.Tensor[[RC, W], pl.FP32], out: pl.Out[pl.Tensor[[RC, W], pl.FP32]],
                    got: pl.Out[pl.Tensor[[NRc, 1], pl.INT32]],
                    t: pl.InOut[pld.DistributedTensor[[RC, W], pl.FP32]],
                    rc: pl.InOut[pld.DistributedTensor[[NRc, 1], pl.INT32]],
                    sig: pl.InOut[pld.DistributedTensor[[NRc, 1], pl.INT32]],
                    fence: pl.InOut[pld.DistributedTensor[[NRc, 1], pl.INT32]],
                    fenced: pl.Scalar[pl.INT32]):
        pl.store(pl.load(pre, [0, 0], [RC, W]), [0, 0], t)  # pre-store
        if fenced == 1:
            pld.tensor.barrier(fence)          # every target holds its old rows
        t = pld.tensor.all_to_all_v(x, t, sig, counts, rc)
        pl.store(pl.load(t, [0, 0], [RC, W]), [0, 0], out)
        got = pl.store(pl.load(rc, [0, 0], [NRc, 1]), [0, 0], got)
        return got

    @pl.jit
    def a2av_chip(x: pl.Tensor[[RC, W], pl.FP32], counts: pl.Tensor[[NRc], pl.INT32],
                  pre: pl.Tensor[[RC, W], pl.FP32], out: pl.Out[pl.Tensor[[RC, W], pl.FP32]],
                  got: pl.Out[pl.Tensor[[NRc, 1], pl.INT32]],
                  t: pl.InOut[pld.DistributedTensor[[RC, W], pl.FP32]],
                  rc: pl.InOut[pld.DistributedTensor[[NRc, 1], pl.INT32]],
                  sig: pl.InOut[pld.DistributedTensor[[NRc, 1], pl.INT32]],
                  fence: pl.InOut[pld.DistributedTensor[[NRc, 1], pl.INT32]],
                  fenced: pl.Scalar[pl.INT32]):
        return a2av_kernel(x, counts, pre, out, got, t, rc, sig, fence, fenced)

    @pl.jit.host
    def a2av_main(xs: pl.Tensor[[NRc, RC, W], pl.FP32], counts: pl.Tensor[[NRc, NRc], pl.INT32],
                  pres: pl.Tensor[[NRc, RC, W], pl.FP32],
                  outs: pl.Out[pl.Tensor[[NRc, RC, W], pl.FP32]],
                  gots: pl.Out[pl.Tensor[[NRc, NRc, 1], pl.INT32]], fenced: pl.Scalar[pl.INT32]):
        tb = pld.alloc_window_buffer([RC, W], dtype=pl.FP32)
        rb = pld.alloc_window_buffer([NRc, 1], dtype=pl.INT32)
        sb = pld.alloc_window_buffer([NRc, 1], dtype=pl.INT32)
        fb = pld.alloc_window_buffer([NRc, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            a2av_chip(xs[r], counts[r], pres[r], outs[r], gots[r],
                      pld.window(tb, [RC, W], dtype=pl.FP32),
                      pld.window(rb, [NRc, 1], dtype=pl.INT32),
                      pld.window(sb, [NRc, 1], dtype=pl.INT32),
                      pld.window(fb, [NRc, 1], dtype=pl.INT32), fenced, device=r)
        return outs

    return a2av_main


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_all_to_all_v_moves_clamped_counts_and_leaves_the_other_rows(n):
    """A negative count moves nothing and reads 0 on the receiver; a count
    above MAX_RECV moves MAX_RECV rows; the self slot is bounded like the
    others; rows not sent keep their value."""
    rng = np.random.default_rng(60 + n)
    xs = rng.integers(1, 50, (n, n * CAP, W)).astype(np.float32)
    pres = -rng.integers(1, 50, (n, n * CAP, W)).astype(np.float32)
    counts = _counts(n)
    outs = np.full_like(xs, np.nan)
    gots = np.full((n, n, 1), -7, np.int32)
    make_a2av_counts(n)(xs, counts, pres, outs, gots, 1, config=config_for(n))
    _check_counts(n, xs, counts, outs, gots, pres)


@pytest.mark.parametrize("n", [2, 3])
def test_all_to_all_v_rows_not_sent_are_not_a_race(n):
    """The race check counts only the rows a count moves as written: with
    every count 0 or negative, a receiver that rewrites its target right
    before the call (no barrier) races with nobody; with rows sent, the
    same program races with the senders' pushes."""
    rng = np.random.default_rng(70 + n)
    xs = rng.integers(1, 50, (n, n * CAP, W)).astype(np.float32)
    pres = -rng.integers(1, 50, (n, n * CAP, W)).astype(np.float32)
    cfg = config_for(n, detect_races=True)
    quiet = np.where(np.arange(n * n).reshape(n, n) % 2, 0, -3).astype(np.int32)
    outs = np.full_like(xs, np.nan)
    gots = np.full((n, n, 1), -7, np.int32)
    make_a2av_counts(n)(xs, quiet, pres, outs, gots, 0, config=cfg)
    _check_counts(n, xs, quiet, outs, gots, pres)
    busy = np.full((n, n), CAP, np.int32)
    with pytest.raises(DataRaceError) as e:
        make_a2av_counts(n)(xs, busy, pres, outs, gots, 0, config=cfg)
    assert "pld.tensor.all_to_all_v" in str(e.value) and "pl.store" in str(e.value)


# --------------------------------------------------------------- all_to_all_v core_num
@functools.lru_cache(maxsize=None)
def make_a2av_lanes(NRc, cores, stride):
    RC = NRc * CAP

    @pl.jit.incore
    def stage_kernel(x: pl.Tensor[[RC, W], pl.FP32], counts: pl.Tensor[[NRc], pl.INT32],
                     inp: pl.InOut[pld.DistributedTensor[[RC, W], pl.FP32]],
                     cnt: pl.InOut[pld.DistributedTensor[[NRc], pl.INT32]],
                     pre: pl.Tensor[[RC, W], pl.FP32],
                     t: pl.InOut[pld.DistributedTensor[[RC, W], pl.FP32]]):
        pl.store(pl.load(x, [0, 0], [RC, W]), [0, 0], inp)
        pl.store(pl.load(pre, [0, 0], [RC, W]), [0, 0], t)
        for i in pl.range(NRc):
            pl.write(cnt, [i], pl.read(counts, [i]))
        return inp

    @pl.jit
    def stage(x: pl.Tensor[[RC, W], pl.FP32], counts: pl.Tensor[[NRc], pl.INT32],
              inp: pl.InOut[pld.DistributedTensor[[RC, W], pl.FP32]],
              cnt: pl.InOut[pld.DistributedTensor[[NRc], pl.INT32]],
              pre: pl.Tensor[[RC, W], pl.FP32],
              t: pl.InOut[pld.DistributedTensor[[RC, W], pl.FP32]]):
        return stage_kernel(x, counts, inp, cnt, pre, t)

    @pl.jit.incore
    def drain_kernel(out: pl.Out[pl.Tensor[[RC, W], pl.FP32]],
                     got: pl.Out[pl.Tensor[[NRc, 1], pl.INT32]],
                     t: pl.InOut[pld.DistributedTensor[[RC, W], pl.FP32]],
                     rc: pl.InOut[pld.DistributedTensor[[NRc, 1], pl.INT32]]):
        pl.store(pl.load(t, [0, 0], [RC, W]), [0, 0], out)
        got = pl.store(pl.load(rc, [0, 0], [NRc, 1]), [0, 0], got)
        return got

    @pl.jit
    def drain(out: pl.Out[pl.Tensor[[RC, W], pl.FP32]], got: pl.Out[pl.Tensor[[NRc, 1], pl.INT32]],
              t: pl.InOut[pld.DistributedTensor[[RC, W], pl.FP32]],
              rc: pl.InOut[pld.DistributedTensor[[NRc, 1], pl.INT32]]):
        return drain_kernel(out, got, t, rc)

    @pl.jit.host
    def lanes_main(xs: pl.Tensor[[NRc, RC, W], pl.FP32], counts: pl.Tensor[[NRc, NRc], pl.INT32],
                   pres: pl.Tensor[[NRc, RC, W], pl.FP32],
                   outs: pl.Out[pl.Tensor[[NRc, RC, W], pl.FP32]],
                   gots: pl.Out[pl.Tensor[[NRc, NRc, 1], pl.INT32]]):
        ib = pld.alloc_window_buffer([RC, W], dtype=pl.FP32)
        cb = pld.alloc_window_buffer([NRc], dtype=pl.INT32)
        tb = pld.alloc_window_buffer([RC, W], dtype=pl.FP32)
        rb = pld.alloc_window_buffer([NRc, 1], dtype=pl.INT32)
        sb = pld.alloc_window_buffer([NRc, stride], dtype=pl.INT32)
        fb = pld.alloc_window_buffer([NRc], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            stage(xs[r], counts[r], pld.window(ib, [RC, W], dtype=pl.FP32),
                  pld.window(cb, [NRc], dtype=pl.INT32), pres[r],
                  pld.window(tb, [RC, W], dtype=pl.FP32), device=r)
        # every target holds its old rows before any rank pushes
        pld.barrier(pld.window(fb, [NRc], dtype=pl.INT32))
        pld.tensor.all_to_all_v(pld.window(ib, [RC, W], dtype=pl.FP32),
                                pld.window(tb, [RC, W], dtype=pl.FP32),
                                pld.window(sb, [NRc, stride], dtype=pl.INT32),
                                pld.window(cb, [NRc], dtype=pl.INT32),
                                pld.window(rb, [NRc, 1], dtype=pl.INT32), core_num=cores)
        for r in pl.range(pld.world_size()):
            drain(outs[r], gots[r], pld.window(tb, [RC, W], dtype=pl.FP32),
                  pld.window(rb, [NRc, 1], dtype=pl.INT32), device=r)
        return outs

    return lanes_main


def _lanes_args(n, seed):
    rng = np.random.default_rng(seed)
    xs = rng.integers(1, 50, (n, n * CAP, W)).astype(np.float32)
    pres = -rng.integers(1, 50, (n, n * CAP, W)).astype(np.float32)
    return xs, _counts(n), pres, np.full_like(xs, np.nan), np.full((n, n, 1), -7, np.int32)


@pytest.mark.parametrize("cores", [1, 3, 5])
@pytest.mark.parametrize("n", WORLD_SIZES)
def test_host_all_to_all_v_on_several_blocks(n, cores):
    """core_num=L launches B = L below the rank count, else a multiple of
    it; a signal of B columns or more serves it, with the same result as
    one block."""
    blocks = cores if cores < n else cores // n * n
    xs, counts, pres, outs, gots = _lanes_args(n, 90 + n + cores)
    make_a2av_lanes(n, cores, blocks)(xs, counts, pres, outs, gots,
                                      config=config_for(n, detect_races=True))
    _check_counts(n, xs, counts, outs, gots, pres)


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_a_signal_stride_below_the_block_count_is_a_run_time_error(n):
    cores = 4
    blocks = cores if cores < n else cores // n * n
    xs, counts, pres, outs, gots = _lanes_args(n, 95 + n)
    with pytest.raises(RankFailure) as e:
        make_a2av_lanes(n, cores, blocks - 1)(xs, counts, pres, outs, gots,
                                              config=config_for(n))
    assert f"launches {blocks} AIV block(s)" in str(e.value)
    assert f"{blocks - 1} column(s)" in str(e.value) and "TC503" in str(e.value)
