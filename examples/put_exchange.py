"""Bulk push with pld.tensor.put: whole tensors, sub-regions, chunked, atomic.

put copies a local tensor (or window) into a peer's window in one call.  Each
rank, with right = my_rank + 1 and left = my_rank - 1 around the ring:
  1. full form: its whole x into the right neighbour's `mirror` window,
  2. sub-region form: x into row my_rank of every rank's `gathered` window
     (dst_offsets / src_offsets / shape together; an allgather by put),
  3. sub-region, chunked and pipelined: the right half of rows 0..4 of its
     `big` tensor into rows 1..5 of the left neighbour's `block` window, moved
     through a 2x4 staging tile with double buffering.  The knobs only change
     how the bytes travel, never which bytes arrive,
  4. atomic=pld.AtomicType.Add: x accumulated into every rank's `total`.
put returns once its bytes are in the peer's window, but the peer cannot see
that; so every rank signals after its puts, and reads its windows only after
the signal from every rank that put into it.
Run: python examples/put_exchange.py --ranks 3
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

SIZE, ROWS, COLS = 8, 6, 16
NR = pl.dynamic("NR")
Vec = pl.Tensor[[1, SIZE], pl.FP32]
Big = pl.Tensor[[ROWS, COLS], pl.FP32]
VecWin = pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]]
GatherWin = pl.InOut[pld.DistributedTensor[[NR, SIZE], pl.FP32]]
BigWin = pl.InOut[pld.DistributedTensor[[ROWS, COLS], pl.FP32]]
SigWin = pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]
OutVec, OutBig = pl.Out[Vec], pl.Out[Big]
OutGather = pl.Out[pl.Tensor[[NR, SIZE], pl.FP32]]


@pl.jit.incore
def put_kernel(x: Vec, big: Big, got_mirror: OutVec, got_gathered: OutGather,
               got_block: OutBig, got_total: OutVec, mirror: VecWin, gathered: GatherWin,
               block: BigWin, total: VecWin, signal: SigWin):
    ctx = pld.get_comm_ctx(gathered)
    my_rank = pld.rank(ctx)
    nranks = pld.nranks(ctx)
    right = (my_rank + 1) % nranks
    left = (my_rank + nranks - 1) % nranks
    pld.tensor.put(mirror, right, x)                                     # 1. whole tensor
    for peer in pl.range(nranks):
        pld.tensor.put(gathered, peer, x, [my_rank, 0], [0, 0], [1, SIZE])   # 2. one row
        pld.tensor.put(total, peer, x, atomic=pld.AtomicType.Add)        # 4. accumulate
    pld.tensor.put(block, left, big, dst_offsets=[1, 0], src_offsets=[0, COLS // 2],
                   shape=[ROWS - 1, COLS // 2], chunk_rows=2, chunk_cols=4,
                   pipeline=True)                                        # 3. chunked
    # signal after put: one arrival per peer, then wait for every peer's
    for peer in pl.range(nranks):
        if peer != my_rank:
            pld.system.notify(signal, peer=peer, offsets=[my_rank, 0], value=1,
                              op=pld.NotifyOp.AtomicAdd)
    for src in pl.range(nranks):
        if src != my_rank:
            pld.system.wait(signal, offsets=[src, 0], expected=1, cmp=pld.WaitCmp.Ge)
    # every rank that put into this rank has signalled: its windows are final
    got_mirror = pl.store(pl.load(mirror, [0, 0], [1, SIZE]), [0, 0], got_mirror)
    pl.store(pl.load(gathered, [0, 0], [NR, SIZE]), [0, 0], got_gathered)
    pl.store(pl.load(block, [0, 0], [ROWS, COLS]), [0, 0], got_block)
    pl.store(pl.load(total, [0, 0], [1, SIZE]), [0, 0], got_total)
    return got_mirror


@pl.jit
def chip(x: Vec, big: Big, got_mirror: OutVec, got_gathered: OutGather, got_block: OutBig,
         got_total: OutVec, mirror: VecWin, gathered: GatherWin, block: BigWin,
         total: VecWin, signal: SigWin):
    return put_kernel(x, big, got_mirror, got_gathered, got_block, got_total, mirror,
                      gathered, block, total, signal)


@pl.jit.host
def main(xs: pl.Tensor[[NR, 1, SIZE], pl.FP32], bigs: pl.Tensor[[NR, ROWS, COLS], pl.FP32],
         mirrors: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]],
         gathereds: pl.Out[pl.Tensor[[NR, NR, SIZE], pl.FP32]],
         blocks: pl.Out[pl.Tensor[[NR, ROWS, COLS], pl.FP32]],
         totals: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]]):
    mirror_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
    gather_buf = pld.alloc_window_buffer([NR, SIZE], dtype=pl.FP32)
    block_buf = pld.alloc_window_buffer([ROWS, COLS], dtype=pl.FP32)
    total_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        chip(xs[r], bigs[r], mirrors[r], gathereds[r], blocks[r], totals[r],
             pld.window(mirror_buf, [1, SIZE], dtype=pl.FP32),
             pld.window(gather_buf, [NR, SIZE], dtype=pl.FP32),
             pld.window(block_buf, [ROWS, COLS], dtype=pl.FP32),
             pld.window(total_buf, [1, SIZE], dtype=pl.FP32),
             pld.window(sig_buf, [NR, 1], dtype=pl.INT32), device=r)
    return mirrors


def run(nr: int):
    rng = np.random.default_rng(6)
    xs = rng.integers(1, 50, size=(nr, 1, SIZE)).astype(np.float32)
    bigs = rng.integers(1, 50, size=(nr, ROWS, COLS)).astype(np.float32)
    mirrors, totals = np.full_like(xs, np.nan), np.full_like(xs, np.nan)
    gathereds = np.full((nr, nr, SIZE), np.nan, np.float32)
    blocks = np.full_like(bigs, np.nan)
    main(xs, bigs, mirrors, gathereds, blocks, totals,
         config=RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr)))))
    np.testing.assert_array_equal(mirrors, np.roll(xs, 1, axis=0))       # from the left
    np.testing.assert_array_equal(gathereds, np.broadcast_to(xs[:, 0, :], (nr, nr, SIZE)))
    want = np.zeros_like(bigs)                                          # windows start at 0
    want[:, 1:, :COLS // 2] = np.roll(bigs, -1, axis=0)[:, :ROWS - 1, COLS // 2:]
    np.testing.assert_array_equal(blocks, want)                         # from the right
    np.testing.assert_array_equal(totals, np.broadcast_to(xs.sum(axis=0), xs.shape))
    return blocks


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    args = ap.parse_args()
    blocks = run(args.ranks)
    print(f"put exchange on {args.ranks} ranks; rank 0 block row 1: {blocks[0, 1, :4].tolist()}")
    print("OK")
