"""Runtime: configuration, compiled programs, the controller and rank workers."""
from .config import DistributedConfig, RunConfig

__all__ = ["DistributedConfig", "RunConfig"]
