"""Window buffers: zero-initialised per call, bytes vs shape allocation, views
sharing storage, comm domains covering a subset of ranks (domain-local
rank/nranks/peer), and runtime faults (bad peer, dynamic out-of-bounds region)."""
import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.errors import RankFailure

from programs_prims import WORLD_SIZES, config_for, line_of, need_ranks

NR = pl.dynamic("NR")
S = 8


# --------------------------------------------------------------- zero init, bytes vs shape
@pl.jit.incore
def zero_kernel(x: pl.Tensor[[2, S], pl.FP32], y: pl.Out[pl.Tensor[[4, 2, S], pl.FP32]],
                w_bytes: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
                w_shape: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
                w_dyn: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
                sig: pl.InOut[pld.DistributedTensor[[1, 2], pl.INT32]]):
    ctx = pld.get_comm_ctx(w_bytes)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    nxt = (me + 1) % n
    # what the windows hold before anyone wrote in this call
    first = pl.add(pl.load(w_bytes, [0, 0], [2, S]), pl.load(w_shape, [0, 0], [2, S]))
    pl.store(first, [0, 0, 0], y)
    pl.store(pl.load(w_dyn, [0, 0], [1, S]), [1, 0, 0], y)
    # tell the rank that writes into this one (the left neighbour) it may do so
    pld.system.notify(sig, (me + n - 1) % n, [0, 0], 1, op=pld.NotifyOp.Set)
    pld.system.wait(sig, [0, 0], 1, cmp=pld.WaitCmp.Eq)
    # the next rank has read its copies: now dirty every window (own and the next's)
    t = pl.load(x, [0, 0], [2, S])
    pld.tile.remote_store(t, w_bytes, nxt, [0, 0])
    pl.store(pl.mul(t, 2.0), [0, 0], w_shape)
    pl.store(pl.load(x, [0, 0], [1, S]), [me, 0], w_dyn)
    pld.system.notify(sig, nxt, [0, 1], 1, op=pld.NotifyOp.Set)
    pld.system.wait(sig, [0, 1], 1, cmp=pld.WaitCmp.Eq)
    pl.store(pl.load(w_bytes, [0, 0], [2, S]), [2, 0, 0], y)
    pl.store(pl.load(w_shape, [0, 0], [2, S]), [3, 0, 0], y)
    return y


@pl.jit
def zero_chip(x: pl.Tensor[[2, S], pl.FP32], y: pl.Out[pl.Tensor[[4, 2, S], pl.FP32]],
              w_bytes: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
              w_shape: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
              w_dyn: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
              sig: pl.InOut[pld.DistributedTensor[[1, 2], pl.INT32]]):
    return zero_kernel(x, y, w_bytes, w_shape, w_dyn, sig)


@pl.jit.host
def zero_main(xs: pl.Tensor[[NR, 2, S], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 4, 2, S], pl.FP32]]):
    bytes_buf = pld.alloc_window_buffer(2 * S * pl.FP32.get_byte())
    shape_buf = pld.alloc_window_buffer([2, S], dtype=pl.FP32)
    dyn_buf = pld.alloc_window_buffer(NR * S * 4)
    sig_buf = pld.alloc_window_buffer(2 * pl.INT32.get_byte())
    for r in pl.range(pld.world_size()):
        zero_chip(xs[r], ys[r], pld.window(bytes_buf, [2, S], dtype=pl.FP32),
                  pld.window(shape_buf, [2, S], dtype=pl.FP32),
                  pld.window(dyn_buf, [NR, S], dtype=pl.FP32),
                  pld.window(sig_buf, [1, 2], dtype=pl.INT32), device=r)
    return ys


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_windows_zeroed_every_call_bytes_and_shape_forms(n):
    rng = np.random.default_rng(110 + n)
    xs = (rng.standard_normal((n, 2, S)) + 5).astype(np.float32)
    cfg = config_for(n)
    for call in range(2):                 # the second call must not see the first's data
        ys = np.full((n, 4, 2, S), np.nan, np.float32)
        zero_main(xs, ys, config=cfg)
        np.testing.assert_array_equal(ys[:, 0], np.zeros((n, 2, S), np.float32))
        np.testing.assert_array_equal(ys[:, 1, 0], np.zeros((n, S), np.float32))
        # the bytes-form window works like the shape-form one
        np.testing.assert_array_equal(ys[:, 2], np.roll(xs, 1, axis=0))
        np.testing.assert_array_equal(ys[:, 3], xs * np.float32(2.0))


