"""HOST allreduce split over core_num=4 lanes, each with its own signal column.

pld.tensor.allreduce(data, signal, core_num=4) in a HOST orchestrator runs
each rank's share of the builtin as 4 lanes (on a chip, 4 vector cores):
the data is cut into 256-element tiles and each lane reduces its own share
of them.  Each lane synchronises on its own column of the signal, so the
signal is rank-2 [world_size, stride] with stride >= core_num -- here
[NR, 4]: cell [src, b] counts rank src's arrivals for lane b.  A rank-1 [NR]
signal only serves core_num=1, and inside a kernel core_num must stay 1.

The result is the ordinary elementwise reduction; the lanes only change who
does which tile.  SIZE is 9 tiles plus a partial one, so every lane has
work but not all the same amount.  Every lane clears its own column, so the
whole [NR, 4] signal reads back as zeros afterwards.
Run: python examples/allreduce_host_lanes.py --ranks 4
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

LANES = 4
SIZE = 9 * 256 + 100       # 10 tiles, the last one partial: lanes get 2 or 3
NR = pl.dynamic("NR")


@pl.jit.incore
def publish_kernel(x: pl.Tensor[[1, SIZE], pl.FP32],
                   data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]]):
    data = pl.store(pl.load(x, [0, 0], [1, SIZE]), [0, 0], data)
    return data


@pl.jit
def publish(x: pl.Tensor[[1, SIZE], pl.FP32],
            data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]]):
    return publish_kernel(x, data)


@pl.jit.incore
def consume_kernel(y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
                   cells: pl.Out[pl.Tensor[[NR, LANES], pl.INT32]],
                   data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
                   signal: pl.InOut[pld.DistributedTensor[[NR, LANES], pl.INT32]]):
    y = pl.store(pl.load(data, [0, 0], [1, SIZE]), [0, 0], y)
    cells = pl.store(pl.load(signal, [0, 0], [NR, LANES]), [0, 0], cells)
    return y


@pl.jit
def consume(y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
            cells: pl.Out[pl.Tensor[[NR, LANES], pl.INT32]],
            data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[NR, LANES], pl.INT32]]):
    return consume_kernel(y, cells, data, signal)


@pl.jit.host
def main(xs: pl.Tensor[[NR, 1, SIZE], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]],
         cells: pl.Out[pl.Tensor[[NR, NR, LANES], pl.INT32]]):
    data_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([NR, LANES], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        publish(xs[r], pld.window(data_buf, [1, SIZE], dtype=pl.FP32), device=r)
    data = pld.tensor.allreduce(pld.window(data_buf, [1, SIZE], dtype=pl.FP32),
                                pld.window(sig_buf, [NR, LANES], dtype=pl.INT32),
                                core_num=LANES)
    for r in pl.range(pld.world_size()):
        consume(ys[r], cells[r], data, pld.window(sig_buf, [NR, LANES], dtype=pl.INT32),
                device=r)
    return ys


def run(nr: int):
    rng = np.random.default_rng(nr)
    xs = rng.integers(-8, 8, (nr, 1, SIZE)).astype(np.float32)   # exact integer sums
    ys = np.full_like(xs, np.nan)
    cells = np.full((nr, nr, LANES), -1, np.int32)
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
    print(f"HOST allreduce, core_num={LANES}, over {args.ranks} ranks: "
          f"{ys[0, 0, :4].tolist()} ...; [{args.ranks}, {LANES}] signal all zeros")
    print("OK")
