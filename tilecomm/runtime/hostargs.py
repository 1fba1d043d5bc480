"""Host tensor arguments of a call: checked before anything starts, shared
with the ranks before the run, and outputs copied back into the caller's
tensors after it.

Only ``pl.Out`` / ``pl.InOut`` parameters are copied back.  Copying inputs
back too would fail on a read-only input after the whole run, and an input
that overlaps an output would overwrite the result with the input's old
contents.  Outputs must be writable, and the call's windows and arguments
must fit in /dev/shm: :func:`check` runs before any segment is created or
rank is touched, so a bad call costs nothing (a prepared worker keeps its
ranks).
"""
from __future__ import annotations

import numpy as np

from ..errors import ArgumentError
from ..ir.types import INOUT, OUT
from . import shmspace
from .executable import to_numpy
from .host import HostTensor

_OUTPUTS = (OUT, INOUT)


def _key(arr):
    """Arrays with equal keys are one tensor for the ranks."""
    return arr.__array_interface__["data"][0], arr.shape, arr.strides, arr.dtype.str


def _directions(executable):
    return executable.directions[executable.ir.entry.name]


def check(executable, args) -> None:
    """Refuse a call whose outputs are read-only (ArgumentError TC412) or whose
    windows and arguments cannot fit in /dev/shm (RuntimeFault TC505)."""
    # parameter names and spans (for the error) from the verified IR it was built from
    params = executable.ir.entry.params
    arrays = [to_numpy(a) for a in args]
    for p, direction, arr in zip(params, _directions(executable), arrays):
        if arr is not None and direction in _OUTPUTS and not arr.flags.writeable:
            kind = "pl.Out" if direction == OUT else "pl.InOut"
            raise ArgumentError(
                f"parameter '{p.name}' is an output ({kind}) but the array passed for it is "
                f"read-only", code="TC412", span=p.span,
                hint="pass a writable array (np.array(x) makes a writable copy), or declare "
                     "the parameter as an input if the program does not write it")
    unique = {_key(arr): arr.nbytes for arr in arrays if arr is not None}
    shmspace.check(executable, unique.values())


def share(call, args, executable):
    """Copy tensor arguments into shared segments: ``(values for the HOST
    orchestrator, [(caller's array, shared tensor)] to copy back)``.  The same
    array passed twice is shared once, so the ranks see one tensor; it is
    copied back if any parameter it is passed as is an output."""
    vals, copies, seen = [], [], {}
    for a, direction in zip(args, _directions(executable)):
        arr = to_numpy(a)
        if arr is None:
            vals.append(a)
            continue
        key = _key(arr)
        shared = seen.get(key)
        if shared is None:
            seg = call.new_segment(max(arr.nbytes, 1))
            shared = HostTensor(seg, seg.ndarray(arr.dtype, arr.shape))
            np.copyto(shared.array, arr)
            seen[key] = shared
        vals.append(shared)
        if direction in _OUTPUTS and not any(s is shared for _, s in copies):
            copies.append((arr, shared))
    return vals, copies
