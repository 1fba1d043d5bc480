"""Many ranks reach exactly each other's copies: windows whose size is not a
multiple of the layout's alignment (a few cache lines; more than a page), a
barrier of every rank signalling every peer, then every rank gathers every
peer's copy of both windows and compares it with a numpy reference."""
import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld

from programs_prims import config_for

NR = pl.dynamic("NR")
R, C = 3, 5             # 60 bytes: copies padded to whole cache lines
W = 1100                # 4400 bytes: copies padded to whole pages


@pl.jit.incore
def exchange_kernel(x: pl.Tensor[[R, C], pl.FP32], wide: pl.Tensor[[1, W], pl.FP32],
                    got: pl.Out[pl.Tensor[[R * NR, C], pl.FP32]],
                    got_wide: pl.Out[pl.Tensor[[NR, W], pl.FP32]],
                    small: pl.InOut[pld.DistributedTensor[[R, C], pl.FP32]],
                    big: pl.InOut[pld.DistributedTensor[[1, W], pl.FP32]],
                    sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    ctx = pld.get_comm_ctx(small)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    pl.store(pl.load(x, [0, 0], [R, C]), [0, 0], small)
    pl.store(pl.load(wide, [0, 0], [1, W]), [0, 0], big)
    for p in pl.range(n):
        if p != me:
            pld.system.notify(sig, p, [me, 0], 1, op=pld.NotifyOp.AtomicAdd)
    for s in pl.range(n):
        if s != me:
            pld.system.wait(sig, [s, 0], 1, cmp=pld.WaitCmp.Ge)
    for s in pl.range(n):
        pl.store(pld.tile.remote_load(small, s, [0, 0], [R, C]), [R * s, 0], got)
        pl.store(pld.tile.remote_load(big, s, [0, 0], [1, W]), [s, 0], got_wide)
    return got


@pl.jit
def exchange_chip(x: pl.Tensor[[R, C], pl.FP32], wide: pl.Tensor[[1, W], pl.FP32],
                  got: pl.Out[pl.Tensor[[R * NR, C], pl.FP32]],
                  got_wide: pl.Out[pl.Tensor[[NR, W], pl.FP32]],
                  small: pl.InOut[pld.DistributedTensor[[R, C], pl.FP32]],
                  big: pl.InOut[pld.DistributedTensor[[1, W], pl.FP32]],
                  sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    exchange_kernel(x, wide, got, got_wide, small, big, sig)
    return got


@pl.jit.host
def exchange_main(xs: pl.Tensor[[NR, R, C], pl.FP32], wides: pl.Tensor[[NR, 1, W], pl.FP32],
                  got: pl.Out[pl.Tensor[[NR, R * NR, C], pl.FP32]],
                  got_wide: pl.Out[pl.Tensor[[NR, NR, W], pl.FP32]]):
    small_buf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    big_buf = pld.alloc_window_buffer([1, W], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        exchange_chip(xs[r], wides[r], got[r], got_wide[r],
                      pld.window(small_buf, [R, C], dtype=pl.FP32),
                      pld.window(big_buf, [1, W], dtype=pl.FP32),
                      pld.window(sig_buf, [NR, 1], dtype=pl.INT32), device=r)
    return got


@pytest.mark.parametrize("n", [2, 16])
def test_many_ranks_reach_exactly_each_others_copies(n):
    rng = np.random.default_rng(7 + n)
    # every element distinct and nonzero: a copy read from the wrong place shows
    xs = (rng.permutation(n * R * C) + 1).astype(np.float32).reshape(n, R, C)
    wides = (rng.permutation(n * W) + 1).astype(np.float32).reshape(n, 1, W)
    got = np.zeros((n, R * n, C), np.float32)
    got_wide = np.zeros((n, n, W), np.float32)
    exchange_main(xs, wides, got, got_wide, config=config_for(n))
    np.testing.assert_array_equal(got, np.broadcast_to(xs.reshape(n * R, C), got.shape))
    np.testing.assert_array_equal(got_wide, np.broadcast_to(wides.reshape(n, W), got_wide.shape))
