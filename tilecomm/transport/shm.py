"""Shared-memory transport: every rank maps every member's window segment, so a
remote access is a plain (or atomic) memory operation at the same byte offset
in the peer's segment."""
from __future__ import annotations

import numpy as np

from .segments import Segment


class ShmTransport:
    name = "shm"

    def __init__(self, control, device: int):
        self.control = control
        self.device = device
        self._segments: dict[str, Segment] = {}
        self._arrays: dict = {}

    def segment(self, name: str) -> Segment:
        seg = self._segments.get(name)
        if seg is None:
            seg = self._segments[name] = Segment.attach(name)
        return seg

    def array(self, segment: str, dtype, shape, offset=0, strides=None) -> np.ndarray:
        return self.segment(segment).ndarray(dtype, shape, offset=offset, strides=strides)

    def window_array(self, buffer, member: int, shape, dtype) -> np.ndarray:
        """Member ``member`` (domain rank) copy of ``buffer`` viewed as shape/dtype."""
        key = (buffer.id, member, tuple(shape), dtype)
        a = self._arrays.get(key)
        if a is None:
            a = self._arrays[key] = self.array(buffer.segments[member], dtype, shape)
        return a

    def peer_array(self, view, peer: int) -> np.ndarray:
        if peer == view.rank:
            return view.local
        return self.window_array(view.buffer, peer, view.shape, view.local.dtype)

    def close(self) -> None:
        self._arrays.clear()
        for seg in self._segments.values():
            seg.close()
        self._segments.clear()
