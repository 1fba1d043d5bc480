"""pld.tensor.all_to_all_v inside a kernel: each rank sends a different
number of rows to each peer (MPI_Alltoallv), in fixed-size slots.

Layouts are flat and padded: with CAP rows reserved per peer,
  * input  [NR*CAP, SIZE] (plain tensor): rows dest*CAP .. dest*CAP+k-1 are
    the k rows for rank dest;
  * send_counts [NR] (plain tensor): k for each dest;
  * target [NR*CAP, SIZE] (window): rank src's rows land in slot src;
  * recv_counts [NR, 1] (window): recv_counts[src, 0] says how many rows of
    slot src are valid.  Counts above CAP are clamped to CAP.
Only the first recv_counts[src, 0] rows of a slot mean anything: the call
moves whole slots, so the rest hold whatever the sender had there.  Read
the counts, not the padding.

The signal is [NR, 1] with NR a compile-time constant (the slot count is
target.shape[0] // NR), so this program is built by build(nr), NR coming from
--ranks.  recv_counts is written with Set (a count, not a credit), so it must
be a window of its own, never the signal.  The signal is all zeros afterwards.
Run: python examples/all_to_all_v.py --ranks 4
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

SIZE = 6
CAP = 3                    # rows reserved per peer (MAX_RECV)


def build(nr: int):
    @pl.jit.incore
    def a2av_kernel(inp: pl.Tensor[[nr * CAP, SIZE], pl.FP32], counts: pl.Tensor[[nr], pl.INT32],
                    out: pl.Out[pl.Tensor[[nr * CAP, SIZE], pl.FP32]],
                    got: pl.Out[pl.Tensor[[nr, 1], pl.INT32]],
                    cells: pl.Out[pl.Tensor[[nr, 1], pl.INT32]],
                    target: pl.InOut[pld.DistributedTensor[[nr * CAP, SIZE], pl.FP32]],
                    signal: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
                    recv: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]]):
        target = pld.tensor.all_to_all_v(inp, target, signal, counts, recv)
        out = pl.store(pl.load(target, [0, 0], [nr * CAP, SIZE]), [0, 0], out)
        got = pl.store(pl.load(recv, [0, 0], [nr, 1]), [0, 0], got)
        cells = pl.store(pl.load(signal, [0, 0], [nr, 1]), [0, 0], cells)
        return out

    @pl.jit
    def chip(inp: pl.Tensor[[nr * CAP, SIZE], pl.FP32], counts: pl.Tensor[[nr], pl.INT32],
             out: pl.Out[pl.Tensor[[nr * CAP, SIZE], pl.FP32]],
             got: pl.Out[pl.Tensor[[nr, 1], pl.INT32]],
             cells: pl.Out[pl.Tensor[[nr, 1], pl.INT32]],
             target: pl.InOut[pld.DistributedTensor[[nr * CAP, SIZE], pl.FP32]],
             signal: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
             recv: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]]):
        return a2av_kernel(inp, counts, out, got, cells, target, signal, recv)

    @pl.jit.host
    def main(inps: pl.Tensor[[nr, nr * CAP, SIZE], pl.FP32], counts: pl.Tensor[[nr, nr], pl.INT32],
             outs: pl.Out[pl.Tensor[[nr, nr * CAP, SIZE], pl.FP32]],
             gots: pl.Out[pl.Tensor[[nr, nr, 1], pl.INT32]],
             cells: pl.Out[pl.Tensor[[nr, nr, 1], pl.INT32]]):
        target_buf = pld.alloc_window_buffer([nr * CAP, SIZE], dtype=pl.FP32)
        sig_buf = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
        recv_buf = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            chip(inps[r], counts[r], outs[r], gots[r], cells[r],
                 pld.window(target_buf, [nr * CAP, SIZE], dtype=pl.FP32),
                 pld.window(sig_buf, [nr, 1], dtype=pl.INT32),
                 pld.window(recv_buf, [nr, 1], dtype=pl.INT32), device=r)
        return outs

    return main


def check(inps, counts, outs, gots):
    """What all_to_all_v promises, rank by rank and slot by slot."""
    nr = inps.shape[0]
    for r in range(nr):
        for src in range(nr):
            k = min(counts[src, r], CAP)
            assert gots[r, src, 0] == k, (r, src, gots[r, src, 0], k)
            np.testing.assert_array_equal(outs[r, src * CAP:src * CAP + k],
                                          inps[src, r * CAP:r * CAP + k])


def run(nr: int):
    rng = np.random.default_rng(nr)
    # inps[src, dest*CAP + i] = 1000*src + 100*dest + 10*i + column
    slot = np.arange(nr * CAP)
    tag = slot // CAP * 100 + slot % CAP * 10                      # 100*dest + 10*i
    inps = (np.arange(nr)[:, None, None] * 1000 + tag[None, :, None]
            + np.arange(SIZE)).astype(np.float32)
    counts = rng.integers(0, CAP + 2, (nr, nr)).astype(np.int32)   # 0 .. CAP+1: some clamp
    outs = np.full_like(inps, np.nan)
    gots = np.full((nr, nr, 1), -1, np.int32)
    cells = np.full((nr, nr, 1), -1, np.int32)
    build(nr)(inps, counts, outs, gots, cells,
              config=RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr)))))
    check(inps, counts, outs, gots)
    np.testing.assert_array_equal(cells, 0)
    return counts, gots


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=4)
    args = ap.parse_args()
    counts, gots = run(args.ranks)
    print(f"all_to_all_v over {args.ranks} ranks: rank 0 sent {counts[0].tolist()} rows, "
          f"received {gots[0, :, 0].tolist()} (cap {CAP})")
    print("OK")
