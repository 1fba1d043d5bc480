"""Pull-mode ring exchange with remote_load, including a ragged tail.

Every rank stages SIZE floats in its window, meets the others at a barrier, and
then pulls from its ring neighbours: the whole row from the left neighbour,
and the right neighbour's row in CHUNK-wide tiles.  SIZE is not a multiple of
CHUNK, so the last tile is ragged: it keeps its physical [1, CHUNK] shape but
only valid_shape=[1, SIZE - off] elements are read; the rest of it is zero.
  * stage -> barrier -> remote_load: remote_load reads the peer's memory as it
    is *now*; without the barrier a fast rank would read a peer's window before
    that peer staged into it and silently get zeros.
  * (my_rank + nranks - 1) % nranks, not (my_rank - 1) % nranks: on the real
    device integer % truncates like C (-1 % 4 == -1), so keep the dividend
    non-negative and the program stays portable.
Run: python examples/remote_load_exchange.py --ranks 3
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

SIZE, CHUNK = 20, 8
NCHUNK = (SIZE + CHUNK - 1) // CHUNK          # 3 tiles: 8 + 8 + 4 valid elements
NR = pl.dynamic("NR")


@pl.jit.incore
def ring_pull(x: pl.Tensor[[1, SIZE], pl.FP32], from_left: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
              from_right: pl.Out[pl.Tensor[[NCHUNK, CHUNK], pl.FP32]],
              stage: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
              signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    ctx = pld.get_comm_ctx(stage)
    my_rank = pld.rank(ctx)
    nranks = pld.nranks(ctx)
    left = (my_rank + nranks - 1) % nranks
    right = (my_rank + 1) % nranks
    pl.store(pl.load(x, [0, 0], [1, SIZE]), [0, 0], stage)
    # barrier (see barrier.py): announce to all, then wait for all
    for peer in pl.range(nranks):
        if peer != my_rank:
            pld.system.notify(signal, peer=peer, offsets=[my_rank, 0], value=1,
                              op=pld.NotifyOp.AtomicAdd)
    for src in pl.range(nranks):
        if src != my_rank:
            pld.system.wait(signal, offsets=[src, 0], expected=1, cmp=pld.WaitCmp.Ge)
    # the left neighbour's row in one tile
    row = pld.tile.remote_load(stage, peer=left, offsets=[0, 0], shape=[1, SIZE])
    from_left = pl.store(row, [0, 0], from_left)
    # the right neighbour's row in fixed-size tiles; the last one is ragged
    for c in pl.range(NCHUNK):
        off = c * CHUNK
        valid = pl.min(CHUNK, SIZE - off)
        t = pld.tile.remote_load(stage, peer=right, offsets=[0, off], shape=[1, CHUNK],
                                 valid_shape=[1, valid])
        # shapes= stores the whole physical tile, so the zero padding is visible
        pl.store(t, [c, 0], from_right, shapes=[1, CHUNK])
    return from_left


@pl.jit
def chip(x: pl.Tensor[[1, SIZE], pl.FP32], from_left: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
         from_right: pl.Out[pl.Tensor[[NCHUNK, CHUNK], pl.FP32]],
         stage: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
         signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    return ring_pull(x, from_left, from_right, stage, signal)


@pl.jit.host
def main(xs: pl.Tensor[[NR, 1, SIZE], pl.FP32], lefts: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]],
         rights: pl.Out[pl.Tensor[[NR, NCHUNK, CHUNK], pl.FP32]]):
    stage_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        chip(xs[r], lefts[r], rights[r], pld.window(stage_buf, [1, SIZE], dtype=pl.FP32),
             pld.window(sig_buf, [NR, 1], dtype=pl.INT32), device=r)
    return lefts


def run(nr: int):
    rng = np.random.default_rng(4)
    xs = rng.uniform(1, 2, size=(nr, 1, SIZE)).astype(np.float32)   # never 0
    lefts = np.full_like(xs, np.nan)
    rights = np.full((nr, NCHUNK, CHUNK), np.nan, np.float32)
    main(xs, lefts, rights,
         config=RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr)))))
    np.testing.assert_array_equal(lefts, np.roll(xs, 1, axis=0))      # lefts[r] = xs[r-1]
    padded = np.zeros((nr, NCHUNK * CHUNK), np.float32)
    padded[:, :SIZE] = np.roll(xs, -1, axis=0)[:, 0, :]             # rights[r] = xs[r+1]
    np.testing.assert_array_equal(rights, padded.reshape(nr, NCHUNK, CHUNK))
    return rights


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    args = ap.parse_args()
    rights = run(args.ranks)
    tail = SIZE - (NCHUNK - 1) * CHUNK
    print(f"ring pull on {args.ranks} ranks; rank 0's ragged last tile: {tail} valid, "
          f"padding {rights[0, -1, tail:].tolist()}")
    print("OK")
