"""Many ranks on few cores: the quickstart's mesh allreduce at 64 to 1024 ranks.

    python bench/bench_ranks.py                  # 64, 256, 512, 1024 ranks (~1 min idle)
    python bench/bench_ranks.py --quick          # 64 and 256 ranks
    python bench/bench_ranks.py --ranks 1024 --repeats 3

Each measurement is a fresh ``python examples/allreduce_quickstart.py
--ranks N`` process (the command the target names), so interpreter start,
imports, compiling and forking are all in the figure.  Printed per rank
count: the wall time of that process (median and best of the repeats), its
CPU time and that of all its ranks (on a shared machine the wall time
follows the load, the CPU time much less), and memory: the caller's peak
RSS; each rank's peak RSS (from the rusage ``wait4`` returns when the caller
reaps it), the largest and the sum -- an upper bound, as RSS counts in every
rank the pages it still shares with the caller after the fork; and the
peak of the ranks' summed PSS (shared pages divided among their sharers, so
the sum is what they really hold), sampled every ``--sample-s`` seconds or
ten times as long as a sample takes (a sample reads every rank's
/proc/<pid>/smaps_rollup), so sampling costs at most a tenth of a core.

Anchor (same run): forking N bare processes from a Python process of the
caller's size and reaping them -- the floor of any design with one process
per rank on this machine.  The quickstart's own work grows as N^2 (every
rank notifies, waits for and loads from every peer).

A benchmark, not a test: nothing here asserts speed.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from report import Row, log

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "examples", "allreduce_quickstart.py")
TARGETS_S = {256: 4.0, 1024: 30.0}     # DESIGN.md section 4 and its notes

# Runs the example in a process of its own, as its command line would, and
# reports what the caller and its ranks used.  Reaping goes through wait4 so
# that each rank's rusage (peak RSS) is kept.
_DRIVER = r"""
import json, os, resource, runpy, sys, threading, time
t0 = time.perf_counter()
peaks, pids, pss = [], [], {"ranks": 0, "all": 0}
def waitpid(pid, options):
    got, status, usage = os.wait4(pid, options)
    if got:
        peaks.append(usage.ru_maxrss)
    return got, status
os.waitpid = waitpid
fork = os.fork
def forked():
    pid = fork()
    if pid:
        pids.append(pid)
    return pid
os.fork = forked
def pss_kb(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0
def sample(period, stop):
    pause = period
    while not stop.wait(pause):
        t = time.perf_counter()
        ranks = sum(pss_kb(p) for p in list(pids))
        pss["ranks"] = max(pss["ranks"], ranks)
        pss["all"] = max(pss["all"], ranks + pss_kb("self"))
        pause = max(period, 10 * (time.perf_counter() - t))   # at most a tenth of a core
stop = threading.Event()
period = float(sys.argv[3])
if period > 0:
    threading.Thread(target=sample, args=(period, stop), daemon=True).start()
sys.argv = [sys.argv[1], "--ranks", sys.argv[2]]
runpy.run_path(sys.argv[0], run_name="__main__")
stop.set()
wall = time.perf_counter() - t0
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"wall": wall, "caller_cpu": me.ru_utime + me.ru_stime,
                  "ranks_cpu": kids.ru_utime + kids.ru_stime, "caller_rss_kb": me.ru_maxrss,
                  "rank_rss_max_kb": max(peaks, default=0), "rank_rss_sum_kb": sum(peaks),
                  "ranks_pss_kb": pss["ranks"], "all_pss_kb": pss["all"],
                  "reaped": len(peaks)}))
"""

# The anchor: fork n processes that exit at once, reap them.
_FORK_FLOOR = r"""
import os, sys, time
import numpy  # the caller's size: numpy is part of every tilecomm process
n = int(sys.argv[1])
t0 = time.perf_counter()
pids = []
for _ in range(n):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    pids.append(pid)
for pid in pids:
    os.waitpid(pid, 0)
print(time.perf_counter() - t0)
"""


def run_quickstart(n: int, sample_s: float) -> dict:
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", _DRIVER, EXAMPLE, str(n), str(sample_s)],
                         check=True,
                         capture_output=True, text=True)
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["process_wall"] = time.perf_counter() - t0     # interpreter start included
    if res["reaped"] != n:
        raise RuntimeError(f"{n} ranks but {res['reaped']} processes reaped")
    return res


def fork_floor(n: int) -> float:
    out = subprocess.run([sys.executable, "-c", _FORK_FLOOR, str(n)], check=True,
                         capture_output=True, text=True)
    return float(out.stdout.strip())


def load() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def mib(kb: float) -> str:
    return f"{kb / 1024:.0f} MiB"


def bench(n: int, repeats: int, sample_s: float) -> Row:
    runs = []
    for i in range(repeats):
        log(f"{n} ranks, run {i + 1}/{repeats} (load {load()})")
        runs.append(run_quickstart(n, sample_s))
    walls = [r["process_wall"] for r in runs]
    mid = statistics.median(walls)
    last = runs[-1]
    floor = fork_floor(n)
    pss = "" if not last["ranks_pss_kb"] else \
        f"; PSS of all ranks {mib(last['ranks_pss_kb'])}, with the caller {mib(last['all_pss_kb'])}"
    measured = (f"{mid:.2f} s (best {min(walls):.2f}); CPU: caller {last['caller_cpu']:.1f} s, "
                f"ranks {last['ranks_cpu']:.1f} s; peak RSS: caller "
                f"{mib(last['caller_rss_kb'])}, a rank {mib(last['rank_rss_max_kb'])}, "
                f"summed {mib(last['rank_rss_sum_kb'])}{pss}")
    target = TARGETS_S.get(n)
    result = "—" if target is None else ("met" if mid <= target else "missed")
    return Row(f"quickstart allreduce, {n} ranks", measured,
               f"fork + reap {n} bare processes: {floor:.2f} s",
               "—" if target is None else f"≤ {target:.0f} s", result)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="64 and 256 ranks only")
    ap.add_argument("--ranks", default=None,
                    help="comma-separated rank counts (default 64,256,512,1024)")
    ap.add_argument("--repeats", type=int, default=1, help="runs per rank count")
    ap.add_argument("--sample-s", type=float, default=0.2,
                    help="period of the PSS samples of every rank (0: none)")
    args = ap.parse_args(argv)
    counts = [int(x) for x in args.ranks.split(",")] if args.ranks else \
        ([64, 256] if args.quick else [64, 256, 512, 1024])
    print(f"# tilecomm ranks benchmark ({os.cpu_count()} CPUs, load average {load()}, "
          f"{args.repeats} run(s) each)\n")
    rows = [bench(n, args.repeats, args.sample_s) for n in counts]
    print("| figure | measured | anchor (same run) | target | result |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r.figure} | {r.measured} | {r.anchor} | {r.target} | {r.result} |")
    print(f"\nload average at the end: {load()}")
    return rows


if __name__ == "__main__":
    main()
