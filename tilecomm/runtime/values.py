"""Runtime values and the descriptors that carry them between processes."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..transport.base import WindowKey
from ..transport.memops import address  # noqa: F401  (re-exported)


@dataclass(frozen=True)
class WindowBuffer:
    """One ``alloc_window_buffer``: a zero-filled copy per member device."""

    id: int
    name: str
    nbytes: int
    devices: tuple            # domain members (logical ranks), sorted; index = domain rank
    segments: object          # the transport's handle per member, same order (a sequence)

    def domain_rank(self, device: int) -> int:
        return self.devices.index(device)


@dataclass(frozen=True)
class HostRef:
    """A view of a host tensor living in a shared segment.  ``base``: the
    segment's address in process 0 where an MPI job reaches host tensors over
    RMA (``backends/mpi/hosts.py``: the displacement of its first byte in the host
    window); 0 where ranks map the segment by name."""

    segment: str
    offset: int
    shape: tuple
    strides: tuple
    dtype: str
    base: int = 0


@dataclass(frozen=True)
class WindowRef:
    buffer: WindowBuffer
    shape: tuple
    dtype: str


class WindowView:
    """A DistributedTensor inside a rank: this rank's copy (``local``) plus the
    key under which the transport reaches the same bytes in a peer's copy."""

    __slots__ = ("buffer", "shape", "dtype", "local", "rank", "nranks", "strides", "key",
                 "cells", "peers", "views", "plans")

    def __init__(self, buffer: WindowBuffer, shape, dtype, local: np.ndarray, rank: int):
        self.buffer = buffer
        self.shape = tuple(shape)
        self.dtype = dtype
        self.local = local
        self.rank = rank
        self.nranks = len(buffer.devices)
        self.strides = local.strides
        self.key = WindowKey(buffer.segments, buffer.devices, self.shape, np.dtype(dtype))
        # (peer, offsets) -> the transport's cell handle, after the first
        # bounds-checked lookup: a notify or a satisfied wait then costs one
        # dict lookup and one transport call
        self.cells: dict = {}
        # the transport's handle of each member's copy, on first use
        self.peers: list = [None] * self.nranks
        # each member's copy as an array where the transport maps it (False
        # where it does not), on first use by a call-site remote_load
        self.views: list = [None] * self.nranks
        # what a collective resolved once for this view (cells, peer pieces)
        self.plans: dict = {}

    def __repr__(self):
        return f"<window '{self.buffer.name}' {list(self.shape)} rank {self.rank}/{self.nranks}>"


class Tile(np.ndarray):
    """A tile: an ndarray of its physical shape plus the valid extent (None =
    all of it).  Elements outside the valid extent are zero."""

    valid = None

    def __array_finalize__(self, obj):
        self.valid = getattr(obj, "valid", None)


def make_tile(arr: np.ndarray, valid=None) -> Tile:
    t = np.ascontiguousarray(arr).view(Tile)
    t.valid = tuple(valid) if valid is not None and tuple(valid) != arr.shape else None
    return t


def valid_region(t) -> tuple:
    v = getattr(t, "valid", None)
    return tuple(v) if v is not None else t.shape
