"""pld.tile.put / pld.tile.get: the tensor transfers with their staging tiles
named, whole tensors and sub-regions, atomic accumulation; the staging tiles
keep their contents on the CPU."""
import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld

from programs_prims import WORLD_SIZES, config_for

NR = pl.dynamic("NR")
R, C = 3, 8


OUT = pl.Out[pl.Tensor[[R, C], pl.FP32]]
WIN = pl.InOut[pld.DistributedTensor[[R, C], pl.FP32]]
SIG = pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]


@pl.jit.incore
def tile_xfer_kernel(x: pl.Tensor[[R, C], pl.FP32], y0: OUT, y1: OUT, z: OUT,
                     st: pl.Out[pl.Tensor[[1, C], pl.FP32]], win: WIN, acc: WIN, sig: SIG):
    ctx = pld.get_comm_ctx(win)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    nxt = (me + 1) % n
    prv = (me + n - 1) % n
    stage = pl.tile.create([1, C], dtype=pl.FP32)
    stage2 = pl.tile.create([1, C], dtype=pl.FP32)
    # the whole tensor to the right neighbour, through one staging tile
    pld.tile.put(win, nxt, x, stage)
    # every rank adds its row 0 into row 1 of every rank's acc (ping-pong stages)
    for p in pl.range(n):
        pld.tile.put(acc, p, x, stage, stage2, [1, 0], [0, 0], [1, C],
                     atomic=pld.AtomicType.Add)
    for p in pl.range(n):
        pld.system.notify(sig, p, [0, 0], 1, op=pld.NotifyOp.AtomicAdd)
    pld.system.wait(sig, [0, 0], n, cmp=pld.WaitCmp.Ge)
    y0 = pl.store(pl.load(win, [0, 0], [R, C]), [0, 0], y0)
    y1 = pl.store(pl.load(acc, [0, 0], [R, C]), [0, 0], y1)
    # rows 1.. of the left neighbour's window, by get, into the same rows of z
    pld.tile.get(z, prv, win, stage, None, [1, 0], [1, 0], [R - 1, C])
    st = pl.store(stage, [0, 0], st)
    return y0, y1, z, st


@pl.jit
def tile_xfer_chip(x: pl.Tensor[[R, C], pl.FP32], y0: OUT, y1: OUT, z: OUT,
                   st: pl.Out[pl.Tensor[[1, C], pl.FP32]], win: WIN, acc: WIN, sig: SIG):
    return tile_xfer_kernel(x, y0, y1, z, st, win, acc, sig)


@pl.jit.host
def tile_xfer_main(xs: pl.Tensor[[NR, R, C], pl.FP32], y0s: pl.Out[pl.Tensor[[NR, R, C], pl.FP32]],
                   y1s: pl.Out[pl.Tensor[[NR, R, C], pl.FP32]],
                   zs: pl.Out[pl.Tensor[[NR, R, C], pl.FP32]],
                   sts: pl.Out[pl.Tensor[[NR, 1, C], pl.FP32]]):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    abuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        tile_xfer_chip(xs[r], y0s[r], y1s[r], zs[r], sts[r],
                       pld.window(wbuf, [R, C], dtype=pl.FP32),
                       pld.window(abuf, [R, C], dtype=pl.FP32),
                       pld.window(sbuf, [1, 1], dtype=pl.INT32), device=r)
    return y0s, y1s, zs, sts


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_tile_put_and_get_move_what_the_tensor_forms_move(n):
    rng = np.random.default_rng(40 + n)
    xs = rng.integers(-8, 8, (n, R, C)).astype(np.float32)
    y0, y1, z = (np.full((n, R, C), -1, np.float32) for _ in range(3))
    st = np.full((n, 1, C), -1, np.float32)
    tile_xfer_main(xs, y0, y1, z, st, config=config_for(n))
    left = np.roll(xs, 1, axis=0)
    np.testing.assert_array_equal(y0, left)                        # put, whole tensor
    acc = np.zeros((n, R, C), np.float32)
    acc[:, 1] = xs[:, 0].sum(axis=0)                               # atomic region puts
    np.testing.assert_array_equal(y1, acc)
    # get: rows 1.. of the left neighbour's window (its left neighbour's x)
    np.testing.assert_array_equal(z[:, 1:], np.roll(left, 1, axis=0)[:, 1:])
    np.testing.assert_array_equal(z[:, 0], np.full((n, C), -1, np.float32))   # row 0 untouched
    np.testing.assert_array_equal(st, np.zeros((n, 1, C), np.float32))       # the stage kept
