"""Programs ported from PyPTO by changing their import lines only: the parts of
upstream's surface its own distributed tests and examples rely on.  Each test
names the upstream test it mirrors; the programs here are this project's own,
checked against numpy."""
from pathlib import Path

import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm import ir
from tilecomm.ir.distributed_compiled_program import (DistributedCompiledProgram,
                                                      DistributedConfig)
from tilecomm.runtime import RunConfig

ROWS, COLS = 4, 8


def _add_one_program(n):
    """Every rank adds one to its slice: one rank-pinned dispatch per rank."""

    @pl.program
    class AddOne:
        @pl.function(type=pl.FunctionType.InCore)
        def add_one(self, x: pl.Tensor[[ROWS, COLS], pl.FP32],
                    y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]
                    ) -> pl.Tensor[[ROWS, COLS], pl.FP32]:
            return pl.store(pl.add(pl.load(x, [0, 0], [ROWS, COLS]), 1.0), [0, 0], y)

        @pl.function(type=pl.FunctionType.Orchestration)
        def chip(self, x: pl.Tensor[[ROWS, COLS], pl.FP32],
                 y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> pl.Tensor[[ROWS, COLS], pl.FP32]:
            return self.add_one(x, y)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, xs: pl.Tensor[[n, ROWS, COLS], pl.FP32],
                      ys: pl.Out[pl.Tensor[[n, ROWS, COLS], pl.FP32]]):
            for r in pl.range(pld.world_size()):
                self.chip(xs[r], ys[r], device=r)
            return ys

    return AddOne


def _inputs(n, seed=0):
    xs = np.random.default_rng(seed).standard_normal((n, ROWS, COLS)).astype(np.float32)
    return xs, np.zeros_like(xs)


# ------------------------------------------------------------------ import places, output_dir
def test_compiled_program_is_upstreams_class_and_output_dir_is_a_path(tmp_path):
    """Mirrors test_l3_dfx_per_rank.py::test_dfx_artifacts_isolated_per_rank: the
    imports of pypto.ir.distributed_compiled_program, and ``output_dir`` joined
    with ``/`` to reach each rank's artefacts."""
    n = 2
    compiled = ir.compile(_add_one_program(n), output_dir=str(tmp_path / "out"),
                          distributed_config=DistributedConfig(device_ids=[0, 1]))
    assert isinstance(compiled, DistributedCompiledProgram)
    assert isinstance(compiled.output_dir, Path)
    assert compiled.output_dir == (tmp_path / "out").resolve()
    xs, ys = _inputs(n)
    compiled(xs, ys, config=RunConfig(enable_dep_gen=True))
    np.testing.assert_array_equal(ys, xs + np.float32(1))
    for r in range(n):
        deps = compiled.output_dir / "dfx_outputs" / f"rank{r}" / "d0" / "deps.json"
        assert deps.is_file() and deps.stat().st_size > 0
    # reassigned from a str, it stays a Path, and the next call's artefacts go there
    compiled.output_dir = str(tmp_path / "elsewhere")
    assert compiled.output_dir == (tmp_path / "elsewhere").resolve()
    compiled(xs, ys, config=RunConfig(enable_dep_gen=True))
    assert (compiled.output_dir / "dfx_outputs" / "rank1" / "d0" / "deps.json").is_file()
    # a reloaded build's output_dir is a Path too
    assert isinstance(DistributedCompiledProgram.from_dir(tmp_path / "out").output_dir, Path)


# ------------------------------------------------------------------ names bound inside scopes
M = 16


@pl.program
class InlineScopes:
    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, a: pl.Tensor[[M, M], pl.FP32], b: pl.Tensor[[M, M], pl.FP32],
                  sum_buf: pl.Out[pl.Tensor[[M, M], pl.FP32]],
                  prod_buf: pl.Out[pl.Tensor[[M, M], pl.FP32]]) -> pl.Tensor[[M, M], pl.FP32]:
        with pl.at(level=pl.Level.CHIP, role=pl.Role.Orchestrator):
            with pl.at(level=pl.Level.CORE_GROUP):
                # two names bound in one task, both carried out to the HOST
                out_sum = pl.assemble(sum_buf, pl.add(a, b), [0, 0])
                out_prod = pl.assemble(prod_buf, pl.mul(a, b), [0, 0])
        with pl.at(level=pl.Level.CHIP, role=pl.Role.Orchestrator):
            with pl.at(level=pl.Level.CORE_GROUP):
                # reads what the first chip scope wrote, through the carried-out names
                pl.assemble(out_prod, pl.add(out_prod, out_sum), [0, 0])
        return out_sum


