"""Host tensors as a rank reaches them: the caller's /dev/shm segments, mapped
by name on first use (a backend whose ranks share no memory with the caller
supplies its own object of this interface: ``Backend.rank_host_tensors``)."""
from __future__ import annotations

import numpy as np

from ...transport.segments import Segment
from ..values import HostRef


class HostSegments:
    """The host-tensor segments of the current run, mapped on first
    use; those whose name starts with ``keep`` (a prepared worker's pooled
    argument segments) stay mapped for the next run."""

    # tensors live in memory this process maps: nothing to fetch or write back
    over_rma = False

    def __init__(self, keep: str | None = None):
        self._segments: dict[str, Segment] = {}
        self._keep = keep
        self._run_only: list[str] = []      # mapped for this run only: closed at its end

    def array(self, ref: HostRef) -> np.ndarray:
        seg = self._segments.get(ref.segment)
        if seg is None:
            name = ref.segment
            seg = self._segments[name] = Segment.attach(name)
            if self._keep is None or not name.startswith(self._keep):
                self._run_only.append(name)
        return seg.ndarray(ref.dtype, ref.shape, offset=ref.offset, strides=ref.strides)

    def close(self) -> None:
        for name in self._run_only:
            self._segments.pop(name).close()
        self._run_only.clear()


__all__ = ["HostSegments"]
