"""HOST allreduce with the signal left out: the orchestrator supplies one.

In a HOST orchestrator, pld.tensor.allreduce(data) with no signal is legal:
right before the call the compiler allocates a fresh, zeroed signal window
of [world_size, core_num] INT32 for it, in the data window's comm domain.
That is convenient for a one-off reduction, and it is also why the form has
two limits:
  * not inside a host for/while loop (it would allocate a window per
    iteration) -- allocate one signal before the loop and pass it, as
    allreduce_host_loop.py does;
  * the call must be a statement of its own (an assignment, an expression
    statement or a return), not part of a larger expression;
and it is mesh mode only (a ring needs its own signal shape).
Inside a kernel the signal is always explicit.

This program publishes a row per rank, reduces it twice with two separate
synthesized signals -- Sum into `total`, Min into `low` -- and reads both
results back in a later dispatch, which sees what the builtins wrote.
Run: python examples/allreduce_host_synthesized.py --ranks 4
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

SIZE = 300                 # more than one 256-element tile of the builtin
NR = pl.dynamic("NR")


@pl.jit.incore
def publish_kernel(x: pl.Tensor[[1, SIZE], pl.FP32],
                   total: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
                   low: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]]):
    row = pl.load(x, [0, 0], [1, SIZE])
    pl.store(row, [0, 0], total)
    pl.store(row, [0, 0], low)
    return total


@pl.jit
def publish(x: pl.Tensor[[1, SIZE], pl.FP32],
            total: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
            low: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]]):
    return publish_kernel(x, total, low)


@pl.jit.incore
def consume_kernel(y: pl.Out[pl.Tensor[[2, SIZE], pl.FP32]],
                   total: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
                   low: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]]):
    pl.store(pl.load(total, [0, 0], [1, SIZE]), [0, 0], y)
    pl.store(pl.load(low, [0, 0], [1, SIZE]), [1, 0], y)
    return y


@pl.jit
def consume(y: pl.Out[pl.Tensor[[2, SIZE], pl.FP32]],
            total: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
            low: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]]):
    return consume_kernel(y, total, low)


@pl.jit.host
def main(xs: pl.Tensor[[NR, 1, SIZE], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 2, SIZE], pl.FP32]]):
    total_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
    low_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
    for r in pl.range(pld.world_size()):
        publish(xs[r], pld.window(total_buf, [1, SIZE], dtype=pl.FP32),
                pld.window(low_buf, [1, SIZE], dtype=pl.FP32), device=r)
    # no signal argument: each call gets a fresh [world_size, 1] signal of its own
    total = pld.tensor.allreduce(pld.window(total_buf, [1, SIZE], dtype=pl.FP32))
    low = pld.tensor.allreduce(pld.window(low_buf, [1, SIZE], dtype=pl.FP32),
                               op=pld.ReduceOp.Min)
    for r in pl.range(pld.world_size()):
        consume(ys[r], total, low, device=r)
    return ys


def run(nr: int):
    rng = np.random.default_rng(nr)
    xs = rng.integers(-50, 50, (nr, 1, SIZE)).astype(np.float32)
    ys = np.full((nr, 2, SIZE), np.nan, np.float32)
    main(xs, ys,
         config=RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr)))))
    want = np.stack([xs[:, 0].sum(axis=0), xs[:, 0].min(axis=0)])
    np.testing.assert_array_equal(ys, np.broadcast_to(want, ys.shape))
    return ys


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=4)
    args = ap.parse_args()
    ys = run(args.ranks)
    print(f"HOST allreduce with synthesized signals over {args.ranks} ranks: Sum "
          f"{ys[0, 0, :3].tolist()} ..., Min {ys[0, 1, :3].tolist()} ...")
    print("OK")
