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
RSS; the largest peak RSS of a rank (from the rusage ``wait4`` returns when
the caller reaps it; RSS counts in every rank the pages it still shares with
the caller after the fork, so these do not add up); and, summed over the
ranks, what each holds once it has run its part, its windows still mapped
(read from its own /proc/self/smaps_rollup just before it reports the run
finished): PSS (shared pages divided among their sharers, so the sum is
what the ranks really use) and private memory (pages no other process
shares).

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
import tempfile
import time

from report import Row, log

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "examples", "allreduce_quickstart.py")
TARGETS_S = {256: 4.0, 1024: 30.0}     # DESIGN.md section 4 and its notes

# Runs the example in a process of its own, as its command line would, and
# reports what the caller and its ranks used.  Reaping goes through wait4 so
# that each rank's rusage (peak RSS) is kept.
_DRIVER = r"""
import json, os, resource, runpy, sys, time
t0 = time.perf_counter()
exits = sys.argv[3]
peaks = []
def waitpid(pid, options):
    got, status, usage = os.wait4(pid, options)
    if got:
        peaks.append(usage.ru_maxrss)
    return got, status
os.waitpid = waitpid
from tilecomm.runtime.control import ShmControlPlane
finish_run = ShmControlPlane.finish_run
def finishing(plane, rank):
    # in a rank, once it has run its part (windows still mapped), before it
    # reports the run finished -- so the caller cannot stop it first: what it
    # holds, from its own smaps_rollup
    try:
        with open("/proc/self/smaps_rollup") as f:
            kb = {k: int(v.split()[0]) for k, v in
                  (line.split(":", 1) for line in f if line[0].isupper())}
        with open(exits, "a") as f:
            f.write(f"{kb['Pss']} {kb['Private_Clean'] + kb['Private_Dirty']}\n")
    except (OSError, KeyError, ValueError):
        pass
    finish_run(plane, rank)
ShmControlPlane.finish_run = finishing
sys.argv = [sys.argv[1], "--ranks", sys.argv[2]]
runpy.run_path(sys.argv[0], run_name="__main__")
wall = time.perf_counter() - t0
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
with open(exits) as f:
    at_exit = [tuple(map(int, line.split())) for line in f]
print(json.dumps({"wall": wall, "caller_cpu": me.ru_utime + me.ru_stime,
                  "ranks_cpu": kids.ru_utime + kids.ru_stime, "caller_rss_kb": me.ru_maxrss,
                  "rank_rss_max_kb": max(peaks, default=0), "rank_rss_sum_kb": sum(peaks),
                  "ranks_pss_kb": sum(p for p, _ in at_exit),
                  "ranks_private_kb": sum(q for _, q in at_exit),
                  "reaped": len(peaks), "reported": len(at_exit)}))
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


def run_quickstart(n: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        exits = os.path.join(tmp, "exits")
        open(exits, "w").close()
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", _DRIVER, EXAMPLE, str(n), exits],
                             check=True, capture_output=True, text=True)
        wall = time.perf_counter() - t0             # interpreter start included
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["process_wall"] = wall
    if res["reaped"] != n or res["reported"] != n:
        raise RuntimeError(f"{n} ranks but {res['reaped']} processes reaped, "
                           f"{res['reported']} reported their memory")
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


def bench(n: int, repeats: int) -> Row:
    runs = []
    for i in range(repeats):
        log(f"{n} ranks, run {i + 1}/{repeats} (load {load()})")
        runs.append(run_quickstart(n))
    walls = [r["process_wall"] for r in runs]
    mid = statistics.median(walls)
    last = runs[-1]
    floor = fork_floor(n)
    measured = (f"{mid:.2f} s (best {min(walls):.2f}); CPU: caller {last['caller_cpu']:.1f} s, "
                f"ranks {last['ranks_cpu']:.1f} s; peak RSS: caller "
                f"{mib(last['caller_rss_kb'])}, a rank {mib(last['rank_rss_max_kb'])}; all ranks "
                f"after their part: PSS {mib(last['ranks_pss_kb'])}, private "
                f"{mib(last['ranks_private_kb'])}")
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
    args = ap.parse_args(argv)
    counts = [int(x) for x in args.ranks.split(",")] if args.ranks else \
        ([64, 256] if args.quick else [64, 256, 512, 1024])
    print(f"# tilecomm ranks benchmark ({os.cpu_count()} CPUs, load average {load()}, "
          f"{args.repeats} run(s) each)\n")
    rows = [bench(n, args.repeats) for n in counts]
    print("| figure | measured | anchor (same run) | target | result |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r.figure} | {r.measured} | {r.anchor} | {r.target} | {r.result} |")
    print(f"\nload average at the end: {load()}")
    return rows


if __name__ == "__main__":
    main()
