"""Testing distributed kernels: explore the schedules of a protocol and
replay the one that fails (``explore``, ``replay``); the pytest plugin
(``tilecomm.testing.plugin``, registered by entry point) runs tests at
several world sizes and transports and checks them for leaks."""
from .explore import ExploreResult, Failure, explore, replay

__all__ = ["ExploreResult", "Failure", "explore", "replay"]
