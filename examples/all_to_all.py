"""pld.tensor.all_to_all inside a kernel: a transpose across ranks.

input is this rank's [NR, SIZE] plain tensor; row dest is the chunk meant for
rank dest.  target is an [NR, SIZE] window; after the call row src of rank r's
target holds what rank src sent to r:  target_r[src] == input_src[r].
Each rank writes its chunks straight into the peers' targets, then the ranks
meet once on the [NR, 1] signal, so when the call returns every chunk has
arrived.

Because the writes start as soon as a rank enters the call, a second
all_to_all into the same target must wait until every rank has consumed the
first: the kernel exchanges, reads, meets at pld.tensor.barrier, and exchanges
again with new data.  One signal serves all three calls and is all zeros at
the end.
Run: python examples/all_to_all.py --ranks 4
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

SIZE = 12
NR = pl.dynamic("NR")


@pl.jit.incore
def exchange_kernel(send: pl.Tensor[[2, NR, SIZE], pl.FP32],
                    got: pl.Out[pl.Tensor[[2, NR, SIZE], pl.FP32]],
                    cells: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
                    table: pl.InOut[pld.DistributedTensor[[NR, SIZE], pl.FP32]],
                    signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    table = pld.tensor.all_to_all(send[0], table, signal)
    pl.store(pl.load(table, [0, 0], [NR, SIZE]), [0, 0, 0], got)
    # everyone has read round 0 before anyone writes round 1 into it
    signal = pld.tensor.barrier(signal)
    table = pld.tensor.all_to_all(send[1], table, signal)
    pl.store(pl.load(table, [0, 0], [NR, SIZE]), [1, 0, 0], got)
    cells = pl.store(pl.load(signal, [0, 0], [NR, 1]), [0, 0], cells)
    return got


@pl.jit
def chip(send: pl.Tensor[[2, NR, SIZE], pl.FP32], got: pl.Out[pl.Tensor[[2, NR, SIZE], pl.FP32]],
         cells: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
         table: pl.InOut[pld.DistributedTensor[[NR, SIZE], pl.FP32]],
         signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    return exchange_kernel(send, got, cells, table, signal)


@pl.jit.host
def main(send: pl.Tensor[[NR, 2, NR, SIZE], pl.FP32],
         got: pl.Out[pl.Tensor[[NR, 2, NR, SIZE], pl.FP32]],
         cells: pl.Out[pl.Tensor[[NR, NR, 1], pl.INT32]]):
    table_buf = pld.alloc_window_buffer([NR, SIZE], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        chip(send[r], got[r], cells[r], pld.window(table_buf, [NR, SIZE], dtype=pl.FP32),
             pld.window(sig_buf, [NR, 1], dtype=pl.INT32), device=r)
    return got


def run(nr: int):
    # send[src, round, dest]: 1000*round + 100*src + 10*dest + column, readable at a glance
    send = (np.arange(2)[None, :, None, None] * 1000 + np.arange(nr)[:, None, None, None] * 100
            + np.arange(nr)[None, None, :, None] * 10 + np.arange(SIZE)).astype(np.float32)
    got = np.full_like(send, np.nan)
    cells = np.full((nr, nr, 1), -1, np.int32)
    main(send, got, cells,
         config=RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr)))))
    # got[r, round, src] == send[src, round, r]: swap the rank axes
    np.testing.assert_array_equal(got, send.transpose(2, 1, 0, 3))
    np.testing.assert_array_equal(cells, 0)
    return got


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=4)
    args = ap.parse_args()
    got = run(args.ranks)
    r = min(1, args.ranks - 1)
    print(f"all_to_all over {args.ranks} ranks: rank {r} received first columns "
          f"{got[r, 0, :, 0].tolist()} (100*src + 10*dest)")
    print("OK")
