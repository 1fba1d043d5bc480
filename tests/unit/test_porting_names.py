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
