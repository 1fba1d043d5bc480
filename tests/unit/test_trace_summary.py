"""``tilecomm trace``: the summary of a traced run against sums taken
directly from the trace's events, the critical path of a hand-made trace
whose answer is known, the critical path of real runs joined only by edges
the trace holds, the timeline files, and the command's behaviour."""
import io
import json
import os
import shutil
import sys

import numpy as np
import pytest
from click.testing import CliRunner

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from conftest import config_for
from tilecomm.cli import main
from tilecomm.cli.trace import progress_for
from tilecomm.dfx import timeline
from tilecomm.dfx import trace as T
from tilecomm.dfx.trace_summary import (COLLECTIVE, DEPENDENCY, PROGRAM_ORDER, SIGNAL,
                                        SUBMITTED, TASKS_DONE, summarize, to_json)

NR = pl.dynamic("NR")
N = 8
ROUNDS = 3
ADD, SET, GE = pld.NotifyOp.AtomicAdd, pld.NotifyOp.Set, pld.WaitCmp.Ge
EPS = 0.002                     # µs: timestamps are rounded to the nanosecond


# ------------------------------------------------------------------ two real traced runs
@pl.jit.incore
def ring_then_sum(x: pl.Tensor[[1, N], pl.FP32], y: pl.Out[pl.Tensor[[1, N], pl.FP32]],
                  token: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
                  data: pl.InOut[pld.DistributedTensor[[1, N], pl.FP32]],
                  signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    ctx = pld.get_comm_ctx(token)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    for g in pl.range(1, ROUNDS + 1):
        pld.system.notify(token, (me + 1) % n, [0, 0], 1, op=ADD)
        pld.system.wait(token, [0, 0], g, cmp=GE)
    data = pl.store(pl.load(x, [0, 0], [1, N]), [0, 0], data)
    data = pld.tensor.allreduce(data, signal, op=pld.ReduceOp.Sum)
    return pl.store(pl.load(data, [0, 0], [1, N]), [0, 0], y)


@pl.jit
def ring_chip(x: pl.Tensor[[1, N], pl.FP32], y: pl.Out[pl.Tensor[[1, N], pl.FP32]],
              token: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
              data: pl.InOut[pld.DistributedTensor[[1, N], pl.FP32]],
              signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    return ring_then_sum(x, y, token, data, signal)


@pl.jit.host
def ring_main(xs: pl.Tensor[[NR, 1, N], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, N], pl.FP32]]):
    tbuf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    dbuf = pld.alloc_window_buffer([1, N], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([pld.world_size(), 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        ring_chip(xs[r], ys[r], pld.window(tbuf, [1, 1], dtype=pl.INT32),
                  pld.window(dbuf, [1, N], dtype=pl.FP32),
                  pld.window(sbuf, [pld.world_size(), 1], dtype=pl.INT32), device=r)
    return ys


SIG = pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]


@pl.jit
def task_chip(inp: pl.Tensor[[1, N], pl.INT32], out: pl.Out[pl.Tensor[[2, N], pl.INT32]],
              payload: pl.InOut[pld.DistributedTensor[[1, N], pl.INT32]], signal: SIG,
              peer: pl.Scalar[pl.INT32]):
    # a deferred waiter, its consumer, and a publisher feeding the next rank
    with pl.manual_scope():
        for slot in pl.range(2):
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="waiter") as wait_tid:
                pld.system.defer_wait(signal=signal, offsets=[0, 0], expected=1, cmp=GE)
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="consumer", deps=[wait_tid]):
                out = pl.store(pl.load(payload, [0, 0], [1, N]), [slot, 0], out)
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="publisher"):
            pld.tile.remote_store(pl.load(inp, [0, 0], [1, N]), target=payload, peer=peer,
                                  offsets=[0, 0])
            pld.system.notify(signal, peer, [0, 0], 1, op=SET)
    return out


