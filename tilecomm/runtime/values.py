"""Runtime values and the descriptors that carry them between processes."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class WindowBuffer:
    """One ``alloc_window_buffer``: a zero-filled segment per member device."""

    id: int
    name: str
    nbytes: int
    devices: tuple            # domain members (logical ranks), sorted; index = domain rank
    segments: tuple           # segment name per member, same order

    def domain_rank(self, device: int) -> int:
        return self.devices.index(device)


@dataclass(frozen=True)
class HostRef:
    """A view of a host tensor living in a shared segment."""

    segment: str
    offset: int
    shape: tuple
    strides: tuple
    dtype: str


@dataclass(frozen=True)
class WindowRef:
    buffer: WindowBuffer
    shape: tuple
    dtype: str


class WindowView:
    """A DistributedTensor inside a rank: this rank's copy (``local``) plus what
    is needed to reach the same bytes in a peer's copy."""

    __slots__ = ("buffer", "shape", "dtype", "local", "rank", "nranks", "strides", "addrs",
                 "cells", "arrays")

    def __init__(self, buffer: WindowBuffer, shape, dtype, local: np.ndarray, rank: int):
        self.buffer = buffer
        self.shape = tuple(shape)
        self.dtype = dtype
        self.local = local
        self.rank = rank
        self.nranks = len(buffer.devices)
        self.strides = local.strides
        # base address of each member's copy, filled on first use: signal ops
        # then cost a few integer operations instead of an ndarray lookup
        self.addrs = [0] * self.nranks
        self.addrs[rank] = address(local)
        self.cells: dict = {}      # (peer, offsets) -> (cell address, sleepers address)
        self.arrays = [None] * self.nranks   # each member's copy as an ndarray, on first use
        self.arrays[rank] = local

    def __repr__(self):
        return f"<window '{self.buffer.name}' {list(self.shape)} rank {self.rank}/{self.nranks}>"


def address(a: np.ndarray) -> int:
    """Address of an array's first element (cheaper than ``a.ctypes.data``)."""
    return a.__array_interface__["data"][0]


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