# --------------------------------------------------------------- views share storage
@pl.jit.incore
def views_kernel(x: pl.Tensor[[2, S], pl.FP32], y: pl.Out[pl.Tensor[[4, 2 * S], pl.FP32]],
                 grid: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
                 flat: pl.InOut[pld.DistributedTensor[[1, 2 * S], pl.FP32]],
                 reshaped: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
                 row0: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
                 sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
    ctx = pld.get_comm_ctx(grid)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    nxt = (me + 1) % n
    # push through one view of the buffer ...
    pld.tile.remote_store(pl.load(x, [0, 0], [2, S]), grid, nxt, [0, 0])
    pld.system.notify(sig, nxt, [0, 0], 1, op=pld.NotifyOp.Set)
    pld.system.wait(sig, [0, 0], 1, cmp=pld.WaitCmp.Eq)
    # ... and read it through the others
    pl.store(pl.load(flat, [0, 0], [1, 2 * S]), [0, 0], y)
    pl.store(pl.load(row0, [0, 0], [1, S]), [1, 0], y)
    # a local write through one view is visible through another
    pl.write(flat, [0, S + 1], pl.cast(me, pl.FP32))
    pl.write(y, [2, 0], pl.read(grid, [1, 1]))
    pl.write(y, [2, 1], pl.read(reshaped, [1, 1]))
    pl.store(pl.load(reshaped, [0, 0], [2, S]), [3, 0], y, [1, S])
    return y


@pl.jit
def views_chip(x: pl.Tensor[[2, S], pl.FP32], y: pl.Out[pl.Tensor[[4, 2 * S], pl.FP32]],
               grid: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
               flat: pl.InOut[pld.DistributedTensor[[1, 2 * S], pl.FP32]],
               reshaped: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
               row0: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
               sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
    return views_kernel(x, y, grid, flat, reshaped, row0, sig)


@pl.jit.host
def views_main(xs: pl.Tensor[[NR, 2, S], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 4, 2 * S], pl.FP32]]):
    buf = pld.alloc_window_buffer([2, S], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        # the 1-D host view [2*S] is seen through the kernel's [2, S] annotation
        views_chip(xs[r], ys[r], pld.window(buf, [2, S], dtype=pl.FP32),
                   pld.window(buf, [1, 2 * S], dtype=pl.FP32),
                   pld.window(buf, [2 * S], dtype=pl.FP32),
                   pld.window(buf, [1, S], dtype=pl.FP32),
                   pld.window(sig_buf, [1, 1], dtype=pl.INT32), device=r)
    return ys


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_views_of_one_buffer_share_storage(n):
    rng = np.random.default_rng(120 + n)
    xs = (rng.standard_normal((n, 2, S)) + 5).astype(np.float32)
    ys = np.full((n, 4, 2 * S), np.nan, np.float32)
    views_main(xs, ys, config=config_for(n))
    got = np.roll(xs, 1, axis=0)                        # what the left neighbour pushed
    np.testing.assert_array_equal(ys[:, 0], got.reshape(n, 2 * S))
    np.testing.assert_array_equal(ys[:, 1, :S], got[:, 0])
    ranks = np.arange(n, dtype=np.float32)
    np.testing.assert_array_equal(ys[:, 2, 0], ranks)   # flat[0, S+1] is grid[1, 1]
    np.testing.assert_array_equal(ys[:, 2, 1], ranks)
    after = got.copy()
    after[:, 1, 1] = ranks
    np.testing.assert_array_equal(ys[:, 3, :S], after[:, 0])


# --------------------------------------------------------------- comm domains of subsets
@pl.jit.incore
def info_kernel(out: pl.Out[pl.Tensor[[1, 3], pl.INT32]],
                sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
                peer: pl.Scalar[pl.INT32], tag: pl.Scalar[pl.INT32]):
    ctx = pld.get_comm_ctx(sig)
    pld.system.notify(sig, peer, [0, 0], tag, op=pld.NotifyOp.Set)
    pld.system.wait(sig, [0, 0], 1, cmp=pld.WaitCmp.Ge)
    pl.write(out, [0, 0], pld.rank(ctx))
    pl.write(out, [0, 1], pld.nranks(ctx))
    pl.write(out, [0, 2], pl.read(sig, [0, 0]))
    return out


@pl.jit
def info_chip(out: pl.Out[pl.Tensor[[1, 3], pl.INT32]],
              sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
              peer: pl.Scalar[pl.INT32], tag: pl.Scalar[pl.INT32]):
    return info_kernel(out, sig, peer, tag)


@pl.jit.host
def device0_main(o_all: pl.Out[pl.Tensor[[NR, 1, 3], pl.INT32]],
                 o_zero: pl.Out[pl.Tensor[[1, 3], pl.INT32]]):
    all_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    zero_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        info_chip(o_all[r], pld.window(all_buf, [1, 1], dtype=pl.INT32),
                  (r + 1) % pld.world_size(), 10 + r, device=r)
    # a window only device 0 ever sees: a one-rank domain
    info_chip(o_zero, pld.window(zero_buf, [1, 1], dtype=pl.INT32), 0, 30, device=0)
    return o_all


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_window_of_device0_only_is_a_one_rank_domain(n):
    o_all = np.full((n, 1, 3), -1, np.int32)
    o_zero = np.full((1, 3), -1, np.int32)
    device0_main(o_all, o_zero, config=config_for(n))
    ranks = np.arange(n)
    np.testing.assert_array_equal(o_all[:, 0, 0], ranks)
    np.testing.assert_array_equal(o_all[:, 0, 1], np.full(n, n))
    np.testing.assert_array_equal(o_all[:, 0, 2], np.roll(10 + ranks, 1))
    np.testing.assert_array_equal(o_zero[0], [0, 1, 30])       # rank 0 of 1, own tag


@pl.jit.host
def subsets_main(o_all: pl.Out[pl.Tensor[[NR, 1, 3], pl.INT32]],
                 o_b: pl.Out[pl.Tensor[[NR, 1, 3], pl.INT32]],
                 o_c: pl.Out[pl.Tensor[[2, 1, 3], pl.INT32]]):
    all_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    b_buf = pld.alloc_window_buffer([1], dtype=pl.INT32)
    c_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        info_chip(o_all[r], pld.window(all_buf, [1, 1], dtype=pl.INT32),
                  (r + 1) % pld.world_size(), 10 + r, device=r)
    # domain B = devices {1, 2}: device 1 is rank 0, device 2 is rank 1
    for r in pl.range(1, 3):
        info_chip(o_b[r], pld.window(b_buf, [1], dtype=pl.INT32), 2 - r, 20 + r, device=r)
    # domain C = devices {0, 2} from two constant dispatches, listed out of order
    info_chip(o_c[0], pld.window(c_buf, [1, 1], dtype=pl.INT32), 0, 40, device=2)
    info_chip(o_c[1], pld.window(c_buf, [1, 1], dtype=pl.INT32), 1, 41, device=0)
    return o_all


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_subset_domains_have_domain_local_ranks(n):
    need_ranks(n, 3, "the domains cover devices {1, 2} and {0, 2}")
    o_all = np.full((n, 1, 3), -1, np.int32)
    o_b = np.full((n, 1, 3), -1, np.int32)
    o_c = np.full((2, 1, 3), -1, np.int32)
    subsets_main(o_all, o_b, o_c, config=config_for(n))
    ranks = np.arange(n)
    # the all-device domain is untouched by the others (isolated windows)
    np.testing.assert_array_equal(o_all[:, 0, 0], ranks)
    np.testing.assert_array_equal(o_all[:, 0, 1], np.full(n, n))
    np.testing.assert_array_equal(o_all[:, 0, 2], np.roll(10 + ranks, 1))
    # domain B: reference from the device list, peers are domain-local
    b_devices = [1, 2]
    expected_b = np.full((n, 1, 3), -1, np.int32)
    for d in b_devices:
        me = b_devices.index(d)
        sender = next(s for s in b_devices if 2 - s == me)   # whose peer is my domain rank
        expected_b[d, 0] = [me, len(b_devices), 20 + sender]
    np.testing.assert_array_equal(o_b, expected_b)
    # domain C = sorted devices {0, 2}: device 0 is rank 0, device 2 is rank 1
    c_devices = [0, 2]
    dispatches = [(2, 0, 40), (0, 1, 41)]                     # (device, peer, tag)
    expected_c = np.empty((2, 1, 3), np.int32)
    for i, (d, _, _) in enumerate(dispatches):
        me = c_devices.index(d)
        tag = next(t for dd, p, t in dispatches if p == me)
        expected_c[i, 0] = [me, len(c_devices), tag]
    np.testing.assert_array_equal(o_c, expected_c)


# --------------------------------------------------------------- runtime faults
PEER_OPS = ["notify", "remote_load", "remote_store", "put", "get"]


@pl.jit.incore
def peer_fault_kernel(x: pl.Tensor[[1, S], pl.FP32], y: pl.Out[pl.Tensor[[1, S], pl.FP32]],
                      data: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
                      sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
                      which: pl.Scalar[pl.INT32], delta: pl.Scalar[pl.INT32]):
    ctx = pld.get_comm_ctx(data)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    bad = n + delta
    t = pl.load(x, [0, 0], [1, S])
    if me == n - 1:
        if which == 0:
            pld.system.notify(sig, bad, [0, 0], 1, op=pld.NotifyOp.Set)  # notify
        if which == 1:
            t = pld.tile.remote_load(data, bad, [0, 0], [1, S])  # remote_load
        if which == 2:
            pld.tile.remote_store(t, data, bad, [0, 0])  # remote_store
        if which == 3:
            pld.tensor.put(data, bad, x)  # put
        if which == 4:
            pld.tensor.get(y, bad, data)  # get
    y = pl.store(t, [0, 0], y)
    return y


@pl.jit
def peer_fault_chip(x: pl.Tensor[[1, S], pl.FP32], y: pl.Out[pl.Tensor[[1, S], pl.FP32]],
                    data: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
                    sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
                    which: pl.Scalar[pl.INT32], delta: pl.Scalar[pl.INT32]):
    return peer_fault_kernel(x, y, data, sig, which, delta)


@pl.jit.host
def peer_fault_main(xs: pl.Tensor[[NR, 1, S], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, S], pl.FP32]],
                    which: pl.Scalar[pl.INT32], delta: pl.Scalar[pl.INT32]):
    data_buf = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        peer_fault_chip(xs[r], ys[r], pld.window(data_buf, [1, S], dtype=pl.FP32),
                        pld.window(sig_buf, [1, 1], dtype=pl.INT32), which, delta, device=r)
    return ys


