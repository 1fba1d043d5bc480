"""Dependency inference for a rank's tasks: which in-flight tasks a new task
must wait for, from the memory its accesses overlap.

A reader waits for every in-flight writer of an overlapping region (the last
writer and whatever it still waits for); a writer waits for every in-flight
reader and writer of an overlapping region.  Completed tasks are forgotten, so
the tables hold only what can still order something.  Regions are numpy views
of the task's arguments: two views overlap when their byte ranges intersect
and, for equal strides, their index boxes do too -- rows of one matrix written
by two tasks are independent, as on the chip.
"""
from __future__ import annotations

import numpy as np

from ..values import WindowView
from ...transport.memops import address

READ, WRITE = "r", "w"


def _root(a: np.ndarray):
    """The object owning ``a``'s memory (views of one buffer share it)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a.base if a.base is not None else a


class Access:
    __slots__ = ("task", "mode", "lo", "hi", "ptr", "shape", "strides", "itemsize", "key")

    def __init__(self, task, mode: str, ptr: int, shape, strides, itemsize: int, key):
        self.task = task
        self.mode = mode
        self.key = key
        self.ptr = ptr
        self.shape = shape
        self.strides = strides
        self.itemsize = itemsize
        lo = hi = ptr
        for n, s in zip(shape, strides):
            if n == 0:
                lo = hi = ptr
                break
            if s >= 0:
                hi += (n - 1) * s
            else:
                lo += (n - 1) * s
        self.lo, self.hi = lo, hi + itemsize

    def same_region(self, other) -> bool:
        return self.ptr == other.ptr and self.shape == other.shape and \
            self.strides == other.strides

    def overlaps(self, other) -> bool:
        if self.hi <= other.lo or other.hi <= self.lo:
            return False
        if len(self.shape) == 2 and self.strides == other.strides and \
                self.itemsize == other.itemsize and self.strides[1] == self.itemsize and \
                self.strides[0] > 0:
            # same 2-D layout: compare the boxes of rows x columns
            base = min(self.ptr, other.ptr)
            rs = self.strides[0]
            boxes = []
            for a in (self, other):
                r, c = divmod(a.ptr - base, rs)
                if c % a.itemsize:
                    return True
                c //= a.itemsize
                if c + a.shape[1] > rs // a.itemsize:
                    return True          # a row wraps into the next: keep it simple
                boxes.append((r, r + a.shape[0], c, c + a.shape[1]))
            (r0, r1, c0, c1), (s0, s1, d0, d1) = boxes
            return r0 < s1 and s0 < r1 and c0 < d1 and d0 < c1
        return True                      # conservative: may only order more


def base_array(value):
    """The array a task argument names (a window's local copy), or None."""
    a = value.local if isinstance(value, WindowView) else value
    return a if isinstance(a, np.ndarray) else None


def region(a: np.ndarray, offsets, extents):
    """(first byte, shape) of ``a[offsets : offsets + extents]`` (extents apply
    to the innermost dims), or of all of ``a`` when the region is not a valid
    one (the task itself reports a bad region)."""
    if offsets is None or len(offsets) != a.ndim:
        return 0, a.shape
    ext = (1,) * (a.ndim - len(extents)) + tuple(extents)
    off = 0
    for o, e, d, st in zip(offsets, ext, a.shape, a.strides):
        o, e = int(o), int(e)
        if o < 0 or o + e > d:
            return 0, a.shape
        off += o * st
    return off, tuple(int(e) for e in ext)


class Tracker:
    """In-flight accesses per memory root."""

    def __init__(self):
        self.by_root: dict = {}
        # per argument array seen lately: (the array, its root's key, its address);
        # asking numpy for an address costs more than the rest of an access
        self._arrays: dict = {}

    def _describe(self, a: np.ndarray):
        d = self._arrays.get(id(a))
        if d is None or d[0] is not a:
            if len(self._arrays) > 256:
                self._arrays.clear()
            d = self._arrays[id(a)] = (a, id(_root(a)), address(a))
        return d

    def release_arrays(self) -> None:
        self._arrays.clear()

    def add(self, task, mode: str, a: np.ndarray, offsets, extents, infer: bool,
            preds: set) -> None:
        """Register ``task``'s access to ``a[offsets : offsets + extents]`` (all
        of ``a`` if offsets is None); add the tasks it must wait for to ``preds``
        (unless ``infer`` is false: a manual scope orders by explicit edges only)."""
        _, key, ptr = self._describe(a)
        off, shape = region(a, offsets, extents)
        acc = Access(task, mode, ptr + off, shape, a.strides, a.itemsize, key)
        entries = self.by_root.setdefault(key, [])
        if infer:
            keep = []
            for e in entries:
                if e.task is task:
                    keep.append(e)
                    continue
                if (mode == WRITE or e.mode == WRITE) and e.overlaps(acc):
                    preds.add(e.task)
                    # a write of the same region supersedes it: later tasks
                    # reach the older one through this one
                    if mode == WRITE and e.same_region(acc):
                        continue
                keep.append(e)
            entries[:] = keep
        entries.append(acc)
        task.accesses.append(acc)

    def forget(self, task) -> None:
        for acc in task.accesses:
            entries = self.by_root.get(acc.key)
            if entries is None:
                continue
            try:
                entries.remove(acc)
            except ValueError:
                pass                     # superseded already
            if not entries:
                del self.by_root[acc.key]
        task.accesses = []


class GraphNode:
    """A task as a recorder's own dependency tracker sees it: the scheduler's
    tracker forgets a task when it completes, a recorder keeps every task of
    the dispatch (a dependency on a completed task still orders)."""

    __slots__ = ("tid", "accesses")

    def __init__(self, tid):
        self.tid, self.accesses = tid, []


def explicit_ids(deps) -> list:
    """The TaskIds a submission's ``deps=`` names (TaskIds or arrays of them;
    an id below 1 names no task)."""
    return [int(i) for d in deps
            for i in (d.ravel().tolist() if hasattr(d, "ravel") else (d,)) if int(i) >= 1]


def inferred_ids(tracker: Tracker, tid: int, acc, manual: bool) -> set:
    """The TaskIds, among those ``tracker`` has seen, that task ``tid`` with
    tracked arguments ``acc`` ((value, mode, offsets, extents) each) depends
    on through the memory they touch (none in a manual scope); registers
    its accesses."""
    node = GraphNode(tid)
    preds: set = set()
    for value, mode, offs, ext in acc:
        a = base_array(value)
        if a is not None:
            tracker.add(node, mode, a, offs, ext, not manual, preds)
    return {p.tid for p in preds if p is not node}
