"""pld.tensor.put: whole tensors from a plain Tensor or a window, sub-regions,
chunking/pipelining (bit-identical to the plain put), and atomic accumulation
in every atomic-add dtype."""
import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.errors import UserError

from programs_prims import (NP_DTYPES, WORLD_SIZES, as_bits, config_for, int_valued, line_of)

NR = pl.dynamic("NR")
S = 16
R, C = 5, 7                 # odd sizes so chunks do not divide the transfer evenly


# --------------------------------------------------------------- whole-tensor put
@pl.jit.incore
def put_full_kernel(x: pl.Tensor[[1, S], pl.FP32], z: pl.Tensor[[1, S], pl.FP32],
                    y: pl.Out[pl.Tensor[[2, S], pl.FP32]],
                    win_a: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
                    win_b: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
                    staged: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
                    sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
    ctx = pld.get_comm_ctx(win_a)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    nxt = (me + 1) % n
    # from a plain Tensor
    pld.tensor.put(win_a, nxt, x)
    # from a window: stage z in this rank's own window first
    pl.store(pl.load(z, [0, 0], [1, S]), [0, 0], staged)
    pld.tensor.put(dst=win_b, peer=nxt, src=staged)
    pld.system.notify(sig, nxt, [0, 0], 1, op=pld.NotifyOp.Set)
    pld.system.wait(sig, [0, 0], 1, cmp=pld.WaitCmp.Eq)
    pl.store(pl.load(win_a, [0, 0], [1, S]), [0, 0], y)
    pl.store(pl.load(win_b, [0, 0], [1, S]), [1, 0], y)
    return y


@pl.jit
def put_full_chip(x: pl.Tensor[[1, S], pl.FP32], z: pl.Tensor[[1, S], pl.FP32],
                  y: pl.Out[pl.Tensor[[2, S], pl.FP32]],
                  win_a: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
                  win_b: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
                  staged: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
                  sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
    return put_full_kernel(x, z, y, win_a, win_b, staged, sig)


@pl.jit.host
def put_full_main(xs: pl.Tensor[[NR, 1, S], pl.FP32], zs: pl.Tensor[[NR, 1, S], pl.FP32],
                  ys: pl.Out[pl.Tensor[[NR, 2, S], pl.FP32]]):
    a_buf = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
    b_buf = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
    staged_buf = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        put_full_chip(xs[r], zs[r], ys[r], pld.window(a_buf, [1, S], dtype=pl.FP32),
                      pld.window(b_buf, [1, S], dtype=pl.FP32),
                      pld.window(staged_buf, [1, S], dtype=pl.FP32),
                      pld.window(sig_buf, [1, 1], dtype=pl.INT32), device=r)
    return ys


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_put_whole_tensor_from_tensor_and_from_window(n):
    rng = np.random.default_rng(10 + n)
    xs = rng.standard_normal((n, 1, S)).astype(np.float32)
    zs = rng.standard_normal((n, 1, S)).astype(np.float32)
    ys = np.zeros((n, 2, S), np.float32)
    put_full_main(xs, zs, ys, config=config_for(n))
    # rank r received from its left neighbour
    np.testing.assert_array_equal(ys[:, 0, :], np.roll(xs[:, 0, :], 1, axis=0))
    np.testing.assert_array_equal(ys[:, 1, :], np.roll(zs[:, 0, :], 1, axis=0))


# --------------------------------------------------------------- sub-region put to all peers
def make_put_subregion(nr: int):
    @pl.jit.incore
    def kernel(x: pl.Tensor[[4, 8], pl.FP32], y: pl.Out[pl.Tensor[[2 * nr, 8], pl.FP32]],
               win: pl.InOut[pld.DistributedTensor[[2 * nr, 8], pl.FP32]],
               sig: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]]):
        ctx = pld.get_comm_ctx(win)
        me = pld.rank(ctx)
        n = pld.nranks(ctx)
        for p in pl.range(n):
            # x[1:3, 2:6] -> peer's win[2*me : 2*me+2, 3:7]
            pld.tensor.put(win, p, x, [2 * me, 3], [1, 2], [2, 4])
        for p in pl.range(n):
            pld.system.notify(sig, p, [me, 0], 1, op=pld.NotifyOp.Set)
        for s in pl.range(n):
            pld.system.wait(sig, [s, 0], 1, cmp=pld.WaitCmp.Eq)
        y = pl.store(pl.load(win, [0, 0], [2 * nr, 8]), [0, 0], y)
        return y

    @pl.jit
    def chip(x: pl.Tensor[[4, 8], pl.FP32], y: pl.Out[pl.Tensor[[2 * nr, 8], pl.FP32]],
             win: pl.InOut[pld.DistributedTensor[[2 * nr, 8], pl.FP32]],
             sig: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]]):
        return kernel(x, y, win, sig)

    @pl.jit.host
    def main(xs: pl.Tensor[[nr, 4, 8], pl.FP32], ys: pl.Out[pl.Tensor[[nr, 2 * nr, 8], pl.FP32]]):
        buf = pld.alloc_window_buffer([2 * nr, 8], dtype=pl.FP32)
        sig_buf = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            chip(xs[r], ys[r], pld.window(buf, [2 * nr, 8], dtype=pl.FP32),
                 pld.window(sig_buf, [nr, 1], dtype=pl.INT32), device=r)
        return ys

    return main


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_put_subregion_to_every_peer(n):
    rng = np.random.default_rng(20 + n)
    xs = rng.standard_normal((n, 4, 8)).astype(np.float32)
    ys = np.full((n, 2 * n, 8), np.nan, np.float32)
    make_put_subregion(n)(xs, ys, config=config_for(n))
    win = np.zeros((2 * n, 8), np.float32)            # windows start zeroed
    for src in range(n):
        win[2 * src:2 * src + 2, 3:7] = xs[src, 1:3, 2:6]
    np.testing.assert_array_equal(ys, np.broadcast_to(win, ys.shape))


