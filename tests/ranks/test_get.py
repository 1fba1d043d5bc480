"""pld.tensor.get after a handshake: whole tensors and sub-regions, into a plain
Tensor and into a window, plus a chunked/pipelined get."""
import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld

from programs_prims import WORLD_SIZES, as_bits, config_for

NR = pl.dynamic("NR")
R, C = 5, 7
SENTINEL = -1.0


@pl.jit.incore
def get_kernel(x: pl.Tensor[[R, C], pl.FP32],
               full_t: pl.Out[pl.Tensor[[R, C], pl.FP32]],
               full_w: pl.Out[pl.Tensor[[R, C], pl.FP32]],
               sub_t: pl.InOut[pl.Tensor[[R, C], pl.FP32]],
               sub_w: pl.Out[pl.Tensor[[R, C], pl.FP32]],
               chunked_t: pl.Out[pl.Tensor[[R, C], pl.FP32]],
               data: pl.InOut[pld.DistributedTensor[[R, C], pl.FP32]],
               landing: pl.InOut[pld.DistributedTensor[[R, C], pl.FP32]],
               sub_landing: pl.InOut[pld.DistributedTensor[[R, C], pl.FP32]],
               sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    ctx = pld.get_comm_ctx(data)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    # stage, then handshake with everyone: no get may run before its source is staged
    pl.store(pl.load(x, [0, 0], [R, C]), [0, 0], data)
    for p in pl.range(n):
        pld.system.notify(sig, p, [me, 0], 1, op=pld.NotifyOp.Set)
    for s in pl.range(n):
        pld.system.wait(sig, [s, 0], 1, cmp=pld.WaitCmp.Eq)
    nxt = (me + 1) % n
    # whole tensor into a plain Tensor and into a window
    pld.tensor.get(full_t, nxt, data)
    pld.tensor.get(dst=landing, peer=nxt, src=data)
    pl.store(pl.load(landing, [0, 0], [R, C]), [0, 0], full_w)
    # sub-region: peer's data[0:3, 1:5] -> dst[1:4, 2:6]
    pld.tensor.get(sub_t, nxt, data, [1, 2], [0, 1], [3, 4])
    pld.tensor.get(sub_landing, nxt, data, dst_offsets=[1, 2], src_offsets=[0, 1], shape=[3, 4])
    pl.store(pl.load(sub_landing, [0, 0], [R, C]), [0, 0], sub_w)
    pld.tensor.get(chunked_t, nxt, data, chunk_rows=2, chunk_cols=3, pipeline=True)
    return full_t


@pl.jit
def get_chip(x: pl.Tensor[[R, C], pl.FP32],
             full_t: pl.Out[pl.Tensor[[R, C], pl.FP32]],
             full_w: pl.Out[pl.Tensor[[R, C], pl.FP32]],
             sub_t: pl.InOut[pl.Tensor[[R, C], pl.FP32]],
             sub_w: pl.Out[pl.Tensor[[R, C], pl.FP32]],
             chunked_t: pl.Out[pl.Tensor[[R, C], pl.FP32]],
             data: pl.InOut[pld.DistributedTensor[[R, C], pl.FP32]],
             landing: pl.InOut[pld.DistributedTensor[[R, C], pl.FP32]],
             sub_landing: pl.InOut[pld.DistributedTensor[[R, C], pl.FP32]],
             sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    get_kernel(x, full_t, full_w, sub_t, sub_w, chunked_t, data, landing, sub_landing, sig)
    return full_t


@pl.jit.host
def get_main(xs: pl.Tensor[[NR, R, C], pl.FP32],
             ys: pl.InOut[pl.Tensor[[NR, 5, R, C], pl.FP32]]):
    data_buf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    landing_buf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sub_buf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        get_chip(xs[r], ys[r, 0], ys[r, 1], ys[r, 2], ys[r, 3], ys[r, 4],
                 pld.window(data_buf, [R, C], dtype=pl.FP32),
                 pld.window(landing_buf, [R, C], dtype=pl.FP32),
                 pld.window(sub_buf, [R, C], dtype=pl.FP32),
                 pld.window(sig_buf, [NR, 1], dtype=pl.INT32), device=r)
    return ys


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_get_whole_and_subregion_into_tensor_and_window(n):
    rng = np.random.default_rng(50 + n)
    xs = rng.standard_normal((n, R, C)).astype(np.float32)
    ys = np.full((n, 5, R, C), SENTINEL, np.float32)
    get_main(xs, ys, config=config_for(n))
    src = np.roll(xs, -1, axis=0)                    # rank r pulled from rank r + 1
    np.testing.assert_array_equal(ys[:, 0], src)
    np.testing.assert_array_equal(ys[:, 1], src)
    # a sub-region get into a plain tensor leaves the rest of the tensor alone ...
    sub_t = np.full((n, R, C), SENTINEL, np.float32)
    sub_t[:, 1:4, 2:6] = src[:, 0:3, 1:5]
    np.testing.assert_array_equal(ys[:, 2], sub_t)
    # ... and into a (zero-initialised) window
    sub_w = np.zeros((n, R, C), np.float32)
    sub_w[:, 1:4, 2:6] = src[:, 0:3, 1:5]
    np.testing.assert_array_equal(ys[:, 3], sub_w)
    # chunked + pipelined get: the same bytes as the plain one
    np.testing.assert_array_equal(as_bits(ys[:, 4]), as_bits(ys[:, 0]))


# --------------------------------------------------------------- gather by get
@pl.jit.incore
def gather_kernel(x: pl.Tensor[[1, C], pl.FP32], out: pl.Out[pl.Tensor[[NR, C], pl.FP32]],
                  data: pl.InOut[pld.DistributedTensor[[1, C], pl.FP32]],
                  sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    ctx = pld.get_comm_ctx(data)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    pl.store(pl.load(x, [0, 0], [1, C]), [0, 0], data)
    for p in pl.range(n):
        if p != me:
            pld.system.notify(sig, p, [me, 0], 1, op=pld.NotifyOp.AtomicAdd)
    for s in pl.range(n):
        if s != me:
            pld.system.wait(sig, [s, 0], 1, cmp=pld.WaitCmp.Ge)
    # pull every rank's row (own included) to a row chosen at run time
    for s in pl.range(n):
        pld.tensor.get(out, s, data, [s, 0], [0, 0], [1, C])
    return out


@pl.jit
def gather_chip(x: pl.Tensor[[1, C], pl.FP32], out: pl.Out[pl.Tensor[[NR, C], pl.FP32]],
                data: pl.InOut[pld.DistributedTensor[[1, C], pl.FP32]],
                sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    return gather_kernel(x, out, data, sig)


@pl.jit.host
def gather_main(xs: pl.Tensor[[NR, 1, C], pl.FP32], outs: pl.Out[pl.Tensor[[NR, NR, C], pl.FP32]]):
    data_buf = pld.alloc_window_buffer(C * pl.FP32.get_byte())
    sig_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        gather_chip(xs[r], outs[r], pld.window(data_buf, [1, C], dtype=pl.FP32),
                    pld.window(sig_buf, [NR, 1], dtype=pl.INT32), device=r)
    return outs


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_gather_by_get_from_every_rank(n):
    rng = np.random.default_rng(60 + n)
    xs = rng.standard_normal((n, 1, C)).astype(np.float32)
    outs = np.full((n, n, C), SENTINEL, np.float32)
    gather_main(xs, outs, config=config_for(n))
    np.testing.assert_array_equal(outs, np.broadcast_to(xs[:, 0, :], (n, n, C)))