def test_a_name_bound_in_an_inline_scope_is_visible_after_it(tmp_path):
    """Mirrors test_l3_distributed.py::TestL3Dependency::test_execute_inline (an
    inline chip scope binding out_sum, returned after it)."""
    compiled = ir.compile(InlineScopes, output_dir=str(tmp_path))
    rng = np.random.default_rng(4)
    a = rng.standard_normal((M, M)).astype(np.float32)
    b = rng.standard_normal((M, M)).astype(np.float32)
    s, p = compiled(a, b)                                  # return style: both outputs
    np.testing.assert_array_equal(s, a + b)
    np.testing.assert_array_equal(p, a * b + (a + b))
    sum_buf, prod_buf = np.zeros_like(a), np.zeros_like(a)
    assert compiled(a, b, sum_buf, prod_buf) is sum_buf   # in place: what the HOST returns
    np.testing.assert_array_equal(sum_buf, a + b)


H = M // 2


@pl.program
class TaskScopes:
    @pl.function(type=pl.FunctionType.Orchestration)
    def chip(self, x: pl.Tensor[[M, M], pl.FP32], y: pl.Out[pl.Tensor[[M, M], pl.FP32]],
             z: pl.Out[pl.Tensor[[M, M], pl.FP32]], w: pl.Out[pl.Tensor[[M, M], pl.FP32]],
             v: pl.Out[pl.Tensor[[M, M], pl.FP32]]) -> pl.Tensor[[M, M], pl.FP32]:
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="double"):
            doubled = pl.assemble(y, pl.add(x, x), [0, 0])
        for i in pl.spmd(2, name_hint="rows"):
            # reads what the first task wrote, through its name: ordered after it
            rows = pl.store(pl.mul(pl.load(doubled, [i * H, 0], [H, M]), 3.0), [i * H, 0], z)
        with pl.manual_scope():
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="square"):
                squared = pl.assemble(w, pl.mul(x, x), [0, 0])
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="sum"):
            total = pl.assemble(v, pl.add(squared, rows), [0, 0])
        return total

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[M, M], pl.FP32], y: pl.Out[pl.Tensor[[M, M], pl.FP32]],
                  z: pl.Out[pl.Tensor[[M, M], pl.FP32]], w: pl.Out[pl.Tensor[[M, M], pl.FP32]],
                  v: pl.Out[pl.Tensor[[M, M], pl.FP32]]) -> pl.Tensor[[M, M], pl.FP32]:
        out = self.chip(x, y, z, w, v)
        return out


def test_names_bound_in_task_scopes_are_visible_after_them(tmp_path):
    """Mirrors test_l3_explicit_dispatch_onboard.py's L3MultiChipProgram (out_sum
    bound in a pl.at task, used after it) in a chip orchestrator: pl.at,
    pl.spmd and a task in pl.manual_scope each bind a name a later task reads,
    and the orchestrator returns one."""
    compiled = ir.compile(TaskScopes, output_dir=str(tmp_path))
    x = np.random.default_rng(5).standard_normal((M, M)).astype(np.float32)
    outs = [np.zeros_like(x) for _ in range(4)]
    got = compiled(x, *outs)
    y, z, w, v = outs
    assert got is v
    np.testing.assert_array_equal(y, x + x)
    np.testing.assert_array_equal(z, (x + x) * np.float32(3))
    np.testing.assert_array_equal(w, x * x)
    np.testing.assert_array_equal(v, x * x + (x + x) * np.float32(3))