# --------------------------------------------------------------- chunking and pipelining
CHUNKINGS = [(1, 0, False), (0, 3, False), (2, 3, True), (4, 5, True), (1, 1, True),
             (64, 64, True)]


def make_put_chunked(cr: int, cc: int, pipe: bool):
    @pl.jit.incore
    def kernel(x: pl.Tensor[[R, C], pl.FP32], y: pl.Out[pl.Tensor[[4, R, C], pl.FP32]],
               plain: pl.InOut[pld.DistributedTensor[[R, C], pl.FP32]],
               chunked: pl.InOut[pld.DistributedTensor[[R, C], pl.FP32]],
               sub_plain: pl.InOut[pld.DistributedTensor[[R, C], pl.FP32]],
               sub_chunked: pl.InOut[pld.DistributedTensor[[R, C], pl.FP32]],
               sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
        ctx = pld.get_comm_ctx(plain)
        me = pld.rank(ctx)
        n = pld.nranks(ctx)
        nxt = (me + 1) % n
        pld.tensor.put(plain, nxt, x)
        pld.tensor.put(chunked, nxt, x, chunk_rows=cr, chunk_cols=cc, pipeline=pipe)
        pld.tensor.put(sub_plain, nxt, x, [1, 2], [0, 1], [4, 5])
        pld.tensor.put(sub_chunked, nxt, x, [1, 2], [0, 1], [4, 5], chunk_rows=cr,
                       chunk_cols=cc, pipeline=pipe)
        pld.system.notify(sig, nxt, [0, 0], 1, op=pld.NotifyOp.Set)
        pld.system.wait(sig, [0, 0], 1, cmp=pld.WaitCmp.Eq)
        pl.store(pl.load(plain, [0, 0], [R, C]), [0, 0, 0], y)
        pl.store(pl.load(chunked, [0, 0], [R, C]), [1, 0, 0], y)
        pl.store(pl.load(sub_plain, [0, 0], [R, C]), [2, 0, 0], y)
        pl.store(pl.load(sub_chunked, [0, 0], [R, C]), [3, 0, 0], y)
        return y

    @pl.jit
    def chip(x: pl.Tensor[[R, C], pl.FP32], y: pl.Out[pl.Tensor[[4, R, C], pl.FP32]],
             plain: pl.InOut[pld.DistributedTensor[[R, C], pl.FP32]],
             chunked: pl.InOut[pld.DistributedTensor[[R, C], pl.FP32]],
             sub_plain: pl.InOut[pld.DistributedTensor[[R, C], pl.FP32]],
             sub_chunked: pl.InOut[pld.DistributedTensor[[R, C], pl.FP32]],
             sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
        return kernel(x, y, plain, chunked, sub_plain, sub_chunked, sig)

    @pl.jit.host
    def main(xs: pl.Tensor[[NR, R, C], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 4, R, C], pl.FP32]]):
        plain_buf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
        chunked_buf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
        sub_plain_buf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
        sub_chunked_buf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
        sig_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            chip(xs[r], ys[r], pld.window(plain_buf, [R, C], dtype=pl.FP32),
                 pld.window(chunked_buf, [R, C], dtype=pl.FP32),
                 pld.window(sub_plain_buf, [R, C], dtype=pl.FP32),
                 pld.window(sub_chunked_buf, [R, C], dtype=pl.FP32),
                 pld.window(sig_buf, [1, 1], dtype=pl.INT32), device=r)
        return ys

    return main


@pytest.mark.parametrize("n", WORLD_SIZES)
@pytest.mark.parametrize("chunking", CHUNKINGS,
                         ids=lambda c: f"r{c[0]}-c{c[1]}-{'pipe' if c[2] else 'seq'}")
