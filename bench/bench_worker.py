"""DistributedWorker benchmarks: what a prepared call costs, and what submit overlaps.

Prints one markdown table row per figure: the value measured, the anchor
measured in the same run, the target from DESIGN.md section 4 and pass/miss.
A benchmark, not a test: nothing here asserts speed.

    python bench/bench_worker.py            # full run (~20 s idle)
    python bench/bench_worker.py --quick    # fewer repeats (~5 s)
    python bench/bench_worker.py --transport copy

Figures.
* A prepared 2-rank call of a trivial program (each rank adds 1 to a cell of
  its own window), with fresh windows per call and with persistent windows
  (zeroed before every call, and kept), beside a one-shot call of the same
  program.  Each is the median (and best) of many calls after a warm-up.
  With each, the CPU time a call costs the controller and each rank process
  (mean over the same calls): on two shared cores the wall time follows the
  load, the CPU time much less, so it is the figure to compare across runs.
* Submit (a submitted call is sent while the one before it still runs, on
  kept persistent windows and on fresh ones): two calls submitted back to
  back and both results taken, against the same two calls made blocking one
  after the other (pairs of each kind interleaved, so both see the same
  load); and, on kept windows, the same with host-side work of the caller
  between the calls and their results (work that releases the GIL, e.g. I/O
  or a large numpy kernel): the submitted calls run while the caller works.
"""
# no `from __future__ import annotations`: program annotations are evaluated
# at definition time
import argparse
import os
import statistics
import time

from tilecomm.runtime import DistributedConfig, RunConfig
from tilecomm.runtime.config import TRANSPORT_NAMES

from kernels import trivial_main   # bench/kernels.py
from report import Row, fmt_us, log

TARGET_PERSISTENT_S = 200e-6      # DESIGN.md section 4: prepared call, persistent windows


def timed(call, n: int) -> list:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        call()
        out.append(time.perf_counter() - t0)
    return out


def best_median(ts) -> str:
    return f"{fmt_us(statistics.median(ts))} (best {fmt_us(min(ts))})"


def _on_cpu_s(pid: int) -> float:
    """Seconds process ``pid`` has run on a CPU (the scheduler's own count, in ns)."""
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0]) * 1e-9


def timed_with_cpu(rt, call, n: int):
    """``timed(call, n)`` plus the CPU time per call of the controller (this
    process, every thread) and of each rank process: on a shared machine a
    call's wall time depends on the load, its CPU time much less."""
    pids = [pid for pid, _ in rt._ranks.launcher.workers]
    c0, r0 = time.process_time(), [_on_cpu_s(p) for p in pids]
    ts = timed(call, n)
    c1, r1 = time.process_time(), [_on_cpu_s(p) for p in pids]
    if [pid for pid, _ in rt._ranks.launcher.workers] != pids:
        return ts, None                     # the ranks were replaced meanwhile
    return ts, ((c1 - c0) / n, [(b - a) / n for a, b in zip(r0, r1)])


def fmt_cpu(cpu) -> str:
    if cpu is None:
        return "?"
    ctl, ranks = cpu
    return (f"controller {fmt_us(ctl)} + ranks {' + '.join(fmt_us(r) for r in ranks)} = "
            f"{fmt_us(ctl + sum(ranks))}")


def bench_prepared(args, cfg, rows):
    compiled = trivial_main.compile(1, config=cfg)
    compiled(1)                                          # compile and warm the cache
    oneshot = timed(lambda: compiled(1), args.oneshot)
    log(f"one-shot {best_median(oneshot)}")
    results, cpus = {}, {}
    for label, opts in (("fresh windows", {}),
                        ("persistent windows, zeroed", {"persistent": True}),
                        ("persistent windows, kept",
                         {"persistent": True, "reset_persistent_windows": False})):
        with compiled.prepare(**opts) as rt:
            timed(lambda: rt(1), args.warm)
            ts, cpus[label] = timed_with_cpu(rt, lambda: rt(1), args.calls)
        results[label] = ts
        log(f"prepared, {label}: {best_median(ts)}; CPU per call: {fmt_cpu(cpus[label])}")
    fresh = statistics.median(results["fresh windows"])
    for label, ts in results.items():
        med = statistics.median(ts)
        persistent = label.startswith("persistent")
        rows.append(Row(
            f"prepared 2-rank trivial call, {label} (median of {len(ts)})", best_median(ts),
            f"one-shot call {fmt_us(statistics.median(oneshot))}"
            + ("" if not persistent else f"; fresh windows {fmt_us(fresh)}"),
            "≤ 200 µs" if persistent else "—",
            ("pass" if med <= TARGET_PERSISTENT_S else "MISS") if persistent else "info"))
    for label, cpu in cpus.items():
        rows.append(Row(f"CPU time per prepared call, {label} (mean of {args.calls})",
                        fmt_cpu(cpu), "—", "—", "info"))


