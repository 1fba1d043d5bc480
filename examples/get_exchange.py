"""Bulk pull with pld.tensor.get: stage, handshake, then read peers' windows.

get is the mirror image of put: the caller copies a peer's window into its own
memory, and the peer takes no part in the transfer.  So the burden moves to
the reader: the peer's data must be staged before the get runs, which is what
the handshake (announce "staged" to all, wait for all) guarantees.  Each rank:
  * full form: copies its left neighbour's whole [ROWS, COLS] window straight
    into its plain output tensor (dst need not be a window),
  * sub-region form: from every peer p copies row (my_rank % ROWS) of p's
    window into row p of its output.  With get the reader decides what to
    fetch and where it lands; with put the writer decides.
Nothing overwrites the staged windows afterwards; a program that reused them
would need a second handshake ("done reading") before writing new data.
Run: python examples/get_exchange.py --ranks 3
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

ROWS, COLS = 4, 16
NR = pl.dynamic("NR")
Block = pl.Tensor[[ROWS, COLS], pl.FP32]
Gathered = pl.Tensor[[NR, COLS], pl.FP32]
StageWin = pl.InOut[pld.DistributedTensor[[ROWS, COLS], pl.FP32]]
SigWin = pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]


@pl.jit.incore
def get_kernel(x: Block, from_left: pl.Out[Block], picked: pl.Out[Gathered],
               stage: StageWin, signal: SigWin):
    ctx = pld.get_comm_ctx(stage)
    my_rank = pld.rank(ctx)
    nranks = pld.nranks(ctx)
    # stage: make this rank's block readable by peers
    pl.store(pl.load(x, [0, 0], [ROWS, COLS]), [0, 0], stage)
    # handshake: after it, every peer's stage window holds its block
    for peer in pl.range(nranks):
        if peer != my_rank:
            pld.system.notify(signal, peer=peer, offsets=[my_rank, 0], value=1,
                              op=pld.NotifyOp.AtomicAdd)
    for src in pl.range(nranks):
        if src != my_rank:
            pld.system.wait(signal, offsets=[src, 0], expected=1, cmp=pld.WaitCmp.Ge)
    # full form: whole window -> whole tensor (chunking is optional; same bytes)
    pld.tensor.get(from_left, (my_rank + nranks - 1) % nranks, stage, chunk_rows=2,
                   chunk_cols=8)
    # sub-region form: one row from every peer, all three region arguments given
    for p in pl.range(nranks):
        pld.tensor.get(picked, p, stage, dst_offsets=[p, 0], src_offsets=[my_rank % ROWS, 0],
                       shape=[1, COLS])
    return from_left


@pl.jit
def chip(x: Block, from_left: pl.Out[Block], picked: pl.Out[Gathered], stage: StageWin,
         signal: SigWin):
    return get_kernel(x, from_left, picked, stage, signal)


@pl.jit.host
def main(xs: pl.Tensor[[NR, ROWS, COLS], pl.FP32],
         lefts: pl.Out[pl.Tensor[[NR, ROWS, COLS], pl.FP32]],
         pickeds: pl.Out[pl.Tensor[[NR, NR, COLS], pl.FP32]]):
    stage_buf = pld.alloc_window_buffer([ROWS, COLS], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        chip(xs[r], lefts[r], pickeds[r], pld.window(stage_buf, [ROWS, COLS], dtype=pl.FP32),
             pld.window(sig_buf, [NR, 1], dtype=pl.INT32), device=r)
    return lefts


def run(nr: int):
    rng = np.random.default_rng(7)
    xs = rng.uniform(1, 2, size=(nr, ROWS, COLS)).astype(np.float32)
    lefts = np.full_like(xs, np.nan)
    pickeds = np.full((nr, nr, COLS), np.nan, np.float32)
    main(xs, lefts, pickeds,
         config=RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr)))))
    np.testing.assert_array_equal(lefts, np.roll(xs, 1, axis=0))        # lefts[r] = xs[r-1]
    want = np.stack([xs[:, r % ROWS, :] for r in range(nr)])            # want[r, p] = xs[p, r%ROWS]
    np.testing.assert_array_equal(pickeds, want)
    return pickeds


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    args = ap.parse_args()
    pickeds = run(args.ranks)
    print(f"get exchange on {args.ranks} ranks; rank 0 picked rows start "
          f"{[round(float(v), 3) for v in pickeds[0, :, 0]]}")
    print("OK")
