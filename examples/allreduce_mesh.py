"""pld.tensor.allreduce inside a kernel, mesh mode: one call replaces the
hand-rolled protocol of allreduce_quickstart.py.

Every rank stages its contribution in its own window and calls
pld.tensor.allreduce(data, signal); afterwards every rank's window holds the
elementwise reduction over all ranks.  The program reduces twice on one
signal: an FP32 Sum, then an FP16 Max.

What to notice:
  * the call sits in an InCore kernel, so it is an InCore composite: it runs
    inside this kernel, on this rank, and every rank of the window's comm
    domain must make the same call (rank-uniform control flow).  A call made by
    some ranks only never completes; tilecomm reports it (see README).
  * signal is an INT32 window [NR, 1]: rank r's arrivals land in row r of
    every peer's copy.  NR = pl.dynamic("NR") keeps one source for any rank
    count.
  * the collective's signal protocol is self-clearing: each call takes its own
    credits back before returning, so the second reduction reuses the same
    signal with no reset, and the kernel reads the signal back as all zeros
    (compare barrier.py, whose hand-rolled counters stay at 1).
  * the window is the result: the call updates `data` in place and returns
    it; rebinding `data = pld.tensor.allreduce(...)` keeps that visible.
Run: python examples/allreduce_mesh.py --ranks 4
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

SIZE = 100                 # any element count works; 100 is not a tile multiple
NR = pl.dynamic("NR")


@pl.jit.incore
def reduce_kernel(x: pl.Tensor[[1, SIZE], pl.FP32], h: pl.Tensor[[1, SIZE], pl.FP16],
                  y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
                  hy: pl.Out[pl.Tensor[[1, SIZE], pl.FP16]],
                  cells: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
                  data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
                  hdata: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP16]],
                  signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    # peers read contributions from windows, so stage them there first
    data = pl.store(pl.load(x, [0, 0], [1, SIZE]), [0, 0], data)
    data = pld.tensor.allreduce(data, signal, op=pld.ReduceOp.Sum)
    y = pl.store(pl.load(data, [0, 0], [1, SIZE]), [0, 0], y)
    # same signal again: the first call left it all zero
    hdata = pl.store(pl.load(h, [0, 0], [1, SIZE]), [0, 0], hdata)
    hdata = pld.tensor.allreduce(hdata, signal, op=pld.ReduceOp.Max)
    hy = pl.store(pl.load(hdata, [0, 0], [1, SIZE]), [0, 0], hy)
    # what the two calls left in this rank's signal
    cells = pl.store(pl.load(signal, [0, 0], [NR, 1]), [0, 0], cells)
    return y


@pl.jit
def chip(x: pl.Tensor[[1, SIZE], pl.FP32], h: pl.Tensor[[1, SIZE], pl.FP16],
         y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]], hy: pl.Out[pl.Tensor[[1, SIZE], pl.FP16]],
         cells: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
         data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
         hdata: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP16]],
         signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    return reduce_kernel(x, h, y, hy, cells, data, hdata, signal)


@pl.jit.host
def main(xs: pl.Tensor[[NR, 1, SIZE], pl.FP32], hs: pl.Tensor[[NR, 1, SIZE], pl.FP16],
         ys: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]],
         hys: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP16]],
         cells: pl.Out[pl.Tensor[[NR, NR, 1], pl.INT32]]):
    data_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
    hdata_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP16)
    sig_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        chip(xs[r], hs[r], ys[r], hys[r], cells[r],
             pld.window(data_buf, [1, SIZE], dtype=pl.FP32),
             pld.window(hdata_buf, [1, SIZE], dtype=pl.FP16),
             pld.window(sig_buf, [NR, 1], dtype=pl.INT32), device=r)
    return ys


def run(nr: int):
    rng = np.random.default_rng(nr)
    # small integers: an FP32 sum of them is exact, whatever the reduction order
    xs = rng.integers(-8, 8, (nr, 1, SIZE)).astype(np.float32)
    hs = rng.standard_normal((nr, 1, SIZE)).astype(np.float16)
    ys = np.zeros_like(xs)
    hys = np.zeros_like(hs)
    cells = np.full((nr, nr, 1), -1, np.int32)
    main(xs, hs, ys, hys, cells,
         config=RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr)))))
    np.testing.assert_array_equal(ys, np.broadcast_to(xs.sum(axis=0), xs.shape))
    # Max only picks one of the inputs: exact in FP16 too
    np.testing.assert_array_equal(hys, np.broadcast_to(hs.max(axis=0), hs.shape))
    np.testing.assert_array_equal(cells, 0)
    return ys, hys


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=4)
    args = ap.parse_args()
    ys, hys = run(args.ranks)
    print(f"mesh allreduce over {args.ranks} ranks: Sum {ys[0, 0, :4].tolist()} ..., "
          f"FP16 Max {hys[0, 0, :4].tolist()} ...; signal back to all zeros")
    print("OK")
