"""Cost of interleaving exploration: how many schedules per second
``tilecomm.testing.explore`` runs on a small protocol, beside an ordinary
call of the same program in the same run, and how long it takes to find a
protocol bug.

Prints one markdown table row per figure.  This is a benchmark, not a test:
nothing here asserts speed.

    python bench/bench_explore.py            # 3 repetitions
    python bench/bench_explore.py --quick    # 1 repetition

The protocol.  2 ranks, ROUNDS = 5 rounds of a handshake: each round every
rank AtomicAdds 1 into the other's counter and waits until its own counter
reached the round number -- 10 visible operations per rank, 20 in all, plus
the end of each rank's dispatch.  It is correct, so the search goes on until
its time budget (BUDGET s) ends.  Figure: schedules run / seconds (each
schedule is a whole call on ranks kept across schedules, on fresh copies of
the arguments, with race detection on), and the preemption bound the search
finished.  Anchor: ordinary one-shot calls of the same program per second
(each starts its ranks).

The bug.  Rank 0 waits ``Eq 1`` then ``Eq 2`` on a counter that ranks 1 and 2
AtomicAdd into (3 ranks): it deadlocks when both adds land before its first
check.  Figure: seconds until ``explore`` returns the failure; target < 60 s.
"""
import argparse
import statistics
import time

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig
from tilecomm.testing import explore

from bench_primitives import cpu_probe, loadavg, machine_info
from report import Row, log

ROUNDS = 5
BUDGET = 20.0
NR = pl.dynamic("NR")


OUT = pl.Out[pl.Tensor[[1, 1], pl.INT32]]
SIG = pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]


def host_of(kernel):
    """The host program: one signal cell per rank, the kernel on every rank."""
    @pl.jit
    def chip(out: OUT, sig: SIG):
        kernel(out, sig)

    @pl.jit.host
    def main(outs: pl.Out[pl.Tensor[[NR, 1, 1], pl.INT32]]):
        sbuf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            chip(outs[r], pld.window(sbuf, [1, 1], dtype=pl.INT32), device=r)
        return outs
    return main


@pl.jit.incore
def eq_counter(out: OUT, sig: SIG):
    ctx = pld.get_comm_ctx(sig)
    if pld.rank(ctx) == 0:
        for k in pl.range(1, pld.nranks(ctx)):
            pld.system.wait(sig, offsets=[0, 0], expected=k, cmp=pld.WaitCmp.Eq)
    else:
        pld.system.notify(sig, peer=0, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)


def build(cmp, rounds: int):
    @pl.jit.incore
    def handshake(out: OUT, sig: SIG):
        ctx = pld.get_comm_ctx(sig)
        me = pld.rank(ctx)
        n = pld.nranks(ctx)
        for k in pl.range(rounds):
            for p in pl.range(n):
                if p != me:
                    pld.system.notify(sig, peer=p, offsets=[0, 0], value=1,
                                      op=pld.NotifyOp.AtomicAdd)
            pld.system.wait(sig, offsets=[0, 0], expected=(k + 1) * (n - 1), cmp=cmp)
    return host_of(handshake)


NR_MESH = 4


