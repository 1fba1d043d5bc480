"""Tutorial 5: tasks inside a rank, and waits that give their core back.

A chip orchestration function (@pl.jit) may split its work into tasks
(`with pl.at(level=pl.Level.CORE_GROUP) as tid:`), which the rank's scheduler
runs concurrently on its cores.  Each rank here, on ONE core:
  * `waiter` registers "signal >= 1" with pld.system.defer_wait and ends at
    once: its core is free, its TaskId completes when the signal arrives;
  * `consume` (deps=[waiter]) copies the payload a peer delivered;
  * `publish`, last in program order, pushes this rank's row to the right
    neighbour, then sets the neighbour's signal.
With a blocking pld.system.wait in `waiter`, the only core would wait for a
publish that never gets a core: a deadlock, reported as such.
  * `double`, after the manual scope, reads what `consume` wrote: that
    dependency is inferred from the data, no deps= needed.
Run: python examples/tutorials/05_tasks.py --ranks 2
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

N = 8
NR = pl.dynamic("NR")
CORE_GROUP = pl.Level.CORE_GROUP


@pl.jit
def chip(x: pl.Tensor[[1, N], pl.FP32], y: pl.Out[pl.Tensor[[2, N], pl.FP32]],
         payload: pl.InOut[pld.DistributedTensor[[1, N], pl.FP32]],
         signal: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]], right: pl.Scalar[pl.INT32]):
    # in a manual scope only explicit deps= order tasks: `publish` must not wait
    # for `waiter` although both touch the signal window
    with pl.manual_scope():
        with pl.at(level=CORE_GROUP, name_hint="waiter") as wait_tid:
            pld.system.defer_wait(signal=signal, offsets=[0, 0], expected=1,
                                  cmp=pld.WaitCmp.Ge)
        with pl.at(level=CORE_GROUP, name_hint="consume", deps=[wait_tid]):
            y = pl.store(pl.load(payload, [0, 0], [1, N]), [0, 0], y)
        with pl.at(level=CORE_GROUP, name_hint="publish"):
            pld.tile.remote_store(pl.load(x, [0, 0], [1, N]), target=payload, peer=right,
                                  offsets=[0, 0])
            pld.system.notify(target=signal, peer=right, offsets=[0, 0], value=1,
                              op=pld.NotifyOp.Set)
    # outside it, dependencies are inferred: this task reads row 0 of y, which
    # `consume` wrote, so it starts only after `consume` finished
    with pl.at(level=CORE_GROUP, name_hint="double"):
        t = pl.load(y, [0, 0], [1, N])
        y = pl.store(pl.add(t, t), [1, 0], y)
    return y


@pl.jit.host
def main(xs: pl.Tensor[[NR, 1, N], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 2, N], pl.FP32]]):
    payload = pld.alloc_window_buffer([1, N], dtype=pl.FP32)
    signal = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        chip(xs[r], ys[r], pld.window(payload, [1, N], dtype=pl.FP32),
             pld.window(signal, [1, 1], dtype=pl.INT32), (r + 1) % pld.world_size(), device=r)
    return ys


def run(nr: int) -> np.ndarray:
    xs = np.arange(nr * N, dtype=np.float32).reshape(nr, 1, N)
    ys = np.full((nr, 2, N), np.nan, np.float32)
    config = RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr))),
                       cores=1)                        # one core per rank
    main(xs, ys, config=config)
    from_left = np.roll(xs, 1, axis=0)[:, 0]
    np.testing.assert_array_equal(ys[:, 0], from_left)
    np.testing.assert_array_equal(ys[:, 1], 2 * from_left)
    return ys


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    args = ap.parse_args()
    ys = run(args.ranks)
    print(f"{args.ranks} ranks on one core each; rank 0 received {ys[0, 0, :4].tolist()} ...")
    print("OK")
