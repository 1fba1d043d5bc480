"""Where a HOST SubWorker may be called, checked at compile time."""
import pytest

import tilecomm
import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.errors import ProgramSyntaxError, ProgramTypeError
from tilecomm.runtime import DistributedConfig

W = 4


@pl.function(type=pl.FunctionType.InCore)
def copy_kernel(self, x: pl.Tensor[[1, W], pl.FP32], y: pl.Out[pl.Tensor[[1, W], pl.FP32]]
                ) -> pl.Tensor[[1, W], pl.FP32]:
    y = pl.store(pl.load(x, [0, 0], [1, W]), [0, 0], y)
    return y


@pl.function(level=pl.Level.HOST, role=pl.Role.SubWorker)
def check(t: pl.Tensor[[1, W], pl.FP32]):
    ...


@pl.function(type=pl.FunctionType.Orchestration)
def plain_chip(self, x: pl.Tensor[[1, W], pl.FP32], y: pl.Out[pl.Tensor[[1, W], pl.FP32]]):
    return self.k(x, y)


@pl.function(type=pl.FunctionType.Orchestration)
def checking_chip(self, x: pl.Tensor[[1, W], pl.FP32], y: pl.Out[pl.Tensor[[1, W], pl.FP32]]):
    self.check(x)
    return self.k(x, y)


@pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
def host_checks(self, xs: pl.Tensor[[2, 1, W], pl.FP32], ys: pl.Out[pl.Tensor[[2, 1, W], pl.FP32]]):
    for r in pl.range(pld.world_size()):
        self.chip(xs[r], ys[r], device=r)
    self.check(ys[0])
    return ys


@pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
def host_checks_on_a_device(self, xs: pl.Tensor[[2, 1, W], pl.FP32],
                            ys: pl.Out[pl.Tensor[[2, 1, W], pl.FP32]]):
    for r in pl.range(pld.world_size()):
        self.chip(xs[r], ys[r], device=r)
    self.check(ys[0], device=0)
    return ys


def _program(chip, main):
    return pl.program(type("P", (), {"k": copy_kernel, "check": check, "chip": chip,
                                     "main": main}))


def _compile(program):
    return tilecomm.ir.compile(program, distributed_config=DistributedConfig([0, 1]))


def test_a_sub_worker_called_by_the_host_orchestrator_compiles():
    compiled = _compile(_program(plain_chip, host_checks))
    assert list(compiled.sub_workers) == ["check"]
    assert compiled.sub_workers["check"].requires_runtime_binding


def test_a_chip_function_cannot_call_a_sub_worker():
    with pytest.raises(ProgramSyntaxError, match="cannot call a HOST SubWorker") as ei:
        _compile(_program(checking_chip, host_checks))
    assert ei.value.code == "TC301"
    assert ei.value.span is not None and ei.value.span.file == __file__


def test_device_is_refused_on_a_sub_worker_call():
    with pytest.raises(ProgramTypeError, match="device= is only accepted") as ei:
        _compile(_program(plain_chip, host_checks_on_a_device))
    assert ei.value.code == "TC308"
