"""Testing distributed kernels: explore the schedules of a protocol and
replay the one that fails (``explore``, ``replay``)."""
from .explore import ExploreResult, Failure, explore, replay

__all__ = ["ExploreResult", "Failure", "explore", "replay"]
