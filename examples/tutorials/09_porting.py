"""Tutorial 9: a PyPTO program, ported.

Written in PyPTO's class form -- @pl.program with @pl.function methods,
compiled with ir.compile and a DistributedConfig -- this program runs here
after one change: the imports.  In PyPTO they read

    import pypto.language as pl
    import pypto.language.distributed as pld
    from pypto import ir
    from pypto.runtime import DistributedConfig

and below they name tilecomm instead.  Every rank stages its row, the ranks
meet at a barrier of AtomicAdd notifies, and each adds every peer's row to
its own (remote_load), plus its rank number.

The second program is written as PyPTO's newer programs are: the config
comes from ``pypto.ir`` (here ``tilecomm.ir``) and the HOST orchestrator
calls the ergonomic collectives ``pld.all_reduce`` and ``pld.all_gather``,
whose signals are allocated for it.
Run: python examples/tutorials/09_porting.py --ranks 3
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm import ir
from tilecomm.ir import DistributedConfig

NR = pl.dynamic("NR")
S = 8


@pl.program
class RowSum:
    @pl.function(type=pl.FunctionType.InCore)
    def kernel(self, x: pl.Tensor[[1, S], pl.FP32], y: pl.Out[pl.Tensor[[1, S], pl.FP32]],
               data: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
               sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]
               ) -> pl.Tensor[[1, S], pl.FP32]:
        ctx = pld.get_comm_ctx(data)
        me, n = pld.rank(ctx), pld.nranks(ctx)
        mine = pl.load(x, [0, 0], [1, S])
        pl.store(mine, [0, 0], data)
        for p in pl.range(n):                       # "my row is staged"
            if p != me:
                pld.system.notify(sig, p, [me, 0], 1, op=pld.NotifyOp.AtomicAdd)
        for p in pl.range(n):
            if p != me:
                pld.system.wait(sig, [p, 0], 1, cmp=pld.WaitCmp.Ge)
        acc = pl.add(mine, pl.cast(me, pl.FP32))
        for p in pl.range(n):
            if p != me:
                acc = pl.add(acc, pld.tile.remote_load(data, p, [0, 0], [1, S]))
        y = pl.store(acc, [0, 0], y)
        return y

    @pl.function(type=pl.FunctionType.Orchestration)
    def chip(self, x: pl.Tensor[[1, S], pl.FP32], y: pl.Out[pl.Tensor[[1, S], pl.FP32]],
             data: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
             sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]
             ) -> pl.Tensor[[1, S], pl.FP32]:
        return self.kernel(x, y, data, sig)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def main(self, xs: pl.Tensor[[NR, 1, S], pl.FP32],
             ys: pl.Out[pl.Tensor[[NR, 1, S], pl.FP32]]):
        data_buf = pld.alloc_window_buffer(S * pl.FP32.get_byte())     # the bytes form
        sig_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            self.chip(xs[r], ys[r], pld.window(data_buf, [1, S], dtype=pl.FP32),
                      pld.window(sig_buf, [NR, 1], dtype=pl.INT32), device=r)
        return ys


@pl.program
class Summed:
    @pl.function(type=pl.FunctionType.InCore)
    def publish_step(self, x: pl.Tensor[[1, S], pl.FP32],
                     data: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]]
                     ) -> pld.DistributedTensor[[1, S], pl.FP32]:
        data = pl.store(pl.load(x, [0, 0], [1, S]), [0, 0], data)
        return data

    @pl.function(type=pl.FunctionType.Orchestration)
    def publish(self, x: pl.Tensor[[1, S], pl.FP32],
                data: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]]
                ) -> pld.DistributedTensor[[1, S], pl.FP32]:
        return self.publish_step(x, data)

    @pl.function(type=pl.FunctionType.InCore)
    def consume_step(self, table: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
                     out: pl.Out[pl.Tensor[[NR, S], pl.FP32]]) -> pl.Tensor[[NR, S], pl.FP32]:
        out = pl.store(pl.load(table, [0, 0], [NR, S]), [0, 0], out)
        return out

    @pl.function(type=pl.FunctionType.Orchestration)
    def consume(self, table: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
                out: pl.Out[pl.Tensor[[NR, S], pl.FP32]]) -> pl.Tensor[[NR, S], pl.FP32]:
        return self.consume_step(table, out)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def main(self, xs: pl.Tensor[[NR, 1, S], pl.FP32],
             outs: pl.Out[pl.Tensor[[NR, NR, S], pl.FP32]]):
        data_buf = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
        table_buf = pld.alloc_window_buffer([NR, S], dtype=pl.FP32)
        for r in pl.range(pld.world_size()):
            self.publish(xs[r], pld.window(data_buf, [1, S], dtype=pl.FP32), device=r)
        data = pld.window(data_buf, [1, S], dtype=pl.FP32)
        data = pld.all_reduce(data, op=pld.ReduceOp.Sum)        # its signal made for it
        table = pld.window(table_buf, [NR, S], dtype=pl.FP32)
        table = pld.all_gather(data, table)                     # every rank's sum, one row each
        for r in pl.range(pld.world_size()):
            self.consume(table, outs[r], device=r)
        return outs


def run_summed(nr: int) -> np.ndarray:
    compiled = ir.compile(Summed, distributed_config=DistributedConfig(device_ids=list(range(nr))))
    xs = np.random.default_rng(nr + 1).integers(-20, 20, (nr, 1, S)).astype(np.float32)
    outs = np.zeros((nr, nr, S), np.float32)
    compiled(xs, outs)
    np.testing.assert_array_equal(outs, np.broadcast_to(xs.sum(axis=0), outs.shape))
    return outs


def run(nr: int) -> np.ndarray:
    compiled = ir.compile(RowSum, distributed_config=DistributedConfig(device_ids=list(range(nr))))
    xs = np.random.default_rng(nr).integers(-20, 20, (nr, 1, S)).astype(np.float32)
    ys = np.zeros_like(xs)
    compiled(xs, ys)
    want = xs.sum(axis=0) + np.arange(nr, dtype=np.float32)[:, None, None]
    np.testing.assert_array_equal(ys, want)
    return ys


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    args = ap.parse_args()
    ys = run(args.ranks)
    print(f"{args.ranks} ranks: rank 0 holds {ys[0, 0, :4].tolist()}...")
    outs = run_summed(args.ranks)
    print(f"all_reduce then all_gather: every row of rank 0 is {outs[0, 0, :4].tolist()}...")
    print("OK")
