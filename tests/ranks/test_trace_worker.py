"""Run artefacts on a prepared worker: per-call configs switch tracing on and
off on the same ranks; HOST collectives are dispatches of their own (their
own d{k} and a slice per rank); remote loads carry their source line."""
import inspect
import json
import os
import re

import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from conftest import children, config_for, my_segments

SIZE = 8
NR = pl.dynamic("NR")


@pl.jit.incore
def stage_kernel(x: pl.Tensor[[1, SIZE], pl.FP32],
                 stage: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]]):
    stage = pl.store(pl.load(x, [0, 0], [1, SIZE]), [0, 0], stage)
    return stage


@pl.jit
def stage_rows(x: pl.Tensor[[1, SIZE], pl.FP32],
               stage: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]]):
    return stage_kernel(x, stage)


@pl.jit.incore
def read_kernel(seen: pl.Out[pl.Tensor[[NR, SIZE], pl.FP32]],
                stage: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]]):
    for src in pl.range(pld.nranks(pld.get_comm_ctx(stage))):
        row = pld.tile.remote_load(stage, peer=src, offsets=[0, 0], shape=[1, SIZE])  # LOAD
        pl.store(row, [src, 0], seen)
    return seen


@pl.jit
def read_rows(seen: pl.Out[pl.Tensor[[NR, SIZE], pl.FP32]],
              stage: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]]):
    return read_kernel(seen, stage)


