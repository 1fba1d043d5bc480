"""Task scheduler benchmarks: per-task overhead and deferred-completion
release latency, measured side by side with their anchors in one run.

    python bench/bench_tasks.py            # N = 10000 tasks
    python bench/bench_tasks.py --quick    # N = 2000

Method: a prepared worker is called with N tasks and with 0 tasks (same
program, same ranks); the per-task figure is (t_N - t_0) / N, best of
repeats, so dispatch and argument costs cancel out.  Release latency: two
ranks pass a token back and forth through deferred waiters (rank 0 publishes,
rank 1's waiter completes, its dependent task publishes back, ...); one
round trip is two releases.  Submitting and running the two tasks of a round
costs more than the hop itself (see the task rows), so the release figure
starts the relay only once every task is submitted and subtracts the same
call with every counter already there (same tasks, same chain, no wait).
That reference runs both ranks' chains at once, competing for the CPUs,
where the relay alternates them, so the difference can come out a little
below zero: it then means no cost beyond the chain's own.  The last row is
the plain relay, submission included: an upper bound of a release plus the
two tasks of a round.  Its anchor is the same ping-pong with blocking
waits inside one kernel, timed the same way.  A prepared-worker call costs
about a millisecond and varies by several on a loaded machine, so each
figure's N makes the N-round call last tens of milliseconds (a kernel round
trip is ~1-4 µs: it needs far more rounds than the relay); fewer rounds
measure the call's noise, not the round trip.  Nothing here asserts speed.
"""
# no `from __future__ import annotations`: annotations are evaluated at
# definition time so program factories capture their sizes
import argparse
import os
import time

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

GE, SET = pld.WaitCmp.Ge, pld.NotifyOp.Set
ONE = pl.Tensor[[1, 1], pl.INT32]
SIG = pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]


def config(nr, cores=None):
    return RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr))),
                     cores=cores)


# ------------------------------------------------------------------ programs
@pl.jit
def chained(acc: pl.Out[pl.Tensor[[1, 1], pl.INT32]], n: pl.Scalar[pl.INT32]):
    for i in pl.range(n):
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="step"):
            pl.write(acc, [0, 0], pl.read(acc, [0, 0]) + 1)     # each one waits for the last
    return acc


@pl.jit
def independent(acc: pl.Out[pl.Tensor[[1, 1], pl.INT32]], n: pl.Scalar[pl.INT32]):
    for i in pl.range(n):
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="empty"):
            pass
    return acc


@pl.jit.host
def one_rank(accs: pl.Out[pl.Tensor[[1, 1, 1], pl.INT32]], n: pl.Scalar[pl.INT32]):
    chained(accs[0], n, device=0)
    return accs


@pl.jit.host
def one_rank_independent(accs: pl.Out[pl.Tensor[[1, 1, 1], pl.INT32]],
                         n: pl.Scalar[pl.INT32]):
    independent(accs[0], n, device=0)
    return accs


@pl.jit
def relay(sig: SIG, role: pl.Scalar[pl.INT32], peer: pl.Scalar[pl.INT32],
          n: pl.Scalar[pl.INT32]):
    # one round at a time: each task waits for the previous round's last task,
    # so one deferred waiter per rank is pending and the figure is a latency
    last = pl.array.create(1, pl.TASK_ID)
    with pl.manual_scope():
        for i in pl.range(n):
            if role == 0:
                with pl.at(level=pl.Level.CORE_GROUP, name_hint="publish", deps=[last]) as pub:
                    pld.system.notify(sig, peer, [0, 0], i + 1, op=SET)
                with pl.at(level=pl.Level.CORE_GROUP, name_hint="token_back",
                           deps=[pub]) as back:
                    pld.system.defer_wait(sig, [0, 0], i + 1, cmp=GE)
                last[0] = back
            else:
                with pl.at(level=pl.Level.CORE_GROUP, name_hint="token", deps=[last]) as got:
                    pld.system.defer_wait(sig, [0, 0], i + 1, cmp=GE)
                with pl.at(level=pl.Level.CORE_GROUP, name_hint="publish", deps=[got]) as pub:
                    pld.system.notify(sig, peer, [0, 0], i + 1, op=SET)
                last[0] = pub


SIG2 = pl.InOut[pld.DistributedTensor[[1, 2], pl.INT32]]


@pl.jit
def gated_relay(sig: SIG2, role: pl.Scalar[pl.INT32], peer: pl.Scalar[pl.INT32],
                n: pl.Scalar[pl.INT32], w: pl.Scalar[pl.INT32]):
    # the relay, started only once every task of the call is submitted (a
    # gate on cell [0, 1] that the last task opens), so submission does not
    # pace the rounds; w = 0 makes every condition already true: the same
    # tasks, chained the same way, with no cross-rank wait
    last = pl.array.create(1, pl.TASK_ID)
    with pl.manual_scope():
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="gate") as gate:
            pld.system.defer_wait(sig, [0, 1], 1, cmp=GE)
        last[0] = gate
        for i in pl.range(n):
            if role == 0:
                with pl.at(level=pl.Level.CORE_GROUP, name_hint="publish", deps=[last]) as pub:
                    pld.system.notify(sig, peer, [0, 0], i + 1, op=SET)
                with pl.at(level=pl.Level.CORE_GROUP, name_hint="token_back",
                           deps=[pub]) as back:
                    pld.system.defer_wait(sig, [0, 0], w * (i + 1), cmp=GE)
                last[0] = back
            else:
                with pl.at(level=pl.Level.CORE_GROUP, name_hint="token", deps=[last]) as got:
                    pld.system.defer_wait(sig, [0, 0], w * (i + 1), cmp=GE)
                with pl.at(level=pl.Level.CORE_GROUP, name_hint="publish", deps=[got]) as pub:
                    pld.system.notify(sig, peer, [0, 0], i + 1, op=SET)
                last[0] = pub
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="open"):
            pld.system.notify(sig, role, [0, 1], 1, op=SET)


