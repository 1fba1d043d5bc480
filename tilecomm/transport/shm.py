"""Shared-memory transport: every rank maps the segment of a window, which
holds every member's copy, so a remote access is a plain (or atomic) memory
operation at the same byte offset in the peer's copy, and a direct view of a
peer's copy is free.

One segment per window buffer, not one per member: with n ranks each rank
would otherwise open and map n segments per window (n^2 mappings in all,
each an open, an mmap, a page fault on first touch and an munmap at the end
of the run -- at 1024 ranks the bulk of a small call's time), and each
dispatch would carry n segment names.  Member ``i``'s copy starts at
``i * stride`` (``Copies``); a stride of whole cache lines (whole pages from
a page up) keeps ranks' copies off each other's lines and every element
naturally aligned for the native atomics.

Wake-ups: each rank has an int32 "sleepers" counter (in a small segment of the
transport's own, one cache line per rank so that counters of different ranks
never share a line).  A waiter counts itself there before it sleeps; a notify
pays for the FUTEX_WAKE syscall only when the receiving rank's counter is
nonzero.  Why that cannot lose a wake-up is argued in native_core.c.
"""
from __future__ import annotations

import threading

import numpy as np

from .. import _native_core as native
from .base import Endpoint, TransportHost, WaitHooks, WindowKey
from .memops import write_region
from .segments import Segment

__all__ = ["Copies", "ShmEndpoint", "ShmHost", "sleep_wait"]

LINE = 64                        # bytes per rank in the sleepers segment
COPY_ALIGN = 128                 # a copy's stride: whole pairs of lines (adjacent-line prefetch)
PAGE = 4096
# A window of many small copies is mapped with its pages present: a rank that
# signals or reads each of n peers touches a page of each copy, and n page
# faults per rank cost more than one populating mmap.  Populating commits the
# whole segment, hence the bound; windows of larger copies fault in the pages
# a rank uses (which then hold more of the data it moves).
POPULATE_UP_TO = 8 << 20
SPIN_WINDOW_NS = 200_000         # bound of the spin + yield phase of try_wait
SLICE_NS = 20_000_000            # a blocked wait calls hooks.check this often

_notify_i32 = native.notify_i32  # module globals: one lookup less on the hottest path
_wait_i32 = native.wait_i32
_arrive_wait_i32 = native.arrive_wait_i32


def sleep_wait(addr: int, cmp: int, expected: int, sleepers: int, hooks: WaitHooks) -> None:
    """The blocking part of a wait on the int32 at ``addr``.  ``hooks.blocked``
    runs before the first (re-)check, so a waiter that the monitor sees as
    blocked has looked at the cell after it said so."""
    hooks.blocked()
    try:
        while True:
            ok, value = _wait_i32(addr, cmp, expected, sleepers, SLICE_NS, 0)
            if ok:
                return
            hooks.check(value)
    finally:
        hooks.unblocked()


def copy_stride(nbytes: int) -> int:
    """Bytes between members' copies of an ``nbytes`` window in its segment."""
    align = PAGE if nbytes >= PAGE else COPY_ALIGN
    return -(-int(nbytes) // align) * align


def _c_strides(shape: tuple, itemsize: int) -> tuple:
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


class Copies:
    """The per-member handles of a window whose copies share one segment
    (``WindowKey.segments`` of the shm transport): ``copies[i]`` is
    ``(segment name, byte offset of member i's copy)``.  Indexed like the
    tuple of handles it stands for, but its size (and so a dispatch that
    names the window, and its hash) does not grow with the members."""

    __slots__ = ("name", "stride", "count", "_hash")

    def __init__(self, name: str, stride: int, count: int):
        self.name = name
        self.stride = stride
        self.count = count
        self._hash = hash((name, stride, count))     # a dict key on every first touch

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, member: int) -> tuple:
        if not -self.count <= member < self.count:
            raise IndexError(f"member {member} of a window of {self.count}")
        return (self.name, (member % self.count) * self.stride)

    def __iter__(self):
        return (self[i] for i in range(self.count))

    def __eq__(self, other) -> bool:
        return type(other) is Copies and (self.name, self.stride, self.count) == \
            (other.name, other.stride, other.count)

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self):
        return (Copies, (self.name, self.stride, self.count))

    def __repr__(self) -> str:
        return f"Copies({self.name!r}, stride={self.stride}, count={self.count})"


