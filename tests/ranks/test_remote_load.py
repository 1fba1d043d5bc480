"""pld.tile.remote_load: every peer's copy after a barrier, ragged valid_shape
(tail zero-filled, physical shape kept), and peer == self."""
import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld

from programs_prims import WORLD_SIZES, config_for

NR = pl.dynamic("NR")
S = 16
SENTINEL = -3.0


@pl.jit.incore
def load_kernel(x: pl.Tensor[[2, S], pl.FP32],
                gathered: pl.Out[pl.Tensor[[2 * NR, S], pl.FP32]],
                selfs: pl.Out[pl.Tensor[[2, 2, S], pl.FP32]],
                ragged: pl.InOut[pl.Tensor[[4, 2, 8], pl.FP32]],
                data: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
                sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    ctx = pld.get_comm_ctx(data)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    # stage -> barrier -> remote_load
    pl.store(pl.load(x, [0, 0], [2, S]), [0, 0], data)
    for p in pl.range(n):
        if p != me:
            pld.system.notify(sig, p, [me, 0], 1, op=pld.NotifyOp.AtomicAdd)
    for s in pl.range(n):
        if s != me:
            pld.system.wait(sig, [s, 0], 1, cmp=pld.WaitCmp.Ge)
    for s in pl.range(n):
        t = pld.tile.remote_load(data, s, [0, 0], [2, S])
        pl.store(t, [2 * s, 0], gathered)
    # peer == self reads the local copy
    pl.store(pld.remote_load(data, peer=me, offsets=[0, 0], shape=[2, S]), [0, 0, 0], selfs)
    pl.store(pl.load(data, [0, 0], [2, S]), [1, 0, 0], selfs)
    # ragged tails: physical [2, 8] tiles with a smaller valid extent
    nxt = (me + 1) % n
    a = pld.tile.remote_load(data, nxt, [0, 4], [2, 8], [1, 5])
    b = pld.tile.remote_load(data, nxt, [0, 8], [2, 8], valid_shape=[2, me + 1])
    pl.store(a, [0, 0, 0], ragged, [2, 8])        # whole physical tile: the tail is zero
    pl.store(b, [1, 0, 0], ragged, [2, 8])
    pl.store(a, [2, 0, 0], ragged)                # valid region only: the rest is untouched
    pl.store(b, [3, 0, 0], ragged)
    return gathered


@pl.jit
def load_chip(x: pl.Tensor[[2, S], pl.FP32],
              gathered: pl.Out[pl.Tensor[[2 * NR, S], pl.FP32]],
              selfs: pl.Out[pl.Tensor[[2, 2, S], pl.FP32]],
              ragged: pl.InOut[pl.Tensor[[4, 2, 8], pl.FP32]],
              data: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
              sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    load_kernel(x, gathered, selfs, ragged, data, sig)
    return gathered


@pl.jit.host
def load_main(xs: pl.Tensor[[NR, 2, S], pl.FP32],
              gathered: pl.Out[pl.Tensor[[NR, 2 * NR, S], pl.FP32]],
              selfs: pl.Out[pl.Tensor[[NR, 2, 2, S], pl.FP32]],
              ragged: pl.InOut[pl.Tensor[[NR, 4, 2, 8], pl.FP32]]):
    data_buf = pld.alloc_window_buffer([2, S], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        load_chip(xs[r], gathered[r], selfs[r], ragged[r],
                  pld.window(data_buf, [2, S], dtype=pl.FP32),
                  pld.window(sig_buf, [NR, 1], dtype=pl.INT32), device=r)
    return gathered


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_remote_load_every_peer_self_and_ragged(n):
    rng = np.random.default_rng(100 + n)
    xs = (rng.standard_normal((n, 2, S)) + 10).astype(np.float32)   # never 0: tails show
    gathered = np.full((n, 2 * n, S), np.nan, np.float32)
    selfs = np.full((n, 2, 2, S), np.nan, np.float32)
    ragged = np.full((n, 4, 2, 8), SENTINEL, np.float32)
    load_main(xs, gathered, selfs, ragged, config=config_for(n))

    np.testing.assert_array_equal(gathered, np.broadcast_to(xs.reshape(2 * n, S),
                                                            gathered.shape))
    np.testing.assert_array_equal(selfs[:, 0], xs)
    np.testing.assert_array_equal(selfs[:, 1], xs)

    nxt = np.roll(xs, -1, axis=0)                       # rank r loaded from rank r + 1
    expected = np.full((n, 4, 2, 8), SENTINEL, np.float32)
    for r in range(n):
        a = np.zeros((2, 8), np.float32)
        a[:1, :5] = nxt[r, :1, 4:9]
        b = np.zeros((2, 8), np.float32)
        b[:, :r + 1] = nxt[r, :, 8:8 + r + 1]
        expected[r, 0], expected[r, 1] = a, b
        expected[r, 2, :1, :5] = a[:1, :5]
        expected[r, 3, :, :r + 1] = b[:, :r + 1]
    np.testing.assert_array_equal(ragged, expected)
