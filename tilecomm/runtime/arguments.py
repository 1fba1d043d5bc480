"""Host tensors between the caller and the ranks: the caller's arrays are
copied into shared segments before a run and copied back after it; ranks map
those segments by name.  (Host tensors are the launcher's business, not the
transport's: an mpiexec launcher would scatter and gather them instead.)"""
from __future__ import annotations

import numpy as np

from ..transport.segments import Segment
from .host import HostTensor
from .executable import to_numpy
from .values import HostRef


def share_arguments(run, args):
    """Shared copies of the tensor arguments: (values for the HOST
    orchestrator, [(caller's array, shared tensor)] to copy back).
    The same array passed twice is shared once, so the ranks see one tensor."""
    vals, copies, seen = [], [], {}
    for a in args:
        arr = to_numpy(a)
        if arr is None:
            vals.append(a)
            continue
        key = (arr.__array_interface__["data"][0], arr.shape, arr.strides, arr.dtype.str)
        if key in seen:
            vals.append(seen[key])
            continue
        seg = run.new_segment(max(arr.nbytes, 1))
        shared = HostTensor(seg, seg.ndarray(arr.dtype, arr.shape))
        np.copyto(shared.array, arr)
        vals.append(shared)
        seen[key] = shared
        copies.append((arr, shared))
    return vals, copies


def copy_back(copies) -> None:
    for user, shared in copies:
        np.copyto(user, shared.array)


def map_result(result, args, host_vals):
    """The HOST orchestrator's return value in the caller's own objects."""
    def one(v):
        for a, h in zip(args, host_vals):
            if v is h:
                return a
        return None
    if isinstance(result, tuple):
        return tuple(one(v) for v in result)
    return one(result) if result is not None else None


class HostSegments:
    """Rank side: the host-tensor segments of the current run, mapped on first use."""

    def __init__(self):
        self._segments: dict[str, Segment] = {}

    def array(self, ref: HostRef) -> np.ndarray:
        seg = self._segments.get(ref.segment)
        if seg is None:
            seg = self._segments[ref.segment] = Segment.attach(ref.segment)
        return seg.ndarray(ref.dtype, ref.shape, offset=ref.offset, strides=ref.strides)

    def close(self) -> None:
        for seg in self._segments.values():
            seg.close()
        self._segments.clear()
