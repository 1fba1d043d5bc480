"""Host tensors between the caller and the ranks: the caller's arrays are
checked before anything starts, copied into shared segments before a run, and
outputs copied back after it; ranks map those segments by name.  (Host
tensors are the launcher's business, not the transport's: an mpiexec launcher
would scatter and gather them instead.)

Only ``pl.Out`` / ``pl.InOut`` parameters are copied back.  Copying inputs
back too would fail on a read-only input after the whole run, and an input
that overlaps an output would overwrite the result with the input's old
contents.  Outputs must be writable, and the call's windows and arguments
must fit in /dev/shm: :func:`check_arguments` runs before any segment is
created or rank is touched, so a bad call costs nothing (a prepared worker
keeps its ranks).
"""
from __future__ import annotations

import threading

import numpy as np

from ...errors import ArgumentError
from ...ir.types import INOUT, OUT
from . import shmspace
from .. import poison
from .orchestrator import HostTensor
from ..executable import to_numpy

_OUTPUTS = (OUT, INOUT)


class Resident:
    """Base of a tensor that lives in a prepared worker's memory
    (``worker.device_tensors``): a call takes it by reference,
    ``host_value()`` being what the HOST orchestrator sees of it."""

    __slots__ = ()

    def host_value(self):
        raise NotImplementedError


def _key(arr):
    """Arrays with equal keys are one tensor for the ranks."""
    return arr.__array_interface__["data"][0], arr.shape, arr.strides, arr.dtype.str


def _directions(executable):
    return executable.directions[executable.entry_info.name]


def check_arguments(executable, args, space: bool = True) -> None:
    """Refuse a call whose outputs are read-only (ArgumentError TC412) or whose
    windows and arguments cannot fit in /dev/shm (RuntimeFault TC505; not
    checked with ``space`` False: a prepared call whose windows and argument
    segments exist already needs no new room)."""
    params = executable.entry_info.params    # names and spans, for the error
    arrays = [to_numpy(a) for a in args]
    for p, direction, arr in zip(params, _directions(executable), arrays):
        if arr is not None and direction in _OUTPUTS and not arr.flags.writeable:
            kind = "pl.Out" if direction == OUT else "pl.InOut"
            raise ArgumentError(
                f"parameter '{p.name}' is an output ({kind}) but the array passed for it is "
                f"read-only", code="TC412", span=p.span,
                hint="pass a writable array (np.array(x) makes a writable copy), or declare "
                     "the parameter as an input if the program does not write it")
    if space:
        unique = {_key(arr): arr.nbytes for arr in arrays if arr is not None}
        shmspace.check(executable, unique.values())


def share_arguments(run, args, executable):
    """Shared copies of the tensor arguments: (values for the HOST
    orchestrator, [(caller's array, shared tensor)] to copy back).  The same
    array passed twice is shared once, so the ranks see one tensor; it is
    copied back if any parameter it is passed as is an output."""
    vals, copies, seen = [], [], {}
    # a caller of torch gets torch in its SubWorkers too (subworkers.invoke)
    run.torch = any(type(a).__module__.startswith("torch") for a in args)
    # RunConfig.poison_windows: a tensor passed only as pl.Out starts as the
    # sentinel (runtime/poison.py), not as the caller's values
    poisoned = set()
    if run.checks.poison:
        directions = {}
        for a, direction in zip(args, _directions(executable)):
            arr = None if isinstance(a, Resident) else to_numpy(a)
            if arr is not None:
                directions.setdefault(_key(arr), set()).add(direction)
        poisoned = {k for k, ds in directions.items() if ds == {OUT}}
    for a, direction in zip(args, _directions(executable)):
        if isinstance(a, Resident):
            vals.append(a.host_value())      # resident already: passed by reference
            continue
        arr = to_numpy(a)
        if arr is None:
            vals.append(a)
            continue
        key = _key(arr)
        shared = seen.get(key)
        if shared is None:
            seg = run.argument_segment(max(arr.nbytes, 1))
            shared = HostTensor(seg, seg.ndarray(arr.dtype, arr.shape))
            if key in poisoned:
                poison.fill(shared.array)
            else:
                np.copyto(shared.array, arr)
            seen[key] = shared
        vals.append(shared)
        if direction in _OUTPUTS and not any(s is shared for _, s in copies):
            copies.append((arr, shared))
    return vals, copies


def copy_back(copies) -> None:
    for user, shared in copies:
        np.copyto(user, shared.array)


def result_positions(result, values):
    """The HOST orchestrator's result as positions in ``values`` (the host
    values it was given, or the caller's arguments): a position, or a tuple
    of them, None for an element that is none of ``values``."""
    def position(v):
        for i, h in enumerate(values):
            if v is h:
                return i
        return None
    if isinstance(result, tuple):
        return tuple(position(v) for v in result)
    return None if result is None else position(result)


def at_positions(positions, values):
    """What ``result_positions`` gave, as the elements of ``values`` at those
    positions (None where it has none)."""
    if isinstance(positions, tuple):
        return tuple(None if i is None else values[i] for i in positions)
    return None if positions is None else values[positions]


def map_result(result, args, host_vals):
    """The HOST orchestrator's return value in the caller's own objects."""
    return at_positions(result_positions(result, host_vals), args)


class ArgumentPool:
    """A prepared worker's host-argument segments, reused call after call.

    Creating a segment for every tensor argument of every call (and mapping
    it in every rank) costs more than a small call itself; the pool keeps
    them, per size, for as long as the ranks live, and ranks keep them mapped
    (``HostSegments(keep=...)``).  Calls run one at a time, so a segment handed
    out to one run is back before the next run starts.  At most ``CAPACITY``
    segments are pooled (ranks keep each mapped): beyond that a call gets
    segments of its own, as a one-shot call does."""

    CAPACITY = 64

    def __init__(self, new_segment):
        self._new_segment = new_segment
        self._free: dict[int, list] = {}
        self._made: list = []          # every pooled segment, closed with the ranks
        self.size = 0
        # a pipelined call takes segments while the one before gives its back
        self._lock = threading.Lock()

    def take(self, nbytes: int):
        with self._lock:
            free = self._free.get(nbytes)
            if free:
                return free.pop()
            if self.size >= self.CAPACITY:
                return None
            self.size += 1
        seg = self._new_segment(nbytes)
        with self._lock:
            self._made.append(seg)
        return seg

    def close(self) -> None:
        """Unmap every pooled segment (the ranks are gone; their names are swept)."""
        with self._lock:
            made, self._made, self._free = self._made, [], {}
        for seg in made:
            seg.close()

    def give_back(self, segments) -> None:
        """``segments`` in the order a run took them: the next run of the same
        sizes takes each back for the same argument (``take`` pops the last),
        so its host tensors are where the last run's were (``plans.py``)."""
        with self._lock:
            for seg in reversed(segments):
                self._free.setdefault(seg.size, []).append(seg)
