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
