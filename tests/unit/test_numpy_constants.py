"""numpy integers computed outside a program are integers inside it: as
annotation dims, byte sizes, shapes and offsets."""
import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

ONE = np.int64(1)
N = np.int32(4)
NBYTES = np.int64(16)
ZERO = np.int16(0)


@pl.jit.incore
def k(x: pl.Tensor[[ONE, N], pl.FP32], y: pl.Out[pl.Tensor[[ONE, N], pl.FP32]],
      w: pl.InOut[pld.DistributedTensor[[ONE, N], pl.FP32]]) -> pl.Tensor[[ONE, N], pl.FP32]:
    t = pl.load(x, [ZERO, ZERO], [ONE, N])
    w = pl.store(t, [ZERO, 0], w)
    u = pl.load(w, [0, ZERO], [ONE, N])
    y = pl.store(pl.mul(u, 2.0), [ZERO, ZERO], y)
    return y


@pl.jit
def chip(x: pl.Tensor[[ONE, N], pl.FP32], y: pl.Out[pl.Tensor[[ONE, N], pl.FP32]],
         w: pl.InOut[pld.DistributedTensor[[ONE, N], pl.FP32]]):
    return k(x, y, w)


@pl.jit.host
def main(xs: pl.Tensor[[2, ONE, N], pl.FP32], ys: pl.Out[pl.Tensor[[2, ONE, N], pl.FP32]]):
    buf = pld.alloc_window_buffer(NBYTES)
    for r in pl.range(pld.world_size()):
        chip(xs[r], ys[r], pld.window(buf, [ONE, N], dtype=pl.FP32), device=r)
    return ys


def test_numpy_integers_are_accepted_as_sizes_dims_and_offsets():
    cfg = RunConfig(distributed_config=DistributedConfig(device_ids=[0, 1]))
    xs = np.arange(8, dtype=np.float32).reshape(2, 1, 4)
    ys = np.zeros_like(xs)
    exe = main.compile(xs, ys, config=cfg).specialise((xs, ys))
    assert exe.prog.buffers[0].nbytes == 16 and type(exe.prog.buffers[0].nbytes) is int
    main(xs, ys, config=cfg)
    np.testing.assert_array_equal(ys, xs * 2)
