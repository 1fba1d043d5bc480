"""Cost of race detection: one kernel timed with RunConfig(detect_races=False)
and with detect_races=True, side by side in one run.

Prints one markdown table row per figure: the call with detection on, its
anchor (the same call with detection off, measured in the same run,
interleaved), the target and pass/miss.  This is a benchmark, not a test:
nothing here asserts speed.

    python bench/bench_races.py            # 9 repetitions of each call
    python bench/bench_races.py --quick    # 5 repetitions
    python bench/bench_races.py --tile-rows 32   # 8 row tiles per peer instead of one

The kernel.  A hand-written mesh allreduce on 4 ranks, 1 MiB of FP32 per rank
(a [256, 1024] window), ITERS = 20 rounds inside one kernel.  Round i: stage
x + i into this rank's own window; barrier (every rank AtomicAdds 1 into its
row of every peer's signal, then waits until every peer's row reached 2i + 1);
pull every peer's copy with pld.tile.remote_load (the own copy with pl.load),
add, and accumulate into y (an ordinary output, not a window); barrier again
(2i + 2), so nobody restages round i + 1 while a peer still reads round i.
The protocol is race-free, so a run with detection on must come back clean;
y is checked against numpy after every call (sum over rounds of the ranks'
x + i).

Method.  Whole one-shot calls (fork, segments, argument copies included),
the off and on calls interleaved so slow drifts hit both alike; the figure is
the median of each and their ratio.  Because a call's launch costs the same
with and without detection, a second row takes it out: the same calls with
0 rounds, and the ratio of (t_20 - t_0) on to off -- the cost on the kernel's
own work.  The machine may be shared: a busy-loop probe (as in
bench_primitives.py) says how many cores were free.
"""
# no `from __future__ import annotations`: program annotations such as
# Tensor[[rows, cols], ...] must be evaluated at definition time so the
# factory's closure variables are captured.
import argparse
import os
import statistics
import sys
import time

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

from bench_primitives import cpu_probe, fmt_s, loadavg, machine_info, verdict
from report import Row, log

NR = 4
ROWS, COLS = 256, 1024          # 1 MiB of FP32 per rank
ITERS = 20


def config(detect: bool) -> RunConfig:
    kw = {"detect_races": True} if detect else {}     # off: the default, not the knob
    return RunConfig(distributed_config=DistributedConfig(device_ids=list(range(NR))), **kw)


# =========================================================================== program
def build(tile_rows: int):
    nb = ROWS // tile_rows

    @pl.jit.incore
    def allreduce_rounds(x: pl.Tensor[[ROWS, COLS], pl.FP32],
                         y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]],
                         data: pl.InOut[pld.DistributedTensor[[ROWS, COLS], pl.FP32]],
                         sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
                         n: pl.Scalar[pl.INT32]) -> pl.Tensor[[ROWS, COLS], pl.FP32]:
        ctx = pld.get_comm_ctx(data)
        me = pld.rank(ctx)
        nranks = pld.nranks(ctx)
        for b in pl.range(nb):
            y = pl.store(pl.tile.full([tile_rows, COLS], pl.FP32, 0.0), [b * tile_rows, 0], y)
        for i in pl.range(n):
            # stage round i's contribution in this rank's own window
            for b in pl.range(nb):
                t = pl.load(x, [b * tile_rows, 0], [tile_rows, COLS])
                pl.store(pl.add(t, pl.cast(i, pl.FP32)), [b * tile_rows, 0], data)
            # barrier 1: every copy holds round i
            for peer in pl.range(nranks):
                if peer != me:
                    pld.system.notify(sig, peer=peer, offsets=[me, 0], value=1,
                                      op=pld.NotifyOp.AtomicAdd)
            for src in pl.range(nranks):
                if src != me:
                    pld.system.wait(sig, offsets=[src, 0], expected=2 * i + 1,
                                    cmp=pld.WaitCmp.Ge)
            # pull and add every copy, accumulate into y
            for b in pl.range(nb):
                acc = pl.load(y, [b * tile_rows, 0], [tile_rows, COLS])
                acc = pl.add(acc, pl.load(data, [b * tile_rows, 0], [tile_rows, COLS]))
                for peer in pl.range(nranks):
                    if peer != me:
                        acc = pl.add(acc, pld.tile.remote_load(
                            data, peer=peer, offsets=[b * tile_rows, 0],
                            shape=[tile_rows, COLS]))
                y = pl.store(acc, [b * tile_rows, 0], y)
            # barrier 2: every rank is done reading round i before anyone restages
            for peer in pl.range(nranks):
                if peer != me:
                    pld.system.notify(sig, peer=peer, offsets=[me, 0], value=1,
                                      op=pld.NotifyOp.AtomicAdd)
            for src in pl.range(nranks):
                if src != me:
                    pld.system.wait(sig, offsets=[src, 0], expected=2 * i + 2,
                                    cmp=pld.WaitCmp.Ge)
        return y

    @pl.jit
    def chip(x: pl.Tensor[[ROWS, COLS], pl.FP32], y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]],
             data: pl.InOut[pld.DistributedTensor[[ROWS, COLS], pl.FP32]],
             sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
             n: pl.Scalar[pl.INT32]):
        return allreduce_rounds(x, y, data, sig, n)

    @pl.jit.host
    def main(xs: pl.Tensor[[NR, ROWS, COLS], pl.FP32],
             ys: pl.Out[pl.Tensor[[NR, ROWS, COLS], pl.FP32]], n: pl.Scalar[pl.INT32]):
        data_buf = pld.alloc_window_buffer([ROWS, COLS], dtype=pl.FP32)
        sig_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            chip(xs[r], ys[r], pld.window(data_buf, [ROWS, COLS], dtype=pl.FP32),
                 pld.window(sig_buf, [NR, 1], dtype=pl.INT32), n, device=r)
        return ys

    return main