@pl.jit.host
def task_main(inps: pl.Tensor[[NR, 1, N], pl.INT32],
              outs: pl.Out[pl.Tensor[[NR, 2, N], pl.INT32]]):
    pbuf = pld.alloc_window_buffer([1, N], dtype=pl.INT32)
    sbuf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        task_chip(inps[r], outs[r], pld.window(pbuf, [1, N], dtype=pl.INT32),
                  pld.window(sbuf, [1, 1], dtype=pl.INT32), (r + 1) % pld.world_size(),
                  device=r)
    return outs


@pytest.fixture(scope="module")
def ring_trace(tmp_path_factory):
    n = 2
    xs = np.random.default_rng(0).integers(-8, 9, (n, 1, N)).astype(np.float32)
    ys = np.zeros_like(xs)
    cache = str(tmp_path_factory.mktemp("ring"))
    cp = ring_main.compile(xs, ys, config=config_for(n, cache_dir=cache))
    cp(xs, ys, config=config_for(n, enable_chip_swimlane=True))
    np.testing.assert_allclose(ys, np.broadcast_to(xs.sum(axis=0), xs.shape))
    return cp.trace_path


@pytest.fixture(scope="module")
def task_trace(tmp_path_factory):
    n = 2
    inps = np.arange(n * N, dtype=np.int32).reshape(n, 1, N)
    outs = np.zeros((n, 2, N), np.int32)
    cache = str(tmp_path_factory.mktemp("tasks"))
    cp = task_main.compile(inps, outs, config=config_for(n, cache_dir=cache))
    cp(inps, outs, config=config_for(n, cores=2, enable_chip_swimlane=True))
    np.testing.assert_array_equal(outs, np.repeat(np.roll(inps, 1, axis=0), 2, axis=1))
    return cp.trace_path


def xs_of(trace):
    return [e for e in trace["traceEvents"] if e["ph"] == "X"]


# ------------------------------------------------------------------ time per lane
def test_time_per_lane_equals_sums_of_the_ring_runs_slices(ring_trace):
    raw = json.load(open(ring_trace))
    s = summarize(T.load(ring_trace))
    evs = xs_of(raw)
    run = max(e["ts"] + e["dur"] for e in evs) - min(e["ts"] for e in evs)
    assert s.duration == pytest.approx(run)
    assert len(s.times) == 2                   # one dispatch thread a rank, no tasks
    for lt in s.times:
        mine = [e for e in evs if (e["pid"], e["tid"]) == lt.lane.key]

        def total(*cats):
            return sum(e["dur"] for e in mine if e["cat"] in cats)

        # every op of this kernel is a leaf inside its dispatch's slice
        assert lt.by_kind["wait"] == pytest.approx(total("wait"), abs=EPS)
        assert lt.by_kind["comm"] == pytest.approx(total("notify", "rma"), abs=EPS)
        assert lt.by_kind["collective"] == pytest.approx(total("collective"), abs=EPS)
        ops = total("wait", "notify", "rma", "collective")
        assert lt.by_kind["compute"] == pytest.approx(total("dispatch") - ops, abs=EPS)
        assert lt.idle == pytest.approx(run - total("dispatch"), abs=EPS)
        assert total("wait") > 0 and total("collective") > 0


def test_time_per_core_lane_equals_its_task_slices_less_their_ops(task_trace):
    raw = json.load(open(task_trace))
    s = summarize(T.load(task_trace))
    evs = xs_of(raw)
    cores = [lt for lt in s.times if lt.lane.name.startswith("core")]
    assert cores and {lt.lane.rank for lt in cores} == {0, 1}
    for lt in cores:
        mine = [e for e in evs if (e["pid"], e["tid"]) == lt.lane.key]
        tasks = sum(e["dur"] for e in mine if e["cat"] == "task")
        ops = sum(e["dur"] for e in mine if e["cat"] in ("notify", "rma"))
        assert lt.by_kind["comm"] == pytest.approx(ops, abs=EPS)
        assert lt.by_kind["compute"] == pytest.approx(tasks - ops, abs=EPS)
    watch = [lt for lt in s.times if lt.lane.name.startswith(("watcher", "deferred"))]
    released = sum(e["dur"] for e in evs if e["cat"] == "deferred")
    assert sum(lt.by_kind["wait"] for lt in watch) == pytest.approx(released, abs=EPS)


