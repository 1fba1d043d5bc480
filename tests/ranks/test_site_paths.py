"""The kernel data path per call site keeps the plain ops' semantics: a
loaded tile is a value snapshot even when the source changes afterwards (by
this rank or by a peer), tiles a loop produces again and again stay
distinct values, and an elementwise result stored straight into its region
(also one that reads that region) equals numpy's."""
import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld

from programs_prims import config_for

NR = pl.dynamic("NR")
S = 16384                   # 64 KiB of FP32: site tiles this large are pooled
ROUNDS = 3


@pl.jit.incore
def snap_kernel(x: pl.Tensor[[1, S], pl.FP32],
                before: pl.Out[pl.Tensor[[2, S], pl.FP32]],
                after: pl.Out[pl.Tensor[[2, S], pl.FP32]],
                acc: pl.InOut[pl.Tensor[[1, S], pl.FP32]],
                data: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
                sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
                done: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    ctx = pld.get_comm_ctx(data)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    nxt = (me + 1) % n
    prv = (me + n - 1) % n
    pl.store(pl.load(x, [0, 0], [1, S]), [0, 0], data)
    pld.system.notify(sig, prv, [me, 0], 1, op=pld.NotifyOp.AtomicAdd)
    pld.system.wait(sig, [nxt, 0], 1, cmp=pld.WaitCmp.Ge)
    # snapshots of the own copy and of the next rank's copy
    own = pl.load(data, [0, 0], [1, S])
    peer = pld.tile.remote_load(data, nxt, [0, 0], [1, S])
    # every rank doubles its own copy once the previous rank has loaded it:
    # both sources change after the loads
    pld.system.notify(done, nxt, [me, 0], 1, op=pld.NotifyOp.AtomicAdd)
    pld.system.wait(done, [prv, 0], 1, cmp=pld.WaitCmp.Ge)
    pl.store(pl.add(own, own), [0, 0], data)
    pld.system.notify(sig, prv, [me, 0], 1, op=pld.NotifyOp.AtomicAdd)
    pld.system.wait(sig, [nxt, 0], 2, cmp=pld.WaitCmp.Ge)
    # both snapshots still hold the staged values
    pl.store(own, [0, 0], before)
    pl.store(peer, [1, 0], before)
    pl.store(pl.load(data, [0, 0], [1, S]), [0, 0], after)
    pl.store(pld.tile.remote_load(data, nxt, [0, 0], [1, S]), [1, 0], after)
    # a loop whose sites produce a new tile each round, every one kept apart
    # from the one before; the last store adds into the region it reads
    t = pl.load(x, [0, 0], [1, S])
    for i in pl.range(ROUNDS):
        prev = t
        t = pl.add(t, pl.load(x, [0, 0], [1, S]))
        acc = pl.store(pl.sub(pl.load(acc, [0, 0], [1, S]), pl.mul(prev, prev)), [0, 0], acc)
    acc = pl.store(pl.add(pl.load(acc, [0, 0], [1, S]), t), [0, 0], acc)
    return acc


@pl.jit
def snap_chip(x: pl.Tensor[[1, S], pl.FP32], before: pl.Out[pl.Tensor[[2, S], pl.FP32]],
              after: pl.Out[pl.Tensor[[2, S], pl.FP32]],
              acc: pl.InOut[pl.Tensor[[1, S], pl.FP32]],
              data: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
              sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
              done: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    return snap_kernel(x, before, after, acc, data, sig, done)


@pl.jit.host
def snap_main(xs: pl.Tensor[[NR, 1, S], pl.FP32], before: pl.Out[pl.Tensor[[NR, 2, S], pl.FP32]],
              after: pl.Out[pl.Tensor[[NR, 2, S], pl.FP32]],
              acc: pl.InOut[pl.Tensor[[NR, 1, S], pl.FP32]]):
    data_buf = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    done_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        snap_chip(xs[r], before[r], after[r], acc[r], pld.window(data_buf, [1, S], dtype=pl.FP32),
                  pld.window(sig_buf, [NR, 1], dtype=pl.INT32),
                  pld.window(done_buf, [NR, 1], dtype=pl.INT32), device=r)
    return acc


@pytest.mark.parametrize("n", [2, 3])
def test_loaded_tiles_are_snapshots_and_site_tiles_stay_distinct(n):
    rng = np.random.default_rng(7 + n)
    xs = rng.integers(1, 9, (n, 1, S)).astype(np.float32)
    acc0 = rng.integers(-50, 50, (n, 1, S)).astype(np.float32)
    before = np.full((n, 2, S), np.nan, np.float32)
    after = np.full((n, 2, S), np.nan, np.float32)
    acc = acc0.copy()
    snap_main(xs, before, after, acc, config=config_for(n))

    nxt = np.roll(xs, -1, axis=0)
    np.testing.assert_array_equal(before[:, 0], xs[:, 0])
    np.testing.assert_array_equal(before[:, 1], nxt[:, 0])
    np.testing.assert_array_equal(after[:, 0], 2 * xs[:, 0])
    np.testing.assert_array_equal(after[:, 1], 2 * nxt[:, 0])
    want = acc0.copy()
    t = xs.copy()
    for _ in range(ROUNDS):
        prev = t
        t = t + xs
        want = want - prev * prev
    np.testing.assert_array_equal(acc, want + t)
