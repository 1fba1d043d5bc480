"""Tutorial 4: collectives, inside a kernel (InCore) and between dispatches (HOST).

The same sum over ranks, computed two ways:
  * InCore: the kernel stages x in its window and calls
    pld.tensor.allreduce(data, signal) as a step of its own computation;
  * HOST: a first dispatch stages x, the HOST orchestrator calls
    pld.tensor.allreduce between dispatches (one builtin dispatch per rank),
    and a second dispatch reads the reduced window.
Run: python examples/tutorials/04_collectives.py --ranks 4
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

SIZE = 16
NR = pl.dynamic("NR")
Row = pl.Tensor[[1, SIZE], pl.FP32]
DataWin = pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]]


# ---------------------------------------------------------------- InCore composite
@pl.jit.incore
def sum_in_kernel(x: Row, y: pl.Out[Row], data: DataWin,
                  sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    data = pl.store(pl.load(x, [0, 0], [1, SIZE]), [0, 0], data)
    data = pld.tensor.allreduce(data, sig, op=pld.ReduceOp.Sum)   # every rank must call it
    y = pl.store(pl.load(data, [0, 0], [1, SIZE]), [0, 0], y)
    return y


@pl.jit
def chip_incore(x: Row, y: pl.Out[Row], data: DataWin,
                sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    return sum_in_kernel(x, y, data, sig)


@pl.jit.host
def main_incore(xs: pl.Tensor[[NR, 1, SIZE], pl.FP32],
                ys: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]]):
    data = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
    sig = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)       # mesh signal: [NR, 1]
    for r in pl.range(pld.world_size()):
        chip_incore(xs[r], ys[r], pld.window(data, [1, SIZE], dtype=pl.FP32),
                    pld.window(sig, [NR, 1], dtype=pl.INT32), device=r)
    return ys


# ---------------------------------------------------------------- HOST builtin
@pl.jit.incore
def stage_kernel(x: Row, data: DataWin):
    data = pl.store(pl.load(x, [0, 0], [1, SIZE]), [0, 0], data)
    return data


@pl.jit
def stage(x: Row, data: DataWin):
    return stage_kernel(x, data)


@pl.jit.incore
def read_kernel(y: pl.Out[Row], data: DataWin):
    y = pl.store(pl.load(data, [0, 0], [1, SIZE]), [0, 0], y)
    return y


@pl.jit
def read(y: pl.Out[Row], data: DataWin):
    return read_kernel(y, data)


@pl.jit.host
def main_host(xs: pl.Tensor[[NR, 1, SIZE], pl.FP32],
              ys: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]]):
    data = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
    sig = pld.alloc_window_buffer([NR], dtype=pl.INT32)          # HOST signal: [world size]
    for r in pl.range(pld.world_size()):
        stage(xs[r], pld.window(data, [1, SIZE], dtype=pl.FP32), device=r)
    pld.tensor.allreduce(pld.window(data, [1, SIZE], dtype=pl.FP32),
                         pld.window(sig, [NR], dtype=pl.INT32))
    for r in pl.range(pld.world_size()):
        read(ys[r], pld.window(data, [1, SIZE], dtype=pl.FP32), device=r)
    return ys


def run(nr: int) -> np.ndarray:
    rng = np.random.default_rng(4)
    xs = rng.integers(-8, 8, (nr, 1, SIZE)).astype(np.float32)   # integer sums are exact
    config = RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr))))
    want = np.broadcast_to(xs.sum(axis=0), xs.shape)
    for main in (main_incore, main_host):
        ys = np.full_like(xs, np.nan)
        main(xs, ys, config=config)
        np.testing.assert_array_equal(ys, want, err_msg=main.__name__)
    return ys


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=4)
    args = ap.parse_args()
    ys = run(args.ranks)
    print(f"allreduce over {args.ranks} ranks, InCore and HOST: {ys[0, 0, :4].tolist()} ...")
    print("OK")
