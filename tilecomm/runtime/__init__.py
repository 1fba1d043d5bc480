"""Runtime: configuration, compiled programs, the controller and rank workers.

The names below load their module on first use (PEP 562), so a part that
needs only the configuration -- the pytest plugin every session of an
environment with tilecomm loads, ``tilecomm.runtime.config`` itself -- does
not pay for the controller, the rank side and numpy's BLAS."""
from __future__ import annotations

from .._lazy import lazy_names

from typing import TYPE_CHECKING

# public name -> the module (relative to this package) that defines it
_HOMES = {
    "DistributedConfig": ".config",
    "RunConfig": ".config",
    "DeviceTensor": ".worker.device_tensors",
    "StackedDeviceTensor": ".worker.device_tensors",
    "DistributedRunHandle": ".worker.handles",
    "RegistrationHandle": ".worker.handles",
    "runs_host_code": ".controller.backend",
    "DistributedWorker": ".worker.distributed_worker",
    "ChipWorker": ".worker.chip_worker",
    "BenchmarkStats": ".worker.bench",
    "benchmark": ".worker.bench",
}

if TYPE_CHECKING:       # what readers and type checkers see
    from .config import DistributedConfig, RunConfig
    from .controller.backend import runs_host_code
    from .worker.device_tensors import DeviceTensor, StackedDeviceTensor
    from .worker.bench import BenchmarkStats, benchmark
    from .worker.chip_worker import ChipWorker
    from .worker.distributed_worker import DistributedWorker
    from .worker.handles import DistributedRunHandle, RegistrationHandle


__getattr__, __dir__ = lazy_names(__name__, _HOMES, globals())


__all__ = ["BenchmarkStats", "ChipWorker", "DeviceTensor", "DistributedConfig", "DistributedRunHandle", "DistributedWorker",
           "RegistrationHandle", "RunConfig", "StackedDeviceTensor", "benchmark", "runs_host_code"]
