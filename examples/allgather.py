"""pld.tensor.allgather inside a kernel: row r of every rank's table becomes
rank r's contribution.

local_data is this rank's [1, SIZE] chunk -- inside a kernel a plain tensor
argument, not a window -- and target is an [NR, SIZE] window.  Each rank
writes its chunk into row my_rank of every rank's target, then the ranks meet
once on the [NR, 1] signal; when the call returns, every row has landed
everywhere.

Gathering twice into one target needs a barrier in between: allgather starts
writing into the peers' targets as soon as a rank enters it, so a fast rank's
second gather could overwrite rows a slow rank has not yet read from the
first.  The kernel below gathers x, reads the table, meets at
pld.tensor.barrier, then gathers 10 * x into the same table.  All three calls
share one signal, which is all zeros at the end.
Run: python examples/allgather.py --ranks 4
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

SIZE = 16
NR = pl.dynamic("NR")


@pl.jit.incore
def gather_kernel(x: pl.Tensor[[1, SIZE], pl.FP32], x10: pl.Tensor[[1, SIZE], pl.FP32],
                  tables: pl.Out[pl.Tensor[[2, NR, SIZE], pl.FP32]],
                  cells: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
                  table: pl.InOut[pld.DistributedTensor[[NR, SIZE], pl.FP32]],
                  signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    table = pld.tensor.allgather(x, table, signal)
    pl.store(pl.load(table, [0, 0], [NR, SIZE]), [0, 0, 0], tables)
    # everyone has read the first table before anyone writes the second
    signal = pld.tensor.barrier(signal)
    table = pld.tensor.allgather(x10, table, signal)
    pl.store(pl.load(table, [0, 0], [NR, SIZE]), [1, 0, 0], tables)
    cells = pl.store(pl.load(signal, [0, 0], [NR, 1]), [0, 0], cells)
    return tables


@pl.jit
def chip(x: pl.Tensor[[1, SIZE], pl.FP32], x10: pl.Tensor[[1, SIZE], pl.FP32],
         tables: pl.Out[pl.Tensor[[2, NR, SIZE], pl.FP32]],
         cells: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
         table: pl.InOut[pld.DistributedTensor[[NR, SIZE], pl.FP32]],
         signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    return gather_kernel(x, x10, tables, cells, table, signal)


@pl.jit.host
def main(xs: pl.Tensor[[NR, 1, SIZE], pl.FP32], x10s: pl.Tensor[[NR, 1, SIZE], pl.FP32],
         tables: pl.Out[pl.Tensor[[NR, 2, NR, SIZE], pl.FP32]],
         cells: pl.Out[pl.Tensor[[NR, NR, 1], pl.INT32]]):
    table_buf = pld.alloc_window_buffer([NR, SIZE], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        chip(xs[r], x10s[r], tables[r], cells[r],
             pld.window(table_buf, [NR, SIZE], dtype=pl.FP32),
             pld.window(sig_buf, [NR, 1], dtype=pl.INT32), device=r)
    return tables


def run(nr: int):
    xs = (np.arange(nr)[:, None, None] * 100 + np.arange(1, SIZE + 1)).astype(np.float32)
    tables = np.full((nr, 2, nr, SIZE), np.nan, np.float32)
    cells = np.full((nr, nr, 1), -1, np.int32)
    main(xs, xs * 10, tables, cells,
         config=RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr)))))
    # on every rank: first table = all xs, second = all 10 * xs
    want = np.stack([xs[:, 0, :], xs[:, 0, :] * 10])
    np.testing.assert_array_equal(tables, np.broadcast_to(want, tables.shape))
    np.testing.assert_array_equal(cells, 0)
    return tables


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=4)
    args = ap.parse_args()
    tables = run(args.ranks)
    print(f"allgather over {args.ranks} ranks: rank 0's table, first column "
          f"{tables[0, 0, :, 0].tolist()}, then {tables[0, 1, :, 0].tolist()}")
    print("OK")
