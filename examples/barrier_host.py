"""HOST barrier: order one round of dispatches before the next, across ranks.

Each rank's dispatches run in host program order, but the ranks run
concurrently, and windows carry no ordering between ranks: rank 0's `read`
dispatch could start while rank 2's `stage` dispatch has not run yet, and
would then read zeros from rank 2's fresh window.  pld.tensor.barrier(signal)
in the host body fixes that: it becomes one builtin dispatch per member rank,
and none of them returns before every rank has reached it -- so on every rank,
every `stage` before the barrier has finished before any `read` after it
starts.

The ordering is proven with data: every rank must see every other rank's
staged row (delete the barrier line and try: at 4 ranks most runs miss one).
The host signal is rank-1 [NR] INT32 (a kernel's barrier uses [NR, 1]); it
clears itself, so the read dispatch finds it all zero.
Run: python examples/barrier_host.py --ranks 4
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

SIZE = 8
NR = pl.dynamic("NR")


@pl.jit.incore
def stage_kernel(x: pl.Tensor[[1, SIZE], pl.FP32],
                 stage: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]]):
    stage = pl.store(pl.load(x, [0, 0], [1, SIZE]), [0, 0], stage)
    return stage


@pl.jit
def stage_rows(x: pl.Tensor[[1, SIZE], pl.FP32],
               stage: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]]):
    return stage_kernel(x, stage)


@pl.jit.incore
def read_kernel(seen: pl.Out[pl.Tensor[[NR, SIZE], pl.FP32]],
                cells: pl.Out[pl.Tensor[[NR], pl.INT32]],
                stage: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
                signal: pl.InOut[pld.DistributedTensor[[NR], pl.INT32]]):
    for src in pl.range(pld.nranks(pld.get_comm_ctx(stage))):
        row = pld.tile.remote_load(stage, peer=src, offsets=[0, 0], shape=[1, SIZE])
        pl.store(row, [src, 0], seen)
    for i in pl.range(NR):
        pl.write(cells, [i], pl.read(signal, [i]))
    return seen


@pl.jit
def read_rows(seen: pl.Out[pl.Tensor[[NR, SIZE], pl.FP32]],
              cells: pl.Out[pl.Tensor[[NR], pl.INT32]],
              stage: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
              signal: pl.InOut[pld.DistributedTensor[[NR], pl.INT32]]):
    return read_kernel(seen, cells, stage, signal)


@pl.jit.host
def main(xs: pl.Tensor[[NR, 1, SIZE], pl.FP32], seen: pl.Out[pl.Tensor[[NR, NR, SIZE], pl.FP32]],
         cells: pl.Out[pl.Tensor[[NR, NR], pl.INT32]]):
    stage_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([NR], dtype=pl.INT32)
    stage = pld.window(stage_buf, [1, SIZE], dtype=pl.FP32)
    signal = pld.window(sig_buf, [NR], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        stage_rows(xs[r], stage, device=r)
    # no rank's read below starts before every rank's stage above has finished
    signal = pld.tensor.barrier(signal)
    for r in pl.range(pld.world_size()):
        read_rows(seen[r], cells[r], stage, signal, device=r)
    return seen


def run(nr: int):
    # rank r stages 100*r + (1..SIZE): never 0, the value of an unstaged window
    xs = (np.arange(nr)[:, None, None] * 100 + np.arange(1, SIZE + 1)).astype(np.float32)
    seen = np.full((nr, nr, SIZE), np.nan, np.float32)
    cells = np.full((nr, nr), -1, np.int32)
    main(xs, seen, cells,
         config=RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr)))))
    np.testing.assert_array_equal(seen, np.broadcast_to(xs[:, 0, :], (nr, nr, SIZE)))
    np.testing.assert_array_equal(cells, 0)
    return seen


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=4)
    args = ap.parse_args()
    seen = run(args.ranks)
    print(f"HOST barrier over {args.ranks} ranks; rank 0 saw first columns "
          f"{seen[0, :, 0].tolist()}; signal all zeros")
    print("OK")
