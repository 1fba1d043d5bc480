"""Persistent comm domains of a prepared worker (``prepare(persistent=True)``).

A window buffer of a persistent worker is allocated on its first use and kept
for as long as the worker's ranks live: later calls find the same segments,
so a call creates no segment, and every rank keeps its mappings between calls
(the end of a run does not unmap them).  A domain is keyed by the program and
the buffer's name, as the reference keys it by program and generated domain
name; a later call that needs the same key with another specification (other
devices, another size) is refused rather than silently given a different
buffer.

Zeroing (``reset_persistent_windows``, on by default) happens in the
controller before the run's first dispatch is sent, while every rank is idle:
no rank can be reading or writing a window at that point, so a plain memset
is enough and no rank-side barrier is needed.  With zeroing off the contents
carry over: self-clearing collectives leave their signals at 0 at the end of
every call and so stay correct; hand-rolled monotonic counters keep growing.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import ConfigError


@dataclass
class _Domain:
    devices: tuple
    nbytes: int
    names: object         # the transport's per-member window handles (a sequence)
    bytes: list           # the controller's byte view of each member's copy, for zeroing


class PersistentDomains:
    """The persistent window buffers of one set of ranks."""

    def __init__(self, new_segment, transport, reset: bool):
        self._new_segment = new_segment   # ranks-lifetime segments
        self._transport = transport
        self.reset = reset
        self._domains: dict = {}
        self.allocations = 0              # how many domains were ever allocated
        # on an MPI process other than 0: how many domains process 0 holds
        self.held_by_controller: int | None = None

    def allocate(self, program_key, name: str, nbytes: int, members: tuple) -> tuple:
        key = (program_key, name)
        dom = self._domains.get(key)
        if dom is not None:
            if dom.devices != members or dom.nbytes != nbytes:
                raise ConfigError(
                    f"persistent CommDomain of window buffer '{name}' changed specification: "
                    f"allocated for devices {list(dom.devices)} with {dom.nbytes} bytes, now "
                    f"needed for devices {list(members)} with {nbytes} bytes", code="TC420",
                    hint="a persistent worker keeps each window buffer for its lifetime; use "
                         "persistent=False (fresh windows per call) when window sizes vary")
            return dom.names
        created: list = []

        class _Source:                    # the transport asks its caller for segments
            @staticmethod
            def new_segment(n):
                seg = self._new_segment(max(int(n), 1))
                created.append(seg)
                return seg

        names = self._transport.allocate_kept(_Source, nbytes, members)
        views = [seg.ndarray(np.uint8, (seg.size,)) for seg in created]
        self._domains[key] = _Domain(members, nbytes, names, views)
        self.allocations += 1
        return names

    def zero(self) -> None:
        """Zero every persistent window (ranks idle: see the module doc)."""
        for dom in self._domains.values():
            if not self._transport.zero(dom.names, dom.nbytes):
                for view in dom.bytes:
                    view.fill(0)

    def __len__(self) -> int:
        if self.held_by_controller is not None:
            return self.held_by_controller
        return len(self._domains)


__all__ = ["PersistentDomains"]
