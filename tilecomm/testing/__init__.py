"""Testing distributed kernels: explore the schedules of a protocol and
replay the one that fails (``explore``, ``replay``); the pytest plugin
(``tilecomm.testing.plugin``, registered by entry point) runs tests at
several world sizes and transports and checks them for leaks.

The exploration names load on first use (PEP 562): the plugin is imported
by every pytest session of an environment with tilecomm installed, and most
of those sessions never explore."""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

_HOMES = {name: ".exploration" for name in ("ExploreResult", "Failure", "explore", "replay")}

if TYPE_CHECKING:
    from .exploration import ExploreResult, Failure, explore, replay


def __getattr__(name: str):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_HOMES))


__all__ = ["ExploreResult", "Failure", "explore", "replay"]
