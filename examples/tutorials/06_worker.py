"""Tutorial 6: the worker API -- prepare once, call many times, submit.

A one-shot call starts its ranks and stops them again.  compiled.prepare()
keeps them running across calls, and with persistent=True the window buffers
are kept too.  Here each rank keeps a running total in a persistent window
(reset_persistent_windows=False: contents carry over from call to call) and
scales it by a weight that stays resident on its rank (alloc_stacked_tensor):
  * three blocking calls: totals x, 2x, 3x;
  * two submitted calls: submit returns at once, result() waits.
Run: python examples/tutorials/06_worker.py --ranks 2
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

SIZE = 8
NR = pl.dynamic("NR")
Row = pl.Tensor[[1, SIZE], pl.FP32]


@pl.jit.incore
def accumulate(x: Row, w: Row, y: pl.Out[Row],
               total: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]]):
    t = pl.add(pl.load(total, [0, 0], [1, SIZE]), pl.load(x, [0, 0], [1, SIZE]))
    total = pl.store(t, [0, 0], total)                 # kept for the next call
    y = pl.store(pl.mul(t, pl.load(w, [0, 0], [1, SIZE])), [0, 0], y)
    return y


@pl.jit
def chip(x: Row, w: Row, y: pl.Out[Row],
         total: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]]):
    return accumulate(x, w, y, total)


@pl.jit.host
def main(xs: pl.Tensor[[NR, 1, SIZE], pl.FP32], ws: pl.Tensor[[NR, 1, SIZE], pl.FP32],
         ys: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]]):
    total = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
    for r in pl.range(pld.world_size()):
        chip(xs[r], ws[r], ys[r], pld.window(total, [1, SIZE], dtype=pl.FP32), device=r)
    return ys


def run(nr: int) -> np.ndarray:
    rng = np.random.default_rng(6)
    xs = rng.integers(1, 9, (nr, 1, SIZE)).astype(np.float32)
    weights = rng.integers(1, 4, (nr, 1, SIZE)).astype(np.float32)
    ys = np.zeros_like(xs)
    config = RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr))))
    compiled = main.compile(xs, weights, ys, config=config)     # compile once
    with compiled.prepare(persistent=True, reset_persistent_windows=False) as rt:
        w = rt.alloc_stacked_tensor(weights)                     # shard r stays on rank r
        for k in (1, 2, 3):
            rt(xs, w, ys)                                        # a blocking call
            np.testing.assert_array_equal(ys, k * xs * weights)
        y4, y5 = np.zeros_like(xs), np.zeros_like(xs)            # one output per call in flight
        h4 = rt.submit(compiled, xs, w, y4)                      # returns at once
        h5 = rt.submit(compiled, xs, w, y5)                      # runs after h4 on each rank
        h4.result()
        h5.result(timeout=30)                                    # re-raises the call's error
    np.testing.assert_array_equal(y4, 4 * xs * weights)
    np.testing.assert_array_equal(y5, 5 * xs * weights)
    return y5


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    args = ap.parse_args()
    y5 = run(args.ranks)
    print(f"5 calls on one worker of {args.ranks} ranks; rank 0 after the fifth: "
          f"{y5[0, 0, :4].tolist()} ...")
    print("OK")
