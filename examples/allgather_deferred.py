"""pld.tensor.allgather(..., defer=True): gather while the core does other work.

With defer=True the call, inside a pl.at task, pushes this rank's row into
every rank's table and returns; the task's TaskId completes once every
rank's row has landed here (the scheduler watches the signal without holding
a core).  Meanwhile an independent task scales x; the task that reads the
table takes deps=[gather_tid].

Gathering again into the same table needs every rank to have read its
first table: ordering the second gather after this rank's reader is not
enough (a fast rank would push its new row into a slow rank's table while
that rank still reads the old one -- the race check reports it).  So the
reader is followed by a deferred barrier, and the second gather waits for
that barrier's TaskId: by then every rank has read.  All calls share one
signal, all zero at the end (each call's epilogue clears it before its
TaskId completes).
Run: python examples/allgather_deferred.py --ranks 4
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

SIZE = 16
NR = pl.dynamic("NR")
CG = pl.Level.CORE_GROUP


@pl.jit
def chip(x: pl.Tensor[[1, SIZE], pl.FP32], x10: pl.Tensor[[1, SIZE], pl.FP32],
         tables: pl.Out[pl.Tensor[[2, NR, SIZE], pl.FP32]],
         scaled: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
         cells: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
         table: pl.InOut[pld.DistributedTensor[[NR, SIZE], pl.FP32]],
         signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    with pl.manual_scope():
        with pl.at(level=CG, name_hint="gather") as g1:
            table = pld.tensor.allgather(x, table, signal, defer=True)
        with pl.at(level=CG, name_hint="independent"):
            scaled = pl.store(pl.mul(pl.load(x, [0, 0], [1, SIZE]), 0.5), [0, 0], scaled)
        with pl.at(level=CG, name_hint="read", deps=[g1]) as r1:
            tables = pl.store(pl.load(table, [0, 0], [NR, SIZE]), [0, 0, 0], tables)
        with pl.at(level=CG, name_hint="all_read", deps=[r1]) as b:
            signal = pld.tensor.barrier(signal, defer=True)
        with pl.at(level=CG, name_hint="gather_again", deps=[b]) as g2:
            table = pld.tensor.allgather(x10, table, signal, defer=True)
        with pl.at(level=CG, name_hint="read_again", deps=[g2]):
            tables = pl.store(pl.load(table, [0, 0], [NR, SIZE]), [1, 0, 0], tables)
            cells = pl.store(pl.load(signal, [0, 0], [NR, 1]), [0, 0], cells)
    return tables


@pl.jit.host
def main(xs: pl.Tensor[[NR, 1, SIZE], pl.FP32], x10s: pl.Tensor[[NR, 1, SIZE], pl.FP32],
         tables: pl.Out[pl.Tensor[[NR, 2, NR, SIZE], pl.FP32]],
         scaled: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]],
         cells: pl.Out[pl.Tensor[[NR, NR, 1], pl.INT32]]):
    table_buf = pld.alloc_window_buffer([NR, SIZE], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        chip(xs[r], x10s[r], tables[r], scaled[r], cells[r],
             pld.window(table_buf, [NR, SIZE], dtype=pl.FP32),
             pld.window(sig_buf, [NR, 1], dtype=pl.INT32), device=r)
    return tables


def run(nr: int):
    xs = (np.arange(nr)[:, None, None] * 100 + np.arange(1, SIZE + 1)).astype(np.float32)
    tables = np.full((nr, 2, nr, SIZE), np.nan, np.float32)
    scaled = np.full((nr, 1, SIZE), np.nan, np.float32)
    cells = np.full((nr, nr, 1), -1, np.int32)
    main(xs, xs * 10, tables, scaled, cells,
         config=RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr)))))
    want = np.stack([xs[:, 0, :], xs[:, 0, :] * 10])
    np.testing.assert_array_equal(tables, np.broadcast_to(want, tables.shape))
    np.testing.assert_array_equal(scaled, xs * 0.5)
    np.testing.assert_array_equal(cells, 0)
    return tables


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=4)
    args = ap.parse_args()
    tables = run(args.ranks)
    print(f"deferred allgather over {args.ranks} ranks: rank 0's table, first column "
          f"{tables[0, 0, :, 0].tolist()}, then {tables[0, 1, :, 0].tolist()}")
    print("OK")
