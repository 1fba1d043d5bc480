"""``RunConfig(enable_dump_args=1)``: only the tensors tagged with
``pl.dump_tag`` / ``dumps=`` are written, before and after each task (and
each dispatch) that takes them, under
``<output_dir>/dfx_outputs/rank{r}/d{k}/args_dump/``; level 0 writes nothing
and level 2 keeps writing every dispatch argument.

Every dumped array is compared with the value the program had there,
computed independently with numpy from the inputs; the file set is compared
exactly, so a missing or an extra dump fails."""
import json
import os

import numpy as np
import pytest

import tilecomm
import tilecomm.language as pl
import tilecomm.language.distributed as pld
from conftest import config_for, files_of

NR = pl.dynamic("NR")
R, N = 2, 8
X = pl.Tensor[[R, N], pl.FP32]
IO = pl.InOut[pl.Tensor[[R, N], pl.FP32]]
XS = pl.Tensor[[NR, R, N], pl.FP32]
IOS = pl.InOut[pl.Tensor[[NR, R, N], pl.FP32]]
DATA = pl.InOut[pld.DistributedTensor[[R, N], pl.FP32]]
ASIG = pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]
T = pl.Tensor[[R, N], pl.FP32]


def data(n, seed):
    rng = np.random.default_rng(seed)
    return [rng.integers(-8, 9, (n, R, N)).astype(np.float32) for _ in range(3)]


def dfx(cp):
    return os.path.join(cp.output_dir, "dfx_outputs")


def compiled(main, tmp_path, n, *args):
    cp = main.compile(*args, config=config_for(n, cache_dir=str(tmp_path / "cache")))
    assert str(cp.output_dir).startswith(str(tmp_path))
    return cp


def task_files(r, k, task, entries):
    """The files of one dumped task (or the dispatch itself: ``task`` None)."""
    base = f"rank{r}/d{k}/args_dump" + (f"/{task}" if task else "")
    return {f"{base}/args.json"} | {f"{base}/{w}/{i:02d}_{name}.npy"
                                    for w in ("before", "after") for i, name in entries}


def load(cp, r, k, task, when, i, name):
    base = os.path.join(dfx(cp), f"rank{r}", f"d{k}", "args_dump", *([task] if task else []))
    return np.load(os.path.join(base, when, f"{i:02d}_{name}.npy"))


# ------------------------------------------------------------------ pl.at, pl.dump_tag, kernel tasks
@pl.jit.incore
def add_thrice(src: X, dst: IO) -> T:
    pl.dump_tag(dst)                  # every task running this kernel dumps dst
    dst = pl.store(pl.add(pl.load(dst, [0, 0], [R, N]), pl.mul(pl.load(src, [0, 0], [R, N]),
                                                                  3.0)), [0, 0], dst)
    return dst


@pl.jit
def chip(x: X, y: IO, z: IO, data: DATA, asig: ASIG):
    t = pl.create_tensor([R, N], pl.FP32, init_value=7.0)
    u = pl.create_tensor([R, N], pl.FP32, init_value=-1.0)
    pl.dump_tag(u)                    # function-wide: every task taking u dumps it
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="double", dumps=[t]):
        t = pl.store(pl.mul(pl.load(x, [0, 0], [R, N]), 2.0), [0, 0], t)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="plus"):
        pl.dump_tag(y)                # this task only; t (tagged for "double") is not dumped
        y = pl.store(pl.add(pl.load(y, [0, 0], [R, N]), pl.load(t, [0, 0], [R, N])), [0, 0], y)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="fill"):
        u = pl.store(pl.add(pl.load(x, [0, 0], [R, N]), pl.load(y, [0, 0], [R, N])), [0, 0], u)
    z = add_thrice(u, z)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="reduce", dumps=[data]):
        data = pl.store(pl.load(x, [0, 0], [R, N]), [0, 0], data)
        data = pld.tensor.allreduce(data, asig, op=pld.ReduceOp.Sum)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="untagged"):
        x2 = pl.load(data, [0, 0], [R, N])
        y = pl.store(pl.add(pl.load(y, [0, 0], [R, N]), x2), [0, 0], y)
    return z


