"""A prepared worker with resident weights: upload once, submit many steps.

Each rank keeps its shard of a weight matrix resident in the worker
(``rt.alloc_stacked_tensor``: shard r lives on rank r); every step computes
``x[r] * w[r]`` elementwise on rank r and sums the products over ranks with an
allreduce on persistent windows (allocated on the first step, reused after).
Steps are submitted two at a time (``rt.submit`` returns at once; a third
submission would wait for the oldest), and each result is checked against
numpy.  Run: python examples/worker_resident_weights.py --ranks 2
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

SIZE = 64


def build(nr: int):
    @pl.jit.incore
    def weighted_sum(x: pl.Tensor[[1, SIZE], pl.FP32], w: pl.Tensor[[1, SIZE], pl.FP32],
                     y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
                     data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
                     signal: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]]
                     ) -> pl.Tensor[[1, SIZE], pl.FP32]:
        prod = pl.mul(pl.load(x, [0, 0], [1, SIZE]), pl.load(w, [0, 0], [1, SIZE]))
        data = pl.store(prod, [0, 0], data)
        data = pld.tensor.allreduce(data, signal, op=pld.ReduceOp.Sum)
        y = pl.store(pl.load(data, [0, 0], [1, SIZE]), [0, 0], y)
        return y

    @pl.jit
    def chip(x: pl.Tensor[[1, SIZE], pl.FP32], w: pl.Tensor[[1, SIZE], pl.FP32],
             y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
             data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
             signal: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]]):
        return weighted_sum(x, w, y, data, signal)

    @pl.jit.host
    def step(xs: pl.Tensor[[nr, 1, SIZE], pl.FP32], ws: pl.Tensor[[nr, 1, SIZE], pl.FP32],
             ys: pl.Out[pl.Tensor[[nr, 1, SIZE], pl.FP32]]):
        data_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
        sig_buf = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            chip(xs[r], ws[r], ys[r], pld.window(data_buf, [1, SIZE], dtype=pl.FP32),
                 pld.window(sig_buf, [nr, 1], dtype=pl.INT32), device=r)
        return ys

    return step


def run(nr: int, steps: int = 6) -> int:
    step = build(nr)
    cfg = RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr))))
    rng = np.random.default_rng(0)
    weights = rng.integers(-4, 4, size=(nr, 1, SIZE)).astype(np.float32)
    inputs = [rng.integers(-4, 4, size=(nr, 1, SIZE)).astype(np.float32) for _ in range(steps)]
    outputs = [np.zeros((nr, 1, SIZE), np.float32) for _ in range(steps)]
    compiled = step.compile(inputs[0], weights, outputs[0], config=cfg)
    with compiled.prepare(persistent=True) as rt:
        ws = rt.alloc_stacked_tensor(weights)            # uploaded once, resident
        for k in range(0, steps, 2):                     # two steps in flight at a time
            handles = [rt.submit(compiled, inputs[i], ws, outputs[i]) for i in (k, k + 1)]
            for h in handles:
                h.result()
    for x, y in zip(inputs, outputs):
        expected = np.broadcast_to((x * weights).sum(axis=0), y.shape)
        np.testing.assert_array_equal(y, expected)
    return steps


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    args = ap.parse_args()
    n = run(args.ranks)
    print(f"{n} steps on {args.ranks} ranks with resident weights: every result matches numpy")
    print("OK")