# ------------------------------------------------------------------ waits
def arrow_sources(raw):
    """wait slice (pid, tid, ts) -> the notify slice its signal arrow starts in."""
    evs = raw["traceEvents"]
    starts = {e["id"]: e for e in evs if e["ph"] == "s" and e["cat"] == "signal"}
    notifies = [e for e in evs if e["ph"] == "X" and e["cat"] == "notify"]
    waits = [e for e in evs if e["ph"] == "X" and e["cat"] in ("wait", "deferred")]
    out = {}
    for f in (e for e in evs if e["ph"] == "f" and e["cat"] == "signal"):
        s = starts[f["id"]]
        (w,) = [e for e in waits if (e["pid"], e["tid"]) == (f["pid"], f["tid"])
                and e["ts"] <= f["ts"] <= e["ts"] + e["dur"]]
        (n,) = [e for e in notifies if (e["pid"], e["tid"]) == (s["pid"], s["tid"])
                and e["ts"] <= s["ts"] <= e["ts"] + e["dur"]]
        out[(w["pid"], w["tid"], w["ts"])] = n
    return out


@pytest.mark.parametrize("which", ["ring", "tasks"])
def test_every_wait_is_listed_longest_first_with_the_notify_its_arrow_starts_at(
        which, ring_trace, task_trace):
    path = ring_trace if which == "ring" else task_trace
    raw = json.load(open(path))
    s = summarize(T.load(path))
    waits = [e for e in xs_of(raw) if e["cat"] in ("wait", "deferred")]
    assert len(s.waits) == len(waits) > 0
    assert [w.slice.dur for w in s.waits] == sorted((w.slice.dur for w in s.waits),
                                                    reverse=True)
    sources = arrow_sources(raw)
    for w in s.waits:
        n = sources.get((w.slice.lane[0], w.slice.lane[1], w.slice.ts))
        if n is None:
            assert w.notify is None
        else:
            assert (w.notify.lane, w.notify.ts) == ((n["pid"], n["tid"]), n["ts"])


# ------------------------------------------------------------------ the critical path
def x(pid, ts, dur, cat, name=None, tid=None, **args):
    return {"name": name or cat, "cat": cat, "ph": "X", "pid": pid, "tid": pid if tid is None
            else tid, "ts": ts, "dur": dur, "args": args}


def proc(pid, rank):
    return {"name": "process_name", "ph": "M", "pid": pid, "tid": pid,
            "args": {"name": f"rank {rank}"}}


def hand_made():
    """Rank 1 computes until 100 and notifies (100..102); rank 0 waits from
    10 and returns at 105, computes until 120 and enters a barrier that rank
    1 enters at 150 (after computing 102..150); both leave it at 160."""
    cell = [0, 0, 0]
    notify = x(2, 100, 2, "notify", "pld.system.notify", cell="c", cell_key=cell,
               op="Set", value=1, result=1, rank=1, line="p.py:5:1")
    wait = x(1, 10, 95, "wait", "pld.system.wait", cell="c", cell_key=cell, cmp="Ge",
             expected=1, observed=1, line="p.py:6:1")
    evs = [proc(1, 0), proc(2, 1),
           x(1, 0, 165, "dispatch", "chip", line="p.py:9:1"), wait,
           x(1, 120, 40, "collective", "pld.tensor.barrier"),
           x(2, 0, 161, "dispatch", "chip", line="p.py:9:1"), notify,
           x(2, 150, 10, "collective", "pld.tensor.barrier")]
    return T.merge([{"traceEvents": evs}], title="hand")


def test_the_critical_path_of_a_hand_made_run_is_the_one_worked_out_by_hand():
    s = summarize(hand_made())
    got = [(seg.lane.rank, seg.what, seg.start, seg.end, seg.then) for seg in s.path]
    # rank 1 entered the barrier last: what rank 0 did before it (its wait
    # included) is off the path, and rank 1's notify is just a step of rank 1
    assert got == [(1, "chip", 0, 100, PROGRAM_ORDER),
                   (1, "pld.system.notify", 100, 102, PROGRAM_ORDER),
                   (1, "chip", 102, 150, COLLECTIVE),
                   (0, "pld.tensor.barrier", 150, 160, PROGRAM_ORDER),
                   (0, "chip", 160, 165, None)]
    wait = next(w for w in s.waits if w.slice.cat == "wait")
    assert wait.notify.rank == 1 and wait.notify.ts == 100


