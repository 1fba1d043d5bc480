"""Where a port finds what upstream's ``pypto.ir.distributed_compiled_program``
offers: a script's ``from pypto.ir.distributed_compiled_program import
DistributedCompiledProgram, DistributedConfig`` keeps working with ``pypto``
changed to ``tilecomm`` and nothing else.

``DistributedCompiledProgram`` is the class ``tilecomm.ir.compile`` returns
for a program with one HOST orchestrator (``isinstance`` checks hold), with
its ``from_dir`` / ``prepare`` / ``output_dir``.  ``CallArg`` is what a call
takes per parameter: a host tensor (numpy array or torch CPU tensor), a
device tensor of a prepared worker, or a scalar.

The compile entry point itself stays in the package (``tilecomm.ir``), below
the compiler; only this module, which nothing in tilecomm imports, reaches up
to it."""
from __future__ import annotations

from typing import Any, Union

from ..compiler import CompiledProgram
from ..runtime.config import DistributedConfig
from ..runtime.worker.device_tensors import DeviceTensor, StackedDeviceTensor
from .enums import Level, ParamDirection, Role

# one class serves both of upstream's: a single-chip program (upstream's
# CompiledProgram) and one with a HOST orchestrator
DistributedCompiledProgram = CompiledProgram

# a torch.Tensor is accepted wherever an array is; torch stays optional, so
# it is named here as Any rather than imported
CallArg = Union[Any, DeviceTensor, StackedDeviceTensor, int, float, bool]

__all__ = ["CallArg", "CompiledProgram", "DeviceTensor", "DistributedCompiledProgram", "DistributedConfig", "Level",
           "ParamDirection", "Role", "StackedDeviceTensor"]
