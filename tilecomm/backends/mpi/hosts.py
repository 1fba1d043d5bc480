"""Host tensors of an MPI job whose processes share no memory: process 0's
host segments reached over MPI one-sided RMA instead of mapped by name.

When.  Only when the job's window pool is not node-shared memory
(``MpiHost.pool.shared`` False): processes on several nodes, or
``TILECOMM_MPI_DIRECT=0``, which runs exactly as across nodes.  On one node
with shared memory the ranks map process 0's segments (``arguments.
HostSegments``) and nothing here exists.

Process 0 (``HostWindow``).  Its host tensors -- a call's argument segments,
a prepared worker's pooled argument segments and device blocks, host
intermediates -- are ``/dev/shm`` segments of its own.  Each is attached to
one MPI *dynamic* window (created once with the ranks, collectively) the
first time a dispatch names it; a ``HostRef`` then carries the segment's
base address in process 0, which is the displacement a remote ``MPI_Get`` /
``MPI_Put`` uses on a dynamic window.  Attaching when a descriptor is made
means no rank can hold a descriptor of memory that is not attached.

Detaching: the window holds a numpy view of every attached segment, and a
segment's mapping cannot go while a view of it lives (``Segment.close``
defers the unmap to the last view).  So a segment closed while attached is
still mapped, and the memory MPI may be accessing can never be unmapped
under it; ``withdraw_closed`` (after every call, on process 0) detaches the
closed ones and drops their views, which is when their memory goes.
Attach / detach are local calls of process 0, legal during the other
processes' access epochs; no rank accesses a segment after its call ended.

A rank in process r > 0 (``RmaHostTensors``).  Before a dispatch runs (after
its host-tensor dependencies), every byte span its host-tensor arguments
cover is fetched with ``MPI_Get`` into a local buffer (views of one segment
that overlap share one buffer, so aliasing arguments alias here too; a
strided view fetches its span and is viewed with its strides); a copy of
what was fetched is kept.  After the dispatch, and *before* its completion
is published (``publish_done``), only the bytes that differ from that copy
are written back (one ``MPI_Put`` per span, an indexed datatype when the
changed bytes are several runs) and flushed.  Only changed bytes, because
several ranks commonly write disjoint parts of one host tensor in one call:
writing back a whole fetched span would overwrite a peer's part with the
stale bytes fetched before it wrote them.

Visibility. ``MPI_Win_flush`` completes the puts *at the target*; the
window's memory model is ``MPI_WIN_UNIFIED`` (checked at creation: the
public and private copies are one memory), so a completed put is in process
0's memory. Every reader comes after a completion the writer published
after its flush: a dependent dispatch on another rank waits for the
writer's published dispatch number before it fetches; process 0 reads
(``copy_back``, SubWorkers) only after the rank's published progress or run
count (``ControlPlane.finish_run``), both published after its flush. The
same order in reverse covers process 0's rank 0 worker, which writes the
mapped segment directly: a remote fetch follows rank 0's published
completion, and a store visible to process 0 is visible to RMA reads in the
unified model.

Progress.  MPI moves RMA data without the target's help only where the
network does it in hardware; otherwise (MPICH's shared-memory path for
dynamic windows, TCP) a get or put into process 0's memory advances only
when process 0 calls into MPI.  Process 0 does so while a call runs -- its
launcher probes for the ranks' messages -- but backs off to sleeps of 1 ms
between probes, so one fetch of a large tensor, moved in many small steps,
took about 100 ms per MiB here.  With a host window its sleeps stop at
``PROGRESS_PAUSE_S`` while a call runs (nothing changes between calls).
"""
from __future__ import annotations

import threading

import numpy as np

from ...errors import ConfigError
from ...runtime.rank.host_tensors import HostSegments
from ...runtime.values import HostRef

__all__ = ["HostWindow", "RmaHostTensors", "open_host_window"]