def interleaved(calls: dict, n: int) -> dict:
    """Time each callable ``n`` times, taking turns, so that all of them see
    the same background load; {name: [seconds]}."""
    out = {name: [] for name in calls}
    for _ in range(n):
        for name, call in calls.items():
            t0 = time.perf_counter()
            call()
            out[name].append(time.perf_counter() - t0)
    return out


def bench_submit(args, cfg, rows):
    compiled = trivial_main.compile(1, config=cfg)
    n = args.pairs
    for label, opts in (("kept persistent windows",
                         {"persistent": True, "reset_persistent_windows": False}),
                        ("fresh windows", {})):
        with compiled.prepare(**opts) as rt:
            timed(lambda: rt(1), args.warm)

            def blocking(work_s=0.0):
                rt(1)
                rt(1)
                if work_s:
                    time.sleep(work_s)

            def submitted(work_s=0.0):
                a = rt.submit(compiled, 1)
                b = rt.submit(compiled, 1)
                if work_s:
                    time.sleep(work_s)                   # the caller's own work
                a.result()
                b.result()

            t = interleaved({"blocking": blocking, "submitted": submitted}, n)
            tb, ts = t["blocking"], t["submitted"]
            log(f"{label}: two blocking {best_median(tb)}; two submitted {best_median(ts)}")
            rows.append(Row(f"two calls submitted back to back ({label}: the second is sent "
                            f"while the first runs), both results taken (median of {n})",
                            best_median(ts), f"two blocking calls {best_median(tb)}",
                            "submitted < blocking",
                            "pass" if statistics.median(ts) < statistics.median(tb) else "MISS"))
            if label != "kept persistent windows":
                continue
            work = args.work_us * 1e-6
            t = interleaved({"blocking": lambda: blocking(work),
                             "submitted": lambda: submitted(work)}, n)
            tbw, tsw = t["blocking"], t["submitted"]
            log(f"with {args.work_us} µs of caller work: blocking {best_median(tbw)}; "
                f"submitted {best_median(tsw)}")
            ok = statistics.median(tsw) < statistics.median(tbw)
            rows.append(Row(f"two submitted calls + {args.work_us} µs of caller work (I/O-like, "
                            f"releases the GIL) before their results (median of {n})",
                            best_median(tsw),
                            f"two blocking calls, then the same work: {best_median(tbw)}",
                            "submitted < blocking", "pass" if ok else "MISS"))


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer calls (a few seconds)")
    ap.add_argument("--transport", choices=list(TRANSPORT_NAMES), default="shm")
    ap.add_argument("--work-us", type=int, default=500,
                    help="caller-side work between submitting and taking results (µs)")
    args = ap.parse_args(argv)
    if args.quick:
        args.calls, args.warm, args.oneshot, args.pairs = 300, 30, 3, 100
    else:
        args.calls, args.warm, args.oneshot, args.pairs = 2000, 200, 10, 500
    return args


def main(argv=None):
    args = parse_args(argv)
    cfg = RunConfig(distributed_config=DistributedConfig(device_ids=[0, 1]),
                    transport=args.transport)
    try:
        with open("/proc/loadavg") as f:
            load = " ".join(f.read().split()[:3])
    except OSError:
        load = "?"
    print(f"# tilecomm DistributedWorker benchmark ({args.transport} transport, "
          f"{os.cpu_count()} CPUs, load average {load}{', quick' if args.quick else ''})\n")
    rows: list = []
    bench_prepared(args, cfg, rows)
    bench_submit(args, cfg, rows)
    print("| figure | measured | anchor (same run) | target | result |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r.figure} | {r.measured} | {r.anchor} | {r.target} | {r.result} |")
    return rows


if __name__ == "__main__":
    main()
