"""Tutorial 7: debugging a protocol -- a deadlock, a crash, a race, and a bug
only some schedules show.

Four small kernels, each run the way that shows what goes wrong, and each
error caught and checked here:
  * a deadlock: every rank waits for its right neighbour before notifying
    it, so nobody notifies; the call raises DeadlockError naming each
    blocked wait, its line, the cell's value and who could still notify it;
  * a crash: one rank stores outside a window; every rank is stopped and the
    call raises RankFailure with that rank's traceback in this file's lines;
  * a race: rank 0 notifies before the store the notify announces, so the
    reader's load may see the old row; RunConfig(detect_races=True) raises
    DataRaceError naming both accesses and the missing order;
  * a schedule bug: rank 0 waits for a counter to be exactly 1, then 2, while
    the other ranks add 1 each; it deadlocks only when both adds land before
    rank 0 looks.  tilecomm.testing.explore finds that schedule and replays
    it; the same protocol with Ge is verified.
Run: python examples/tutorials/07_debugging.py --ranks 3
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.errors import DataRaceError, DeadlockError, RankFailure
from tilecomm.runtime import DistributedConfig, RunConfig
from tilecomm.testing import explore

NR = pl.dynamic("NR")
S = 8
Row = pl.Tensor[[1, S], pl.FP32]
Box = pld.DistributedTensor[[1, S], pl.FP32]
Cell = pld.DistributedTensor[[1, 1], pl.INT32]


def host_of(kernel):
    """Every kernel of this tutorial runs on every rank with the same windows."""
    @pl.jit
    def chip(x: Row, y: pl.Out[Row], box: pl.InOut[Box], sig: pl.InOut[Cell]):
        return kernel(x, y, box, sig)

    @pl.jit.host
    def main(xs: pl.Tensor[[NR, 1, S], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, S], pl.FP32]]):
        box = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
        sig = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            chip(xs[r], ys[r], pld.window(box, [1, S], dtype=pl.FP32),
                 pld.window(sig, [1, 1], dtype=pl.INT32), device=r)
        return ys
    return main


@pl.jit.incore
def wait_first(x: Row, y: pl.Out[Row], box: pl.InOut[Box], sig: pl.InOut[Cell]):
    ctx = pld.get_comm_ctx(sig)
    right = (pld.rank(ctx) + 1) % pld.nranks(ctx)
    pld.system.wait(sig, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)      # nobody got here
    pld.system.notify(sig, peer=right, offsets=[0, 0], value=1, op=pld.NotifyOp.Set)
    return y


@pl.jit.incore
def overrun(x: Row, y: pl.Out[Row], box: pl.InOut[Box], sig: pl.InOut[Cell]):
    ctx = pld.get_comm_ctx(sig)
    # column S - n + 1 + rank: the last rank writes one past the end of its window
    col = S - pld.nranks(ctx) + 1 + pld.rank(ctx)
    pl.write(box, [0, col], 1.0)
    return y


def sender_of(data_first: bool):
    @pl.jit.incore
    def send(x: Row, y: pl.Out[Row], box: pl.InOut[Box], sig: pl.InOut[Cell]):
        ctx = pld.get_comm_ctx(sig)
        me = pld.rank(ctx)
        if me == 0:
            row = pl.load(x, [0, 0], [1, S])
            if data_first:
                pld.tile.remote_store(row, box, peer=1, offsets=[0, 0])
            pld.system.notify(sig, peer=1, offsets=[0, 0], value=1, op=pld.NotifyOp.Set)
            if not data_first:
                pld.tile.remote_store(row, box, peer=1, offsets=[0, 0])     # too late
        if me == 1:
            pld.system.wait(sig, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
            y = pl.store(pl.load(box, [0, 0], [1, S]), [0, 0], y)
        return y
    return send


def counter_of(cmp):
    @pl.jit.incore
    def counter(x: Row, y: pl.Out[Row], box: pl.InOut[Box], sig: pl.InOut[Cell]):
        ctx = pld.get_comm_ctx(sig)
        if pld.rank(ctx) == 0:
            for k in pl.range(1, pld.nranks(ctx)):
                pld.system.wait(sig, offsets=[0, 0], expected=k, cmp=cmp)
        else:
            pld.system.notify(sig, peer=0, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
        return y
    return counter


# Each broken program (and its fix), built once here at module level rather
# than inside run(): `tilecomm check` sees the programs a file binds at module
# level, so `tilecomm check 07_debugging.py` reports what the lint says about
# them without running anything.
deadlocking = host_of(wait_first)
crashing = host_of(overrun)
notify_first = host_of(sender_of(data_first=False))
store_first = host_of(sender_of(data_first=True))
counter_eq = host_of(counter_of(pld.WaitCmp.Eq))
counter_ge = host_of(counter_of(pld.WaitCmp.Ge))


def run(nr: int) -> None:
    config = RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr))))
    xs = np.arange(nr * S, dtype=np.float32).reshape(nr, 1, S)
    ys = np.zeros_like(xs)

    # 1. a deadlock is reported, not hung on
    try:
        deadlocking(xs, ys, config=config)
        raise AssertionError("expected a deadlock")
    except DeadlockError as e:
        assert f"({nr} blocked, 0 finished)" in str(e), e
        print(str(e).splitlines()[0])

    # 2. a crash stops every rank and names the line
    try:
        crashing(xs, ys, config=config)
        raise AssertionError("expected a rank failure")
    except RankFailure as e:
        assert e.rank == nr - 1 and "07_debugging.py" in e.traceback_text, e
        print(str(e).splitlines()[0])

    if nr < 2:
        print("OK")
        return

    # 3. a race is found whether or not this run's data came out wrong
    checked = RunConfig(distributed_config=config.distributed_config, detect_races=True)
    try:
        notify_first(xs, ys, config=checked)
        raise AssertionError("expected a data race")
    except DataRaceError as e:
        assert {a.op for r in e.races for a in (r.first, r.second)} >= \
            {"pld.tile.remote_store", "pl.load"}, e
        print(str(e).splitlines()[0])
    ys[:] = 0
    store_first(xs, ys, config=checked)       # the fix: data first
    np.testing.assert_array_equal(ys[1], xs[0])

    # 4. a bug only some schedules show, found and replayed
    if nr >= 3:
        res = explore(counter_eq, xs, ys, world_size=nr)
        assert res.failure is not None and res.failure.kind == "deadlock", res
        print(f"explore: {res.failure.kind} after {res.schedules} schedules, "
              f"schedule {res.failure.schedule}")
        try:
            res.failure.replay()
            raise AssertionError("the replay passed")
        except DeadlockError:
            pass
    res = explore(counter_ge, xs, ys, world_size=nr)
    assert res.verified and res.failure is None, res
    print(f"explore: Ge verified in {res.schedules} schedules (preemption bound {res.bound})")
    print("OK")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=3)
    run(ap.parse_args().ranks)
