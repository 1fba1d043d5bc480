"""Window buffers: allocate, write, read back, and view one buffer two ways.

A window buffer is raw per-rank memory that peers can reach; pld.window gives it
a shape and dtype.  This example (no communication) shows:
  * both allocation forms: a size in BYTES, and a shape with dtype=,
  * a kernel storing its input into its window and loading it back (pl.load /
    pl.store on a window act on this rank's own copy),
  * two views of the same buffer sharing storage: rows written through a
    [ROWS, COLS] FP32 view are read back through a flat [1, ROWS*COLS] view and
    through an INT32 view of the same bytes,
  * windows start zero-filled.
Run: python examples/window_roundtrip.py --ranks 2
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

ROWS, COLS = 4, 8
NR = pl.dynamic("NR")
Row = pl.Tensor[[ROWS, COLS], pl.FP32]


@pl.jit.incore
def roundtrip_kernel(x: Row, y: pl.Out[Row],
                     y_flat: pl.Out[pl.Tensor[[1, ROWS * COLS], pl.FP32]],
                     y_bits: pl.Out[pl.Tensor[[ROWS, COLS], pl.INT32]],
                     fresh: pl.Out[Row],
                     grid: pl.InOut[pld.DistributedTensor[[ROWS, COLS], pl.FP32]],
                     flat: pl.InOut[pld.DistributedTensor[[1, ROWS * COLS], pl.FP32]],
                     bits: pl.InOut[pld.DistributedTensor[[ROWS, COLS], pl.INT32]],
                     scratch: pl.InOut[pld.DistributedTensor[[ROWS, COLS], pl.FP32]]):
    # read the second buffer before anything touches it: it must be all zeros
    fresh = pl.store(pl.load(scratch, [0, 0], [ROWS, COLS]), [0, 0], fresh)
    # stage x into this rank's window, then read it back from the window
    pl.store(pl.load(x, [0, 0], [ROWS, COLS]), [0, 0], grid)
    y = pl.store(pl.load(grid, [0, 0], [ROWS, COLS]), [0, 0], y)
    # the same bytes seen through the other two views of the buffer
    y_flat = pl.store(pl.load(flat, [0, 0], [1, ROWS * COLS]), [0, 0], y_flat)
    y_bits = pl.store(pl.load(bits, [0, 0], [ROWS, COLS]), [0, 0], y_bits)
    return y


@pl.jit
def chip(x: Row, y: pl.Out[Row], y_flat: pl.Out[pl.Tensor[[1, ROWS * COLS], pl.FP32]],
         y_bits: pl.Out[pl.Tensor[[ROWS, COLS], pl.INT32]], fresh: pl.Out[Row],
         grid: pl.InOut[pld.DistributedTensor[[ROWS, COLS], pl.FP32]],
         flat: pl.InOut[pld.DistributedTensor[[1, ROWS * COLS], pl.FP32]],
         bits: pl.InOut[pld.DistributedTensor[[ROWS, COLS], pl.INT32]],
         scratch: pl.InOut[pld.DistributedTensor[[ROWS, COLS], pl.FP32]]):
    return roundtrip_kernel(x, y, y_flat, y_bits, fresh, grid, flat, bits, scratch)


@pl.jit.host
def main(xs: pl.Tensor[[NR, ROWS, COLS], pl.FP32], ys: pl.Out[pl.Tensor[[NR, ROWS, COLS], pl.FP32]],
         ys_flat: pl.Out[pl.Tensor[[NR, 1, ROWS * COLS], pl.FP32]],
         ys_bits: pl.Out[pl.Tensor[[NR, ROWS, COLS], pl.INT32]],
         freshs: pl.Out[pl.Tensor[[NR, ROWS, COLS], pl.FP32]]):
    # bytes form: the size is in BYTES, so multiply by the element size
    raw = pld.alloc_window_buffer(ROWS * COLS * pl.FP32.get_byte())
    # shape form: the byte size is computed from shape and dtype
    scratch = pld.alloc_window_buffer([ROWS, COLS], dtype=pl.FP32)
    for r in pl.range(pld.world_size()):
        chip(xs[r], ys[r], ys_flat[r], ys_bits[r], freshs[r],
             pld.window(raw, [ROWS, COLS], dtype=pl.FP32),
             pld.window(raw, [1, ROWS * COLS], dtype=pl.FP32),
             pld.window(raw, [ROWS, COLS], dtype=pl.INT32),
             pld.window(scratch, [ROWS, COLS], dtype=pl.FP32), device=r)
    return ys


def run(nr: int):
    rng = np.random.default_rng(2)
    xs = rng.standard_normal((nr, ROWS, COLS)).astype(np.float32)
    ys, freshs = np.zeros_like(xs), np.full_like(xs, np.nan)
    ys_flat = np.zeros((nr, 1, ROWS * COLS), np.float32)
    ys_bits = np.zeros((nr, ROWS, COLS), np.int32)
    main(xs, ys, ys_flat, ys_bits, freshs,
         config=RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr)))))
    np.testing.assert_array_equal(ys, xs)
    np.testing.assert_array_equal(ys_flat, xs.reshape(nr, 1, ROWS * COLS))
    np.testing.assert_array_equal(ys_bits, xs.view(np.int32))   # same bytes, other dtype
    np.testing.assert_array_equal(freshs, np.zeros_like(xs))
    return ys_bits


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    args = ap.parse_args()
    bits = run(args.ranks)
    print(f"window round trip on {args.ranks} ranks; rank 0 first word as INT32 bits: "
          f"{hex(int(bits[0, 0, 0]) & 0xFFFFFFFF)}")
    print("OK")