@pl.jit.incore
def pingpong_kernel(sig: SIG, role: pl.Scalar[pl.INT32], peer: pl.Scalar[pl.INT32],
                    n: pl.Scalar[pl.INT32]):
    for i in pl.range(n):
        if role == 0:
            pld.system.notify(sig, peer, [0, 0], i + 1, op=SET)
            pld.system.wait(sig, [0, 0], i + 1, cmp=GE)
        else:
            pld.system.wait(sig, [0, 0], i + 1, cmp=GE)
            pld.system.notify(sig, peer, [0, 0], i + 1, op=SET)


@pl.jit
def pingpong(sig: SIG, role: pl.Scalar[pl.INT32], peer: pl.Scalar[pl.INT32],
             n: pl.Scalar[pl.INT32]):
    pingpong_kernel(sig, role, peer, n)


def two_ranks(chip):
    @pl.jit.host
    def main(n: pl.Scalar[pl.INT32]):
        sbuf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            chip(pld.window(sbuf, [1, 1], dtype=pl.INT32), r, 1 - r, n, device=r)
    return main


@pl.jit.host
def two_ranks_gated(w: pl.Scalar[pl.INT32], n: pl.Scalar[pl.INT32]):
    sbuf = pld.alloc_window_buffer([1, 2], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        gated_relay(pld.window(sbuf, [1, 2], dtype=pl.INT32), r, 1 - r, n, w, device=r)


# ------------------------------------------------------------------ timing
def best(worker, repeats, *args):
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        worker(*args)
        ts.append(time.perf_counter() - t0)
    return min(ts)


def per_item(worker, n, repeats, *args):
    return (best(worker, repeats, *args, n) - best(worker, repeats, *args, 0)) / n


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--cores", type=int, default=None, help="RunConfig.cores (default: cpu's)")
    a = ap.parse_args()
    n = 2000 if a.quick else 10000
    rounds = 2000 if a.quick else 10000           # relay: ~10-100 µs per round
    kernel_rounds = 20000 if a.quick else 100000  # blocking ping-pong: ~1-4 µs per round
    reps = 5
    rows = []

    acc = np.zeros((1, 1, 1), np.int32)
    with one_rank.compile(acc, n, config=config(1, a.cores)).prepare() as w:
        us = per_item(w, n, reps, acc) * 1e6
        acc[:] = 0
        w(acc, n)
        assert acc[0, 0, 0] == n, acc               # the chain really ran in order
        rows.append((f"chained tasks (each waits for the last, N = {n})", f"{us:.1f} µs/task",
                     "—", "≤ 20 µs", "pass" if us <= 20 else "MISS"))
    with one_rank_independent.compile(acc, n, config=config(1, a.cores)).prepare() as w:
        us = per_item(w, n, reps, acc) * 1e6
        rows.append((f"independent empty tasks (N = {n})", f"{us:.1f} µs/task", "—", "≤ 10 µs",
                     "pass" if us <= 10 else "MISS"))

    with two_ranks(pingpong).compile(kernel_rounds, config=config(2, a.cores)).prepare() as w:
        rt_block = per_item(w, kernel_rounds, reps) * 1e6
    with two_ranks_gated.compile(1, rounds, config=config(2, a.cores)).prepare() as w:
        # same submissions and tasks in both: what is left is the cross-rank hop
        waiting = best(w, reps, 1, rounds)
        local = best(w, reps, 0, rounds)
    release = (waiting - local) / (2 * rounds) * 1e6
    rows.append((f"defer_wait release: notify on one rank → dependent task starts on the other "
                 f"(half a relay round trip less the same chain with its counters already "
                 f"there, tasks submitted first, {rounds} rounds)", f"{release:.1f} µs",
                 f"blocking notify→wait round trip in a kernel ({kernel_rounds} rounds): "
                 f"{rt_block:.2f} µs",
                 "≤ 3× the round trip", "pass" if release <= 3 * rt_block else "MISS"))
    with two_ranks(relay).compile(rounds, config=config(2, a.cores)).prepare() as w:
        rt_defer = per_item(w, rounds, reps) * 1e6
    rows.append((f"relay half round trip, submitted while it runs (a release plus a publish "
                 f"and a waiter task, each submitted and run; {rounds} rounds)",
                 f"{rt_defer / 2:.1f} µs", "—", "—", "info"))

    print("| figure | measured | anchor (same run) | target (DESIGN §4) | result |")
    print("|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print(f"\ncores per rank: {config(1, a.cores).resolved_cores()}; machine: "
          f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
