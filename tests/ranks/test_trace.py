"""Run artefacts (reference 5.1) and the Perfetto trace of a call.

Per flag, the files of every rank and dispatch under
``<output_dir>/dfx_outputs/rank{r}/d{k}/``; stale directories cleared; the
task graph of a task program equal to the edges its accesses and ``deps=``
imply; dumped arguments equal to the numpy inputs and results; a traced run
computing what an untraced one computes; and the trace's schema: one pid
per rank, every event with its keys, and every released wait with exactly
one flow arrow from the notify the program's protocol says released it."""
import inspect
import json
import os
import re

import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from conftest import children, config_for, files_of
from tilecomm.errors import DeadlockError, RankFailure, RuntimeFault

NR = pl.dynamic("NR")
N = 8
ROUNDS = 3
ADD, SET, GE = pld.NotifyOp.AtomicAdd, pld.NotifyOp.Set, pld.WaitCmp.Ge
SIG = pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]
DATA = pl.InOut[pld.DistributedTensor[[1, N], pl.FP32]]
ASIG = pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]


# ------------------------------------------------------------------ a ring of counters + allreduce
@pl.jit.incore
def ring_rounds(count: pl.Out[pl.Tensor[[1, 1], pl.INT32]], sig: SIG) -> pl.Tensor[[1, 1], pl.INT32]:
    ctx = pld.get_comm_ctx(sig)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    for g in pl.range(1, ROUNDS + 1):
        # round g: one credit to the next rank, then wait for the g-th from the previous
        pld.system.notify(sig, (me + 1) % n, [0, 0], 1, op=ADD)
        pld.system.wait(sig, [0, 0], g, cmp=GE)
    pl.write(count, [0, 0], pl.read(sig, [0, 0]))
    return count


@pl.jit.incore
def reduce_rows(x: pl.Tensor[[1, N], pl.FP32], y: pl.Out[pl.Tensor[[1, N], pl.FP32]],
                data: DATA, asig: ASIG) -> pl.Tensor[[1, N], pl.FP32]:
    data = pl.store(pl.load(x, [0, 0], [1, N]), [0, 0], data)
    data = pld.tensor.allreduce(data, asig, op=pld.ReduceOp.Sum)
    return pl.store(pl.load(data, [0, 0], [1, N]), [0, 0], y)


@pl.jit
def ring_chip(x: pl.Tensor[[1, N], pl.FP32], y: pl.Out[pl.Tensor[[1, N], pl.FP32]],
              count: pl.Out[pl.Tensor[[1, 1], pl.INT32]], sig: SIG, data: DATA, asig: ASIG):
    count = ring_rounds(count, sig)
    return reduce_rows(x, y, data, asig)


