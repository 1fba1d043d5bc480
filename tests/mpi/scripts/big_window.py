"""A call whose window buffer is 2 MiB per rank: with TILECOMM_MPI_POOL_MB=1
the MPI backend's pool cannot hold it (TC510).  Prints OK otherwise."""
import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

R, C = 512, 1024


@pl.jit.incore
def fill_kernel(y: pl.Out[pl.Tensor[[1, C], pl.FP32]],
                win: pl.InOut[pld.DistributedTensor[[R, C], pl.FP32]]):
    pl.store(pl.load(win, [R - 1, 0], [1, C]), [0, 0], y)
    return y


@pl.jit
def fill_chip(y: pl.Out[pl.Tensor[[1, C], pl.FP32]],
              win: pl.InOut[pld.DistributedTensor[[R, C], pl.FP32]]):
    return fill_kernel(y, win)


@pl.jit.host
def fill_main(ys: pl.Out[pl.Tensor[[1, 1, C], pl.FP32]]):
    buf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)  # BIG
    for r in pl.range(pld.world_size()):
        fill_chip(ys[r], pld.window(buf, [R, C], dtype=pl.FP32), device=r)
    return ys


if __name__ == "__main__":
    ys = np.ones((1, 1, C), np.float32)
    fill_main(ys, config=RunConfig(distributed_config=DistributedConfig(device_ids=[0])))
    assert not ys.any()                 # windows start zero-filled
    print("OK")