# =========================================================================== timing
def expected(xs: np.ndarray, n: int) -> np.ndarray:
    # small integers and small n: every FP32 partial sum is exact, in any order
    total = n * xs.sum(axis=0) + NR * (n * (n - 1) // 2)
    return np.broadcast_to(total, xs.shape)


def timed_call(main, xs, ys, n: int, cfg: RunConfig) -> float:
    ys[...] = np.nan
    t0 = time.perf_counter()
    main(xs, ys, n, config=cfg)
    t = time.perf_counter() - t0
    want = expected(xs, n)
    if not np.array_equal(ys, want):
        bad = tuple(np.argwhere(ys != want)[0])
        raise RuntimeError(f"wrong allreduce after {n} rounds: element {bad} is {ys[bad]}, "
                           f"expected {want[bad]}")
    return t


def measure(main, reps: int) -> dict:
    """Median whole-call times {(detect, n): seconds}, the calls interleaved."""
    rng = np.random.default_rng(0)
    xs = rng.integers(-8, 8, (NR, ROWS, COLS)).astype(np.float32)
    ys = np.empty_like(xs)
    modes = [False, True]
    cfgs = {d: config(d) for d in modes}
    for d in modes:                              # compile + first launch of each, untimed
        timed_call(main, xs, ys, ITERS, cfgs[d])
    times = {(d, n): [] for d in modes for n in (0, ITERS)}
    for rep in range(reps):
        for d in modes:
            for n in (ITERS, 0):
                times[d, n].append(timed_call(main, xs, ys, n, cfgs[d]))
        log(f"repetition {rep + 1}/{reps}: " + ", ".join(
            f"{'on' if d else 'off'} t_{n} {fmt_s(v[-1])}" for (d, n), v in times.items()))
    return {k: statistics.median(v) for k, v in times.items()}


# =========================================================================== main
def measure_moe(reps: int, nr: int = NR) -> dict:
    """The MoE dispatch / combine round of examples/moe_dispatch_combine.py at
    the DeepSeek layer's shape (bench_moe.py's inputs), one-shot calls with
    detection off and on, interleaved: detect -> median seconds.  Every
    result is checked against the example's numpy reference."""
    from bench_moe import moe, moe_inputs
    shape = moe.DEEPSEEK
    xs, idxs, wts, ys, stats = moe_inputs(nr, shape)
    want, want_stats = moe.reference(xs, idxs, wts, shape)
    prog = moe.build(nr, shape)
    times = {False: [], True: []}
    for i in range(reps + 1):
        for detect in (False, True):
            ys[...] = 0
            stats[...] = 0
            t0 = time.perf_counter()
            prog(xs, idxs, wts, ys, stats, config=config(detect))
            if i:                                   # the first of each: compile, untimed
                times[detect].append(time.perf_counter() - t0)
            np.testing.assert_array_equal(stats[:, 0], want_stats)
            np.testing.assert_allclose(ys, want, rtol=2 ** -6, atol=2 ** -6)
    for detect, ts in times.items():
        log(f"  moe deepseek {nr} ranks, detect {detect}: median {fmt_s(statistics.median(ts))}")
    return {d: statistics.median(ts) for d, ts in times.items()}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="5 repetitions instead of 9")
    ap.add_argument("--no-moe", action="store_true",
                    help="leave out the MoE round at the DeepSeek shape")
    ap.add_argument("--tile-rows", type=int, default=ROWS, choices=[8, 16, 32, 64, 128, 256],
                    help=f"rows per tile (default {ROWS}: one 1 MiB tile per copy)")
    args = ap.parse_args(argv)
    args.repeats = 5 if args.quick else 9
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    for line in machine_info():
        print(line)
    print(f"mode: {'quick' if args.quick else 'full'}; {NR} ranks, {ROWS}x{COLS} FP32 "
          f"(1 MiB) per rank, tiles of {args.tile_rows} rows, {ITERS} rounds per call, "
          f"median of {args.repeats}; detection off and on", flush=True)
    start = time.perf_counter()
    probe = cpu_probe()
    log(f"busy-loop probe {probe:.2f} cores")
    try:
        med = measure(build(args.tile_rows), args.repeats)
    except Exception as err:
        if getattr(err, "code", None) != "TC601":
            raise
        print(f"\ndetect_races=True reported a race in this race-free kernel:\n{err}")
        return 1
    moe_med = measure_moe(max(3, args.repeats // 2)) if not args.no_moe else None
    total = time.perf_counter() - start

    tiles = ROWS // args.tile_rows
    what = (f"4-rank mesh allreduce, 1 MiB per rank, {ITERS} rounds in one kernel "
            f"({tiles} tile{'s' if tiles > 1 else ''} per copy per round, 2 barriers)")
    off, off0 = med[False, ITERS], med[False, 0]
    on, on0 = med[True, ITERS], med[True, 0]
    k_off, k_on = off - off0, on - on0
    ratio = f"{k_on / k_off:.2f}× off" if k_off > 0 else "n/a"
    rows = [Row(f"{what}: whole one-shot call, detect_races=True (median of {args.repeats})",
                f"{fmt_s(on)} = {on / off:.2f}× off", f"detect_races off: {fmt_s(off)}",
                "≤ 2× off", verdict(on / off <= 2)),
            Row(f"  ↳ the kernel's rounds only: t_{ITERS} − t_0 (launch taken out; t_0 on "
                f"{fmt_s(on0)}, off {fmt_s(off0)})", f"{fmt_s(k_on)} = {ratio}",
                f"detect_races off: {fmt_s(k_off)}", "— (diagnostic)", "info")]
    if moe_med is not None:
        m_off, m_on = moe_med[False], moe_med[True]
        rows.append(Row(f"MoE dispatch/combine round, DeepSeek shape, {NR} ranks "
                        f"(examples/moe_dispatch_combine.py): whole one-shot call, "
                        f"detect_races=True", f"{fmt_s(m_on)} = {m_on / m_off:.2f}× off",
                        f"detect_races off: {fmt_s(m_off)}", "≤ 3× off",
                        verdict(m_on / m_off <= 3)))

    print()
    print("| figure | measured | anchor (same run) | target | result |")
    print("|---|---|---|---|---|")
    for row in rows:
        print(f"| {row.figure} | {row.measured} | {row.anchor} | {row.target} | {row.result} |")
    print()
    print(f"load average at end: {loadavg()}; busy-loop probe got {cpu_probe():.2f} of "
          f"{os.cpu_count()} cores (at start {probe:.2f}); total {total:.1f} s")
    print("method: whole one-shot calls, detection off and on interleaved, median of "
          "repetitions; every result checked against numpy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