@pl.jit.host
def ring_main(xs: pl.Tensor[[NR, 1, N], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, N], pl.FP32]],
              counts: pl.Out[pl.Tensor[[NR, 1, 1], pl.INT32]]):
    sbuf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    dbuf = pld.alloc_window_buffer([1, N], dtype=pl.FP32)
    abuf = pld.alloc_window_buffer([pld.world_size(), 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        ring_chip(xs[r], ys[r], counts[r], pld.window(sbuf, [1, 1], dtype=pl.INT32),
                  pld.window(dbuf, [1, N], dtype=pl.FP32),
                  pld.window(abuf, [pld.world_size(), 1], dtype=pl.INT32), device=r)
    return ys


def ring_data(n, seed=0):
    xs = np.random.default_rng(seed).integers(-8, 9, (n, 1, N)).astype(np.float32)
    return xs, np.zeros_like(xs), np.zeros((n, 1, 1), np.int32)


def run_ring(tmp_path, n, **dfx):
    cp = compiled(ring_main, tmp_path, n, *ring_data(n))
    xs, ys, counts = ring_data(n)
    cp(xs, ys, counts, config=config_for(n, **dfx))
    np.testing.assert_allclose(ys, np.broadcast_to(xs.sum(axis=0), xs.shape))
    np.testing.assert_array_equal(counts, np.full((n, 1, 1), ROUNDS))
    return cp, xs, ys, counts


def compiled(main, tmp_path, n, *args):
    """``main`` compiled with its output directory (so its artefacts) under
    this test's temporary directory."""
    cp = main.compile(*args, config=config_for(n, cache_dir=str(tmp_path / "cache")))
    assert str(cp.output_dir).startswith(str(tmp_path))
    return cp


def dfx(cp):
    return os.path.join(cp.output_dir, "dfx_outputs")


# ------------------------------------------------------------------ artefact files per flag
FLAGS = {
    "dep_gen": (dict(enable_dep_gen=True), {"deps.json"}),
    "scope_stats": (dict(enable_scope_stats=True), {"scope_stats/scope_stats.jsonl"}),
    "swimlane": (dict(enable_chip_swimlane=True), {"deps.json", "chip_swimlane_records.json",
                                                   "merged_swimlane_<time>.json"}),
    "dump_args": (dict(enable_dump_args=2), {"args_dump/args.json"} | {
        f"args_dump/{w}/{i:02d}_{name}.npy" for w in ("before", "after")
        for i, name in enumerate(["x", "y", "count", "sig", "data", "asig"])}),
}


@pytest.mark.parametrize("flag", sorted(FLAGS))
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_each_flag_writes_its_files_for_every_rank(tmp_path, n, flag):
    kw, want = FLAGS[flag]
    cp, *_ = run_ring(tmp_path, n, **kw)
    files = files_of(dfx(cp))
    expect = {f"rank{r}/d0/{f}" for r in range(n) for f in want}
    # a dispatch's part of the merged trace is named for the time it was written
    got = {re.sub(r"merged_swimlane_\d{8}_\d{6}\.json$", "merged_swimlane_<time>.json", f)
           for f in files}
    if kw.get("enable_chip_swimlane"):
        expect.add("merged_swimlane.json")
    assert got == expect
    for f in files:
        assert os.path.getsize(os.path.join(dfx(cp), f)) > 0, f


def test_no_flag_writes_nothing(tmp_path):
    cp, *_ = run_ring(tmp_path, 2)
    assert not os.path.exists(dfx(cp))


def test_stale_dispatch_dirs_are_cleared_and_other_files_kept(tmp_path):
    cp = compiled(ring_main, tmp_path, 2, *ring_data(2))
    stale = os.path.join(dfx(cp), "rank7", "d3")
    os.makedirs(stale)
    open(os.path.join(stale, "deps.json"), "w").write("{}")
    keep = os.path.join(dfx(cp), "notes.txt")
    open(keep, "w").write("mine")
    xs, ys, counts = ring_data(2)
    cp(xs, ys, counts, config=config_for(2, enable_dep_gen=True))
    assert not os.path.exists(stale)
    assert open(keep).read() == "mine"
    assert {f for f in files_of(dfx(cp)) if f.endswith("deps.json")} == \
        {"rank0/d0/deps.json", "rank1/d0/deps.json"}


def test_an_unwritable_output_directory_is_refused_before_the_ranks_start(tmp_path):
    cp = compiled(ring_main, tmp_path, 2, *ring_data(2))
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    cp.output_dir = str(blocker / "out")          # a directory cannot live inside a file
    xs, ys, counts = ring_data(2)
    with pytest.raises(RuntimeFault) as ei:
        cp(xs, ys, counts, config=config_for(2, enable_dep_gen=True))
    assert ei.value.code == "TC443" and str(blocker) in ei.value.message
    assert not children()
    cp(xs, ys, counts, config=config_for(2))      # without artefacts the call runs
    np.testing.assert_array_equal(counts, np.full((2, 1, 1), ROUNDS))


@pytest.mark.parametrize("n", [1, 3])
def test_dumped_arguments_equal_the_inputs_and_results(tmp_path, n):
    cp, xs, ys, counts = run_ring(tmp_path, n, enable_dump_args=2)
    for r in range(n):
        d = os.path.join(dfx(cp), f"rank{r}", "d0", "args_dump")
        np.testing.assert_array_equal(np.load(os.path.join(d, "before", "00_x.npy")), xs[r])
        np.testing.assert_array_equal(np.load(os.path.join(d, "before", "01_y.npy")),
                                      np.zeros((1, N), np.float32))
        np.testing.assert_array_equal(np.load(os.path.join(d, "after", "01_y.npy")), ys[r])
        np.testing.assert_array_equal(np.load(os.path.join(d, "after", "02_count.npy")),
                                      counts[r])
        # windows: this rank's copy, zero before the call, the sum after it
        np.testing.assert_array_equal(np.load(os.path.join(d, "before", "04_data.npy")),
                                      np.zeros((1, N), np.float32))
        np.testing.assert_allclose(np.load(os.path.join(d, "after", "04_data.npy")),
                                   xs.sum(axis=0))
        # a self-clearing allreduce leaves its signal at zero
        np.testing.assert_array_equal(np.load(os.path.join(d, "after", "05_asig.npy")),
                                      np.zeros((n, 1), np.int32))
        manifest = json.load(open(os.path.join(d, "args.json")))
        assert [m["name"] for m in manifest] == ["x", "y", "count", "sig", "data", "asig"]
        assert [m["kind"] for m in manifest] == ["tensor"] * 3 + ["window"] * 3


@pytest.mark.parametrize("n", [2, 4])
def test_traced_results_equal_untraced_results(tmp_path, n):
    _, _, ys0, c0 = run_ring(tmp_path / "plain", n)
    _, _, ys1, c1 = run_ring(tmp_path / "traced", n, enable_chip_swimlane=4,
                             enable_scope_stats=True, enable_dump_args=2)
    np.testing.assert_array_equal(ys0, ys1)
    np.testing.assert_array_equal(c0, c1)


# ------------------------------------------------------------------ trace schema
KEYS = {"X": {"name", "cat", "pid", "tid", "ts", "dur", "args"},
        "i": {"name", "cat", "pid", "tid", "ts", "args"},
        "M": {"name", "pid", "tid", "args"},
        "s": {"name", "cat", "pid", "tid", "ts", "id"},
        "f": {"name", "cat", "pid", "tid", "ts", "id", "bp"}}


def check_schema(trace, n):
    """Checks the trace's shape; returns its events with ``pid`` replaced by
    the rank each process names."""
    evs = trace["traceEvents"]
    for e in evs:
        assert e["ph"] in KEYS, e
        assert KEYS[e["ph"]] <= set(e), e
    names = {e["pid"]: e["args"]["name"] for e in evs if e["ph"] == "M" and
             e["name"] == "process_name"}
    assert sorted(names.values()) == sorted(f"rank {r}" for r in range(n))
    assert {e["pid"] for e in evs} == set(names)              # one process per rank
    # no pid / tid 0, and thread ids unique across processes, as Perfetto
    # expects of them
    assert all(e["pid"] > 0 and e["tid"] > 0 for e in evs)
    owner = {}
    for e in evs:
        assert owner.setdefault(e["tid"], e["pid"]) == e["pid"], e
    used = {(e["pid"], e["tid"]) for e in evs if e["ph"] in "Xi"}
    named = {(e["pid"], e["tid"]) for e in evs if e["ph"] == "M" and e["name"] == "thread_name"}
    assert used <= named
    rank = {pid: int(name.split()[1]) for pid, name in names.items()}
    return [dict(e, pid=rank[e["pid"]]) for e in evs]


def within(ts, ev):
    return ev["ts"] <= ts <= ev["ts"] + ev["dur"]


def releasing_notifies(evs, release):
    """The notify slices with a flow arrow ending in ``release`` (checked: one arrow)."""
    ends = [f for f in evs if f["ph"] == "f" and f["cat"] == "signal" and
            f["pid"] == release["pid"] and f["tid"] == release["tid"] and
            within(f["ts"], release)]
    assert len(ends) == 1, (release, ends)
    starts = [s for s in evs if s["ph"] == "s" and s["id"] == ends[0]["id"]]
    assert len(starts) == 1
    s = starts[0]
    hits = [e for e in evs if e["ph"] == "X" and e["cat"] == "notify" and e["pid"] == s["pid"]
            and e["tid"] == s["tid"] and within(s["ts"], e)]
    assert len(hits) == 1
    return hits[0]


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_every_released_wait_has_one_arrow_from_the_notify_that_released_it(tmp_path, n):
    cp, *_ = run_ring(tmp_path, n, enable_chip_swimlane=True)
    assert cp.trace_path == os.path.join(dfx(cp), "merged_swimlane.json")
    evs = check_schema(json.load(open(cp.trace_path)), n)
    waits = [e for e in evs if e["ph"] == "X" and e["cat"] == "wait"]
    assert len(waits) == n * ROUNDS
    for w in waits:
        r, g = w["pid"], w["args"]["expected"]
        # the protocol: rank r's wait for >= g is released by the g-th credit of rank r - 1
        nt = releasing_notifies(evs, w)
        assert nt["pid"] == (r - 1) % n == w["args"]["released_by"]["rank"]
        assert nt["args"]["cell_key"] == w["args"]["cell_key"]
        assert nt["args"]["op"] == "AtomicAdd" and nt["args"]["value"] == 1
        assert nt["args"]["result"] == g >= 1
        assert w["args"]["line"].endswith(f":{line_of(ring_rounds, 'pld.system.wait')}:9")
        assert nt["args"]["line"].endswith(f":{line_of(ring_rounds, 'pld.system.notify')}:9")
    flows = [e for e in evs if e["ph"] == "s"]
    assert len(flows) == len(waits)
    notifies = [e for e in evs if e["ph"] == "X" and e["cat"] == "notify"]
    assert len(notifies) == n * ROUNDS
    # the allreduce is one slice per rank, with its line; the dispatch encloses the ops
    coll = [e for e in evs if e["ph"] == "X" and e["cat"] == "collective"]
    assert sorted(e["pid"] for e in coll) == list(range(n))
    assert all(e["name"] == "pld.tensor.allreduce" for e in coll)
    disp = {e["pid"]: e for e in evs if e["ph"] == "X" and e["cat"] == "dispatch"}
    assert sorted(disp) == list(range(n))
    for e in waits + notifies + coll:
        d = disp[e["pid"]]
        assert d["ts"] <= e["ts"] and e["ts"] + e["dur"] <= d["ts"] + d["dur"] + 0.002


def line_of(func, text):
    lines, first = inspect.getsourcelines(func.fn)
    hits = [first + i for i, ln in enumerate(lines) if text in ln]
    assert len(hits) == 1
    return hits[0]


def test_swimlane_level_one_records_tasks_and_dispatches_but_no_comm_ops(tmp_path):
    cp, *_ = run_ring(tmp_path, 2, enable_chip_swimlane=1)
    evs = check_schema(json.load(open(cp.trace_path)), 2)
    cats = {e.get("cat") for e in evs if e["ph"] == "X"}
    assert cats == {"dispatch"}


# ------------------------------------------------------------------ tasks: deps.json and task slices
X = pl.Tensor[[2, N], pl.INT32]
Y = pl.Out[pl.Tensor[[2, N], pl.INT32]]
GSIG = pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]


@pl.jit
def graph_chip(x: X, y: Y, sig: GSIG):
    t = pl.create_tensor([1, N], pl.INT32)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="writer") as w:
        pld.system.wait(sig, [0, 0], 1, cmp=GE)
        t = pl.store(pl.add(pl.load(x, [0, 0], [1, N]), 1), [0, 0], t)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="reader"):
        y = pl.store(pl.mul(pl.load(t, [0, 0], [1, N]), 2), [0, 0], y)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="opener"):
        pld.system.notify(sig, pld.rank(pld.get_comm_ctx(sig)), [0, 0], 1, op=SET)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="after_writer", deps=[w]):
        y = pl.store(pl.load(x, [1, 0], [1, N]), [1, 0], y)
    return y


