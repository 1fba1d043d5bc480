"""HOST builtins: broadcast, allgather, all_to_all and reduce_scatter called
from the host orchestrator, between dispatches, on one signal.

A collective written in a HOST orchestrator is not run by the host itself:
it becomes one builtin dispatch per member rank of its windows' comm domain.
The builtins run concurrently, meet on the signal, and each rank's later
dispatches see what they wrote -- so the pattern is
    stage (per-rank dispatch) -> collectives (host body) -> read (per-rank dispatch).
Compared with the same collectives inside a kernel (broadcast.py,
allgather.py, all_to_all.py, reduce_scatter.py):
  * every operand is a pld.window view made in the host body, and each one
    is a different alloc_window_buffer.  The chunk allgather sends and the
    rows all_to_all sends are windows too (a kernel passes plain tensors),
    so a dispatch stages them first;
  * the signal is rank-1 [NR] INT32 (a kernel uses [NR, 1]);
  * there is no kernel around the call, so no rank-divergent control flow:
    every member rank always takes part.
The four calls share one signal: each leaves it all zero for the next, as
the read dispatch shows.  With an explicit signal these calls may also sit
in a host loop (see allreduce_host_loop.py).
Run: python examples/host_collectives.py --ranks 4 [--root R]
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

SIZE = 40
NR = pl.dynamic("NR")


@pl.jit.incore
def stage_kernel(x: pl.Tensor[[1, SIZE], pl.FP32], rows: pl.Tensor[[NR, SIZE], pl.FP32],
                 bcast: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
                 chunk: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
                 send: pl.InOut[pld.DistributedTensor[[NR, SIZE], pl.FP32]],
                 parts: pl.InOut[pld.DistributedTensor[[NR, SIZE], pl.FP32]]):
    row = pl.load(x, [0, 0], [1, SIZE])
    pl.store(row, [0, 0], bcast)           # only the root's copy will matter
    pl.store(row, [0, 0], chunk)           # this rank's allgather contribution
    block = pl.load(rows, [0, 0], [NR, SIZE])
    pl.store(block, [0, 0], send)          # row dest goes to rank dest
    pl.store(block, [0, 0], parts)         # row j is this rank's part of rank j's sum
    return bcast


@pl.jit
def stage(x: pl.Tensor[[1, SIZE], pl.FP32], rows: pl.Tensor[[NR, SIZE], pl.FP32],
          bcast: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
          chunk: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
          send: pl.InOut[pld.DistributedTensor[[NR, SIZE], pl.FP32]],
          parts: pl.InOut[pld.DistributedTensor[[NR, SIZE], pl.FP32]]):
    return stage_kernel(x, rows, bcast, chunk, send, parts)


@pl.jit.incore
def read_kernel(got: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
                tables: pl.Out[pl.Tensor[[3, NR, SIZE], pl.FP32]],
                cells: pl.Out[pl.Tensor[[NR], pl.INT32]],
                bcast: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
                gathered: pl.InOut[pld.DistributedTensor[[NR, SIZE], pl.FP32]],
                received: pl.InOut[pld.DistributedTensor[[NR, SIZE], pl.FP32]],
                parts: pl.InOut[pld.DistributedTensor[[NR, SIZE], pl.FP32]],
                signal: pl.InOut[pld.DistributedTensor[[NR], pl.INT32]]):
    pl.store(pl.load(bcast, [0, 0], [1, SIZE]), [0, 0], got)
    pl.store(pl.load(gathered, [0, 0], [NR, SIZE]), [0, 0, 0], tables)
    pl.store(pl.load(received, [0, 0], [NR, SIZE]), [1, 0, 0], tables)
    pl.store(pl.load(parts, [0, 0], [NR, SIZE]), [2, 0, 0], tables)
    for i in pl.range(NR):
        pl.write(cells, [i], pl.read(signal, [i]))
    return got


@pl.jit
def read(got: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
         tables: pl.Out[pl.Tensor[[3, NR, SIZE], pl.FP32]],
         cells: pl.Out[pl.Tensor[[NR], pl.INT32]],
         bcast: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
         gathered: pl.InOut[pld.DistributedTensor[[NR, SIZE], pl.FP32]],
         received: pl.InOut[pld.DistributedTensor[[NR, SIZE], pl.FP32]],
         parts: pl.InOut[pld.DistributedTensor[[NR, SIZE], pl.FP32]],
         signal: pl.InOut[pld.DistributedTensor[[NR], pl.INT32]]):
    return read_kernel(got, tables, cells, bcast, gathered, received, parts, signal)


def build(root: int):
    """root must be a compile-time int; the factory makes it one."""

    @pl.jit.host
    def main(xs: pl.Tensor[[NR, 1, SIZE], pl.FP32], rows: pl.Tensor[[NR, NR, SIZE], pl.FP32],
             got: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]],
             tables: pl.Out[pl.Tensor[[NR, 3, NR, SIZE], pl.FP32]],
             cells: pl.Out[pl.Tensor[[NR, NR], pl.INT32]]):
        bcast_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
        chunk_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
        gathered_buf = pld.alloc_window_buffer([NR, SIZE], dtype=pl.FP32)
        send_buf = pld.alloc_window_buffer([NR, SIZE], dtype=pl.FP32)
        received_buf = pld.alloc_window_buffer([NR, SIZE], dtype=pl.FP32)
        parts_buf = pld.alloc_window_buffer([NR, SIZE], dtype=pl.FP32)
        sig_buf = pld.alloc_window_buffer([NR], dtype=pl.INT32)
        bcast = pld.window(bcast_buf, [1, SIZE], dtype=pl.FP32)
        chunk = pld.window(chunk_buf, [1, SIZE], dtype=pl.FP32)
        gathered = pld.window(gathered_buf, [NR, SIZE], dtype=pl.FP32)
        send = pld.window(send_buf, [NR, SIZE], dtype=pl.FP32)
        received = pld.window(received_buf, [NR, SIZE], dtype=pl.FP32)
        parts = pld.window(parts_buf, [NR, SIZE], dtype=pl.FP32)
        signal = pld.window(sig_buf, [NR], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            stage(xs[r], rows[r], bcast, chunk, send, parts, device=r)
        # four collectives, one builtin dispatch per rank each, one signal for all
        bcast = pld.tensor.broadcast(bcast, signal, root=root)
        gathered = pld.tensor.allgather(chunk, gathered, signal)
        received = pld.tensor.all_to_all(send, received, signal)
        parts = pld.tensor.reduce_scatter(parts, signal)
        for r in pl.range(pld.world_size()):
            read(got[r], tables[r], cells[r], bcast, gathered, received, parts, signal,
                 device=r)
        return got

    return main


def run(nr: int, root: int):
    rng = np.random.default_rng(nr)
    xs = rng.integers(-8, 8, (nr, 1, SIZE)).astype(np.float32)
    rows = rng.integers(-8, 8, (nr, nr, SIZE)).astype(np.float32)   # rows[rank, j]
    got = np.full_like(xs, np.nan)
    tables = np.full((nr, 3, nr, SIZE), np.nan, np.float32)
    cells = np.full((nr, nr), -1, np.int32)
    build(root)(xs, rows, got, tables, cells,
                config=RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr)))))
    np.testing.assert_array_equal(got, np.broadcast_to(xs[root], xs.shape), err_msg="broadcast")
    for r in range(nr):
        np.testing.assert_array_equal(tables[r, 0], xs[:, 0], err_msg="allgather")
        np.testing.assert_array_equal(tables[r, 1], rows[:, r], err_msg="all_to_all")
        want = rows[r].copy()
        want[r] = rows[:, r].sum(axis=0)
        np.testing.assert_array_equal(tables[r, 2], want, err_msg="reduce_scatter")
    np.testing.assert_array_equal(cells, 0, err_msg="signal")
    return got


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--root", type=int, default=None, help="broadcast root; default: the last rank")
    args = ap.parse_args()
    root = args.ranks - 1 if args.root is None else args.root
    run(args.ranks, root)
    print(f"HOST broadcast (root {root}), allgather, all_to_all, reduce_scatter over "
          f"{args.ranks} ranks on one [{args.ranks}] signal, left all zeros")
    print("OK")
