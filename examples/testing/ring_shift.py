"""A user's kernel module: every rank passes its row to the next rank around
the ring and sums what it got with its own row.

Rank r stores its row into rank (r+1) % n's ``inbox`` window with
remote_store, then notifies that rank's ``arrived`` cell: data first, then
the notify, so the wait of the receiver orders its read after the store.
Each rank waits for its own cell, reads its inbox and writes
``got`` (the left neighbour's row) and ``total`` (its row plus that one).
One rank passes its row to itself.  Tested by test_ring_shift.py.
"""
import tilecomm.language as pl
import tilecomm.language.distributed as pld

SIZE = 32
NR = pl.dynamic("NR")
Row = pl.Tensor[[1, SIZE], pl.FP32]
Rows = pl.Tensor[[NR, 1, SIZE], pl.FP32]
Inbox = pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]]
Cell = pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]


@pl.jit.incore
def shift(x: Row, got: pl.Out[Row], total: pl.Out[Row], inbox: Inbox, arrived: Cell):
    ctx = pld.get_comm_ctx(inbox)
    right = (pld.rank(ctx) + 1) % pld.nranks(ctx)
    mine = pl.load(x, [0, 0], [1, SIZE])
    pld.tile.remote_store(mine, inbox, peer=right, offsets=[0, 0])
    pld.system.notify(arrived, peer=right, offsets=[0, 0], value=1, op=pld.NotifyOp.Set)
    pld.system.wait(arrived, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Eq)
    left_row = pl.load(inbox, [0, 0], [1, SIZE])
    got = pl.store(left_row, [0, 0], got)
    total = pl.store(pl.add(mine, left_row), [0, 0], total)
    return total


@pl.jit
def chip(x: Row, got: pl.Out[Row], total: pl.Out[Row], inbox: Inbox, arrived: Cell):
    return shift(x, got, total, inbox, arrived)


@pl.jit.host
def ring_shift(xs: Rows, got: pl.Out[Rows], total: pl.Out[Rows]):
    inbox = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
    arrived = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        chip(xs[r], got[r], total[r], pld.window(inbox, [1, SIZE], dtype=pl.FP32),
             pld.window(arrived, [1, 1], dtype=pl.INT32), device=r)
    return total
