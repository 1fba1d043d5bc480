"""Asynchronous push with pld.tensor.put_async: compute while the rows travel.

Each rank builds one DMA session, issues a put of its row into row my_rank of
every rank's `gathered` window (an allgather), and while those transfers are
in flight computes x * x locally.  Only then does it wait each event --
the wait is what says a transfer has landed -- and after the waits it
signals the peers.  The order is the point: notify before the wait and the
peer may read a row that has not arrived (run with TILECOMM_DETECT_RACES=1
to see the race check say so).  The moved region must be one contiguous row
(static, flat, logically 1-D), and every event must be waited before the
kernel returns.
Run: python examples/put_async_exchange.py --ranks 3
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

SIZE = 16
NR = pl.dynamic("NR")
Vec = pl.Tensor[[1, SIZE], pl.FP32]
GatherWin = pl.InOut[pld.DistributedTensor[[NR, SIZE], pl.FP32]]
SigWin = pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]
OutGather = pl.Out[pl.Tensor[[NR, SIZE], pl.FP32]]


@pl.jit.incore
def gather_kernel(x: Vec, squared: pl.Out[Vec], got: OutGather, gathered: GatherWin,
                  signal: SigWin):
    ctx = pld.get_comm_ctx(gathered)
    my_rank = pld.rank(ctx)
    nranks = pld.nranks(ctx)
    sess = pld.system.async_session()
    for peer in pl.range(nranks):
        evt = pld.tensor.put_async(gathered, peer, x, sess, [my_rank, 0], [0, 0], [1, SIZE])
        # local work overlaps the transfer
        t = pl.load(x, [0, 0], [1, SIZE])
        squared = pl.store(pl.mul(t, t), [0, 0], squared)
        pld.system.wait_async_event(evt, sess)          # landed: now it may be announced
    for peer in pl.range(nranks):
        if peer != my_rank:
            pld.system.notify(signal, peer=peer, offsets=[my_rank, 0], value=1,
                              op=pld.NotifyOp.AtomicAdd)
    for src in pl.range(nranks):
        if src != my_rank:
            pld.system.wait(signal, offsets=[src, 0], expected=1, cmp=pld.WaitCmp.Ge)
    pl.store(pl.load(gathered, [0, 0], [NR, SIZE]), [0, 0], got)
    return squared


@pl.jit
def chip(x: Vec, squared: pl.Out[Vec], got: OutGather, gathered: GatherWin, signal: SigWin):
    return gather_kernel(x, squared, got, gathered, signal)


@pl.jit.host
def main(xs: pl.Tensor[[NR, 1, SIZE], pl.FP32], squares: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]],
         gots: pl.Out[pl.Tensor[[NR, NR, SIZE], pl.FP32]]):
    gather_buf = pld.alloc_window_buffer([NR, SIZE], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        chip(xs[r], squares[r], gots[r], pld.window(gather_buf, [NR, SIZE], dtype=pl.FP32),
             pld.window(sig_buf, [NR, 1], dtype=pl.INT32), device=r)
    return squares


def run(nr: int):
    rng = np.random.default_rng(11)
    xs = rng.integers(-20, 20, size=(nr, 1, SIZE)).astype(np.float32)
    squares = np.full_like(xs, np.nan)
    gots = np.full((nr, nr, SIZE), np.nan, np.float32)
    main(xs, squares, gots,
         config=RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr)))))
    np.testing.assert_array_equal(squares, xs * xs)
    np.testing.assert_array_equal(gots, np.broadcast_to(xs[:, 0, :], (nr, nr, SIZE)))
    return gots


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    args = ap.parse_args()
    gots = run(args.ranks)
    print(f"put_async allgather on {args.ranks} ranks; rank 0 row 1: {gots[0, 1, :4].tolist()}")
    print("OK")
