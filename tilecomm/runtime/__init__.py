"""Runtime: configuration, compiled programs, the controller and rank workers."""
from .config import DistributedConfig, RunConfig
from .device_tensors import DeviceTensor, StackedDeviceTensor
from .handles import DistributedRunHandle, RegistrationHandle
from .launch import runs_host_code
from .prepared import DistributedWorker

__all__ = ["DeviceTensor", "DistributedConfig", "DistributedRunHandle", "DistributedWorker",
           "RegistrationHandle", "RunConfig", "StackedDeviceTensor", "runs_host_code"]
