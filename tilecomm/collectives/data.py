"""Every member's copy of a window as one flat element stream.

A collective treats a window view as ``numel`` packed elements (a whole
tensor is reduced as one ``[1, numel]`` stream).  Where the transport maps
peer memory the copies are plain arrays and numpy reads and writes them in
place; otherwise each access is the transport's get or put of a slice.
"""
from __future__ import annotations

import numpy as np

from ..transport.base import WindowKey

# Reductions and copies run in pieces of this many bytes, so the operands of
# one piece are still in cache when its result is copied to the peers (the L2
# of a core holds several of them).
CHUNK_BYTES = 256 * 1024
# Slices owned by different ranks start on their own cache line: two ranks
# writing neighbouring elements would otherwise fight over the line.
LINE_BYTES = 64


class FlatWindow:
    """One window view, every member's copy, flat."""

    __slots__ = ("local", "n", "me", "size", "direct", "handles", "transport", "dtype")

    def __init__(self, transport, view):
        key = view.key
        self.size = int(view.local.size)
        flat = WindowKey(key.segments, key.devices, (self.size,), key.dtype)
        self.transport = transport
        self.me = view.rank
        self.n = view.nranks
        self.dtype = view.local.dtype
        self.local = view.local.reshape(-1)
        direct = [transport.peer_view(flat, m) if m != self.me else self.local
                  for m in range(self.n)]
        if all(d is not None for d in direct):
            self.direct, self.handles = direct, None
        else:
            self.direct = None
            self.handles = [transport.window(flat, m) for m in range(self.n)]

    def read(self, member: int, lo: int, hi: int, scratch: np.ndarray) -> np.ndarray:
        """Elements [lo, hi) of ``member``'s copy: a view where memory is shared,
        else fetched into ``scratch``."""
        if self.direct is not None:
            return self.direct[member][lo:hi]
        if member == self.me:
            return self.local[lo:hi]
        out = scratch[:hi - lo]
        self.transport.get(self.handles[member], (slice(lo, hi),), out)
        return out

    def write(self, member: int, lo: int, hi: int, src: np.ndarray) -> None:
        """Store ``src`` as elements [lo, hi) of ``member``'s copy."""
        if self.direct is not None:
            dst = self.direct[member][lo:hi]
            if not np.shares_memory(dst, src):
                np.copyto(dst, src)
        elif member == self.me:
            np.copyto(self.local[lo:hi], src)
        else:
            self.transport.put(self.handles[member], (slice(lo, hi),), src, False)


def split(total: int, parts: int, part: int, itemsize: int, unit: int = 0) -> tuple:
    """[lo, hi) of ``part`` when ``total`` elements are split into ``parts``
    nearly equal pieces whose bounds fall on cache lines (or on multiples of
    ``unit`` elements when given)."""
    step = unit or max(1, LINE_BYTES // itemsize)
    blocks = -(-total // step)
    lo = min(total, (blocks * part // parts) * step)
    hi = min(total, (blocks * (part + 1) // parts) * step)
    return lo, hi


def chunks(lo: int, hi: int, itemsize: int):
    """[lo, hi) cut into pieces of about ``CHUNK_BYTES``."""
    step = max(1, CHUNK_BYTES // itemsize)
    for a in range(lo, hi, step):
        yield a, min(hi, a + step)