def _mesh_allreduce():
    """pld.tensor.allreduce of one [1, 8] row in a kernel, on NR_MESH ranks."""
    row = pl.Tensor[[1, 8], pl.FP32]
    win = pl.InOut[pld.DistributedTensor[[1, 8], pl.FP32]]
    csig = pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]

    @pl.jit.incore
    def reduce(x: row, y: pl.Out[row], data: win, sig: csig) -> row:
        data = pl.store(pl.load(x, [0, 0], [1, 8]), [0, 0], data)
        data = pld.tensor.allreduce(data, sig)
        y = pl.store(pl.load(data, [0, 0], [1, 8]), [0, 0], y)
        return y

    @pl.jit
    def chip(x: row, y: pl.Out[row], data: win, sig: csig):
        return reduce(x, y, data, sig)

    @pl.jit.host
    def main(xs: pl.Tensor[[NR, 1, 8], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, 8], pl.FP32]]):
        dbuf = pld.alloc_window_buffer([1, 8], dtype=pl.FP32)
        sbuf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            chip(xs[r], ys[r], pld.window(dbuf, [1, 8], dtype=pl.FP32),
                 pld.window(sbuf, [NR, 1], dtype=pl.INT32), device=r)
        return ys
    return main


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1 repetition instead of 3")
    args = ap.parse_args(argv)
    reps = 1 if args.quick else 3
    for line in machine_info():
        print(line)
    print(f"mode: {'quick' if args.quick else 'full'}; median of {reps}", flush=True)
    log(f"busy-loop probe {cpu_probe():.2f} cores")

    good = build(pld.WaitCmp.Ge, ROUNDS)
    outs = np.zeros((2, 1, 1), np.int32)
    cfg = RunConfig(distributed_config=DistributedConfig(device_ids=[0, 1]))
    good(outs, config=cfg)                                   # compiled, warm
    rates, calls, counts = [], [], []
    bounds = []
    for rep in range(reps):
        res = explore(good, outs, world_size=2, time_budget_s=BUDGET)
        if res.failure is not None:
            print(f"\nthe correct protocol failed:\n{res.failure.report}")
            return 1
        rates.append(res.schedules / res.seconds)
        bounds.append(res.bound)
        counts.append(res.schedules)
        t0 = time.perf_counter()
        for _ in range(5):
            good(outs, config=cfg)
        calls.append(5 / (time.perf_counter() - t0))
        log(f"repetition {rep + 1}/{reps}: {res.schedules} schedules in {res.seconds:.2f} s "
            f"(bound {res.bound}); ordinary calls {calls[-1]:.1f}/s")

    bad = host_of(eq_counter)
    found = []
    for rep in range(reps):
        res = explore(bad, np.zeros((3, 1, 1), np.int32), world_size=3, time_budget_s=60)
        if res.failure is None or res.failure.kind != "deadlock":
            print(f"\nthe Eq bug was not found: {res}")
            return 1
        found.append(res.seconds)
        log(f"repetition {rep + 1}/{reps}: Eq bug found after {res.schedules} schedules, "
            f"{res.seconds:.2f} s")

    mesh = _mesh_allreduce()
    complete = []
    for rep in range(reps):
        xs = np.arange(NR_MESH * 8, dtype=np.float32).reshape(NR_MESH, 1, 8)
        ys = np.zeros_like(xs)

        def check(args, want=np.broadcast_to(xs.sum(axis=0), xs.shape)):
            np.testing.assert_array_equal(args[1], want)
        res = explore(mesh, xs, ys, world_size=NR_MESH, check=check, time_budget_s=60)
        if res.failure is not None:
            print(f"\nthe mesh allreduce failed:\n{res.failure.report}")
            return 1
        complete.append(res)
        log(f"repetition {rep + 1}/{reps}: {NR_MESH}-rank mesh allreduce {res.coverage}, "
            f"{res.seconds:.2f} s")

    rate, anchor = statistics.median(rates), statistics.median(calls)
    rows = [
        Row(f"explore: 2 ranks, {4 * ROUNDS} visible ops, searched to the end or for "
            f"{BUDGET:.0f} s ({statistics.median(counts):.0f} schedules, bound {min(bounds)} "
            f"finished)",
            f"{rate:.0f} schedules/s", f"{anchor:.1f} one-shot calls/s", "—",
            f"{rate / anchor:.1f}x the calls"),
        Row("explore: 3-rank Eq-on-a-shared-counter bug, time to the failure",
            f"{statistics.median(found):.2f} s", "—", "< 60 s",
            "met" if statistics.median(found) < 60 else "MISSED"),
    ]
    done = [r for r in complete if r.verified and r.complete]
    secs = statistics.median(r.seconds for r in complete)
    rows.append(Row(
        f"explore: {NR_MESH}-rank mesh allreduce (pld.tensor.allreduce of one row), verified "
        f"complete ({statistics.median(r.schedules for r in complete):.0f} schedules)",
        f"{secs:.2f} s" + ("" if len(done) == len(complete) else " (NOT complete)"), "—",
        "complete < 60 s", "met" if len(done) == len(complete) and secs < 60 else "MISSED"))
    print(f"\nload average {loadavg()}\n")
    print("| figure | measured | anchor (same run) | target | result |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r.figure} | {r.measured} | {r.anchor} | {r.target} | {r.result} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