def test_a_wait_on_the_path_hands_over_to_the_notify_that_released_it():
    tr = hand_made()
    # without the barrier, the end of the run is rank 0's: its wait is on the path
    tr["traceEvents"] = [e for e in tr["traceEvents"] if e.get("cat") != "collective"]
    s = summarize(tr)
    got = [(seg.lane.rank, seg.what, seg.start, seg.end, seg.then) for seg in s.path]
    assert got == [(1, "chip", 0, 100, PROGRAM_ORDER),
                   (1, "pld.system.notify", 100, 102, SIGNAL),
                   (0, "pld.system.wait", 102, 105, PROGRAM_ORDER),
                   (0, "chip", 105, 165, None)]


EDGES = {PROGRAM_ORDER, SIGNAL, COLLECTIVE, DEPENDENCY, SUBMITTED, TASKS_DONE}


@pytest.mark.parametrize("which", ["ring", "tasks"])
def test_the_critical_path_of_a_real_run_is_contiguous_and_joined_by_the_traces_edges(
        which, ring_trace, task_trace):
    path = ring_trace if which == "ring" else task_trace
    raw = json.load(open(path))
    s = summarize(T.load(path))
    segs = s.path
    assert segs and segs[-1].end == pytest.approx(s.end) and segs[-1].then is None
    assert all(seg.dur >= 0 for seg in segs)
    sources = arrow_sources(raw)
    dep_s = {e["id"]: e for e in raw["traceEvents"] if e["ph"] == "s"
             and e.get("cat") == "dependency"}
    dep_f = {e["id"]: e for e in raw["traceEvents"] if e["ph"] == "f"
             and e.get("cat") == "dependency"}
    for j, (a, b) in enumerate(zip(segs, segs[1:])):
        assert a.end == pytest.approx(b.start, abs=EPS), (a, b)      # ordered, no gap
        assert a.then in EDGES
        if a.then == PROGRAM_ORDER:
            assert a.lane == b.lane
            continue
        sa, sb = s.slices[a.slice], s.slices[b.slice] if b.slice >= 0 else None
        if a.then == SIGNAL:        # the trace's arrow from this notify to that wait
            n = sources[(sb.lane[0], sb.lane[1], sb.ts)]
            assert ((n["pid"], n["tid"]), n["ts"]) == (sa.lane, sa.ts)
        elif a.then == COLLECTIVE:
            assert sb.cat == "collective" and b.start == pytest.approx(
                max(e.ts for e in s.slices if e.cat == "collective" and e.name == sb.name))
        elif a.then == DEPENDENCY:  # a dependency arrow, or the release of a deferral
            # the task itself, or the scheduler's gap before it and then the task
            b_task = sb if sb is not None else s.slices[segs[j + 2].slice]
            assert b_task.cat == "task" and b_task.lane == b.lane.key
            if sa.cat == "task":
                assert any((f["pid"], f["tid"]) == b_task.lane
                           and b_task.ts <= f["ts"] <= b_task.end
                           and (dep_s[i]["pid"], dep_s[i]["tid"]) == sa.lane
                           and sa.ts <= dep_s[i]["ts"] <= sa.end for i, f in dep_f.items())
            else:
                assert sa.cat == "deferred" and sa.rank == b_task.rank
        else:                       # a task and its own rank's dispatch thread
            assert a.lane.rank == b.lane.rank and a.lane != b.lane
    if which == "tasks":
        assert any(seg.kind == "compute" and seg.what.startswith("task ") for seg in segs)


# ------------------------------------------------------------------ files and the command
@pytest.fixture(scope="module")
def drawn_once(ring_trace):
    """matplotlib keeps the font files it loads open for the life of the
    process (its font cache): load them before a test's leak check starts."""
    s = summarize(T.load(ring_trace))
    timeline.figure(s).savefig(io.BytesIO(), format="png")
    timeline.svg(s)