@pl.jit.host
def main(xs: pl.Tensor[[NR, 1, SIZE], pl.FP32], seen: pl.Out[pl.Tensor[[NR, NR, SIZE], pl.FP32]]):
    stage_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([NR], dtype=pl.INT32)
    stage = pld.window(stage_buf, [1, SIZE], dtype=pl.FP32)
    signal = pld.window(sig_buf, [NR], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        stage_rows(xs[r], stage, device=r)
    signal = pld.tensor.barrier(signal)          # BARRIER
    for r in pl.range(pld.world_size()):
        read_rows(seen[r], stage, device=r)
    return seen


def ranked(evs):
    """The events with ``pid`` replaced by the rank each process names."""
    rank = {e["pid"]: int(e["args"]["name"].split()[1]) for e in evs
            if e["ph"] == "M" and e["name"] == "process_name"}
    return [dict(e, pid=rank[e["pid"]]) for e in evs]


def marked_line(func, marker):
    lines, first = inspect.getsourcelines(getattr(func, "fn", func))
    hits = [first + i for i, ln in enumerate(lines) if ln.rstrip().endswith(f"# {marker}")]
    assert len(hits) == 1
    return hits[0]


def tree(root):
    """{path under root: mtime}; a dispatch's part of the merged trace, whose
    name carries the time it was written, as ``merged_swimlane_<time>.json``."""
    out = {}
    for dp, _, fs in os.walk(root):
        for f in fs:
            p = os.path.join(dp, f)
            rel = re.sub(r"merged_swimlane_\d{8}_\d{6}\.json$", "merged_swimlane_<time>.json",
                         os.path.relpath(p, root))
            out[rel] = os.stat(p).st_mtime_ns
    return out


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_prepared_worker_traces_only_the_calls_that_ask(tmp_path, n):
    xs = np.random.default_rng(n).integers(-9, 9, (n, 1, SIZE)).astype(np.float32)
    seen = np.zeros((n, n, SIZE), np.float32)
    want = np.broadcast_to(xs[:, 0][None], (n, n, SIZE))
    cp = main.compile(xs, seen, config=config_for(n, cache_dir=str(tmp_path)))
    root = os.path.join(cp.output_dir, "dfx_outputs")
    traced = config_for(n, enable_chip_swimlane=2)
    with cp.prepare() as worker:
        worker(xs, seen, config=traced)
        np.testing.assert_array_equal(seen, want)
        first = tree(root)
        # per rank: stage (d0), the HOST barrier (d1), read (d2)
        assert set(first) == {"merged_swimlane.json"} | {
            f"rank{r}/d{k}/{f}" for r in range(n) for k in range(3)
            for f in ("deps.json", "chip_swimlane_records.json", "merged_swimlane_<time>.json")}
        deps = json.load(open(os.path.join(root, "rank0", "d1", "deps.json")))
        assert deps["function"] == "builtin.tensor.barrier"
        assert deps["line"].endswith(f":{marked_line(main, 'BARRIER')}:14")
        evs = ranked(json.load(open(cp.trace_path))["traceEvents"])
        # level 2: no scheduler or orchestrator phases
        assert not [e for e in evs if e.get("cat") in ("dependency", "orchestrator")]
        bars = [e for e in evs if e["ph"] == "X" and e["cat"] == "collective"]
        assert sorted(e["pid"] for e in bars) == list(range(n))
        assert {e["name"] for e in bars} == {"pld.tensor.barrier (HOST)"}
        loads = [e for e in evs if e["ph"] == "X" and e["name"] == "pld.tile.remote_load"]
        assert sorted((e["pid"], e["args"]["peer"]) for e in loads) == \
            [(r, p) for r in range(n) for p in range(n)]
        assert all(e["args"]["line"].endswith(f":{marked_line(read_kernel, 'LOAD')}:9")
                   for e in loads)
        # every rank's barrier slice ends after every rank's stage dispatch started
        stages = [e for e in evs if e["ph"] == "X" and e["name"] == "stage_rows"]
        assert len(stages) == n
        assert min(b["ts"] + b["dur"] for b in bars) >= max(s["ts"] for s in stages)

        seen[:] = 0
        worker(xs, seen)                             # untraced: nothing written
        np.testing.assert_array_equal(seen, want)
        assert tree(root) == first

        seen[:] = 0
        worker(xs, seen, config=config_for(n, enable_dep_gen=True))
        np.testing.assert_array_equal(seen, want)
        again = tree(root)
        # stale swimlanes of the first call are gone, the graphs rewritten
        assert set(again) == {f"rank{r}/d{k}/deps.json" for r in range(n) for k in range(3)}
        assert all(again[f] > first[f] for f in again)


def _count(path):
    try:
        return len(os.listdir(path))
    except OSError:
        return None


@pytest.mark.parametrize("n", [2, 3])
def test_many_traced_calls_on_one_worker_grow_nothing(tmp_path, n):
    """Traced and untraced calls alternate on the same ranks: no descriptor
    or /dev/shm entry accumulates in the caller, no thread in any rank, and
    every traced call rewrites the same files.  (A rank's descriptor count
    is not compared: it holds each finished run's segments until its garbage
    collector runs, traced or not.)"""
    xs = np.random.default_rng(0).integers(-9, 9, (n, 1, SIZE)).astype(np.float32)
    seen = np.zeros((n, n, SIZE), np.float32)
    want = np.broadcast_to(xs[:, 0][None], (n, n, SIZE))
    cp = main.compile(xs, seen, config=config_for(n, cache_dir=str(tmp_path)))
    traced = config_for(n, enable_chip_swimlane=4, enable_dump_args=2, enable_scope_stats=True)
    plain = config_for(n)

    def snapshot():
        ranks = sorted(children())
        return (_count("/proc/self/fd"), len(my_segments()), ranks,
                [_count(f"/proc/{p}/task") for p in ranks])

    with cp.prepare() as worker:
        for i in range(3):                       # warm: caches, first traces
            worker(xs, seen, config=traced if i % 2 == 0 else plain)
        before = snapshot()
        for i in range(30):
            seen[:] = 0
            worker(xs, seen, config=traced if i % 2 == 0 else plain)
            np.testing.assert_array_equal(seen, want)
        after = snapshot()
    assert after == before
    files = {f for f in tree(os.path.join(cp.output_dir, "dfx_outputs"))}
    assert len([f for f in files if f.endswith("chip_swimlane_records.json")]) == 3 * n
