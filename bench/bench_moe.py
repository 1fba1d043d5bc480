"""MoE dispatch/combine round and sharded GEMM, each beside its anchor.

    python bench/bench_moe.py             # 2, 4 and 8 ranks, DeepSeek-sized layer
    python bench/bench_moe.py --quick     # fewer repeats
    python bench/bench_moe.py --profile   # where a 2-rank round spends its time

MoE (examples/moe_dispatch_combine.py, T=128 tokens per rank, top-6 of 16
experts per rank, H=4096 BF16, 192 rows per expert): the program is built
with its first 0, 1, 2 and 3 phases (0 = the call with its windows and no
kernel), each run on a prepared worker (ranks stay up, windows fresh every
call), best of repeats; a phase's time is the difference of consecutive
prefixes, so call, argument and window costs cancel out.  Each is timed
twice: with fresh windows every call, where a round's first writes into
them fault their pages in (thousands per rank per round), and with windows
the worker keeps (``prepare(persistent=True)``, zeroed before each call),
the setting of a layer called again and again.  Effective bytes/s
counts the payload the phase moves between ranks over all ranks (BF16 rows,
dispatch: + weight and route per row) divided by the phase time.  The
numpy column is the same round computed by numpy in this process (the
example's reference: no communication), as a scale for the arithmetic.  A
second table gives the phases in CPU time of a rank (its chip function's
thread time, median over calls, mean over ranks, differences of prefixes
again): on a shared machine wall time also counts other processes' turns on
the cores, CPU time mostly does not.

GEMM (examples/sharded_gemm.py): rank r computes c[r] = a[r] @ b and the
shards are all-gathered; timed as (round - empty call) like the MoE phases,
beside numpy.matmul of the same [nr*M, K] @ [K, N] in this process, with
numpy's BLAS pool and on one thread (what each rank uses).

--profile runs rounds at 2 ranks, first timing each rank's chip function
in CPU (thread) time -- the figure to compare before and after a change on a
shared machine -- then under cProfile (the bench patches the rank image
before the ranks are forked), and prints rank 0's top functions.  Nothing here asserts speed.
"""
# no `from __future__ import annotations`: program factories capture their sizes
import argparse
import contextlib
import cProfile
import importlib.util
import os
import pstats
import sys
import tempfile
import time

import numpy as np
from threadpoolctl import threadpool_limits

from tilecomm.runtime import DistributedConfig, RunConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_example(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "examples",
                                                                     name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


moe = load_example("moe_dispatch_combine")


def config(nr):
    return RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr))))


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def fmt_s(t):
    return f"{t * 1e3:8.2f} ms"


def fmt_rate(nbytes, t):
    return f"{nbytes / t / 1e9:6.2f} GB/s" if t > 0 else "   n/a"


# ------------------------------------------------------------------ MoE
def moe_inputs(nr, shape, seed=0):
    rng = np.random.default_rng(seed)
    xs, idxs, wts = moe.make_inputs(rng, nr, shape, full=(0,), empty=(nr * shape.experts - 1,))
    ys = np.zeros(xs.shape, np.float32)
    stats = np.zeros((nr, 1, shape.experts + 1), np.int32)
    return xs, idxs, wts, ys, stats


def time_prefixes(nr, shape, repeats, persistent=False):
    """Per prefix of 0..3 phases: the best call time, and the CPU (thread) time
    of a rank's chip function (median over calls, mean over ranks); and the
    full round's stats, checked against the reference.  The four programs
    stay prepared side by side and are called in turn, so a burst of other
    load hits them alike.  ``persistent``: the workers keep their windows
    (zeroed before every call while the ranks are idle) instead of fresh
    ones per call."""
    xs, idxs, wts, ys, stats = moe_inputs(nr, shape)
    args = (xs, idxs, wts, ys, stats)
    cfg = config(nr)
    progs = [moe.build(nr, shape, phases).compile(*args, config=cfg) for phases in range(4)]
    keys = [program_key(p, args) for p in progs]
    best = [float("inf")] * 4
    with probing(cpu_probe) as out_dir, contextlib.ExitStack() as stack:
        workers = [stack.enter_context(p.prepare(*args, config=cfg, persistent=persistent))
                   for p in progs]
        for w in workers:
            w(*args)                                    # first call on these ranks, untimed
        for _ in range(repeats):
            for i, w in enumerate(workers):
                t0 = time.perf_counter()
                w(*args)
                best[i] = min(best[i], time.perf_counter() - t0)
        cpu = [float(np.mean([np.median(t[1:]) for t in cpu_times(out_dir, nr, key)]))
               for key in keys]
    for phases in range(4):
        log(f"  moe {nr} ranks, {phases} phase(s){', kept windows' if persistent else ''}: "
            f"best {fmt_s(best[phases])}, rank CPU {fmt_s(cpu[phases])}")
    want, want_stats = moe.reference(xs, idxs, wts, shape)
    np.testing.assert_array_equal(stats[:, 0], want_stats)
    np.testing.assert_allclose(ys, want, rtol=2 ** -6, atol=2 ** -6)
    return best, cpu, want_stats


