"""A traced run: a ring of notifies and an allreduce, recorded as a Perfetto trace.

Every rank passes a token around the ring ROUNDS times (AtomicAdd one credit
into the next rank's counter, wait until its own counter reached the round),
then the ranks sum their rows with pld.tensor.allreduce.  The call passes
RunConfig(enable_chip_swimlane=True), so each rank writes a trace of its
dispatch under <output_dir>/dfx_outputs/rank{r}/d0/ and the call merges them
into one file: open it at https://ui.perfetto.dev (Open trace file) to see
one track per rank, a slice per notify, wait and collective with its source
line, and an arrow from every notify to the wait it released.

Run: python examples/traced_run.py --ranks 4 [--out DIR]
"""
import argparse
import json

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

N = 16
ROUNDS = 3
NR = pl.dynamic("NR")


@pl.jit.incore
def ring_then_sum(x: pl.Tensor[[1, N], pl.FP32], y: pl.Out[pl.Tensor[[1, N], pl.FP32]],
                  token: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
                  data: pl.InOut[pld.DistributedTensor[[1, N], pl.FP32]],
                  signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    ctx = pld.get_comm_ctx(token)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    for g in pl.range(1, ROUNDS + 1):
        pld.system.notify(token, (me + 1) % n, [0, 0], 1, op=pld.NotifyOp.AtomicAdd)
        pld.system.wait(token, [0, 0], g, cmp=pld.WaitCmp.Ge)
    data = pl.store(pl.load(x, [0, 0], [1, N]), [0, 0], data)
    data = pld.tensor.allreduce(data, signal, op=pld.ReduceOp.Sum)
    y = pl.store(pl.load(data, [0, 0], [1, N]), [0, 0], y)
    return y


@pl.jit
def chip(x: pl.Tensor[[1, N], pl.FP32], y: pl.Out[pl.Tensor[[1, N], pl.FP32]],
         token: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
         data: pl.InOut[pld.DistributedTensor[[1, N], pl.FP32]],
         signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    return ring_then_sum(x, y, token, data, signal)


@pl.jit.host
def main(xs: pl.Tensor[[NR, 1, N], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, N], pl.FP32]]):
    tbuf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    dbuf = pld.alloc_window_buffer([1, N], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([pld.world_size(), 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        chip(xs[r], ys[r], pld.window(tbuf, [1, 1], dtype=pl.INT32),
             pld.window(dbuf, [1, N], dtype=pl.FP32),
             pld.window(sbuf, [pld.world_size(), 1], dtype=pl.INT32), device=r)
    return ys


def run(nr: int, out=None) -> str:
    xs = np.random.default_rng(0).integers(-8, 9, (nr, 1, N)).astype(np.float32)
    ys = np.zeros_like(xs)
    dist = DistributedConfig(device_ids=list(range(nr)))
    compiled = main.compile(xs, ys, config=RunConfig(distributed_config=dist, cache_dir=out))
    compiled(xs, ys, config=RunConfig(distributed_config=dist, enable_chip_swimlane=True))
    np.testing.assert_allclose(ys, np.broadcast_to(xs.sum(axis=0), xs.shape))
    with open(compiled.trace_path) as f:
        trace = json.load(f)
    waits = [e for e in trace["traceEvents"] if e.get("cat") == "wait" and e["ph"] == "X"]
    arrows = [e for e in trace["traceEvents"] if e["ph"] == "s"]
    assert len(waits) == nr * ROUNDS and len(arrows) == len(waits), (len(waits), len(arrows))
    print(f"{nr} ranks: {len(waits)} waits, each with an arrow from the notify that released it")
    return compiled.trace_path


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--out", default=None,
                    help="cache directory the program (and its dfx_outputs) goes under")
    args = ap.parse_args()
    path = run(args.ranks, args.out)
    print(f"trace: {path}")
    print("open it at https://ui.perfetto.dev")
    print("OK")
