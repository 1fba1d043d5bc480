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
        "CallArg", "Role", "Level", "ParamDirection"],
    "tilecomm.runtime": ["RunConfig", "DistributedConfig", "DistributedWorker", "DeviceTensor",
                         "StackedDeviceTensor", "ChipWorker", "RegistrationHandle", "benchmark",
                         "BenchmarkStats"],
    "tilecomm.ir": ["compile", "CompiledProgram", "DistributedCompiledProgram",
                    "DistributedConfig"],
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
    assert e.span.line == TileUsedAfterItsTask.get_function("chip").fn.__code__.co_firstlineno + 4


# ------------------------------------------------------------------ inspecting programs
@pl.program
class Inspectable:
    @pl.function(type=pl.FunctionType.InCore)
    def tile_add(self, a: pl.Tensor[[8, 8], pl.FP32], b: pl.Tensor[[8, 8], pl.FP32],
                 f: pl.Out[pl.Tensor[[8, 8], pl.FP32]]) -> pl.Tensor[[8, 8], pl.FP32]:
        return pl.store(pl.add(pl.load(a, [0, 0], [8, 8]), pl.load(b, [0, 0], [8, 8])), [0, 0], f)

    @pl.function(type=pl.FunctionType.Orchestration)
    def chip_orch(self, a: pl.Tensor[[8, 8], pl.FP32], b: pl.Tensor[[8, 8], pl.FP32],
                  f: pl.Out[pl.Tensor[[8, 8], pl.FP32]]) -> pl.Tensor[[8, 8], pl.FP32]:
        return self.tile_add(a, b, f)

    @pl.function(level=pl.Level.HOST, role=pl.Role.SubWorker)
    def inspect_result(f: pl.Tensor[[8, 8], pl.FP32]):
        """Bound at run time."""
        ...

    @pl.function(level=pl.Level.HOST, role=pl.Role.SubWorker)
    def concrete(f: pl.InOut[pl.Tensor[[8, 8], pl.FP32]]):
        f[:] = 0

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, a: pl.Tensor[[8, 8], pl.FP32], b: pl.Tensor[[8, 8], pl.FP32],
                  f: pl.Out[pl.Tensor[[8, 8], pl.FP32]]) -> pl.Tensor[[8, 8], pl.FP32]:
        out_f = self.chip_orch(a, b, f)
        self.inspect_result(out_f)
        return out_f


def test_program_and_functions_are_inspectable_as_upstreams():
    """Mirrors examples/runtime/distributed_callback.py::show_abstract_flag
    (``InspectProgram.get_function("inspect_result").requires_runtime_binding``)."""
    from tilecomm.ir.distributed_compiled_program import ParamDirection
    from tilecomm.ir.types import TensorType
    P = Inspectable
    assert P.name == "Inspectable"
    fn = P.get_function("inspect_result")
    assert fn is not None and fn is P["inspect_result"] and fn.name == "inspect_result"
    assert fn.requires_runtime_binding is True
    assert P.get_function("concrete").requires_runtime_binding is False
    assert P.get_function("host_orch").requires_runtime_binding is False
    assert P.get_function("missing") is None and P["missing"] is None
    assert (fn.level, fn.role) == (pl.Level.HOST, pl.Role.SubWorker)
    host = P.get_function("host_orch")
    assert (host.level, host.role) == (pl.Level.HOST, pl.Role.Orchestrator)
    assert P.get_function("tile_add").func_type == pl.FunctionType.InCore
    assert P.get_function("chip_orch").func_type == pl.FunctionType.Orchestration
    assert P.get_function("chip_orch").level is None
    assert [p.name_hint for p in host.params] == ["a", "b", "f"]
    assert host.param_directions == [ParamDirection.In, ParamDirection.In, ParamDirection.Out]
    assert P.get_function("concrete").param_directions == [ParamDirection.InOut]
    assert host.params[2].type == TensorType((8, 8), pl.FP32, direction="Out")
    assert host.return_types == [TensorType((8, 8), pl.FP32)]
    assert fn.return_types == []
    assert sorted(P.functions) == ["chip_orch", "concrete", "host_orch", "inspect_result",
                                   "tile_add"]


def test_jit_functions_report_their_form():
    @pl.jit.host
    def main(x: pl.Tensor[[8], pl.FP32]):
        return x

    assert (main.name, main.level, main.role) == ("main", pl.Level.HOST, pl.Role.Orchestrator)
    assert main.func_type == pl.FunctionType.Orchestration


# ------------------------------------------------------------------ single-chip programs
import tilecomm.language.distributed as pld                          # noqa: E402
from tilecomm.errors import ProgramTypeError                         # noqa: E402


@pl.program
class SingleChipWithWindow:
    @pl.function(type=pl.FunctionType.Orchestration)
    def chip(self, data: pl.InOut[pld.DistributedTensor[[8], pl.FP32]]):
        return data


class NothingToRun:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[8], pl.FP32]):
        return x


def test_a_single_chip_entry_cannot_take_a_window():
    """No HOST orchestrator allocates it: said at the parameter, before any run."""
    with pytest.raises(ProgramTypeError) as ei:
        ir.compile(SingleChipWithWindow)
    assert ei.value.code == "TC104" and "single-chip program" in ei.value.message
    assert "parameter 'data'" in ei.value.message


def test_a_program_needs_an_entry():
    with pytest.raises(TypeError, match="needs an entry"):
        pl.program(NothingToRun)


def test_upstream_toolchain_options_are_accepted_and_others_refused():
    compiled = ir.compile(Inspectable, skip_ptoas=True, strategy=None, dump_passes=False)
    assert compiled.name == "host_orch"
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) \['skip_ptaos'\]"):
        ir.compile(Inspectable, skip_ptaos=True)