# one MPI call moves at most this many bytes (its count is a C int)
CHUNK = 1 << 30
# process 0's longest sleep between probes of its channel while a call runs
# (see "Progress" in the module doc)
PROGRESS_PAUSE_S = 50e-6


def open_host_window(MPI, comm, shared: bool, launcher):
    """The job's host window, or None where the processes map process 0's
    segments (``shared``: the window pool is node-shared memory).  Collective
    over ``comm``; shortens ``launcher``'s sleeps between probes (process 0)."""
    if shared:
        return None
    launcher.max_pause = min(launcher.max_pause, PROGRESS_PAUSE_S)
    return HostWindow(MPI, comm)


class HostWindow:
    """Process 0's host segments in one MPI dynamic window (every process of
    the job holds one; only process 0 attaches memory)."""

    def __init__(self, MPI, comm):
        self.MPI = MPI
        self.me = comm.Get_rank()
        self.win = MPI.Win.Create_dynamic(comm=comm)
        # decided together, so that every process raises or none does
        unified = comm.allreduce(int(self.win.Get_attr(MPI.WIN_MODEL) == MPI.WIN_UNIFIED),
                                 op=MPI.MIN)
        if not unified:
            self.win.Free()
            raise ConfigError("the MPI library's dynamic windows use the separate memory "
                              "model on some process; host tensors without shared memory "
                              "need MPI_WIN_UNIFIED", code="TC456",
                              hint="use an MPI build whose RMA memory model is unified (MPICH's "
                                   "is), or run every process on one node")
        self.win.Lock_all()            # one passive-target epoch for the window's lifetime
        self._attached: dict = {}      # Segment -> (its uint8 view, base address)
        self._lock = threading.Lock()  # the HOST orchestrator and a call's end

    @property
    def remote(self) -> bool:
        """Whether this process's rank reaches host tensors over RMA."""
        return self.me != 0

    # ------------------------------------------------------------ process 0
    def expose(self, segment) -> int:
        """Attach ``segment`` (once) and return its base address for a HostRef."""
        got = self._attached.get(segment)
        if got is not None:
            return got[1]
        with self._lock:
            got = self._attached.get(segment)
            if got is None:
                if segment.size == 0:          # nothing a view could reach
                    return 0
                view = segment.ndarray(np.uint8, (segment.size,))
                self.win.Attach(view)
                got = self._attached[segment] = (view, self.MPI.Get_address(view))
        return got[1]

    def withdraw_closed(self) -> None:
        """Detach every attached segment its owner closed (their mappings were
        held by the views dropped here: see the module doc)."""
        with self._lock:
            closed = [s for s in self._attached if s.closed]
            for seg in closed:
                view, _ = self._attached.pop(seg)
                self.win.Detach(view)

    # ------------------------------------------------------------ ranks
    def rank_tensors(self, keep: str | None):
        """How the rank of this process reaches host tensors."""
        if self.remote:
            return RmaHostTensors(self.MPI, self.win)
        return HostSegments(keep)

    def close(self) -> None:
        """Collective: detach everything, free the window."""
        with self._lock:
            for view, _ in self._attached.values():
                self.win.Detach(view)
            self._attached.clear()
        self.win.Unlock_all()
        self.win.Free()


def _span(ref: HostRef) -> tuple:
    """Bytes ``[lo, hi)`` of ``ref``'s segment that its view covers."""
    itemsize = np.dtype(ref.dtype).itemsize
    if any(n == 0 for n in ref.shape):
        return ref.offset, ref.offset
    lo = ref.offset + sum((n - 1) * s for n, s in zip(ref.shape, ref.strides) if s < 0)
    hi = ref.offset + sum((n - 1) * s for n, s in zip(ref.shape, ref.strides) if s > 0) + itemsize
    return lo, hi


