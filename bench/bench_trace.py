"""What tracing costs: the same calls untraced and with
``RunConfig(enable_chip_swimlane=...)``, side by side in one run.

    python bench/bench_trace.py            # N = 2000 ops per call
    python bench/bench_trace.py --quick    # N = 300, fewer repeats (< 30 s)

Method (as in bench_primitives.py).  A call whose kernel loops N times and
one whose kernel loops 0 times, on the same prepared ranks, best of several
repeats; the cost per iteration is (t_N - t_0) / N.  Each iteration is one
``pld.system.notify`` and one ``pld.system.wait``:

* self-signal, 1 rank: the rank notifies its own cell and waits for it (the
  condition already holds), so the figure is the in-kernel cost of two ops;
* ping-pong, 2 ranks: a notify -> wait round trip between two processes.

Two traced figures: "in the kernel", from the dispatch slices the trace
itself records (what recording adds while the program runs), and "whole
call", from wall time (plus writing each rank's file and merging the trace
of the call, matching every wait with its notify).  "Overhead per traced op"
is the traced minus the untraced cost per iteration, divided by the two ops
of an iteration.  This
is a benchmark, not a test: nothing asserts speed.
"""
import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

from kernels import pingpong_kernel, selfsig_kernel   # bench/kernels.py


def config(nr: int, **kw) -> RunConfig:
    return RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr))), **kw)


def build(kernel, nr: int):
    @pl.jit
    def chip(out: pl.Out[pl.Tensor[[1, 1], pl.INT32]],
             sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]], n: pl.Scalar[pl.INT32]):
        return kernel(out, sig, n)

    @pl.jit.host
    def main(outs: pl.Out[pl.Tensor[[nr, 1, 1], pl.INT32]], n: pl.Scalar[pl.INT32]):
        buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            chip(outs[r], pld.window(buf, [1, 1], dtype=pl.INT32), n, device=r)
        return outs

    return main


def per_iteration(call, n: int, repeats: int, after=None):
    """(best t_n - best t_0) / n, the two interleaved; with ``after``, also
    (best after() of the n calls - best after() of the 0 calls) / n."""
    call(0)
    call(n)                                       # warm: compile, first traces
    b0 = bn = a0 = an = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        call(0)
        b0 = min(b0, time.perf_counter() - t)
        if after:
            a0 = min(a0, after())
        t = time.perf_counter()
        call(n)
        bn = min(bn, time.perf_counter() - t)
        if after:
            an = min(an, after())
    return (bn - b0) / n, ((an - a0) / n if after else None)


def dispatch_seconds(path: str) -> float:
    """Rank 0's dispatch slice in the merged trace: the kernel's own time,
    without writing or merging any file."""
    with open(path) as f:
        evs = json.load(f)["traceEvents"]
    (pid,) = [e["pid"] for e in evs if e["ph"] == "M" and e["name"] == "process_name"
              and e["args"]["name"] == "rank 0"]
    return min(e["dur"] for e in evs if e["ph"] == "X" and e["cat"] == "dispatch"
               and e["pid"] == pid) / 1e6


def measure(name, kernel, nr, n, repeats, level, cache):
    main = build(kernel, nr)
    outs = np.zeros((nr, 1, 1), np.int32)
    cp = main.compile(outs, 0, config=config(nr, cache_dir=cache))
    plain, traced = config(nr), config(nr, enable_chip_swimlane=level)
    with cp.prepare() as worker:
        def run(cfg):
            def call(k):
                outs[:] = 0
                worker(outs, k, config=cfg)
                assert (outs == k).all(), outs.ravel()
            return call
        t_plain, _ = per_iteration(run(plain), n, repeats)
        t_traced, t_kernel = per_iteration(run(traced), n, repeats,
                                           lambda: dispatch_seconds(cp.trace_path))
    size = os.path.getsize(cp.trace_path)
    return (name, t_plain, t_kernel, (t_kernel - t_plain) / 2, t_traced,
            (t_traced - t_plain) / 2, size)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="N = 300, 3 repeats")
    ap.add_argument("--level", type=int, default=4, help="enable_chip_swimlane level (2-4)")
    args = ap.parse_args(argv)
    n, repeats = (300, 3) if args.quick else (2000, 5)
    print(f"mode: {'quick' if args.quick else 'full'}; N = {n} iterations of notify + wait "
          f"per call; swimlane level {args.level}; {os.cpu_count()} cpus", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="tilecomm-bench-trace-") as cache:
        rows.append(measure("self-signal notify + wait, 1 rank", selfsig_kernel, 1, n,
                            repeats, args.level, cache))
        rows.append(measure("ping-pong round trip, 2 ranks", pingpong_kernel, 2, n,
                            repeats, args.level, cache))
    print()
    print("| figure | untraced / iteration | traced, in the kernel / iteration | recording "
          "overhead per traced op | traced, whole call / iteration | overhead per traced op "
          "incl. writing + merging | merged trace |")
    print("|---|---|---|---|---|---|---|")
    for name, a, k, k_op, b, b_op, size in rows:
        print(f"| {name} | {a * 1e6:.2f} µs | {k * 1e6:.2f} µs | {k_op * 1e6:.2f} µs | "
              f"{b * 1e6:.2f} µs | {b_op * 1e6:.2f} µs | {size / 1024:.0f} KiB "
              f"({2 * n} ops) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
