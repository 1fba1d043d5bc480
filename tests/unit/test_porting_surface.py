"""Where a port finds upstream's names: a PyPTO script whose ``pypto`` import
lines now say ``tilecomm`` imports the same names from the same modules."""
import importlib

import pytest

# upstream module -> the public names its distributed tests and examples import
UPSTREAM_NAMES = {
    # every public name upstream's pypto/ir/distributed_compiled_program.py defines or
    # re-exports for callers (test_l3_explicit_dispatch_onboard.py imports the first two)
    "tilecomm.ir.distributed_compiled_program": [
        "DistributedCompiledProgram", "DistributedConfig", "DeviceTensor", "StackedDeviceTensor",
        "CallArg", "Role", "Level"],
    "tilecomm.runtime": ["RunConfig", "DistributedConfig", "DistributedWorker", "DeviceTensor",
                         "StackedDeviceTensor"],
    "tilecomm.ir": ["compile"],
}


@pytest.mark.parametrize("module", sorted(UPSTREAM_NAMES))
def test_upstream_names_import_from_the_renamed_module(module):
    mod = importlib.import_module(module)
    missing = [n for n in UPSTREAM_NAMES[module] if not hasattr(mod, n)]
    assert not missing, f"{module} lacks {missing}"


def test_the_config_and_the_program_class_are_tilecomms_own():
    from tilecomm.compiler import CompiledProgram
    from tilecomm.ir import distributed_compiled_program as dcp
    from tilecomm.runtime import DistributedConfig
    assert dcp.DistributedConfig is DistributedConfig
    assert dcp.DistributedCompiledProgram is CompiledProgram
    assert set(dcp.__all__) >= set(UPSTREAM_NAMES["tilecomm.ir.distributed_compiled_program"])


# ------------------------------------------------------------------ names bound inside scopes
import tilecomm.language as pl                                       # noqa: E402
from tilecomm import ir                                              # noqa: E402
from tilecomm.errors import ProgramSyntaxError                       # noqa: E402


@pl.program
class TileUsedAfterItsTask:
    @pl.function(type=pl.FunctionType.Orchestration)
    def chip(self, x: pl.Tensor[[8, 8], pl.FP32], y: pl.Out[pl.Tensor[[8, 8], pl.FP32]]):
        with pl.at(level=pl.Level.CORE_GROUP):
            t = pl.load(x, [0, 0], [8, 8])          # a tile: it lives in the task
        y = pl.store(t, [0, 0], y)
        return y

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[8, 8], pl.FP32], y: pl.Out[pl.Tensor[[8, 8], pl.FP32]]):
        self.chip(x, y)
        return y


def test_a_value_that_cannot_leave_its_scope_is_named_with_where_it_was_bound():
    """A tile bound in a task is not carried out (it lives on a core): the
    unknown-name error says where it was bound and what does get out."""
    with pytest.raises(ProgramSyntaxError) as ei:
        ir.compile(TileUsedAfterItsTask)
    e = ei.value
    assert e.code == "TC307" and "unknown name 't'" in e.message
    assert "bound inside the pl.at task at line" in e.hint and "in place" in e.hint
    assert e.span.line == TileUsedAfterItsTask.functions["chip"].fn.__code__.co_firstlineno + 4
