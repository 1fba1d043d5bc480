"""Tutorial 3: remote load/store (tiles) and put/get (tensors).

Four ways to move a row between ranks around a ring, each paired with the
signal that tells the reader the data is there (data first, then notify):
  1. pld.tile.remote_store: push a tile into the right neighbour's `inbox`;
  2. pld.tile.remote_load:  pull a tile from the left neighbour's `stage`;
  3. pld.tensor.put:        push a whole tensor into the left neighbour's `box`;
  4. pld.tensor.get:        pull the right neighbour's `stage` into a tensor.
Run: python examples/tutorials/03_remote_access.py --ranks 3
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

SIZE = 8
NR = pl.dynamic("NR")
Row = pl.Tensor[[1, SIZE], pl.FP32]
RowWin = pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]]
SigWin = pl.InOut[pld.DistributedTensor[[4, 1], pl.INT32]]
INBOX, STAGED_L, STAGED_R, BOX = 0, 1, 2, 3        # signal cells, one per arrival
SET, GE = pld.NotifyOp.Set, pld.WaitCmp.Ge


@pl.jit.incore
def exchange(x: Row, got: pl.Out[pl.Tensor[[4, SIZE], pl.FP32]],
             inbox: RowWin, stage: RowWin, box: RowWin, sig: SigWin):
    ctx = pld.get_comm_ctx(sig)
    me, n = pld.rank(ctx), pld.nranks(ctx)
    right, left = (me + 1) % n, (me + n - 1) % n
    t = pl.load(x, [0, 0], [1, SIZE])
    # 1. remote_store: the tile lands in the right neighbour's inbox, then we say so
    pld.tile.remote_store(t, inbox, peer=right, offsets=[0, 0])
    pld.system.notify(sig, peer=right, offsets=[INBOX, 0], value=1, op=SET)
    # stage x in our own copy and tell both neighbours it is there to read
    pl.store(t, [0, 0], stage)
    pld.system.notify(sig, peer=right, offsets=[STAGED_L, 0], value=1, op=SET)
    pld.system.notify(sig, peer=left, offsets=[STAGED_R, 0], value=1, op=SET)
    # 3. put: the whole tensor x into the left neighbour's box, then we say so
    pld.tensor.put(box, left, x)
    pld.system.notify(sig, peer=left, offsets=[BOX, 0], value=1, op=SET)

    # 1. read what the left neighbour stored into our inbox, once it said so
    pld.system.wait(sig, offsets=[INBOX, 0], expected=1, cmp=GE)
    pl.store(pl.load(inbox, [0, 0], [1, SIZE]), [0, 0], got)
    # 2. remote_load: read the left neighbour's stage, once it is staged
    pld.system.wait(sig, offsets=[STAGED_L, 0], expected=1, cmp=GE)
    pl.store(pld.tile.remote_load(stage, left, [0, 0], [1, SIZE]), [1, 0], got)
    # 3. read what the right neighbour put into our box
    pld.system.wait(sig, offsets=[BOX, 0], expected=1, cmp=GE)
    pl.store(pl.load(box, [0, 0], [1, SIZE]), [2, 0], got)
    # 4. get: copy the right neighbour's stage into row 3 of got
    pld.system.wait(sig, offsets=[STAGED_R, 0], expected=1, cmp=GE)
    pld.tensor.get(got, right, stage, dst_offsets=[3, 0], src_offsets=[0, 0], shape=[1, SIZE])
    return got


@pl.jit
def chip(x: Row, got: pl.Out[pl.Tensor[[4, SIZE], pl.FP32]], inbox: RowWin, stage: RowWin,
         box: RowWin, sig: SigWin):
    return exchange(x, got, inbox, stage, box, sig)


@pl.jit.host
def main(xs: pl.Tensor[[NR, 1, SIZE], pl.FP32], gots: pl.Out[pl.Tensor[[NR, 4, SIZE], pl.FP32]]):
    inbox = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
    stage = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
    box = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
    sig = pld.alloc_window_buffer([4, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        chip(xs[r], gots[r], pld.window(inbox, [1, SIZE], dtype=pl.FP32),
             pld.window(stage, [1, SIZE], dtype=pl.FP32),
             pld.window(box, [1, SIZE], dtype=pl.FP32),
             pld.window(sig, [4, 1], dtype=pl.INT32), device=r)
    return gots


def run(nr: int) -> np.ndarray:
    xs = (np.arange(nr, dtype=np.float32).reshape(nr, 1, 1) * 10
          + np.arange(SIZE, dtype=np.float32)).reshape(nr, 1, SIZE)
    gots = np.full((nr, 4, SIZE), np.nan, np.float32)
    config = RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr))))
    main(xs, gots, config=config)
    from_left, from_right = np.roll(xs, 1, axis=0)[:, 0], np.roll(xs, -1, axis=0)[:, 0]
    np.testing.assert_array_equal(gots[:, 0], from_left)     # remote_store by the left
    np.testing.assert_array_equal(gots[:, 1], from_left)     # remote_load from the left
    np.testing.assert_array_equal(gots[:, 2], from_right)    # put by the right
    np.testing.assert_array_equal(gots[:, 3], from_right)    # get from the right
    return gots


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    args = ap.parse_args()
    gots = run(args.ranks)
    print(f"{args.ranks} ranks; rank 0 got rows starting {gots[0, :, 0].tolist()}")
    print("OK")
