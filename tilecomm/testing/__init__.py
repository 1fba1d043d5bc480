"""Testing distributed kernels: explore the schedules of a protocol and
replay the one that fails (``explore``, ``replay``); the pytest plugin
(``tilecomm.testing.plugin``, registered by entry point) runs tests at
several world sizes and transports and checks them for leaks.

The exploration names load on first use (PEP 562): the plugin is imported
by every pytest session of an environment with tilecomm installed, and most
of those sessions never explore."""
from __future__ import annotations

from .._lazy import lazy_names

from typing import TYPE_CHECKING

_HOMES = {name: ".exploration" for name in ("ExploreResult", "Failure", "explore", "replay")}

if TYPE_CHECKING:
    from .exploration import ExploreResult, Failure, explore, replay


__getattr__, __dir__ = lazy_names(__name__, _HOMES, globals())


__all__ = ["ExploreResult", "Failure", "explore", "replay"]
