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
