"""Which process's inputs a call reads, and that every process ends up with
the outputs: each process passes inputs of its own (offset by 1000 times
its MPI rank); the program reads process 0's.  Prints OK per process."""
import os
import sys

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

NR = pl.dynamic("NR")
S = 8


@pl.jit.incore
def shift_kernel(x: pl.Tensor[[1, S], pl.FP32], y: pl.Out[pl.Tensor[[1, S], pl.FP32]],
                 win: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
                 sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
    ctx = pld.get_comm_ctx(win)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    pld.tensor.put(win, (me + 1) % n, x)
    pld.system.notify(sig, (me + 1) % n, [0, 0], 1, op=pld.NotifyOp.AtomicAdd)
    pld.system.wait(sig, [0, 0], 1, cmp=pld.WaitCmp.Ge)
    pl.store(pl.load(win, [0, 0], [1, S]), [0, 0], y)
    return y


@pl.jit
def shift_chip(x: pl.Tensor[[1, S], pl.FP32], y: pl.Out[pl.Tensor[[1, S], pl.FP32]],
               win: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
               sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
    return shift_kernel(x, y, win, sig)


@pl.jit.host
def shift_main(xs: pl.Tensor[[NR, 1, S], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, S], pl.FP32]]):
    win = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
    sig = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        shift_chip(xs[r], ys[r], pld.window(win, [1, S], dtype=pl.FP32),
                   pld.window(sig, [1, 1], dtype=pl.INT32), device=r)
    return ys


def main(n: int) -> None:
    me = int(os.environ.get("PMI_RANK", "0"))
    base = np.arange(n * S, dtype=np.float32).reshape(n, 1, S)
    xs = base + 1000 * me                       # what this process passes
    ys = np.full((n, 1, S), -1, np.float32)
    cfg = RunConfig(distributed_config=DistributedConfig(device_ids=list(range(n))))
    got = shift_main(xs, ys, config=cfg)
    assert got is ys                            # the result is the caller's own array
    np.testing.assert_array_equal(ys, np.roll(base, 1, axis=0))   # process 0's inputs
    # a prepared worker: several calls, each with fresh inputs from process 0
    with shift_main.compile(xs, ys, config=cfg).prepare() as worker:
        for k in range(3):
            ys[...] = -1
            worker(xs * (k + 2), ys)
            np.testing.assert_array_equal(ys, np.roll(base * (k + 2), 1, axis=0))
    print(f"OK {me}", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]))