@pl.jit.host
def graph_main(xs: pl.Tensor[[NR, 2, N], pl.INT32], ys: pl.Out[pl.Tensor[[NR, 2, N], pl.INT32]]):
    sbuf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        graph_chip(xs[r], ys[r], pld.window(sbuf, [1, 1], dtype=pl.INT32), device=r)
    return ys


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_task_graph_and_task_slices(tmp_path, n):
    xs = np.arange(n * 2 * N, dtype=np.int32).reshape(n, 2, N)
    ys = np.zeros_like(xs)
    cp = compiled(graph_main, tmp_path, n, xs, ys)
    for _ in range(2):              # a second run starts again at d0, with fresh task ids
        ys[:] = 0
        cp(xs, ys, config=config_for(n, cores=2, enable_chip_swimlane=True,
                                     enable_scope_stats=True))
        np.testing.assert_array_equal(ys[:, 0], (xs[:, 0] + 1) * 2)
        np.testing.assert_array_equal(ys[:, 1], xs[:, 1])
    evs = check_schema(json.load(open(cp.trace_path)), n)
    for r in range(n):
        d = os.path.join(dfx(cp), f"rank{r}", "d0")
        deps = json.load(open(os.path.join(d, "deps.json")))
        assert deps["function"] == "graph_chip" and deps["rank"] == r
        ids = {t["name"]: t["id"] for t in deps["tasks"]}
        assert set(ids) == {"writer", "reader", "opener", "after_writer"}
        name = {v: k for k, v in ids.items()}
        edges = {(name[e["from"]], name[e["to"]]): e["kinds"] for e in deps["edges"]}
        assert edges == {("writer", "reader"): ["inferred"],
                         ("writer", "after_writer"): ["explicit"]}
        stats = [json.loads(ln) for ln in open(os.path.join(d, "scope_stats",
                                                             "scope_stats.jsonl"))]
        assert len(stats) == 1 and stats[0]["tasks_submitted"] == 4
        assert 1 <= stats[0]["task_window_watermark"] <= 4
        assert stats[0]["dep_edges"] == 2 and stats[0]["heap_bytes"] is None
        # one slice per task, on a core track of this rank, with its task id
        tasks = [e for e in evs if e["ph"] == "X" and e["cat"] == "task" and e["pid"] == r]
        assert sorted(e["args"]["task_id"] for e in tasks) == sorted(ids.values())
        (disp,) = [e for e in evs if e["ph"] == "X" and e["cat"] == "dispatch" and e["pid"] == r]
        assert all(e["tid"] != disp["tid"] for e in tasks)
        # the writer's wait sits on the writer's core and is released by the opener's Set
        (w,) = [e for e in evs if e["ph"] == "X" and e["cat"] == "wait" and e["pid"] == r]
        nt = releasing_notifies(evs, w)
        assert nt["pid"] == r and nt["args"]["op"] == "Set" and nt["args"]["result"] == 1
        writer = [e for e in tasks if e["name"] == "writer"][0]
        assert w["tid"] == writer["tid"] and within(w["ts"], writer)
        # level 3: an arrow from the end of each task another one waited for to
        # its start (the scheduler's edges: reader and after_writer wait for writer)
        by_id = {e["id"]: e for e in evs if e["ph"] in "sf" and e["cat"] == "dependency"
                 and e["ph"] == "s" and e["pid"] == r}
        arrows = set()
        for f in (e for e in evs if e["ph"] == "f" and e["cat"] == "dependency"
                  and e["pid"] == r):
            s = by_id[f["id"]]
            src = [t["name"] for t in tasks if t["tid"] == s["tid"] and within(s["ts"], t)]
            dst = [t["name"] for t in tasks if t["tid"] == f["tid"] and within(f["ts"], t)]
            assert len(src) == 1 and len(dst) == 1
            arrows.add((src[0], dst[0]))
        # (after_writer's edge exists only if writer was still running when it
        # was submitted: the scheduler keeps no edge to a completed task)
        assert ("writer", "reader") in arrows
        assert arrows <= {("writer", "reader"), ("writer", "after_writer")}
        # level 4: the orchestrating thread's submissions and its wait for the tasks
        orch = [e for e in evs if e["ph"] == "X" and e["cat"] == "orchestrator"
                and e["pid"] == r]
        assert [e["name"] for e in sorted(orch, key=lambda e: e["ts"])] == [
            "submit writer", "submit reader", "submit opener", "submit after_writer",
            "wait for tasks"]
        assert all(e["tid"] == disp["tid"] for e in orch)
    assert not os.path.exists(os.path.join(dfx(cp), "rank0", "d1"))


