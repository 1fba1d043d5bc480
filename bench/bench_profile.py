"""Where the time of two small things goes: an 8 B hand-written protocol
round, by rank-context method, and a prepared call, by phase.

    python bench/bench_profile.py rounds [--protocol mesh] [--n 20000]
    python bench/bench_profile.py call [--calls 1000]

``rounds``: every rank-context method the lowered kernel calls is wrapped in
a perf_counter pair inside the rank processes (forked after the wrapping);
the wrapper's own cost is measured there and subtracted.  Rank 0's figures
per protocol round are printed; what the methods do not cover is the lowered
code's own loops and branches.  ``wait`` includes the time the peer took to
notify, so it follows the load.

``call``: the phases of ``controller.run.Run`` (begin: __init__, prepare,
share, start, orchestrate, end -- sending the dispatches, during which the
woken ranks often run on the caller's core -- then watch, collect,
release), medians over many prepared calls of a trivial 2-rank program on
kept persistent windows; "outside Run" is the worker's own part.

A diagnostic, not a benchmark: wrapping costs time itself; compare the
shares, and figures taken in the same run."""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from time import perf_counter

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_protocols as bp  # noqa: E402
from bench_primitives import loadavg  # noqa: E402

METHODS = ("copy_at", "store_at", "load_at", "remote_load_at", "accum_begin", "accum_at",
           "accum_store_at", "binary_at", "store_binary_at", "notify", "wait", "remote_store",
           "put", "rank", "nranks", "get_comm_ctx")


def rounds(protocol: str, n: int) -> None:
    import tilecomm.runtime.controller.ranks as R
    from tilecomm.runtime.rank.context import RankContext
    out = tempfile.mkdtemp(prefix="tilecomm-profile-")
    spent: dict = {}
    depth = [0]

    def wrap(name):
        f = getattr(RankContext, name)

        def w(self, *a):
            if depth[0]:                    # a method called by another: the outer one counts
                return f(self, *a)
            depth[0] = 1
            t = perf_counter()
            try:
                return f(self, *a)
            finally:
                d = perf_counter() - t
                depth[0] = 0
                s = spent.setdefault(name, [0, 0.0])
                s[0] += 1
                s[1] += d
        return w

    plain_main = R.rank_main

    def rank_main(rank, setup, channel):
        for m in METHODS:
            if hasattr(RankContext, m):
                setattr(RankContext, m, wrap(m))

        def nothing(*a):
            return None
        k = 100_000
        t = perf_counter()
        for _ in range(k):
            t0 = perf_counter()
            nothing(1, 2)
            perf_counter() - t0
        spent["_wrapper"] = [k, perf_counter() - t]
        try:
            return plain_main(rank, setup, channel)
        finally:
            with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
                json.dump(spent, f)

    R.rank_main = rank_main
    cols = 2
    main = bp.BUILDERS[protocol](bp.NR, cols)
    xs = np.ones((bp.NR, 1, cols), np.float32)
    ys = np.zeros((bp.NR, 1, cols), np.float32)
    cfg = bp.config()
    compiled = main.compile(xs, ys, 0, config=cfg)
    with compiled.prepare(xs, ys, 0, config=cfg) as w:
        w(xs, ys, 0)
        t = time.perf_counter()
        w(xs, ys, 0)
        t0 = time.perf_counter() - t
        t = time.perf_counter()
        w(xs, ys, n)
        tn = time.perf_counter() - t
    with open(os.path.join(out, "rank0.json")) as f:
        d = json.load(f)
    k, s = d.pop("_wrapper")
    per = s / k
    calls = n + 2                           # rounds run in the three calls
    print(f"{protocol} 8 B: {(tn - t0) / n * 1e6:.2f} us per round with the wrappers; "
          f"load {loadavg()}")
    total = 0.0
    for m, (k, s) in sorted(d.items(), key=lambda kv: -kv[1][1]):
        us = (s - k * per) / calls * 1e6
        total += us
        print(f"  {m:16s} {k / calls:5.1f} calls/round {us:7.2f} us/round "
              f"{(s / k - per) * 1e6:6.2f} us/call")
    print(f"  methods together {total:.2f} us/round (wrapper {per * 1e6:.2f} us/call "
          f"subtracted)")


def call(calls: int) -> None:
    from kernels import trivial_main
    from tilecomm.runtime.controller import run as RUN
    spent: dict = {}

    def wrap(name):
        f = getattr(RUN.Run, name)

        def w(*a, **k):
            t = perf_counter()
            try:
                return f(*a, **k)
            finally:
                spent.setdefault(name, []).append(perf_counter() - t)
        setattr(RUN.Run, name, w)

    for name in ("__init__", "prepare", "share", "start", "orchestrate", "end", "watch",
                 "collect", "release"):
        wrap(name)
    compiled = trivial_main.compile(1, config=bp.config())
    ts = []
    with compiled.prepare(persistent=True, reset_persistent_windows=False) as rt:
        for _ in range(200):
            rt(1)
        spent.clear()
        for _ in range(calls):
            t = perf_counter()
            rt(1)
            ts.append(perf_counter() - t)
    med = statistics.median(ts) * 1e6
    print(f"prepared call, kept windows: median {med:.1f} us over {calls}; load {loadavg()}")
    total = 0.0
    for name, v in spent.items():
        m = statistics.median(v) * 1e6
        total += m
        print(f"  {name:12s} {m:6.1f} us")
    print(f"  outside Run  {med - total:6.1f} us")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("rounds", "call"))
    ap.add_argument("--protocol", choices=bp.PROTOCOLS, default="mesh")
    ap.add_argument("--n", type=int, default=20_000, help="protocol rounds")
    ap.add_argument("--calls", type=int, default=1000, help="prepared calls")
    args = ap.parse_args(argv)
    if args.what == "rounds":
        rounds(args.protocol, args.n)
    else:
        call(args.calls)
    return 0


if __name__ == "__main__":
    sys.exit(main())
