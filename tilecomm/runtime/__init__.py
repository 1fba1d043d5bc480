"""Runtime: configuration, compiled programs, the controller and rank workers."""
from .config import DistributedConfig, RunConfig
from .worker.device_tensors import DeviceTensor, StackedDeviceTensor
from .worker.handles import DistributedRunHandle, RegistrationHandle
from .controller.backend import runs_host_code
from .worker.distributed_worker import DistributedWorker

__all__ = ["DeviceTensor", "DistributedConfig", "DistributedRunHandle", "DistributedWorker",
           "RegistrationHandle", "RunConfig", "StackedDeviceTensor", "runs_host_code"]
