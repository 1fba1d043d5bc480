"""pld.tensor.reduce_scatter inside a kernel: rank r ends with the sum of
everyone's row r.

target is an [NR, SIZE] window.  Before the call each rank stages all NR rows
in it -- row j is its contribution to the chunk rank j will own.  After the
call, row r of rank r holds the sum over all ranks of their row r; the other
rows of rank r's window are left as that rank staged them (they are not
zeroed and not reduced).  Only ReduceOp.Sum is provided; use allreduce for
Max / Min / Prod.

Together with allgather this is an allreduce in two halves: every rank
reduces only 1/NR of the data, which is why reduce_scatter is the first half
of most large allreduce implementations.  The [NR, 1] signal is all zeros
afterwards.
Run: python examples/reduce_scatter.py --ranks 4
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

SIZE = 20
NR = pl.dynamic("NR")


@pl.jit.incore
def scatter_kernel(rows: pl.Tensor[[NR, SIZE], pl.FP32],
                   out: pl.Out[pl.Tensor[[NR, SIZE], pl.FP32]],
                   cells: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
                   table: pl.InOut[pld.DistributedTensor[[NR, SIZE], pl.FP32]],
                   signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    # peers read this rank's rows from its window: stage all of them
    table = pl.store(pl.load(rows, [0, 0], [NR, SIZE]), [0, 0], table)
    table = pld.tensor.reduce_scatter(table, signal, op=pld.ReduceOp.Sum)
    out = pl.store(pl.load(table, [0, 0], [NR, SIZE]), [0, 0], out)
    cells = pl.store(pl.load(signal, [0, 0], [NR, 1]), [0, 0], cells)
    return out


@pl.jit
def chip(rows: pl.Tensor[[NR, SIZE], pl.FP32], out: pl.Out[pl.Tensor[[NR, SIZE], pl.FP32]],
         cells: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
         table: pl.InOut[pld.DistributedTensor[[NR, SIZE], pl.FP32]],
         signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    return scatter_kernel(rows, out, cells, table, signal)


@pl.jit.host
def main(rows: pl.Tensor[[NR, NR, SIZE], pl.FP32], outs: pl.Out[pl.Tensor[[NR, NR, SIZE], pl.FP32]],
         cells: pl.Out[pl.Tensor[[NR, NR, 1], pl.INT32]]):
    table_buf = pld.alloc_window_buffer([NR, SIZE], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        chip(rows[r], outs[r], cells[r], pld.window(table_buf, [NR, SIZE], dtype=pl.FP32),
             pld.window(sig_buf, [NR, 1], dtype=pl.INT32), device=r)
    return outs


def run(nr: int):
    rng = np.random.default_rng(nr)
    rows = rng.integers(-8, 8, (nr, nr, SIZE)).astype(np.float32)   # rows[rank, j]
    outs = np.full_like(rows, np.nan)
    cells = np.full((nr, nr, 1), -1, np.int32)
    main(rows, outs, cells,
         config=RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr)))))
    for r in range(nr):
        want = rows[r].copy()                  # rows other than r: as staged
        want[r] = rows[:, r, :].sum(axis=0)    # row r: the sum of everyone's row r
        np.testing.assert_array_equal(outs[r], want)
    np.testing.assert_array_equal(cells, 0)
    return outs


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=4)
    args = ap.parse_args()
    outs = run(args.ranks)
    print(f"reduce_scatter over {args.ranks} ranks: rank r's row r starts "
          f"{[outs[r, r, 0].item() for r in range(args.ranks)]}")
    print("OK")