class _Fetched:
    """One span of a segment fetched for the current dispatch."""

    __slots__ = ("segment", "base", "lo", "hi", "data", "original")

    def __init__(self, segment, base, lo, hi):
        self.segment, self.base, self.lo, self.hi = segment, base, lo, hi
        self.data = np.empty(hi - lo, np.uint8)
        self.original = None


class RmaHostTensors:
    """A rank's host tensors in MPI process r > 0: fetched per dispatch,
    changed bytes written back before the dispatch's completion is published
    (see the module doc).  The interface of ``rank.host_tensors.HostSegments`` plus
    ``fetch`` / ``write_back``."""

    over_rma = True

    def __init__(self, MPI, win):
        self.MPI = MPI
        self.win = win
        self._spans: dict = {}         # segment name -> [_Fetched] of this dispatch

    def fetch(self, args) -> None:
        """Get every host-tensor span the dispatch's ``args`` cover (views
        of one segment that overlap or touch are fetched as one span)."""
        self._spans = {}
        wanted: dict = {}
        for a in args:
            if type(a) is HostRef:
                lo, hi = _span(a)
                if hi > lo:
                    wanted.setdefault((a.segment, a.base), []).append((lo, hi))
        if not wanted:
            return
        for (name, base), spans in wanted.items():
            spans.sort()
            merged: list = []
            for lo, hi in spans:
                if merged and lo <= merged[-1][1]:
                    merged[-1][1] = max(merged[-1][1], hi)
                else:
                    merged.append([lo, hi])
            got = self._spans[name] = [_Fetched(name, base, lo, hi) for lo, hi in merged]
            for f in got:
                self._get(f)
        self.win.Flush(0)
        for spans in self._spans.values():
            for f in spans:
                f.original = f.data.copy()

    def _get(self, f: _Fetched) -> None:
        B = self.MPI.BYTE
        for at in range(0, f.hi - f.lo, CHUNK):
            n = min(CHUNK, f.hi - f.lo - at)
            self.win.Get([f.data[at:at + n], B], 0, [f.base + f.lo + at, n, B])

    def array(self, ref: HostRef) -> np.ndarray:
        """The dispatch's view ``ref`` of its fetched bytes."""
        lo, hi = _span(ref)
        if hi <= lo:
            return np.empty(ref.shape, ref.dtype)
        for f in self._spans.get(ref.segment, ()):
            if f.lo <= lo and hi <= f.hi:
                return np.ndarray(ref.shape, ref.dtype, buffer=f.data, offset=ref.offset - f.lo,
                                  strides=ref.strides)
        raise AssertionError(f"host tensor {ref.segment}[{lo}:{hi}] was not fetched for "
                             f"this dispatch")

    def write_back(self) -> None:
        """Put the bytes the dispatch changed, then flush: complete in process
        0's memory when this returns."""
        B = self.MPI.BYTE
        put = False
        types = []                     # indexed types, freed once the puts completed
        try:
            for spans in self._spans.values():
                for f in spans:
                    changed = f.data != f.original
                    if not changed.any():
                        continue
                    put = True
                    edges = np.flatnonzero(np.diff(changed.view(np.int8), prepend=0, append=0))
                    starts, ends = edges[0::2], edges[1::2]
                    if len(starts) == 1:
                        a, b = int(starts[0]), int(ends[0])
                        for at in range(a, b, CHUNK):
                            n = min(CHUNK, b - at)
                            self.win.Put([f.data[at:at + n], B], 0, [f.base + f.lo + at, n, B])
                        continue
                    # several runs: one indexed type describes them in the buffer
                    # and at the target alike (same displacements from its start)
                    t = B.Create_hindexed((ends - starts).tolist(), starts.tolist()).Commit()
                    types.append(t)
                    self.win.Put([f.data, 1, t], 0, [f.base + f.lo, 1, t])
            if put:
                self.win.Flush(0)
        finally:
            for t in types:
                t.Free()
            self._spans = {}

    def close(self) -> None:
        """The run ended: drop what the last dispatch fetched."""
        self._spans = {}