@pytest.mark.parametrize("n", WORLD_SIZES)
@pytest.mark.parametrize("op", PEER_OPS)
def test_peer_out_of_range_is_a_rank_failure(n, op):
    xs = np.ones((n, 1, S), np.float32)
    ys = np.full((n, 1, S), -2.0, np.float32)
    # peer == nranks for most ops, peer == -1 for some: both are outside [0, nranks)
    delta = -(n + 1) if op in ("remote_load", "put") else 0
    with pytest.raises(RankFailure) as ei:
        peer_fault_main(xs, ys, PEER_OPS.index(op), delta, config=config_for(n))
    e = ei.value
    assert e.rank == n - 1
    assert f"rank {n - 1}" in str(e)
    assert e.error_code == "TC501"
    assert e.error_type == "RuntimeFault"
    assert e.span.line == line_of(peer_fault_kernel, op)
    assert f"peer {n + delta}" in str(e)               # the offending peer value
    np.testing.assert_array_equal(ys, -2.0)            # nothing copied back on failure


REGION_OPS = ["store", "load", "remote_store", "remote_load", "put", "get", "notify", "wait"]


@pl.jit.incore
def region_fault_kernel(x: pl.Tensor[[1, S], pl.FP32], y: pl.Out[pl.Tensor[[1, S], pl.FP32]],
                        data: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
                        sig: pl.InOut[pld.DistributedTensor[[1, 2], pl.INT32]],
                        which: pl.Scalar[pl.INT32], off: pl.Scalar[pl.INT32]):
    ctx = pld.get_comm_ctx(data)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    nxt = (me + 1) % n
    t = pl.load(x, [0, 0], [1, S])
    if me == n - 1:
        if which == 0:
            pl.store(t, [0, off], data)  # store
        if which == 1:
            t = pl.load(x, [0, off], [1, S])  # load
        if which == 2:
            pld.tile.remote_store(t, data, nxt, [1, off])  # remote_store
        if which == 3:
            t = pld.tile.remote_load(data, nxt, [1, off], [1, S])  # remote_load
        if which == 4:
            pld.tensor.put(data, nxt, x, [1, off], [0, 0], [1, S])  # put
        if which == 5:
            pld.tensor.get(y, nxt, data, [0, 0], [1, off], [1, S])  # get
        if which == 6:
            pld.system.notify(sig, nxt, [0, off + 2], 1, op=pld.NotifyOp.Set)  # notify
        if which == 7:
            pld.system.wait(sig, [0, off + 2], 1, cmp=pld.WaitCmp.Ge)  # wait
    y = pl.store(t, [0, 0], y)
    return y


