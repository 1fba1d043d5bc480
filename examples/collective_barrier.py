"""pld.tensor.barrier inside a kernel, proven with data: a window is
overwritten only after every peer has finished reading it.

Each rank publishes a row in its own `stage` window, then reads every rank's
row with remote_load -- twice, with new rows the second time.  Two barriers
make that correct:
  1. between publishing and reading: no rank reads a peer's row before that
     peer has written it (otherwise it would read the zeros of a fresh window);
  2. between reading and overwriting: no rank replaces its row for round 2
     while a slower peer is still reading round 1 from it.  Without this one,
     a fast rank's round-2 row shows up in a slow rank's round-1 result.
The checks below fail if either read sees the wrong round -- delete barrier 2
and try: at 4 ranks they fail on nearly every run.

pld.tensor.barrier is the collective form of barrier.py's hand-rolled notify
/ wait loop.  Its signal is the same [NR, 1] INT32 window, but the collective
takes its credits back before returning, so one signal serves all four
barriers (and any other mesh collective) back to back, and reads as all zeros
afterwards -- the hand-rolled counters of barrier.py stay at 1 instead.
Every rank must call the barrier the same number of times: it is a
collective, so a call some ranks skip never completes.
Run: python examples/collective_barrier.py --ranks 4
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

SIZE = 8
NR = pl.dynamic("NR")


@pl.jit.incore
def barrier_kernel(x: pl.Tensor[[2, SIZE], pl.FP32],
                   seen: pl.Out[pl.Tensor[[2, NR, SIZE], pl.FP32]],
                   cells: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
                   stage: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
                   signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    nranks = pld.nranks(pld.get_comm_ctx(stage))
    for rd in pl.range(2):
        # publish this round's row in this rank's own window
        pl.store(pl.load(x, [rd, 0], [1, SIZE]), [0, 0], stage)
        # 1. every row of this round is published before anyone reads
        signal = pld.tensor.barrier(signal)
        for src in pl.range(nranks):
            row = pld.tile.remote_load(stage, peer=src, offsets=[0, 0], shape=[1, SIZE])
            pl.store(row, [rd, src, 0], seen)
        # 2. every rank has read this round before anyone overwrites its row
        signal = pld.tensor.barrier(signal)
    # four calls on one signal, and nothing left in it
    cells = pl.store(pl.load(signal, [0, 0], [NR, 1]), [0, 0], cells)
    return seen


@pl.jit
def chip(x: pl.Tensor[[2, SIZE], pl.FP32], seen: pl.Out[pl.Tensor[[2, NR, SIZE], pl.FP32]],
         cells: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
         stage: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
         signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    return barrier_kernel(x, seen, cells, stage, signal)


@pl.jit.host
def main(xs: pl.Tensor[[NR, 2, SIZE], pl.FP32], seen: pl.Out[pl.Tensor[[NR, 2, NR, SIZE], pl.FP32]],
         cells: pl.Out[pl.Tensor[[NR, NR, 1], pl.INT32]]):
    stage_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        chip(xs[r], seen[r], cells[r], pld.window(stage_buf, [1, SIZE], dtype=pl.FP32),
             pld.window(sig_buf, [NR, 1], dtype=pl.INT32), device=r)
    return seen


def run(nr: int):
    # rank r, round rd publishes 1000*rd + 100*r + (1..SIZE): never 0 (unpublished),
    # and the round is readable from the value
    xs = (np.arange(2)[None, :, None] * 1000 + np.arange(nr)[:, None, None] * 100
          + np.arange(1, SIZE + 1)).astype(np.float32)
    seen = np.full((nr, 2, nr, SIZE), np.nan, np.float32)
    cells = np.full((nr, nr, 1), -1, np.int32)
    main(xs, seen, cells,
         config=RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr)))))
    # seen[r, rd, src] is what rank r read from rank src in round rd
    want = np.broadcast_to(xs.transpose(1, 0, 2)[None], (nr, 2, nr, SIZE))
    np.testing.assert_array_equal(seen, want)
    np.testing.assert_array_equal(cells, 0)
    return seen


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=4)
    args = ap.parse_args()
    seen = run(args.ranks)
    print(f"barrier over {args.ranks} ranks; rank 0 read first columns "
          f"{seen[0, 0, :, 0].tolist()} then {seen[0, 1, :, 0].tolist()}; signal all zeros")
    print("OK")