# ------------------------------------------------------------------ SubWorker results, torch
@pl.program
class ParallelReduce:
    """Two chip dispatches into HOST intermediates, reduced by a SubWorker
    whose result is the output it writes."""

    @pl.function(type=pl.FunctionType.InCore)
    def tile_add(self, a: pl.Tensor[[M, M], pl.FP32], b: pl.Tensor[[M, M], pl.FP32],
                 f: pl.Out[pl.Tensor[[M, M], pl.FP32]]) -> pl.Tensor[[M, M], pl.FP32]:
        return pl.store(pl.add(pl.load(a, [0, 0], [M, M]), pl.load(b, [0, 0], [M, M])), [0, 0], f)

    @pl.function(type=pl.FunctionType.InCore)
    def tile_sub(self, a: pl.Tensor[[M, M], pl.FP32], b: pl.Tensor[[M, M], pl.FP32],
                 f: pl.Out[pl.Tensor[[M, M], pl.FP32]]) -> pl.Tensor[[M, M], pl.FP32]:
        return pl.store(pl.sub(pl.load(a, [0, 0], [M, M]), pl.load(b, [0, 0], [M, M])), [0, 0], f)

    @pl.function(type=pl.FunctionType.Orchestration)
    def chip_add(self, a: pl.Tensor[[M, M], pl.FP32], b: pl.Tensor[[M, M], pl.FP32],
                 f: pl.Out[pl.Tensor[[M, M], pl.FP32]]) -> pl.Tensor[[M, M], pl.FP32]:
        return self.tile_add(a, b, f)

    @pl.function(type=pl.FunctionType.Orchestration)
    def chip_sub(self, a: pl.Tensor[[M, M], pl.FP32], b: pl.Tensor[[M, M], pl.FP32],
                 f: pl.Out[pl.Tensor[[M, M], pl.FP32]]) -> pl.Tensor[[M, M], pl.FP32]:
        return self.tile_sub(a, b, f)

    @pl.function(level=pl.Level.HOST, role=pl.Role.SubWorker)
    def reduce_sum(s: pl.Tensor[[M, M], pl.FP32], d: pl.Tensor[[M, M], pl.FP32],
                   f: pl.Out[pl.Tensor[[M, M], pl.FP32]]) -> pl.Tensor[[M, M], pl.FP32]:
        SEEN.append(type(f))
        f[:] = s + d
        return f

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, a: pl.Tensor[[M, M], pl.FP32], b: pl.Tensor[[M, M], pl.FP32],
                  f: pl.Out[pl.Tensor[[M, M], pl.FP32]]) -> pl.Tensor[[M, M], pl.FP32]:
        s: pl.Tensor[[M, M], pl.FP32] = pl.create_tensor([M, M], dtype=pl.FP32)
        d: pl.Tensor[[M, M], pl.FP32] = pl.create_tensor([M, M], dtype=pl.FP32)
        out_s = self.chip_add(a, b, s)
        out_d = self.chip_sub(a, b, d)
        out_f: pl.Tensor[[M, M], pl.FP32] = self.reduce_sum(out_s, out_d, f)
        return out_f


SEEN: list = []          # the type of tensor each SubWorker call was given


def _ab(seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((M, M)).astype(np.float32),
            rng.standard_normal((M, M)).astype(np.float32))


def test_return_style_through_a_sub_worker_returns_the_output_it_writes(tmp_path):
    """Mirrors test_l3_parallel_reduce.py::TestL3ParallelReduce::test_execute:
    ``f = compiled(a, b)`` with the result bound from a SubWorker call."""
    compiled = ir.compile(ParallelReduce, output_dir=str(tmp_path))
    a, b = _ab(6)
    SEEN.clear()
    f = compiled(a, b)
    assert isinstance(f, np.ndarray) and SEEN == [np.ndarray]
    want = (a + b) + (a - b)                            # = 2a, as the program rounds it
    np.testing.assert_array_equal(f, want)
    with compiled.prepare() as rt:                      # a prepared worker returns it too
        np.testing.assert_array_equal(rt(a, b), want)
        np.testing.assert_array_equal(rt.submit(compiled, a, b).result(), want)


def test_torch_in_torch_out(tmp_path):
    """Mirrors test_l3_distributed.py::TestL3Dependency::test_execute (a
    SubWorker calling torch.allclose on its tensor) and
    test_l3_parallel_reduce.py (torch.add in the SubWorker, a torch result):
    a caller of torch gets torch in SubWorker bodies and callbacks and from a
    return-style call, as zero-copy views of the host tensors."""
    torch = pytest.importorskip("torch")
    compiled = ir.compile(ParallelReduce, output_dir=str(tmp_path))
    a, b = (torch.from_numpy(v) for v in _ab(7))
    SEEN.clear()
    f = compiled(a, b)
    assert isinstance(f, torch.Tensor) and SEEN == [torch.Tensor]
    assert torch.equal(f, (a + b) + (a - b))
    got = []

    def callback(args):                     # bound in place of the body: writes through a view
        got.append([type(t) for t in args])
        torch.mul(args[0], 10.0, out=args[2])

    with compiled.prepare(callbacks={"reduce_sum": callback}) as rt:
        f = rt(a, b)
    assert got == [[torch.Tensor] * 3]
    assert isinstance(f, torch.Tensor) and torch.equal(f, (a + b) * 10.0)
    # numpy in, numpy everywhere: torch is not handed to a caller who did not use it
    SEEN.clear()
    f = compiled(a.numpy(), b.numpy())
    assert isinstance(f, np.ndarray) and SEEN == [np.ndarray]


