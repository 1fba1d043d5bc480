"""Dependencies come from the data, not from statement order.

Three tasks per rank share one intermediate tensor `t`:
  * `produce` waits until `release` opens a gate cell, then writes `t`;
  * `consume` reads `t` -- it depends on `produce` (read after write), so the
    scheduler holds it back although it is ready to run and a core is free;
  * `release` touches no data of the others, so nothing orders it: it runs
    on the next free core and opens the gate.
Statement order says produce, consume, release; the data say produce before
consume and nothing about release.  Had the scheduler run tasks in
statement order on one core, `produce` would wait forever for a gate that
only a later statement opens; had it ignored the data, `consume` would read
`t` before it was written.  Two regions of one tensor written by two tasks
(the two halves of `y` below) are independent and may run at the same time.
Run: python examples/dependency_inference.py --ranks 2
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

NR = pl.dynamic("NR")
N = 8


@pl.jit
def chip(x: pl.Tensor[[2, N], pl.FP32], y: pl.Out[pl.Tensor[[2, N], pl.FP32]],
         gate: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
    t = pl.create_tensor([1, N], pl.FP32)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="produce"):
        pld.system.wait(gate, [0, 0], 1, cmp=pld.WaitCmp.Ge)
        t = pl.store(pl.mul(pl.load(x, [0, 0], [1, N]), 10.0), [0, 0], t)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="consume"):
        y = pl.store(pl.add(pl.load(t, [0, 0], [1, N]), 1.0), [0, 0], y)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="release"):
        y = pl.store(pl.load(x, [1, 0], [1, N]), [1, 0], y)      # the other half of y
        pld.system.notify(gate, pld.rank(pld.get_comm_ctx(gate)), [0, 0], 1,
                          op=pld.NotifyOp.Set)
    return y


@pl.jit.host
def main(xs: pl.Tensor[[NR, 2, N], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 2, N], pl.FP32]]):
    gbuf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        chip(xs[r], ys[r], pld.window(gbuf, [1, 1], dtype=pl.INT32), device=r)
    return ys


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    n = ap.parse_args().ranks
    xs = np.random.default_rng(2).standard_normal((n, 2, N)).astype(np.float32)
    ys = np.zeros_like(xs)
    main(xs, ys, config=RunConfig(distributed_config=DistributedConfig(
        device_ids=list(range(n))), cores=2))
    np.testing.assert_allclose(ys[:, 0], xs[:, 0] * 10 + 1, rtol=1e-6)
    np.testing.assert_array_equal(ys[:, 1], xs[:, 1])
    print(f"{n} ranks: consume ran after produce; release ran without waiting for either")
    print("OK")