class ShmHost(TransportHost):
    name = "shm"

    def __init__(self, world: int, new_segment):
        self.world = world
        self.sleepers_segment = new_segment(world * LINE)
        self._windows: dict[str, Segment] = {}

    def allocate(self, run, nbytes: int, members: tuple) -> Copies:
        stride = copy_stride(nbytes)
        seg = run.new_segment(stride * len(members))
        self._windows[seg.name] = seg
        return Copies(seg.name, stride, len(members))

    def read_cell(self, handle, byte_offset: int) -> int:
        name, base = handle
        return native.load_i32(self._windows[name].addr + base + byte_offset)

    def wake(self, handle, byte_offset: int) -> None:
        name, base = handle
        seg = self._windows.get(name)
        if seg is not None:
            native.futex_wake(seg.addr + base + byte_offset, -1)

    def end_run(self, run) -> None:
        # the run closes and unlinks its segments; a submitted run begun
        # before this one ended keeps its own
        for seg in run.segments:
            self._windows.pop(seg.name, None)

    def endpoint(self, device: int, world: int) -> "ShmEndpoint":
        return ShmEndpoint(device, Segment.attach(self.sleepers_segment.name))

    def close(self) -> None:
        self._windows.clear()
        self.sleepers_segment.close()
        self.sleepers_segment.unlink()


class ShmEndpoint(Endpoint):
    name = "shm"

    def __init__(self, device: int, sleepers: Segment):
        self.device = device
        self._sleepers_segment = sleepers
        self._sleepers_base = sleepers.addr
        self.sleepers = sleepers.addr + device * LINE
        self._segments: dict[str, Segment] = {}
        self._views: dict = {}
        self._bases: dict = {}               # Copies -> the mapped segment's address
        self._attach_lock = threading.Lock()

    def _segment(self, copies: Copies) -> Segment:
        seg = self._segments.get(copies.name)
        if seg is None:
            with self._attach_lock:      # tasks of one rank may race to map it
                seg = self._segments.get(copies.name)
                if seg is None:
                    small = copies.stride <= PAGE
                    seg = self._segments[copies.name] = Segment.attach(
                        copies.name, POPULATE_UP_TO if small else 0)
        return seg

    def _view(self, key: WindowKey, member: int) -> np.ndarray:
        # One array over every member's copy per (window, view), indexed by
        # member: a rank that reaches all n peers once per call builds one
        # checked view, not n.  Keyed by the window's copies, not by the key,
        # whose hash covers its tuple of devices (which grows with the domain).
        copies = key.segments
        at = (copies, key.shape, key.dtype)
        every = self._views.get(at)
        if every is None:
            every = self._views[at] = self._segment(copies).ndarray(
                key.dtype, (copies.count, *key.shape), 0,
                (copies.stride, *_c_strides(key.shape, key.dtype.itemsize)))
        return every[member, ...]           # a view even of a 0-d window

    def where(self, addr):
        for name, seg in self._segments.items():
            if seg.addr <= addr < seg.addr + seg.size:
                return name, addr - seg.addr
        return None

    local = _view
    peer_view = _view
    window = _view                   # the handle is the peer's copy itself

    def put(self, window, index, src, atomic):
        write_region(window[index] if index else window, src, atomic)

    def get(self, window, index, dst):
        np.copyto(dst, window[index] if index else window)

    def cell(self, key, member, byte_offset):
        # on a rank's first touch of each peer's cell (n per call with n
        # peers): kept to a lookup and arithmetic
        copies = key.segments
        base = self._bases.get(copies)
        if base is None:
            base = self._bases[copies] = self._segment(copies).addr
        if not 0 <= member < copies.count:
            raise IndexError(f"member {member} of a window of {copies.count}")
        return (base + member * copies.stride + byte_offset,
                self._sleepers_base + key.devices[member] * LINE)

    def signal(self, cell, op, value):
        # seq_cst store/add; the receiver's sleepers count decides whether a
        # futex wake (a syscall) is needed at all
        return _notify_i32(cell[0], op, value, cell[1])

    def read_cell(self, cell):
        return native.load_i32(cell[0])

    def try_wait(self, cell, cmp, expected, spin):
        return _wait_i32(cell[0], cmp, expected, self.sleepers, SPIN_WINDOW_NS, spin)[0]

    def wait(self, cell, cmp, expected, hooks):
        sleep_wait(cell[0], cmp, expected, self.sleepers, hooks)

    def signal_group(self, outs, ins):
        return tuple(x for c in outs for x in c), tuple(c[0] for c in ins)

    def arrive_wait(self, group, value, expected, spin):
        # one native call per barrier generation: the adds, the wakes and the waits
        return _arrive_wait_i32(group[0], group[1], value, expected, self.sleepers,
                                SPIN_WINDOW_NS, spin)

    def end_run(self):
        self._views.clear()
        self._bases.clear()
        for seg in self._segments.values():
            seg.close()                  # unmapped once the last view of it is gone
        self._segments.clear()

    def close(self):
        self.end_run()
        self._sleepers_segment.close()