# ------------------------------------------------------------------ single-chip programs
@pl.program
class SingleChip:
    """No HOST orchestrator: a single-chip (L2) program."""

    @pl.function(type=pl.FunctionType.InCore)
    def scale(self, x: pl.Tensor[[M, M], pl.FP32], y: pl.Out[pl.Tensor[[M, M], pl.FP32]]
              ) -> pl.Tensor[[M, M], pl.FP32]:
        return pl.store(pl.mul(pl.load(x, [0, 0], [M, M]), 2.0), [0, 0], y)

    @pl.function(type=pl.FunctionType.Orchestration)
    def chip_orch(self, x: pl.Tensor[[M, M], pl.FP32], y: pl.Out[pl.Tensor[[M, M], pl.FP32]],
                  z: pl.Out[pl.Tensor[[M, M], pl.FP32]]) -> pl.Tensor[[M, M], pl.FP32]:
        y = self.scale(x, y)
        with pl.at(level=pl.Level.CORE_GROUP):
            out = pl.assemble(z, pl.add(y, x), [0, 0])
        return out


@pl.program
class TwoChipOrchs:
    @pl.function(type=pl.FunctionType.InCore)
    def tile_add(self, a: pl.Tensor[[M, M], pl.FP32], b: pl.Tensor[[M, M], pl.FP32],
                 f: pl.Out[pl.Tensor[[M, M], pl.FP32]]) -> pl.Tensor[[M, M], pl.FP32]:
        return pl.store(pl.add(pl.load(a, [0, 0], [M, M]), pl.load(b, [0, 0], [M, M])), [0, 0], f)

    @pl.function(type=pl.FunctionType.InCore)
    def tile_sub(self, a: pl.Tensor[[M, M], pl.FP32], b: pl.Tensor[[M, M], pl.FP32],
                 f: pl.Out[pl.Tensor[[M, M], pl.FP32]]) -> pl.Tensor[[M, M], pl.FP32]:
        return pl.store(pl.sub(pl.load(a, [0, 0], [M, M]), pl.load(b, [0, 0], [M, M])), [0, 0], f)

    @pl.function(type=pl.FunctionType.Orchestration)
    def chip_orch_add(self, a: pl.Tensor[[M, M], pl.FP32], b: pl.Tensor[[M, M], pl.FP32],
                      f: pl.Out[pl.Tensor[[M, M], pl.FP32]]) -> pl.Tensor[[M, M], pl.FP32]:
        return self.tile_add(a, b, f)

    @pl.function(type=pl.FunctionType.Orchestration)
    def chip_orch_sub(self, a: pl.Tensor[[M, M], pl.FP32], b: pl.Tensor[[M, M], pl.FP32],
                      f: pl.Out[pl.Tensor[[M, M], pl.FP32]]) -> pl.Tensor[[M, M], pl.FP32]:
        return self.tile_sub(a, b, f)


def test_a_single_chip_program_runs_on_one_device(tmp_path):
    """A @pl.program without a HOST orchestrator runs its chip orchestration
    on one device, in place or return style, as upstream's L2 programs."""
    x = np.random.default_rng(8).standard_normal((M, M)).astype(np.float32)
    compiled = ir.compile(SingleChip, output_dir=str(tmp_path))
    assert compiled.name == "chip_orch" and compiled.param_names == ["x", "y", "z"]
    y, z = np.zeros_like(x), np.zeros_like(x)
    assert compiled(x, y, z) is z
    np.testing.assert_array_equal(y, x * np.float32(2))
    np.testing.assert_array_equal(z, x * np.float32(2) + x)
    y2, z2 = compiled(x)                                   # return style: both outputs
    np.testing.assert_array_equal(z2, z)
    # a distributed config names the device; still one
    many = ir.compile(SingleChip, output_dir=str(tmp_path / "many"),
                      distributed_config=DistributedConfig(device_ids=[2, 3]))
    assert many.world == 1
    np.testing.assert_array_equal(many(x)[1], z)


