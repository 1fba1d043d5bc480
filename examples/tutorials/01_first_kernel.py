"""Tutorial 1: a first kernel, run on every rank.

Each rank scales its own row of the input by (rank + 1).  Three functions, one
per level: an InCore kernel does the tile work, a chip orchestration function
calls it on one rank, and the HOST orchestrator dispatches that function to
every rank with device=r.
Run: python examples/tutorials/01_first_kernel.py --ranks 4
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

SIZE = 8
NR = pl.dynamic("NR")          # the rank count: taken from the host tensors' first dim


@pl.jit.incore
def scale(x: pl.Tensor[[1, SIZE], pl.FP32], y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
          win: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
    # a kernel learns who it is from a window's comm context
    me = pld.rank(pld.get_comm_ctx(win))
    t = pl.load(x, [0, 0], [1, SIZE])                  # tensor -> tile
    t = pl.mul(t, pl.add(pl.cast(me, pl.FP32), 1.0))   # tile work
    y = pl.store(t, [0, 0], y)                         # tile -> tensor
    return y


@pl.jit
def chip(x: pl.Tensor[[1, SIZE], pl.FP32], y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
         win: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
    return scale(x, y, win)


@pl.jit.host
def main(xs: pl.Tensor[[NR, 1, SIZE], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]]):
    buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        chip(xs[r], ys[r], pld.window(buf, [1, 1], dtype=pl.INT32), device=r)
    return ys


def run(nr: int) -> np.ndarray:
    xs = np.arange(nr * SIZE, dtype=np.float32).reshape(nr, 1, SIZE)
    ys = np.zeros_like(xs)
    config = RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr))))
    main(xs, ys, config=config)                        # ys is written in place
    factor = np.arange(1, nr + 1, dtype=np.float32).reshape(nr, 1, 1)
    np.testing.assert_array_equal(ys, xs * factor)
    return ys


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    args = ap.parse_args()
    ys = run(args.ranks)
    print(f"{args.ranks} ranks; first element of each row: {ys[:, 0, 0].tolist()}")
    print("OK")