# ------------------------------------------------------------------ deferred conditions
@pl.jit
def deferred_chip(inp: pl.Tensor[[1, N], pl.INT32], out: pl.Out[pl.Tensor[[4, N], pl.INT32]],
                  payload: pl.InOut[pld.DistributedTensor[[1, N], pl.INT32]], signal: GSIG,
                  peer: pl.Scalar[pl.INT32]):
    with pl.manual_scope():
        for slot in pl.range(4):
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="waiter") as wait_tid:
                epoch: pl.Scalar[pl.INT32] = pl.read(inp, [0, 0])
                pld.system.defer_wait(signal=signal, offsets=[0, 0], expected=epoch, cmp=GE)
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="consumer", deps=[wait_tid]):
                out = pl.store(pl.load(payload, [0, 0], [1, N]), [slot, 0], out)
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="publisher"):
            pld.tile.remote_store(pl.load(inp, [0, 0], [1, N]), target=payload, peer=peer,
                                  offsets=[0, 0])
            pld.system.notify(signal, peer, [0, 0], pl.read(inp, [0, 0]), op=SET)
    return out


@pl.jit.host
def deferred_main(inps: pl.Tensor[[NR, 1, N], pl.INT32],
                  outs: pl.Out[pl.Tensor[[NR, 4, N], pl.INT32]]):
    pbuf = pld.alloc_window_buffer([1, N], dtype=pl.INT32)
    sbuf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        deferred_chip(inps[r], outs[r], pld.window(pbuf, [1, N], dtype=pl.INT32),
                      pld.window(sbuf, [1, 1], dtype=pl.INT32), (r + 1) % pld.world_size(),
                      device=r)
    return outs


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_deferred_conditions_have_arrows_from_the_publisher(tmp_path, n):
    inps = np.random.default_rng(1).integers(0, 100, (n, 1, N)).astype(np.int32)
    inps[:, 0, 0] = 5
    outs = np.zeros((n, 4, N), np.int32)
    cp = compiled(deferred_main, tmp_path, n, inps, outs)
    cp(inps, outs, config=config_for(n, cores=2, enable_chip_swimlane=True))
    np.testing.assert_array_equal(outs, np.repeat(np.roll(inps, 1, axis=0), 4, axis=1))
    evs = check_schema(json.load(open(cp.trace_path)), n)
    released = [e for e in evs if e["ph"] == "X" and e["cat"] == "deferred"]
    assert sorted(e["pid"] for e in released) == sorted(list(range(n)) * 4)
    for rel in released:
        nt = releasing_notifies(evs, rel)
        assert nt["pid"] == (rel["pid"] - 1) % n
        assert nt["args"]["op"] == "Set" and nt["args"]["result"] == 5
        assert nt["args"]["cell_key"] == rel["args"]["cell_key"]
    # the tile form: the program stores a tile
    stores = [e for e in evs if e["ph"] == "X" and e["name"] == "pld.tile.remote_store"]
    assert sorted(e["pid"] for e in stores) == list(range(n))