def numpy_round(nr, shape, repeats):
    xs, idxs, wts, _, _ = moe_inputs(nr, shape)
    b = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        moe.reference(xs, idxs, wts, shape)
        b = min(b, time.perf_counter() - t0)
    return b


def bench_moe(ranks, repeats):
    shape = moe.DEEPSEEK
    row = shape.hidden * 2
    rows = []
    for nr in ranks:
        log(f"MoE round, {nr} ranks")
        best, cpu, st = time_prefixes(nr, shape, repeats)
        kept_best, _, _ = time_prefixes(nr, shape, repeats, persistent=True)
        kept = int(st[:, :-1].sum())
        phase = [max(best[i + 1] - best[i], 0.0) for i in range(3)]
        phase_cpu = [cpu[i + 1] - cpu[i] for i in range(3)]
        rows.append((nr, kept, int(st[:, -1].sum()), phase, best[3] - best[0], best[0],
                     kept * (row + 8), kept * row, numpy_round(nr, shape, max(1, repeats // 2)),
                     phase_cpu, kept_best[3] - kept_best[0]))
    print(f"\nMoE dispatch/combine round (T={shape.tokens}/rank, top-{shape.topk} of "
          f"{shape.experts} experts/rank, H={shape.hidden} BF16, capacity {shape.capacity}); "
          f"wall time, best of {repeats}")
    print(f"{'ranks':>5} {'rows':>6} {'dropped':>7} | {'dispatch':>11} {'(rate)':>11} | "
          f"{'expert+return':>13} {'(rate)':>11} | {'combine':>11} | {'round':>11} | "
          f"{'call, no kernel':>15} | {'numpy round':>11}")
    for nr, kept, dropped, ph, rnd, empty, dbytes, rbytes, npt, *_ in rows:
        print(f"{nr:>5} {kept:>6} {dropped:>7} | {fmt_s(ph[0])} {fmt_rate(dbytes, ph[0])} | "
              f"{fmt_s(ph[1]):>13} {fmt_rate(rbytes, ph[1])} | {fmt_s(ph[2])} | {fmt_s(rnd)} | "
              f"{fmt_s(empty):>15} | {fmt_s(npt)}")
    print("\nthe same phases in CPU time of one rank (its chip function's thread time, median "
          "of the calls, mean over ranks)")
    print(f"{'ranks':>5} | {'dispatch':>11} | {'expert+return':>13} | {'combine':>11} | "
          f"{'round':>11}")
    for nr, *_, pc, _ in rows:
        print(f"{nr:>5} | {fmt_s(pc[0])} | {fmt_s(pc[1]):>13} | {fmt_s(pc[2])} | "
              f"{fmt_s(sum(pc))}")
    print("\nthe round beside numpy: fresh windows every call (above), and windows kept by "
          "the worker (prepare(persistent=True): zeroed before each call while the ranks are "
          "idle, so a round writes pages already mapped); target at 2 ranks: within 2× of numpy")
    print(f"{'ranks':>5} | {'fresh windows':>13} | {'kept windows':>12} | {'numpy round':>11} | "
          f"{'kept / numpy':>12} | result")
    for nr, _, _, _, rnd, _, _, _, npt, _, kept_rnd in rows:
        ratio = kept_rnd / npt
        verdict = ("pass" if ratio <= 2 else "MISS") if nr == 2 else "info"
        print(f"{nr:>5} | {fmt_s(rnd):>13} | {fmt_s(kept_rnd):>12} | {fmt_s(npt)} | "
              f"{ratio:>11.2f}× | {verdict}")


# ------------------------------------------------------------------ GEMM
def bench_gemm(ranks, repeats):
    repeats *= 3                                     # calls of a few ms: more of them
    try:
        gemm = load_example("sharded_gemm")
    except FileNotFoundError:
        log("examples/sharded_gemm.py not present: GEMM skipped")
        return
    print(f"\nSharded GEMM c[r] = a[r] @ b + allgather, FP32; best of {repeats}")
    print(f"{'ranks':>5} {'shape per rank':>22} | {'tilecomm':>11} | {'numpy.matmul':>12} | "
          f"{'(1 thread)':>13} | {'call, no kernel':>15}")
    for nr in ranks:
        m, k, n = gemm.BENCH_SHAPE
        rng = np.random.default_rng(nr)
        a = rng.standard_normal((nr, m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        cfg = config(nr)
        out = np.zeros((nr, nr * m, n), np.float32)
        progs = [gemm.build(nr, m, k, n, compute=c).compile(a, b, out, config=cfg)
                 for c in (False, True)]
        best = [float("inf")] * 2
        with contextlib.ExitStack() as stack:
            workers = [stack.enter_context(p.prepare(a, b, out, config=cfg)) for p in progs]
            for w in workers:
                w(a, b, out)
            for _ in range(repeats):
                for i, w in enumerate(workers):
                    t0 = time.perf_counter()
                    w(a, b, out)
                    best[i] = min(best[i], time.perf_counter() - t0)
        want = gemm.reference(a, b)
        for r in range(nr):
            np.testing.assert_allclose(out[r], want, rtol=1e-4, atol=1e-4)
        flat = a.reshape(nr * m, k)
        t_np = [float("inf")] * 2
        for _ in range(repeats):
            for i, threads in enumerate((None, 1)):     # numpy's default pool; one thread
                with threadpool_limits(limits=threads, user_api="blas"):
                    t0 = time.perf_counter()
                    np.matmul(flat, b)
                    t_np[i] = min(t_np[i], time.perf_counter() - t0)
        print(f"{nr:>5} {f'[{m}, {k}] @ [{k}, {n}]':>22} | {fmt_s(best[1] - best[0])} | "
              f"{fmt_s(t_np[0]):>12} | {fmt_s(t_np[1]):>13} | {fmt_s(best[0]):>15}")


# ------------------------------------------------------------------ profile
@contextlib.contextmanager
def probing(probe):
    """Ranks forked inside this block run each chip function as
    ``probe(fn, rc, args, out_dir)`` (the bench patches the rank image class
    before the ranks are forked; nothing of tilecomm changes).  Yields the
    directory the probe writes into; removes it afterwards."""
    from tilecomm.runtime.executable import KernelImage
    out_dir = tempfile.mkdtemp(prefix="bench_moe_probe_")
    plain = KernelImage.function

    def probed(self, name):
        fn = plain(self, name)
        return lambda rc, *args: probe(fn, rc, args, out_dir)

    KernelImage.function = probed
    try:
        yield out_dir
    finally:
        KernelImage.function = plain
        for f in os.listdir(out_dir):
            os.unlink(os.path.join(out_dir, f))
        os.rmdir(out_dir)


def run_rounds(nr, rounds):
    """``rounds`` full MoE rounds on a prepared worker; the program's key."""
    shape = moe.DEEPSEEK
    args = moe_inputs(nr, shape)
    cfg = config(nr)
    compiled = moe.build(nr, shape).compile(*args, config=cfg)
    with compiled.prepare(*args, config=cfg) as worker:
        for _ in range(rounds):
            worker(*args)
    return program_key(compiled, args)


def program_key(compiled, args):
    """What the probes call a program: its lowered file's name."""
    return os.path.basename(compiled.lowered(*args).filename)


def cpu_times(out_dir, nr, key):
    """Per rank, the thread times its probe recorded for program ``key``, in
    call order."""
    out = []
    for r in range(nr):
        with open(os.path.join(out_dir, f"{key}.rank{r}.cpu")) as f:
            out.append([float(x) for x in f.read().split()])
    return out


def cpu_probe(fn, rc, args, out_dir):
    """CPU time of this rank's thread for the round: immune to the waits in
    barriers and, mostly, to other load on a shared machine."""
    t0 = time.thread_time()
    try:
        return fn(rc, *args)
    finally:
        key = os.path.basename(rc.image.filename)
        with open(os.path.join(out_dir, f"{key}.rank{rc.device}.cpu"), "a") as f:
            f.write(f"{time.thread_time() - t0}\n")


_PROFILES = {}


def profile_probe(fn, rc, args, out_dir):
    prof = _PROFILES.setdefault(os.getpid(), cProfile.Profile())
    prof.enable()
    try:
        return fn(rc, *args)
    finally:
        prof.disable()
        prof.dump_stats(os.path.join(out_dir, f"rank{rc.device}.prof"))


def profile_round(nr, rounds):
    with probing(cpu_probe) as out_dir:
        key = run_rounds(nr, rounds)
        print(f"\nCPU time per MoE round at {nr} ranks (thread time of each rank's round, "
              f"median of {rounds - 1}; the first round is left out)")
        for r, ts in enumerate(cpu_times(out_dir, nr, key)):
            print(f"  rank {r}: {fmt_s(float(np.median(ts[1:])))}")
    with probing(profile_probe) as out_dir:
        run_rounds(nr, rounds)
        print(f"\nProfile of rank 0 over {rounds} MoE round(s) at {nr} ranks")
        st = pstats.Stats(os.path.join(out_dir, "rank0.prof"), stream=sys.stdout)
        st.sort_stats("tottime").print_stats(15)
        st.sort_stats("cumulative").print_stats(20)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats")
    ap.add_argument("--ranks", type=int, nargs="*", default=[2, 4, 8])
    ap.add_argument("--profile", action="store_true", help="profile a 2-rank round instead")
    args = ap.parse_args(argv)
    if args.profile:
        profile_round(2, 4 if args.quick else 10)
        return 0
    repeats = 3 if args.quick else 7
    t0 = time.perf_counter()
    bench_moe(args.ranks, repeats)
    bench_gemm(args.ranks, repeats)
    print(f"\n(total {time.perf_counter() - t0:.1f} s; {os.cpu_count()} CPUs, shared)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