@pl.jit
def region_fault_chip(x: pl.Tensor[[1, S], pl.FP32], y: pl.Out[pl.Tensor[[1, S], pl.FP32]],
                      data: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
                      sig: pl.InOut[pld.DistributedTensor[[1, 2], pl.INT32]],
                      which: pl.Scalar[pl.INT32], off: pl.Scalar[pl.INT32]):
    return region_fault_kernel(x, y, data, sig, which, off)


@pl.jit.host
def region_fault_main(xs: pl.Tensor[[NR, 1, S], pl.FP32],
                      ys: pl.Out[pl.Tensor[[NR, 1, S], pl.FP32]],
                      which: pl.Scalar[pl.INT32], off: pl.Scalar[pl.INT32]):
    data_buf = pld.alloc_window_buffer([2, S], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([1, 2], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        region_fault_chip(xs[r], ys[r], pld.window(data_buf, [2, S], dtype=pl.FP32),
                          pld.window(sig_buf, [1, 2], dtype=pl.INT32), which, off, device=r)
    return ys


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_in_bounds_runtime_offsets_run(n):
    # the same kernel with offset 0 is valid for every op that returns: the faults
    # below come from the run-time values, not from the program
    xs = np.arange(n * S, dtype=np.float32).reshape(n, 1, S)
    for which in (0, 1):
        ys = np.zeros((n, 1, S), np.float32)
        region_fault_main(xs, ys, which, 0, config=config_for(n))
        np.testing.assert_array_equal(ys, xs)


@pytest.mark.parametrize("n", WORLD_SIZES)
@pytest.mark.parametrize("op", REGION_OPS)
def test_dynamic_out_of_bounds_region_is_a_rank_failure(n, op):
    xs = np.ones((n, 1, S), np.float32)
    ys = np.full((n, 1, S), -2.0, np.float32)
    off = -3 if op in ("load", "get", "wait") else 3  # past either end
    with pytest.raises(RankFailure) as ei:
        region_fault_main(xs, ys, REGION_OPS.index(op), off, config=config_for(n))
    e = ei.value
    assert e.rank == n - 1
    assert f"rank {n - 1}" in str(e)
    assert e.error_code == "TC502"
    assert e.error_type == "RuntimeFault"
    assert e.span.line == line_of(region_fault_kernel, op)
    np.testing.assert_array_equal(ys, -2.0)            # nothing copied back on failure