# ------------------------------------------------------------------ a run that deadlocks
@pl.jit.incore
def wait_forever(count: pl.Out[pl.Tensor[[1, 1], pl.INT32]], sig: SIG) -> pl.Tensor[[1, 1], pl.INT32]:
    ctx = pld.get_comm_ctx(sig)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    pld.system.notify(sig, (me + 1) % n, [0, 0], 1, op=ADD)
    pld.system.wait(sig, [0, 0], 2, cmp=GE)          # one credit only ever arrives
    pl.write(count, [0, 0], pl.read(sig, [0, 0]))
    return count


@pl.jit
def stuck_chip(count: pl.Out[pl.Tensor[[1, 1], pl.INT32]], sig: SIG):
    return wait_forever(count, sig)


@pl.jit.host
def stuck_main(counts: pl.Out[pl.Tensor[[NR, 1, 1], pl.INT32]]):
    sbuf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        stuck_chip(counts[r], pld.window(sbuf, [1, 1], dtype=pl.INT32), device=r)
    return counts


@pytest.mark.parametrize("n", [1, 2, 3])
def test_a_deadlocked_run_still_leaves_a_trace_of_what_happened(tmp_path, n):
    counts = np.zeros((n, 1, 1), np.int32)
    cp = compiled(stuck_main, tmp_path, n, counts)
    with pytest.raises(DeadlockError) as ei:
        cp(counts, config=config_for(n, enable_chip_swimlane=True))
    assert ei.value.trace_path == cp.trace_path
    evs = check_schema(json.load(open(cp.trace_path)), n)
    blocked = [e for e in evs if e["ph"] == "X" and e["cat"] == "blocked"]
    assert sorted(e["pid"] for e in blocked) == list(range(n))
    for b in blocked:
        a = b["args"]
        assert (a["cmp"], a["expected"], a["observed"]) == ("Ge", 2, 1)
        assert b["name"] == "pld.system.wait (never released)"
    # the credits that did arrive: one notify per rank, no arrow into a blocked wait
    assert len([e for e in evs if e["ph"] == "X" and e["cat"] == "notify"]) == n
    assert not [e for e in evs if e["ph"] in "sf"]
    disp = [e for e in evs if e["ph"] == "X" and e["cat"] == "dispatch"]
    assert sorted(e["pid"] for e in disp) == list(range(n))
    assert all(e["args"]["finished"] is False for e in disp)