def test_the_timeline_png_and_html_are_written(ring_trace, tmp_path, drawn_once):
    out = CliRunner().invoke(main, ["trace", ring_trace, "--plot", str(tmp_path / "t.png"),
                                    "--html", str(tmp_path / "t.html")])
    assert out.exit_code == 0, out.output
    png = (tmp_path / "t.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    page = (tmp_path / "t.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page and "</svg>" in page
    for lane in ("rank 0 · dispatch", "rank 1 · dispatch", "critical path", "Longest waits"):
        assert lane in page
    assert "<?xml" not in page


def test_the_text_summary_and_json_agree_with_the_analysis(ring_trace):
    s = summarize(T.load(ring_trace))
    out = CliRunner().invoke(main, ["trace", ring_trace, "--top", "2"])
    assert out.exit_code == 0, out.output
    for head in ("Time per lane", "Longest waits (2 of 6)", "Critical path:"):
        assert head in out.output
    got = json.loads(CliRunner().invoke(main, ["trace", ring_trace, "--format", "json",
                                               "--top", "2"]).output)
    want = to_json(s, 2)
    assert got["critical_path"] == json.loads(json.dumps(want["critical_path"]))
    assert len(got["waits"]) == 2 and got["waits"][0]["dur_us"] == s.waits[0].slice.dur
    assert got["waits"][0]["released_by"]["rank"] == s.waits[0].notify.rank


def test_a_directory_without_a_merged_trace_is_merged_from_the_ranks_files(ring_trace):
    root = os.path.dirname(ring_trace)
    copy = os.path.join(os.path.dirname(root), "copy_of_dfx")
    shutil.copytree(root, copy)
    os.unlink(os.path.join(copy, "merged_swimlane.json"))
    a = json.loads(CliRunner().invoke(main, ["trace", ring_trace, "--format", "json"]).output)
    b = json.loads(CliRunner().invoke(main, ["trace", copy, "--format", "json"]).output)
    assert a["critical_path"] == b["critical_path"] and a["lanes"] == b["lanes"]


def test_a_file_that_is_no_trace_is_refused_with_its_code(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "name": "a"}]}')
    out = CliRunner().invoke(main, ["trace", str(bad)])
    assert out.exit_code == 1 and "TC444" in out.output and "not a swimlane trace" in out.output
    empty = tmp_path / "empty"
    empty.mkdir()
    out = CliRunner().invoke(main, ["trace", str(empty)])
    assert out.exit_code == 1 and "holds no trace" in out.output


def test_drawing_without_matplotlib_names_the_pip_command(ring_trace, monkeypatch, tmp_path):
    monkeypatch.setattr(timeline, "available", lambda: False)
    out = CliRunner().invoke(main, ["trace", ring_trace, "--plot", str(tmp_path / "a.png")])
    assert out.exit_code == 1 and "pip install 'tilecomm[plot]'" in out.output
    assert not (tmp_path / "a.png").exists()


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_progress_is_drawn_on_a_terminal_for_long_work_and_never_when_piped():
    items = list(range(50))
    tty, pipe = Tty(), io.StringIO()
    assert list(progress_for(tty, True)(items, "lanes", 50)) == items
    assert "lanes" in tty.getvalue() and "100%" in tty.getvalue()
    assert list(progress_for(pipe, True)(items, "lanes", 50)) == items
    assert list(progress_for(Tty(), False)(items, "lanes", 50)) == items
    assert pipe.getvalue() == ""


def test_the_command_writes_nothing_to_stderr_when_piped(ring_trace, tmp_path, monkeypatch,
                                                        drawn_once):
    monkeypatch.setattr(sys.modules["tilecomm.cli.trace"], "LONG_INPUT", 0)  # all is long
    out = CliRunner().invoke(
        main, ["trace", ring_trace, "--plot", str(tmp_path / "p.png")])
    assert out.exit_code == 0 and out.stderr == ""
