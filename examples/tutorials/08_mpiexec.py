"""Tutorial 8: the same script on shared memory and under mpiexec.

Every rank contributes a row; a HOST allreduce between two dispatches gives
every rank the sum.  Run it as a plain Python program and the ranks are
processes forked on this machine over shared memory; start it with mpiexec
and each MPI process is one rank, on MPI-3 one-sided communication:

    python examples/tutorials/08_mpiexec.py --ranks 4
    mpiexec -n 4 python examples/tutorials/08_mpiexec.py --ranks 4

Nothing in the program changes.  Under mpiexec every process runs the whole
script: process 0 runs the HOST orchestrator, the others serve their rank's
dispatches, and when the call ends every process holds the results, so the
check below passes on each of them.
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig, runs_host_code

NR = pl.dynamic("NR")
S = 16
Row = pl.Tensor[[1, S], pl.FP32]
Data = pld.DistributedTensor[[1, S], pl.FP32]


@pl.jit.incore
def stage_kernel(x: Row, data: pl.InOut[Data]):
    pl.store(pl.load(x, [0, 0], [1, S]), [0, 0], data)


@pl.jit
def stage(x: Row, data: pl.InOut[Data]):
    stage_kernel(x, data)


@pl.jit.incore
def collect_kernel(y: pl.Out[Row], data: pl.InOut[Data]) -> Row:
    y = pl.store(pl.load(data, [0, 0], [1, S]), [0, 0], y)
    return y


@pl.jit
def collect(y: pl.Out[Row], data: pl.InOut[Data]) -> Row:
    return collect_kernel(y, data)


@pl.jit.host
def main(xs: pl.Tensor[[NR, 1, S], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, S], pl.FP32]]):
    data_buf = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
    for r in pl.range(pld.world_size()):
        stage(xs[r], pld.window(data_buf, [1, S], dtype=pl.FP32), device=r)
    # a HOST collective: a signal window of its own is made for it
    pld.tensor.allreduce(pld.window(data_buf, [1, S], dtype=pl.FP32))
    for r in pl.range(pld.world_size()):
        collect(ys[r], pld.window(data_buf, [1, S], dtype=pl.FP32), device=r)
    return ys


def run(nr: int) -> np.ndarray:
    xs = np.arange(nr * S, dtype=np.float32).reshape(nr, 1, S)   # process 0's are read
    ys = np.zeros_like(xs)
    config = RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr))))
    main(xs, ys, config=config)
    np.testing.assert_array_equal(ys, np.broadcast_to(xs.sum(axis=0), xs.shape))
    return ys


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    args = ap.parse_args()
    ys = run(args.ranks)
    where = "the process that runs the HOST code" if runs_host_code() else "a serving process"
    print(f"{args.ranks} ranks, {where}: every rank holds {ys[0, 0, :4].tolist()}...")
    print("OK")
