"""pld.tile.remote_store, pld.tensor.remote_store and the short pld.remote_store:
plain pushes, atomic accumulation from every rank, and 2-D pushes into 3-D
targets."""
import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld

from programs_prims import NP_DTYPES, WORLD_SIZES, config_for, int_valued

NR = pl.dynamic("NR")
S = 16
FORMS = 5


# --------------------------------------------------------------- every form, ring push
@pl.jit.incore
def forms_kernel(x: pl.Tensor[[2, S], pl.FP32], y: pl.Out[pl.Tensor[[FORMS, 2, S], pl.FP32]],
                 w_tile: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
                 w_tensor: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
                 w_gm: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
                 w_short_tile: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
                 w_short_tensor: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
                 sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
    ctx = pld.get_comm_ctx(sig)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    nxt = (me + 1) % n
    t = pl.load(x, [0, 0], [2, S])
    # tile form: a computed tile (x + my rank)
    pld.tile.remote_store(pl.add(t, pl.cast(me, pl.FP32)), w_tile, nxt, [0, 0])
    # tensor form: a tensor-level value, and a GM tensor loaded implicitly
    pld.tensor.remote_store(pl.add(x, x), w_tensor, nxt, [0, 0])
    pld.tensor.remote_store(x, w_gm, peer=nxt, offsets=[0, 0])
    # short form dispatching on the operand kind
    pld.remote_store(t, w_short_tile, nxt, [0, 0])
    pld.remote_store(pl.mul(x[0:1, 4:12], 3.0), w_short_tensor, nxt, [1, 2])
    pld.system.notify(sig, nxt, [0, 0], 1, op=pld.NotifyOp.Set)
    pld.system.wait(sig, [0, 0], 1, cmp=pld.WaitCmp.Eq)
    pl.store(pl.load(w_tile, [0, 0], [2, S]), [0, 0, 0], y)
    pl.store(pl.load(w_tensor, [0, 0], [2, S]), [1, 0, 0], y)
    pl.store(pl.load(w_gm, [0, 0], [2, S]), [2, 0, 0], y)
    pl.store(pl.load(w_short_tile, [0, 0], [2, S]), [3, 0, 0], y)
    pl.store(pl.load(w_short_tensor, [0, 0], [2, S]), [4, 0, 0], y)
    return y


@pl.jit
def forms_chip(x: pl.Tensor[[2, S], pl.FP32], y: pl.Out[pl.Tensor[[FORMS, 2, S], pl.FP32]],
               w_tile: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
               w_tensor: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
               w_gm: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
               w_short_tile: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
               w_short_tensor: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
               sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
    return forms_kernel(x, y, w_tile, w_tensor, w_gm, w_short_tile, w_short_tensor, sig)


@pl.jit.host
def forms_main(xs: pl.Tensor[[NR, 2, S], pl.FP32],
               ys: pl.Out[pl.Tensor[[NR, FORMS, 2, S], pl.FP32]]):
    b_tile = pld.alloc_window_buffer([2, S], dtype=pl.FP32)
    b_tensor = pld.alloc_window_buffer([2, S], dtype=pl.FP32)
    b_gm = pld.alloc_window_buffer([2, S], dtype=pl.FP32)
    b_short_tile = pld.alloc_window_buffer([2, S], dtype=pl.FP32)
    b_short_tensor = pld.alloc_window_buffer([2, S], dtype=pl.FP32)
    b_sig = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        forms_chip(xs[r], ys[r], pld.window(b_tile, [2, S], dtype=pl.FP32),
                   pld.window(b_tensor, [2, S], dtype=pl.FP32),
                   pld.window(b_gm, [2, S], dtype=pl.FP32),
                   pld.window(b_short_tile, [2, S], dtype=pl.FP32),
                   pld.window(b_short_tensor, [2, S], dtype=pl.FP32),
                   pld.window(b_sig, [1, 1], dtype=pl.INT32), device=r)
    return ys


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_remote_store_forms(n):
    rng = np.random.default_rng(70 + n)
    xs = rng.standard_normal((n, 2, S)).astype(np.float32)
    ys = np.full((n, FORMS, 2, S), np.nan, np.float32)
    forms_main(xs, ys, config=config_for(n))
    src = np.roll(xs, 1, axis=0)                     # pushed by the left neighbour
    src_rank = np.roll(np.arange(n), 1).astype(np.float32)[:, None, None]
    np.testing.assert_array_equal(ys[:, 0], src + src_rank)
    np.testing.assert_array_equal(ys[:, 1], src + src)
    np.testing.assert_array_equal(ys[:, 2], src)
    np.testing.assert_array_equal(ys[:, 3], src)
    short_tensor = np.zeros((n, 2, S), np.float32)
    short_tensor[:, 1, 2:10] = src[:, 0, 4:12] * np.float32(3.0)
    np.testing.assert_array_equal(ys[:, 4], short_tensor)


# --------------------------------------------------------------- atomic accumulation
def make_atomic_store(dt):
    @pl.jit.incore
    def kernel(x: pl.Tensor[[2, 8], dt], y: pl.Out[pl.Tensor[[2, 2, 8], dt]],
               w_tile: pl.InOut[pld.DistributedTensor[[2, 8], dt]],
               w_tensor: pl.InOut[pld.DistributedTensor[[2, 8], dt]],
               arrived: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
        ctx = pld.get_comm_ctx(w_tile)
        me = pld.rank(ctx)
        n = pld.nranks(ctx)
        t = pl.load(x, [0, 0], [2, 8])
        for p in pl.range(n):
            pld.tile.remote_store(t, w_tile, p, [0, 0], atomic=pld.AtomicType.Add)
            # the tensor form pushes row 1 only, onto row 0
            pld.tensor.remote_store(x[1:2, 0:8], w_tensor, p, [0, 0],
                                    atomic=pld.AtomicType.Add)
        for p in pl.range(n):
            pld.system.notify(arrived, p, [0, 0], 1, op=pld.NotifyOp.AtomicAdd)
        pld.system.wait(arrived, [0, 0], n, cmp=pld.WaitCmp.Ge)
        pl.store(pl.load(w_tile, [0, 0], [2, 8]), [0, 0, 0], y)
        pl.store(pl.load(w_tensor, [0, 0], [2, 8]), [1, 0, 0], y)
        return y

    @pl.jit
    def chip(x: pl.Tensor[[2, 8], dt], y: pl.Out[pl.Tensor[[2, 2, 8], dt]],
             w_tile: pl.InOut[pld.DistributedTensor[[2, 8], dt]],
             w_tensor: pl.InOut[pld.DistributedTensor[[2, 8], dt]],
             arrived: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
        return kernel(x, y, w_tile, w_tensor, arrived)

    @pl.jit.host
    def main(xs: pl.Tensor[[NR, 2, 8], dt], ys: pl.Out[pl.Tensor[[NR, 2, 2, 8], dt]]):
        b_tile = pld.alloc_window_buffer([2, 8], dtype=dt)
        b_tensor = pld.alloc_window_buffer([2, 8], dtype=dt)
        b_arrived = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            chip(xs[r], ys[r], pld.window(b_tile, [2, 8], dtype=dt),
                 pld.window(b_tensor, [2, 8], dtype=dt),
                 pld.window(b_arrived, [1, 1], dtype=pl.INT32), device=r)
        return ys

    return main


@pytest.mark.parametrize("n", WORLD_SIZES)
@pytest.mark.parametrize("dt", [pl.FP32, pl.BF16, pl.INT8], ids=lambda d: d.name)
def test_atomic_remote_store_sums_all_ranks(n, dt):
    npdt = NP_DTYPES[dt]
    rng = np.random.default_rng(80 + n)
    xs = int_valued(rng, (n, 2, 8), npdt)
    ys = np.full((n, 2, 2, 8), 5, npdt)
    make_atomic_store(dt)(xs, ys, config=config_for(n))
    total = xs.astype(np.float32).sum(axis=0)
    row_only = np.zeros((2, 8), np.float32)
    row_only[0] = total[1]
    expected = np.stack([total, row_only]).astype(npdt)
    np.testing.assert_array_equal(ys, np.broadcast_to(expected, ys.shape))


# --------------------------------------------------------------- 2-D push into a 3-D target
@pl.jit.incore
def push3d_kernel(x: pl.Tensor[[2, 8], pl.FP32], x3: pl.Tensor[[1, 2, 8], pl.FP32],
                  y: pl.Out[pl.Tensor[[2, 4, S], pl.FP32]],
                  w_tile: pl.InOut[pld.DistributedTensor[[1, 4, S], pl.FP32]],
                  w_tensor: pl.InOut[pld.DistributedTensor[[1, 4, S], pl.FP32]],
                  sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
    ctx = pld.get_comm_ctx(sig)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    nxt = (me + 1) % n
    # a 2-D tile lands on the inner two dims of the 3-D target
    pld.tile.remote_store(pl.load(x, [0, 0], [2, 8]), w_tile, nxt, [0, 1, 4])
    # a tensor with a leading dim of 1 is a 2-D push too
    pld.tensor.remote_store(x3, w_tensor, nxt, [0, 2, 8])
    pld.system.notify(sig, nxt, [0, 0], 1, op=pld.NotifyOp.Set)
    pld.system.wait(sig, [0, 0], 1, cmp=pld.WaitCmp.Eq)
    pl.store(pl.load(w_tile, [0, 0, 0], [1, 4, S]), [0, 0, 0], y)
    pl.store(pl.load(w_tensor, [0, 0, 0], [1, 4, S]), [1, 0, 0], y)
    return y


@pl.jit
def push3d_chip(x: pl.Tensor[[2, 8], pl.FP32], x3: pl.Tensor[[1, 2, 8], pl.FP32],
                y: pl.Out[pl.Tensor[[2, 4, S], pl.FP32]],
                w_tile: pl.InOut[pld.DistributedTensor[[1, 4, S], pl.FP32]],
                w_tensor: pl.InOut[pld.DistributedTensor[[1, 4, S], pl.FP32]],
                sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
    return push3d_kernel(x, x3, y, w_tile, w_tensor, sig)


@pl.jit.host
def push3d_main(xs: pl.Tensor[[NR, 2, 8], pl.FP32], x3s: pl.Tensor[[NR, 1, 2, 8], pl.FP32],
                ys: pl.Out[pl.Tensor[[NR, 2, 4, S], pl.FP32]]):
    b_tile = pld.alloc_window_buffer([1, 4, S], dtype=pl.FP32)
    b_tensor = pld.alloc_window_buffer([1, 4, S], dtype=pl.FP32)
    b_sig = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        push3d_chip(xs[r], x3s[r], ys[r], pld.window(b_tile, [1, 4, S], dtype=pl.FP32),
                    pld.window(b_tensor, [1, 4, S], dtype=pl.FP32),
                    pld.window(b_sig, [1, 1], dtype=pl.INT32), device=r)
    return ys


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_2d_push_into_3d_target(n):
    rng = np.random.default_rng(90 + n)
    xs = rng.standard_normal((n, 2, 8)).astype(np.float32)
    x3s = rng.standard_normal((n, 1, 2, 8)).astype(np.float32)
    ys = np.full((n, 2, 4, S), np.nan, np.float32)
    push3d_main(xs, x3s, ys, config=config_for(n))
    expected = np.zeros((n, 2, 4, S), np.float32)
    expected[:, 0, 1:3, 4:12] = np.roll(xs, 1, axis=0)
    expected[:, 1, 2:4, 8:16] = np.roll(x3s[:, 0], 1, axis=0)
    np.testing.assert_array_equal(ys, expected)
