"""pld.tensor.broadcast inside a kernel: every rank ends with the root's row.

Before the call the root stages its data in its own `data` window; the other
ranks' windows are overwritten by the call, so what they hold beforehand does
not matter (here they stage their own rows, to show they are replaced).
`root` is a rank index within the window's comm domain and must be a
compile-time int: this program is built by build(root), so the root comes
from the command line yet is a constant in the kernel (the factory pattern).
The shapes use NR = pl.dynamic("NR"), so one build runs at any rank count.

On the chip the call has no barrier after the non-roots read the root's
row (a rank returns once it has its own copy), so a root that overwrites its
row straight after the call may race with a slow reader -- the race check
reports it.  The kernel therefore passes a pld.tensor.barrier on the same
signal before every rank reuses its window.  The [NR, 1] signal is back to
all zeros afterwards.
Run: python examples/broadcast.py --ranks 4 [--root R]
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

SIZE = 24
NR = pl.dynamic("NR")


def build(root: int):
    @pl.jit.incore
    def broadcast_kernel(x: pl.Tensor[[1, SIZE], pl.FP32],
                         y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
                         cells: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
                         data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
                         signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
        row = pl.load(x, [0, 0], [1, SIZE])
        data = pl.store(row, [0, 0], data)
        data = pld.tensor.broadcast(data, signal, root=root)
        y = pl.store(pl.load(data, [0, 0], [1, SIZE]), [0, 0], y)
        # the chip's broadcast has no barrier after the non-roots read the
        # root's row: wait for every rank before the root's window is reused
        pld.tensor.barrier(signal)
        data = pl.store(pl.mul(row, -1.0), [0, 0], data)
        cells = pl.store(pl.load(signal, [0, 0], [NR, 1]), [0, 0], cells)
        return y

    @pl.jit
    def chip(x: pl.Tensor[[1, SIZE], pl.FP32], y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
             cells: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
             data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
             signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
        return broadcast_kernel(x, y, cells, data, signal)

    @pl.jit.host
    def main(xs: pl.Tensor[[NR, 1, SIZE], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]],
             cells: pl.Out[pl.Tensor[[NR, NR, 1], pl.INT32]]):
        data_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
        sig_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            chip(xs[r], ys[r], cells[r], pld.window(data_buf, [1, SIZE], dtype=pl.FP32),
                 pld.window(sig_buf, [NR, 1], dtype=pl.INT32), device=r)
        return ys

    return main


def run(nr: int, root: int):
    main = build(root)
    xs = (np.arange(nr)[:, None, None] * 100 + np.arange(SIZE)).astype(np.float32)
    ys = np.full_like(xs, np.nan)
    cells = np.full((nr, nr, 1), -1, np.int32)
    main(xs, ys, cells,
         config=RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr)))))
    np.testing.assert_array_equal(ys, np.broadcast_to(xs[root], xs.shape))
    np.testing.assert_array_equal(cells, 0)
    return ys


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--root", type=int, default=None, help="default: the last rank")
    args = ap.parse_args()
    root = args.ranks - 1 if args.root is None else args.root
    ys = run(args.ranks, root)
    print(f"broadcast from rank {root} over {args.ranks} ranks: every rank holds "
          f"{ys[0, 0, :4].tolist()} ...")
    print("OK")
