"""pld.tensor.allreduce inside a kernel, ring mode.

On a chip, mode="ring" passes segments around the ring of ranks, each rank
talking to its neighbours only: NR-1 steps of reduce-scatter, then NR-1 of
all-gather, each step with a row of the signal to itself.  Hence the ring
signal [2*(NR-1), NR] -- a different shape from the mesh signal [NR, 1],
and the two must not share a window (a mesh collective on a ring-shaped
signal, or a ring on a mesh-shaped one, is refused).  tilecomm takes the
same program, signal included, and computes the same reduction with its own
schedule on the CPU.

Its row count has to be a compile-time constant, which is why this program is
built by a factory: build(nr) takes the rank count from --ranks and the body
sees nr as a plain constant.  The result is the same elementwise reduction as
the mesh mode; SIZE need not be a multiple of NR (segments are uneven), and
the signal is back to all zeros afterwards like every collective's.
Run: python examples/allreduce_ring.py --ranks 4
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

SIZE = 50                  # not a multiple of 3 or 4: the ring segments differ in length


def build(nr: int):
    rows = 2 * (nr - 1)    # one signal row per ring round

    @pl.jit.incore
    def ring_kernel(x: pl.Tensor[[1, SIZE], pl.FP32], y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
                    cells: pl.Out[pl.Tensor[[rows, nr], pl.INT32]],
                    data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
                    signal: pl.InOut[pld.DistributedTensor[[rows, nr], pl.INT32]]):
        data = pl.store(pl.load(x, [0, 0], [1, SIZE]), [0, 0], data)
        data = pld.tensor.allreduce(data, signal, op=pld.ReduceOp.Sum, mode="ring")
        y = pl.store(pl.load(data, [0, 0], [1, SIZE]), [0, 0], y)
        cells = pl.store(pl.load(signal, [0, 0], [rows, nr]), [0, 0], cells)
        return y

    @pl.jit
    def chip(x: pl.Tensor[[1, SIZE], pl.FP32], y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
             cells: pl.Out[pl.Tensor[[rows, nr], pl.INT32]],
             data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
             signal: pl.InOut[pld.DistributedTensor[[rows, nr], pl.INT32]]):
        return ring_kernel(x, y, cells, data, signal)

    @pl.jit.host
    def main(xs: pl.Tensor[[nr, 1, SIZE], pl.FP32], ys: pl.Out[pl.Tensor[[nr, 1, SIZE], pl.FP32]],
             cells: pl.Out[pl.Tensor[[nr, rows, nr], pl.INT32]]):
        data_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
        sig_buf = pld.alloc_window_buffer([rows, nr], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            chip(xs[r], ys[r], cells[r], pld.window(data_buf, [1, SIZE], dtype=pl.FP32),
                 pld.window(sig_buf, [rows, nr], dtype=pl.INT32), device=r)
        return ys

    return main


def run(nr: int):
    main = build(nr)
    rng = np.random.default_rng(nr)
    xs = rng.integers(-8, 8, (nr, 1, SIZE)).astype(np.float32)   # integer sums are exact
    ys = np.zeros_like(xs)
    cells = np.full((nr, 2 * (nr - 1), nr), -1, np.int32)
    main(xs, ys, cells,
         config=RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr)))))
    np.testing.assert_array_equal(ys, np.broadcast_to(xs.sum(axis=0), xs.shape))
    np.testing.assert_array_equal(cells, 0)
    return ys


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=4)
    args = ap.parse_args()
    ys = run(args.ranks)
    print(f"ring allreduce over {args.ranks} ranks (signal [{2 * (args.ranks - 1)}, "
          f"{args.ranks}]): {ys[0, 0, :4].tolist()} ...")
    print("OK")