@pl.jit.incore
def last_rank_faults(count: pl.Out[pl.Tensor[[1, 1], pl.INT32]], sig: SIG) -> pl.Tensor[[1, 1], pl.INT32]:
    ctx = pld.get_comm_ctx(sig)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    if me == n - 1:
        pld.system.notify(sig, n + 5, [0, 0], 1, op=ADD)       # no such peer: this rank fails
    pld.system.wait(sig, [0, 0], 1, cmp=GE)
    pl.write(count, [0, 0], pl.read(sig, [0, 0]))
    return count


@pl.jit
def faulty_chip(count: pl.Out[pl.Tensor[[1, 1], pl.INT32]], sig: SIG):
    return last_rank_faults(count, sig)


@pl.jit.host
def faulty_main(counts: pl.Out[pl.Tensor[[NR, 1, 1], pl.INT32]]):
    sbuf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        faulty_chip(counts[r], pld.window(sbuf, [1, 1], dtype=pl.INT32), device=r)
    return counts


@pytest.mark.parametrize("n", [1, 3])
def test_a_rank_failure_still_leaves_a_trace(tmp_path, n):
    counts = np.zeros((n, 1, 1), np.int32)
    cp = compiled(faulty_main, tmp_path, n, counts)
    with pytest.raises(RankFailure) as ei:
        cp(counts, config=config_for(n, enable_chip_swimlane=2))
    assert ei.value.rank == n - 1
    assert ei.value.trace_path == cp.trace_path
    evs = check_schema(json.load(open(cp.trace_path)), n)
    disp = {e["pid"]: e for e in evs if e["ph"] == "X" and e["cat"] == "dispatch"}
    assert disp[n - 1]["args"]["finished"] is False
    # the others were aborted in their waits (if they got that far before the abort)
    for e in evs:
        if e["ph"] == "X" and e["cat"] in ("wait", "blocked"):
            assert e["pid"] != n - 1 and e["cat"] == "blocked"
