"""A hand-rolled barrier from notify/wait, proven with data.

Every rank stages a row in its window, meets the others at a barrier, then
reads every peer's staged row with remote_load.  The barrier is the "isolated"
form: signal is an [NR, 1] INT32 window and rank r owns row r of it.
  * notify first, then wait: a rank that waited first would never send its own
    arrival, and if every rank did that, nobody would ever arrive (deadlock).
  * notify(peer, offsets=[my_rank, 0]) marks "rank my_rank has arrived" in the
    peer's copy; wait(offsets=[src, 0]) looks at this rank's own copy.
  * AtomicAdd + Ge: with one writer per cell a Set would do, but AtomicAdd
    composes with shared cells and repeated rounds, and Ge stays true once
    reached, so a late check can never miss the moment the cell equalled 1.
  * counters are monotonic: after the call each rank's cell [i, 0] holds 1 for
    every peer i and 0 for itself (reusing the buffer would need threshold 2).
Run: python examples/barrier.py --ranks 3
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

SIZE = 8
NR = pl.dynamic("NR")


@pl.jit.incore
def barrier_kernel(x: pl.Tensor[[1, SIZE], pl.FP32],
                   seen: pl.Out[pl.Tensor[[NR, SIZE], pl.FP32]],
                   cells: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
                   stage: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
                   signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    ctx = pld.get_comm_ctx(stage)
    my_rank = pld.rank(ctx)
    nranks = pld.nranks(ctx)
    # 1. stage: publish this rank's row in its own window
    pl.store(pl.load(x, [0, 0], [1, SIZE]), [0, 0], stage)
    # 2. barrier, arrival half: tell every peer "my row is staged"
    for peer in pl.range(nranks):
        if peer != my_rank:
            pld.system.notify(signal, peer=peer, offsets=[my_rank, 0], value=1,
                              op=pld.NotifyOp.AtomicAdd)
    # 3. barrier, waiting half: every peer has staged once its cell reaches 1
    for src in pl.range(nranks):
        if src != my_rank:
            pld.system.wait(signal, offsets=[src, 0], expected=1, cmp=pld.WaitCmp.Ge)
    # 4. after the barrier every peer's staged row is safe to read
    for src in pl.range(nranks):
        row = pld.tile.remote_load(stage, peer=src, offsets=[0, 0], shape=[1, SIZE])
        pl.store(row, [src, 0], seen)
    # the counters the barrier left behind (hand-rolled signals never reset)
    for i in pl.range(nranks):
        pl.write(cells, [i, 0], pl.read(signal, [i, 0]))
    return seen


@pl.jit
def chip(x: pl.Tensor[[1, SIZE], pl.FP32], seen: pl.Out[pl.Tensor[[NR, SIZE], pl.FP32]],
         cells: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
         stage: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
         signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    return barrier_kernel(x, seen, cells, stage, signal)


@pl.jit.host
def main(xs: pl.Tensor[[NR, 1, SIZE], pl.FP32], seen: pl.Out[pl.Tensor[[NR, NR, SIZE], pl.FP32]],
         cells: pl.Out[pl.Tensor[[NR, NR, 1], pl.INT32]]):
    stage_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        chip(xs[r], seen[r], cells[r], pld.window(stage_buf, [1, SIZE], dtype=pl.FP32),
             pld.window(sig_buf, [NR, 1], dtype=pl.INT32), device=r)
    return seen


def run(nr: int):
    # rank r stages r*100 + (1..SIZE): recognisable, and never 0, the unstaged value
    xs = (np.arange(nr)[:, None, None] * 100 + np.arange(1, SIZE + 1)).astype(np.float32)
    seen = np.full((nr, nr, SIZE), np.nan, np.float32)
    cells = np.full((nr, nr, 1), -1, np.int32)
    main(xs, seen, cells,
         config=RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr)))))
    # every rank saw every rank's staged row
    np.testing.assert_array_equal(seen, np.broadcast_to(xs[:, 0, :], (nr, nr, SIZE)))
    # one arrival from each peer, none from itself
    np.testing.assert_array_equal(cells[:, :, 0], 1 - np.eye(nr, dtype=np.int32))
    return seen


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    args = ap.parse_args()
    seen = run(args.ranks)
    print(f"barrier over {args.ranks} ranks; rank 0 saw first columns "
          f"{seen[0, :, 0].tolist()}")
    print("OK")
