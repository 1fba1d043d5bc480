"""Runtime: configuration, compiled programs, the controller and rank workers."""
from .config import DistributedConfig, RunConfig
from .prepared import DistributedWorker

__all__ = ["DistributedConfig", "DistributedWorker", "RunConfig"]