def test_chunked_and_pipelined_put_is_bit_identical(n, chunking):
    rng = np.random.default_rng(30 + n)
    xs = rng.standard_normal((n, R, C)).astype(np.float32)
    xs[:, 0, 0] = -0.0                               # sign of zero must survive too
    ys = np.full((n, 4, R, C), np.nan, np.float32)
    make_put_chunked(*chunking)(xs, ys, config=config_for(n))
    src = np.roll(xs, 1, axis=0)                     # left neighbour's data
    sub = np.zeros_like(src)
    sub[:, 1:5, 2:7] = src[:, 0:4, 1:6]
    np.testing.assert_array_equal(as_bits(ys[:, 0]), as_bits(src))
    np.testing.assert_array_equal(as_bits(ys[:, 2]), as_bits(sub))
    # the chunked / pipelined puts produce exactly the unchunked bytes
    np.testing.assert_array_equal(as_bits(ys[:, 1]), as_bits(ys[:, 0]))
    np.testing.assert_array_equal(as_bits(ys[:, 3]), as_bits(ys[:, 2]))


# --------------------------------------------------------------- atomic-add put
ATOMIC_DTYPES = [pl.FP32, pl.FP16, pl.BF16, pl.INT32, pl.INT16, pl.INT8]


def make_atomic_put(dt):
    @pl.jit.incore
    def kernel(x: pl.Tensor[[2, 8], dt], y: pl.Out[pl.Tensor[[2, 8], dt]],
               win: pl.InOut[pld.DistributedTensor[[2, 8], dt]],
               sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
        ctx = pld.get_comm_ctx(win)
        me = pld.rank(ctx)
        n = pld.nranks(ctx)
        # everyone accumulates into rank 0: the whole tensor, then row 1 again onto row 0
        pld.tensor.put(win, 0, x, atomic=pld.AtomicType.Add)  # ATOMIC-PUT
        pld.tensor.put(win, 0, x, [0, 0], [1, 0], [1, 8], atomic=pld.AtomicType.Add)
        pld.system.notify(sig, 0, [me, 0], 1, op=pld.NotifyOp.Set)
        if me == 0:
            for s in pl.range(n):
                pld.system.wait(sig, [s, 0], 1, cmp=pld.WaitCmp.Eq)
        y = pl.store(pl.load(win, [0, 0], [2, 8]), [0, 0], y)
        return y

    @pl.jit
    def chip(x: pl.Tensor[[2, 8], dt], y: pl.Out[pl.Tensor[[2, 8], dt]],
             win: pl.InOut[pld.DistributedTensor[[2, 8], dt]],
             sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
        return kernel(x, y, win, sig)

    @pl.jit.host
    def main(xs: pl.Tensor[[NR, 2, 8], dt], ys: pl.Out[pl.Tensor[[NR, 2, 8], dt]]):
        buf = pld.alloc_window_buffer([2, 8], dtype=dt)
        sig_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            chip(xs[r], ys[r], pld.window(buf, [2, 8], dtype=dt),
                 pld.window(sig_buf, [NR, 1], dtype=pl.INT32), device=r)
        return ys

    main.kernel = kernel                 # lets a test locate lines inside the kernel
    return main


@pytest.mark.parametrize("n", WORLD_SIZES)
@pytest.mark.parametrize("dt", ATOMIC_DTYPES, ids=lambda d: d.name)
def test_atomic_add_put_accumulates_into_one_peer(n, dt):
    npdt = NP_DTYPES[dt]
    rng = np.random.default_rng(40 + n)
    xs = int_valued(rng, (n, 2, 8), npdt)
    ys = np.full((n, 2, 8), 7, npdt)
    make_atomic_put(dt)(xs, ys, config=config_for(n))
    acc = xs.astype(np.float32).sum(axis=0)          # float32 accumulate, then cast
    acc[0] += xs[:, 1, :].astype(np.float32).sum(axis=0)
    expected = np.zeros((n, 2, 8), np.float32)
    expected[0] = acc                                # only rank 0 was written to
    np.testing.assert_array_equal(ys, expected.astype(npdt))
    assert ys.dtype == npdt


def test_bf16_atomic_put_rejected_on_a5_profile():
    # bf16 atomic add exists only on the a2a3 chips; the a5 profile refuses it
    # before any rank starts
    from tilecomm.runtime import DistributedConfig, RunConfig
    main = make_atomic_put(pl.BF16)
    xs = np.zeros((2, 2, 8), NP_DTYPES[pl.BF16])
    ys = np.zeros_like(xs)
    cfg = RunConfig(platform="a5", distributed_config=DistributedConfig(device_ids=[0, 1]))
    with pytest.raises(UserError) as ei:
        main(xs, ys, config=cfg)
    assert isinstance(ei.value, ValueError)
    assert ei.value.code == "TC215"
    assert "BF16" in ei.value.message
    # both atomic puts are diagnosed; the first points at the first put's line
    assert len(ei.value.diagnostics) == 2
    assert ei.value.line == line_of(main.kernel, "ATOMIC-PUT")