def test_a_single_chip_program_with_several_orchestrations_is_called_by_name(tmp_path):
    """Mirrors test_l2_multi_orch.py::TestL2MultiOrch::test_dispatch_surface and
    ::test_execute_one_orch_on_device."""
    compiled = ir.compile(TwoChipOrchs, output_dir=str(tmp_path), skip_ptoas=True)
    assert compiled.orchestration_names == ["chip_orch_add", "chip_orch_sub"]
    add = compiled["chip_orch_add"]
    assert compiled.chip_orch_add is add and add.name == "chip_orch_add"
    assert add.param_names == ["a", "b", "f"]
    assert add.output_dir == tmp_path.resolve() / "next_levels" / "chip_orch_add"
    a, b = _ab(9)
    with pytest.raises(TypeError, match="select one explicitly"):
        compiled(a, b, np.zeros_like(a))
    with pytest.raises(KeyError, match=r"chip_orch_add.*chip_orch_sub"):
        compiled["chip_orch_missing"]
    with pytest.raises(AttributeError, match="no attribute 'definitely_not_an_orch'"):
        compiled.definitely_not_an_orch                     # noqa: B018
    f = np.zeros_like(a)
    compiled["chip_orch_sub"](a, b, f)
    np.testing.assert_array_equal(f, a - b)
    np.testing.assert_array_equal(compiled.chip_orch_add(a, b), a + b)
    with compiled.prepare() as rt:                          # one worker serves both
        np.testing.assert_array_equal(rt.run(compiled["chip_orch_sub"], a, b), a - b)


# ------------------------------------------------------------------ per-dispatch swimlanes
def _hop_program(n):
    """Each rank notifies the next and waits for the previous, then adds one."""

    @pl.program
    class Hop:
        @pl.function(type=pl.FunctionType.InCore)
        def hop(self, x: pl.Tensor[[ROWS, COLS], pl.FP32],
                y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]],
                sig: pl.InOut[pld.DistributedTensor[[n, 1], pl.INT32]]
                ) -> pl.Tensor[[ROWS, COLS], pl.FP32]:
            ctx = pld.get_comm_ctx(sig)
            me = pld.rank(ctx)
            pld.system.notify(sig, (me + 1) % n, [me, 0], 1, op=pld.NotifyOp.AtomicAdd)
            pld.system.wait(sig, [(me + n - 1) % n, 0], 1, cmp=pld.WaitCmp.Ge)
            return pl.store(pl.add(pl.load(x, [0, 0], [ROWS, COLS]), 1.0), [0, 0], y)

        @pl.function(type=pl.FunctionType.Orchestration)
        def chip(self, x: pl.Tensor[[ROWS, COLS], pl.FP32],
                 y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]],
                 sig: pl.InOut[pld.DistributedTensor[[n, 1], pl.INT32]]
                 ) -> pl.Tensor[[ROWS, COLS], pl.FP32]:
            return self.hop(x, y, sig)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, xs: pl.Tensor[[n, ROWS, COLS], pl.FP32],
                      ys: pl.Out[pl.Tensor[[n, ROWS, COLS], pl.FP32]]):
            sig_buf = pld.alloc_window_buffer([n, 1], dtype=pl.INT32)
            for r in pl.range(pld.world_size()):
                self.chip(xs[r], ys[r], pld.window(sig_buf, [n, 1], dtype=pl.INT32), device=r)
            return ys

    return Hop


@pytest.mark.parametrize("n", [2, 3])
def test_every_dispatch_gets_its_part_of_the_merged_swimlane(tmp_path, n):
    """Mirrors test_l3_dfx_per_rank.py::TestL3DfxPerRank::test_swimlane_per_rank:
    with enable_chip_swimlane, each rank{r}/d0/ holds chip_swimlane_records.json,
    deps.json and a merged_swimlane_*.json -- here that dispatch's part of the
    call's merged trace, whose wait names the rank whose notify released it."""
    import json
    from tilecomm.dfx import trace as T
    from tilecomm.runtime.rank.tracing import pid_of
    compiled = ir.compile(_hop_program(n), output_dir=str(tmp_path),
                          distributed_config=DistributedConfig(device_ids=list(range(n))))
    xs, ys = _inputs(n, seed=n)
    compiled(xs, ys, config=RunConfig(enable_chip_swimlane=True))
    np.testing.assert_array_equal(ys, xs + np.float32(1))
    dfx = compiled.output_dir / "dfx_outputs"
    assert (dfx / "merged_swimlane.json").is_file()
    for r in range(n):
        d = dfx / f"rank{r}" / "d0"
        assert (d / "chip_swimlane_records.json").stat().st_size > 0
        assert (d / "deps.json").stat().st_size > 0
        merged = list(d.glob("merged_swimlane_*.json"))
        assert len(merged) == 1 and merged[0].stat().st_size > 0
        view = T.load(str(merged[0]))                    # a well-formed trace
        assert view["otherData"]["rank"] == r and view["otherData"]["dispatch"] == 0
        assert {e["pid"] for e in view["traceEvents"]} == {pid_of(r)}     # this rank only
        waits = [e for e in view["traceEvents"] if e.get("cat") == "wait"]
        assert len(waits) == 1
        assert waits[0]["args"]["released_by"]["rank"] == (r + n - 1) % n
        # the rank's own records do not know who released the wait
        own = json.load(open(d / "chip_swimlane_records.json"))
        assert not any("released_by" in e.get("args", {}) for e in own["traceEvents"])