@pl.jit.host
def main(xs: XS, ys: IOS, zs: IOS):
    dbuf = pld.alloc_window_buffer([R, N], dtype=pl.FP32)
    abuf = pld.alloc_window_buffer([pld.world_size(), 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        chip(xs[r], ys[r], zs[r], pld.window(dbuf, [R, N], dtype=pl.FP32),
             pld.window(abuf, [pld.world_size(), 1], dtype=pl.INT32), device=r)
    return zs


def run_main(tmp_path, n, level, seed=1):
    xs, ys, zs = data(n, seed)
    cp = compiled(main, tmp_path, n, xs, ys.copy(), zs.copy())
    y0, z0 = ys.copy(), zs.copy()
    cp(xs, ys, zs, config=config_for(n, cores=2, enable_dump_args=level))
    total = xs.sum(axis=0)
    np.testing.assert_array_equal(ys, y0 + 2 * xs + total)
    np.testing.assert_array_equal(zs, z0 + 3 * (xs + y0 + 2 * xs))
    return cp, xs, y0, z0


# task ids in submission order; argument indices are the captured names in
# the order the orchestration function binds them (x, y, z, data, asig, t, u)
MAIN_TASKS = {"task1_double": [(1, "t")], "task2_plus": [(0, "y")],
              "task3_fill": [(2, "u")], "task4_add_thrice": [(0, "src"), (1, "dst")],
              "task5_reduce": [(1, "data")]}


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_level_1_writes_exactly_the_tagged_tensors_with_their_values(tmp_path, n):
    cp, xs, y0, z0 = run_main(tmp_path, n, 1)
    want = set()
    for r in range(n):
        for task, entries in MAIN_TASKS.items():
            want |= task_files(r, 0, task, entries)
    assert files_of(dfx(cp)) == want
    total = xs.sum(axis=0)
    for r in range(n):
        x, y, z = xs[r], y0[r], z0[r]

        def check(task, i, name, before, after):
            np.testing.assert_array_equal(load(cp, r, 0, task, "before", i, name), before)
            np.testing.assert_array_equal(load(cp, r, 0, task, "after", i, name), after)

        check("task1_double", 1, "t", np.full((R, N), 7.0, np.float32), 2 * x)
        check("task2_plus", 0, "y", y, y + 2 * x)
        u = x + y + 2 * x
        check("task3_fill", 2, "u", np.full((R, N), -1.0, np.float32), u)
        check("task4_add_thrice", 0, "src", u, u)
        check("task4_add_thrice", 1, "dst", z, z + 3 * u)
        # a window: this rank's copy, zero before, every rank's x summed after
        check("task5_reduce", 1, "data", np.zeros((R, N), np.float32), total)
        manifest = json.load(open(os.path.join(dfx(cp), f"rank{r}", "d0", "args_dump",
                                               "task4_add_thrice", "args.json")))
        assert [(m["index"], m["name"], m["kind"], m["dtype"], m["shape"]) for m in manifest] \
            == [(0, "src", "tensor", "float32", [R, N]), (1, "dst", "tensor", "float32", [R, N])]
        manifest = json.load(open(os.path.join(dfx(cp), f"rank{r}", "d0", "args_dump",
                                               "task5_reduce", "args.json")))
        assert [(m["name"], m["kind"]) for m in manifest] == [("data", "window")]


@pytest.mark.parametrize("n", [1, 3])
def test_level_0_writes_nothing(tmp_path, n):
    cp, *_ = run_main(tmp_path, n, 0)
    assert not os.path.exists(dfx(cp))


@pytest.mark.parametrize("n", [2])
def test_level_2_still_writes_every_dispatch_argument_and_no_task(tmp_path, n):
    cp, xs, y0, z0 = run_main(tmp_path, n, 2)
    names = ["x", "y", "z", "data", "asig"]
    assert files_of(dfx(cp)) == {f for r in range(n)
                                 for f in task_files(r, 0, None, list(enumerate(names)))}
    np.testing.assert_array_equal(load(cp, 1, 0, None, "before", 1, "y"), y0[1])


@pytest.mark.parametrize("n", [2, 4])
def test_level_1_with_a_trace_computes_the_same(tmp_path, n):
    """Dumps and the recording context together: same results (checked in
    ``run_main``), the trace and the dumps both written."""
    xs, ys, zs = data(n, 5)
    cp = compiled(main, tmp_path, n, xs, ys.copy(), zs.copy())
    y0, z0 = ys.copy(), zs.copy()
    cp(xs, ys, zs, config=config_for(n, cores=2, enable_dump_args=1, enable_chip_swimlane=4))
    np.testing.assert_array_equal(zs, z0 + 3 * (3 * xs + y0))
    got = files_of(dfx(cp))
    assert "merged_swimlane.json" in got
    for r in range(n):
        assert task_files(r, 0, "task4_add_thrice", MAIN_TASKS["task4_add_thrice"]) <= got
    # the next call without dumps runs untraced and undumped (the context is back)
    cp(xs, ys, zs, config=config_for(n, cores=2))


# ------------------------------------------------------------------ class form: pl.submit
@pl.program
class Submits:
    @pl.function(type=pl.FunctionType.InCore)
    def add_one(self, x: X, y: IO) -> T:
        y = pl.store(pl.add(pl.add(pl.load(y, [0, 0], [R, N]), pl.load(x, [0, 0], [R, N])), 1.0),
                     [0, 0], y)
        return y

    @pl.function(type=pl.FunctionType.InCore)
    def double_row(self, y: IO) -> T:
        b = pl.get_block_idx()
        y = pl.store(pl.mul(pl.load(y, [b, 0], [1, N]), 2.0), [b, 0], y)
        return y

    @pl.function(type=pl.FunctionType.Orchestration)
    def chip(self, x: X, y: IO, z: IO):
        y, first = pl.submit(self.add_one, x, y, dumps=[y])
        y, second = pl.spmd_submit(self.double_row, y, core_num=R, dumps=[y])
        z, third = pl.submit(self.add_one, y, z)
        return z

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def main(self, xs: XS, ys: IOS, zs: IOS):
        for r in pl.range(pld.world_size()):
            self.chip(xs[r], ys[r], zs[r], device=r)
        return zs


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_submit_dumps_in_the_class_form(tmp_path, n):
    cp = tilecomm.ir.compile(Submits, str(tmp_path / "out"),
                             distributed_config=config_for(n).dist)
    xs, ys, zs = data(n, 2)
    y0, z0 = ys.copy(), zs.copy()
    cp(xs, ys, zs, config=config_for(n, cores=3, enable_dump_args=1))
    y1 = y0 + xs + 1
    np.testing.assert_array_equal(ys, 2 * y1)
    np.testing.assert_array_equal(zs, z0 + 2 * y1 + 1)
    want = set()
    for r in range(n):
        want |= task_files(r, 0, "task1_add_one", [(1, "y")])
        want |= task_files(r, 0, "task2_double_row", [(0, "y")])
    assert files_of(dfx(cp)) == want
    for r in range(n):
        np.testing.assert_array_equal(load(cp, r, 0, "task1_add_one", "before", 1, "y"), y0[r])
        np.testing.assert_array_equal(load(cp, r, 0, "task1_add_one", "after", 1, "y"), y1[r])
        # the spmd task: before its first block, after its last
        np.testing.assert_array_equal(load(cp, r, 0, "task2_double_row", "before", 0, "y"),
                                      y1[r])
        np.testing.assert_array_equal(load(cp, r, 0, "task2_double_row", "after", 0, "y"),
                                      2 * y1[r])


# ------------------------------------------------------------------ dispatches
@pl.jit.incore
def axpy(x: X, y: IO) -> T:
    pl.dump_tag(y)
    y = pl.store(pl.add(pl.load(y, [0, 0], [R, N]), pl.mul(pl.load(x, [0, 0], [R, N]), 2.0)),
                 [0, 0], y)
    return y


@pl.jit
def chip_inline(x: X, y: IO, z: IO):
    return axpy(x, y)                 # no tasks: an inline call; the dispatch dumps y


@pl.jit.incore
def plus_one(y: IO) -> T:
    y = pl.store(pl.add(pl.load(y, [0, 0], [R, N]), 1.0), [0, 0], y)
    return y


@pl.jit.host
def twice(xs: XS, ys: IOS, zs: IOS):
    for r in pl.range(pld.world_size()):
        chip_inline(xs[r], ys[r], zs[r], device=r)
    for r in pl.range(pld.world_size()):
        chip_inline(xs[r], ys[r], zs[r], device=r)
    for r in pl.range(pld.world_size()):
        zr = zs[r]
        with pl.at(level=pl.Level.CHIP, role=pl.Role.Orchestrator, dumps=[zr]):
            zr = plus_one(zr)
    return ys


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_tagged_parameters_are_dumped_around_each_dispatch(tmp_path, n):
    xs, ys, zs = data(n, 3)
    cp = compiled(twice, tmp_path, n, xs, ys.copy(), zs.copy())
    y0, z0 = ys.copy(), zs.copy()
    cp(xs, ys, zs, config=config_for(n, enable_dump_args=1))
    np.testing.assert_array_equal(ys, y0 + 4 * xs)
    np.testing.assert_array_equal(zs, z0 + 1)
    got = files_of(dfx(cp))
    # the tagged chip dispatches: d0 and d1 on every rank, y only
    chips = set()
    for r in range(n):
        chips |= task_files(r, 0, None, [(1, "y")]) | task_files(r, 1, None, [(1, "y")])
        for k, before in ((0, y0[r]), (1, y0[r] + 2 * xs[r])):
            np.testing.assert_array_equal(load(cp, r, k, None, "before", 1, "y"), before)
            np.testing.assert_array_equal(load(cp, r, k, None, "after", 1, "y"),
                                          before + 2 * xs[r])
        manifest = json.load(open(os.path.join(dfx(cp), f"rank{r}", "d0", "args_dump",
                                               "args.json")))
        assert [(m["index"], m["name"]) for m in manifest] == [(1, "y")]
    assert chips <= got
    # the inline chip scopes (placed by the host runtime): one dispatch each,
    # dumping its row of zs before and after the increment
    inline = sorted(f for f in got - chips if f.endswith("args.json"))
    assert len(inline) == n and len(got - chips) == 3 * n, sorted(got - chips)
    left = [z0[r] for r in range(n)]
    for f in inline:
        d = os.path.dirname(os.path.join(dfx(cp), f))
        manifest = json.load(open(f"{d}/args.json"))
        assert [m["name"] for m in manifest] == ["zr"] and manifest[0]["shape"] == [R, N]
        i = manifest[0]["index"]
        before = np.load(os.path.join(d, "before", f"{i:02d}_zr.npy"))
        np.testing.assert_array_equal(np.load(os.path.join(d, "after", f"{i:02d}_zr.npy")),
                                      before + 1)
        # the rows are distinct (random), so each dispatch's row is identified
        hit = [j for j, z in enumerate(left) if np.array_equal(z, before)]
        assert len(hit) == 1
        left.pop(hit[0])
    assert not left


# ------------------------------------------------------------------ prepared worker
def _task_dirs(cp, r):
    """{task name: TaskId} of the dumped tasks of rank r's dispatch d0."""
    d = os.path.join(dfx(cp), f"rank{r}", "d0", "args_dump")
    out = {}
    for name in os.listdir(d):
        tid, _, task = name.partition("_")
        out[task] = int(tid[len("task"):])
    return out


@pytest.mark.parametrize("n", [1, 2, 4])
def test_a_prepared_worker_dumps_only_in_the_calls_that_ask(tmp_path, n):
    xs, ys, zs = data(n, 4)
    cp = compiled(main, tmp_path, n, xs, ys.copy(), zs.copy())
    dumping = config_for(n, cores=2, enable_dump_args=1)
    with cp.prepare() as worker:
        for i, cfg in enumerate([dumping, config_for(n, cores=2), dumping,
                                 config_for(n, cores=2, enable_chip_swimlane=3,
                                            enable_dump_args=1),
                                 config_for(n, cores=2)]):
            ys[:], zs[:] = data(n, 4)[1:]
            y0, z0 = ys.copy(), zs.copy()
            if os.path.exists(dfx(cp)):
                mtimes = {f: os.stat(os.path.join(dfx(cp), f)).st_mtime_ns
                          for f in files_of(dfx(cp))}
            worker(xs, ys, zs, config=cfg)
            np.testing.assert_array_equal(ys, y0 + 2 * xs + xs.sum(axis=0))
            np.testing.assert_array_equal(zs, z0 + 3 * (3 * xs + y0))
            got = files_of(dfx(cp))
            if not cfg.enable_dump_args:          # nothing written, nothing removed
                assert {f: os.stat(os.path.join(dfx(cp), f)).st_mtime_ns for f in got} == \
                    mtimes
                continue
            for r in range(n):
                tids = _task_dirs(cp, r)
                assert set(tids) == {t.partition("_")[2] for t in MAIN_TASKS}
                # TaskIds in submission order
                order = [t.partition("_")[2] for t in MAIN_TASKS]
                assert sorted(order, key=tids.get) == order
                u = 3 * xs[r] + y0[r]
                d = os.path.join(dfx(cp), f"rank{r}", "d0", "args_dump",
                                 f"task{tids['add_thrice']}_add_thrice")
                np.testing.assert_array_equal(np.load(f"{d}/before/01_dst.npy"), z0[r])
                np.testing.assert_array_equal(np.load(f"{d}/after/01_dst.npy"), z0[r] + 3 * u)
            assert len([f for f in got if "/args_dump/" in f]) == \
                n * sum(1 + 2 * len(e) for e in MAIN_TASKS.values())