# ------------------------------------------------------------------ the build directory
NRK, S = 2, 8
W = pl.InOut[pld.DistributedTensor[[NRK, S], pl.FP32]]
W1 = pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]]
C = pl.InOut[pld.DistributedTensor[[NRK, 1], pl.INT32]]
OUT8 = pl.Out[pl.Tensor[[8, NRK, S], pl.FP32]]


@pl.program
class HostCollectives:
    """Every HOST collective once, between a publishing and a consuming dispatch."""

    @pl.function(type=pl.FunctionType.InCore)
    def publish_step(self, x: pl.Tensor[[NRK, S], pl.FP32], a: W, b: W, c: W, d: W, loc: W1,
                     e: W, f: W, g: W, cnt: C) -> pld.DistributedTensor[[NRK, S], pl.FP32]:
        t = pl.load(x, [0, 0], [NRK, S])
        pl.store(t, [0, 0], a)
        pl.store(t, [0, 0], b)
        pl.store(t, [0, 0], c)
        pl.store(t, [0, 0], d)
        pl.store(t, [0, 0], e)
        pl.store(t, [0, 0], f)
        pl.store(t, [0, 0], g)
        pl.store(pl.load(x, [0, 0], [1, S]), [0, 0], loc)
        for i in pl.range(NRK):
            pl.write(cnt, [i, 0], 1)
        return a

    @pl.function(type=pl.FunctionType.Orchestration)
    def publish_orch(self, x: pl.Tensor[[NRK, S], pl.FP32], a: W, b: W, c: W, d: W, loc: W1,
                     e: W, f: W, g: W, cnt: C) -> pld.DistributedTensor[[NRK, S], pl.FP32]:
        return self.publish_step(x, a, b, c, d, loc, e, f, g, cnt)

    @pl.function(type=pl.FunctionType.InCore)
    def consume_step(self, out: OUT8, a: W, b: W, c: W, d: W, gath: W, e: W, ex: W, vex: W
                     ) -> pl.Tensor[[8, NRK, S], pl.FP32]:
        pl.store(pl.load(a, [0, 0], [NRK, S]), [0, 0, 0], out)
        pl.store(pl.load(b, [0, 0], [NRK, S]), [1, 0, 0], out)
        pl.store(pl.load(c, [0, 0], [NRK, S]), [2, 0, 0], out)
        pl.store(pl.load(d, [0, 0], [NRK, S]), [3, 0, 0], out)
        pl.store(pl.load(gath, [0, 0], [NRK, S]), [4, 0, 0], out)
        pl.store(pl.load(e, [0, 0], [NRK, S]), [5, 0, 0], out)
        pl.store(pl.load(ex, [0, 0], [NRK, S]), [6, 0, 0], out)
        out = pl.store(pl.load(vex, [0, 0], [NRK, S]), [7, 0, 0], out)
        return out

    @pl.function(type=pl.FunctionType.Orchestration)
    def consume_orch(self, out: OUT8, a: W, b: W, c: W, d: W, gath: W, e: W, ex: W, vex: W
                     ) -> pl.Tensor[[8, NRK, S], pl.FP32]:
        return self.consume_step(out, a, b, c, d, gath, e, ex, vex)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, xs: pl.Tensor[[NRK, NRK, S], pl.FP32],
                  outs: pl.Out[pl.Tensor[[NRK, 8, NRK, S], pl.FP32]]):
        a_buf = pld.alloc_window_buffer([NRK, S], dtype=pl.FP32)
        b_buf = pld.alloc_window_buffer([NRK, S], dtype=pl.FP32)
        c_buf = pld.alloc_window_buffer([NRK, S], dtype=pl.FP32)
        d_buf = pld.alloc_window_buffer([NRK, S], dtype=pl.FP32)
        e_buf = pld.alloc_window_buffer([NRK, S], dtype=pl.FP32)
        f_buf = pld.alloc_window_buffer([NRK, S], dtype=pl.FP32)
        g_buf = pld.alloc_window_buffer([NRK, S], dtype=pl.FP32)
        gath_buf = pld.alloc_window_buffer([NRK, S], dtype=pl.FP32)
        ex_buf = pld.alloc_window_buffer([NRK, S], dtype=pl.FP32)
        vex_buf = pld.alloc_window_buffer([NRK, S], dtype=pl.FP32)
        loc_buf = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
        cnt_buf = pld.alloc_window_buffer([NRK, 1], dtype=pl.INT32)
        recv_buf = pld.alloc_window_buffer([NRK, 1], dtype=pl.INT32)
        s1_buf = pld.alloc_window_buffer([NRK], dtype=pl.INT32)
        s2_buf = pld.alloc_window_buffer([NRK, 1], dtype=pl.INT32)
        ring_buf = pld.alloc_window_buffer([2 * (NRK - 1) + 1, NRK], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            self.publish_orch(xs[r], pld.window(a_buf, [NRK, S], dtype=pl.FP32),
                              pld.window(b_buf, [NRK, S], dtype=pl.FP32),
                              pld.window(c_buf, [NRK, S], dtype=pl.FP32),
                              pld.window(d_buf, [NRK, S], dtype=pl.FP32),
                              pld.window(loc_buf, [1, S], dtype=pl.FP32),
                              pld.window(e_buf, [NRK, S], dtype=pl.FP32),
                              pld.window(f_buf, [NRK, S], dtype=pl.FP32),
                              pld.window(g_buf, [NRK, S], dtype=pl.FP32),
                              pld.window(cnt_buf, [NRK, 1], dtype=pl.INT32), device=r)
        s = pld.window(s1_buf, [NRK], dtype=pl.INT32)
        t = pld.window(s2_buf, [NRK, 1], dtype=pl.INT32)
        pld.tensor.barrier(s)
        pld.tensor.allreduce(pld.window(a_buf, [NRK, S], dtype=pl.FP32), s, op=pld.ReduceOp.Sum)
        pld.tensor.allreduce(pld.window(b_buf, [NRK, S], dtype=pl.FP32), s, op=pld.ReduceOp.Max)
        pld.tensor.allreduce(pld.window(c_buf, [NRK, S], dtype=pl.FP32),
                             pld.window(ring_buf, [2 * (NRK - 1) + 1, NRK], dtype=pl.INT32),
                             mode="ring")
        pld.tensor.broadcast(pld.window(d_buf, [NRK, S], dtype=pl.FP32), s, root=1)
        pld.tensor.allgather(pld.window(loc_buf, [1, S], dtype=pl.FP32),
                             pld.window(gath_buf, [NRK, S], dtype=pl.FP32), t)
        pld.tensor.reduce_scatter(pld.window(e_buf, [NRK, S], dtype=pl.FP32), s)
        pld.tensor.all_to_all(pld.window(f_buf, [NRK, S], dtype=pl.FP32),
                              pld.window(ex_buf, [NRK, S], dtype=pl.FP32), t)
        pld.tensor.all_to_all_v(pld.window(g_buf, [NRK, S], dtype=pl.FP32),
                                pld.window(vex_buf, [NRK, S], dtype=pl.FP32), t,
                                pld.window(cnt_buf, [NRK, 1], dtype=pl.INT32),
                                pld.window(recv_buf, [NRK, 1], dtype=pl.INT32))
        for r in pl.range(pld.world_size()):
            self.consume_orch(outs[r], pld.window(a_buf, [NRK, S], dtype=pl.FP32),
                              pld.window(b_buf, [NRK, S], dtype=pl.FP32),
                              pld.window(c_buf, [NRK, S], dtype=pl.FP32),
                              pld.window(d_buf, [NRK, S], dtype=pl.FP32),
                              pld.window(gath_buf, [NRK, S], dtype=pl.FP32),
                              pld.window(e_buf, [NRK, S], dtype=pl.FP32),
                              pld.window(ex_buf, [NRK, S], dtype=pl.FP32),
                              pld.window(vex_buf, [NRK, S], dtype=pl.FP32), device=r)
        return outs


VARIANTS = ["builtin.tensor.barrier__fp32", "builtin.tensor.allreduce__sum__fp32",
            "builtin.tensor.allreduce__max__fp32", "builtin.tensor.allreduce_ring__sum__fp32",
            "builtin.tensor.broadcast__root1__fp32", "builtin.tensor.allgather__fp32",
            "builtin.tensor.reduce_scatter__sum__fp32", "builtin.tensor.all_to_all__fp32",
            "builtin.tensor.all_to_all_v__fp32"]


def test_the_build_directory_has_upstreams_layout(tmp_path):
    """Mirrors the variant_dir checks of test_l3_host_tensor_allreduce.py (and
    _ring, _barrier, _broadcast, _allgather, _reduce_scatter, _all_to_all,
    _all_to_all_v): right after ir.compile, next_levels/ holds one directory
    per HOST collective variant, named as upstream names it, with a
    kernel_config.py; each chip orchestration function has its lowered code
    and a manifest; then the call computes what numpy says."""
    import runpy
    compiled = ir.compile(HostCollectives, output_dir=str(tmp_path),
                          distributed_config=DistributedConfig(device_ids=[0, 1]))
    top = compiled.output_dir / "next_levels"
    for v in VARIANTS:
        cfg = runpy.run_path(str(top / v / "kernel_config.py"))
        assert cfg["BUILTIN"]["variant"] == v
        assert cfg["BUILTIN"]["algorithm"].startswith("tilecomm.collectives.algorithms.")
        assert cfg["BUILTIN"]["calls"][0].startswith(__file__)
    assert sorted(p.name for p in top.iterdir()) == sorted(VARIANTS + ["consume_orch",
                                                                       "publish_orch"])
    cfg = runpy.run_path(str(top / "publish_orch" / "kernel_config.py"))
    src = cfg["ORCHESTRATION"]["source"]
    assert src == str(top / "publish_orch" / "orchestration" / "publish_orch.py")
    assert "def f_publish_orch(_rt, x, a, b, c, d, loc, e, f, g, cnt)" in open(src).read()
    assert cfg["ORCHESTRATION"]["signature"] == ["IN"] + ["INOUT"] * 9
    assert [k["name"] for k in cfg["KERNELS"]] == ["publish_step"]
    assert "def f_publish_step(" in open(cfg["KERNELS"][0]["source"]).read()
    assert "_rt.dispatch('publish_orch'" in \
        (compiled.output_dir / "orchestration" / "host_orch.py").read_text()

    xs = np.random.default_rng(10).integers(-9, 9, (NRK, NRK, S)).astype(np.float32)
    outs = np.zeros((NRK, 8, NRK, S), np.float32)
    compiled(xs, outs)
    for r in range(NRK):
        o = outs[r]
        np.testing.assert_array_equal(o[0], xs.sum(0))
        np.testing.assert_array_equal(o[1], xs.max(0))
        np.testing.assert_array_equal(o[2], xs.sum(0))
        np.testing.assert_array_equal(o[3], xs[1])
        np.testing.assert_array_equal(o[4], xs[:, 0])
        want = xs[r].copy()
        want[r] = xs[:, r].sum(0)
        np.testing.assert_array_equal(o[5], want)
        np.testing.assert_array_equal(o[6], xs[:, r])
        np.testing.assert_array_equal(o[7], xs[:, r])


def test_a_single_chip_build_is_laid_out_flat(tmp_path):
    """Upstream's single-chip build: kernel_config.py, orchestration/ and
    kernels/ at the top of output_dir (next_levels/<name>/ for several)."""
    import runpy
    compiled = ir.compile(SingleChip, output_dir=str(tmp_path))
    cfg = runpy.run_path(str(compiled.output_dir / "kernel_config.py"))
    assert cfg["ORCHESTRATION"]["function_name"] == "f_chip_orch"
    assert (compiled.output_dir / "orchestration" / "chip_orch.py").is_file()
    assert {k["name"] for k in cfg["KERNELS"]} >= {"scale"}
    assert not (compiled.output_dir / "next_levels").exists()
    two = ir.compile(TwoChipOrchs, output_dir=str(tmp_path / "two"))
    for name in two.orchestration_names:
        assert (two[name].output_dir / "kernel_config.py").is_file()
        assert (two[name].output_dir / "orchestration" / f"{name}.py").is_file()


def test_torch_stays_unimported_for_a_caller_of_numpy(tmp_path):
    """The same program called with numpy in a fresh process: torch is never
    imported (it is optional)."""
    import os
    import subprocess
    import sys
    script = f"""
import sys
sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
import numpy as np
import test_porting as t
from tilecomm import ir
a, b = t._ab(11)
f = ir.compile(t.ParallelReduce, output_dir={str(tmp_path)!r})(a, b)
np.testing.assert_array_equal(f, (a + b) + (a - b))
assert t.SEEN == [np.ndarray], t.SEEN
assert "torch" not in sys.modules, "torch was imported"
print("OK")
"""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "OK", run.stdout + run.stderr
