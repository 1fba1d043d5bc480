"""MPI-3 one-sided transport: windows are regions of one MPI RMA window per
set of ranks, every remote byte and every signal moves as an MPI RMA call.

Windows.  MPI window creation is collective, but a HOST orchestrator allocates
window buffers one at a time while the ranks already run.  So each process
contributes one *pool* to a single MPI window, allocated collectively when
the ranks are set up, and a window buffer is a region at the same offset of
every member's pool (symmetric, as the reference requires; a process outside
a buffer's comm domain leaves its region unused).  The controller bumps an
offset per buffer and zero-fills the region in every member's pool before
any rank can see it; the offset goes back to 0 when a run starts.  On one
node the pool window is an ``MPI_Win_allocate_shared`` window: every process
maps every pool, which is what :meth:`MpiEndpoint.peer_view` hands to the
collectives for direct loads and stores (the reason MPI offers such windows).
Otherwise -- the job spans nodes, or ``TILECOMM_MPI_DIRECT=0`` asks to run
as if it did -- it is an ordinary ``MPI_Win_allocate`` window, every access
to a peer an RMA call; the job's control plane follows the same choice
(``backends/mpi/spmd.py``).

Passive target, one epoch: each process opens ``MPI_Win_lock_all`` once and
keeps it; completion is ``MPI_Win_flush`` to the target after every
operation, so, as the transport interface promises, a put, get, atomic add or
signal is complete at the target when the call returns.  Data is therefore
always flushed before the notify that publishes it.

Operations: put / get are ``MPI_Put`` / ``MPI_Get`` with a datatype
describing the region in the target copy (derived from the same region of
the rank's own copy -- every member's copy has its layout -- and cached);
atomic add is ``MPI_Accumulate(MPI_SUM)`` where MPI has the element type.
FP16 and BF16 have no MPI reduction: they are added with a
compare-and-swap loop on the aligned 32-bit word holding each element (read
the words, add in the element type, ``MPI_Compare_and_swap``, retry the
words another process changed meanwhile) -- atomic per element, slower.
Signals are ``MPI_Accumulate`` on ``MPI_INT32_T`` with ``MPI_REPLACE`` (Set)
or ``MPI_SUM`` (AtomicAdd), so every update of a cell is an MPI atomic and
they are ordered with one another.

Waiting.  No MPI call sleeps until a memory word changes, so a wait polls its
own cell: spin, then yield, then sleep in slices that grow to ``MAX_SLICE_NS``
(ranks may outnumber cores: a sleeping waiter leaves the core to the rank
that will release it), calling ``hooks.check`` after every slice.  On a
shared window the cell is read with a seq_cst load of the mapped memory (an
MPI atomic on a shared window is a memory operation, and MPI's unified
memory model makes it visible to loads); otherwise with
``MPI_Fetch_and_op(MPI_NO_OP)``, which also drives MPI progress.
"""
from __future__ import annotations

import threading
import time

import numpy as np

from ... import _native_core as native
from ...errors import RuntimeFault
from ...waits import holds
from ...transport.base import NOTIFY_SET, Endpoint, TransportHost, WaitHooks, WindowKey
from ...transport.memops import address, check_atomic, write_region
from .comm import check_job, on_one_node, require_mpi, unlink_backing_file
from . import jobwatch
from ...transport.shm import SPIN_WINDOW_NS

__all__ = ["MpiEndpoint", "MpiHost", "DEFAULT_POOL_BYTES"]

DEFAULT_POOL_BYTES = 256 << 20      # per process; pages are only backed once used
ALIGN = 64                          # window buffers start on their own cache line
FIRST_SLICE_NS = 20_000             # a blocked wait's first sleep slice
MAX_SLICE_NS = 1_000_000            # ... growing to this (the reaction time to an abort)

_wait_i32 = native.wait_i32


def _mpi_types(MPI):
    """numpy dtype -> the MPI type ``MPI_Accumulate(MPI_SUM)`` adds natively."""
    return {np.dtype(np.float32): MPI.FLOAT, np.dtype(np.float64): MPI.DOUBLE,
            np.dtype(np.int8): MPI.INT8_T, np.dtype(np.int16): MPI.INT16_T,
            np.dtype(np.int32): MPI.INT32_T, np.dtype(np.int64): MPI.INT64_T,
            np.dtype(np.uint8): MPI.UINT8_T, np.dtype(np.uint16): MPI.UINT16_T,
            np.dtype(np.uint32): MPI.UINT32_T, np.dtype(np.uint64): MPI.UINT64_T}


class _Pool:
    """One process's share of the job-wide pool window, plus what every
    endpoint and the host of that process need to reach the others."""

    def __init__(self, comm, pool_bytes: int, direct: bool = True):
        MPI = require_mpi()
        self.MPI = MPI
        self.comm = comm
        self.me = comm.Get_rank()
        self.size = comm.Get_size()
        self.pool_bytes = -(-pool_bytes // 4096) * 4096
        # direct=False: an ordinary window even on one node, so every access
        # to a peer is an RMA call, exactly as between nodes
        self.shared = direct and on_one_node(comm)
        if self.shared:
            self.win = MPI.Win.Allocate_shared(self.pool_bytes, 1, comm=comm)
            self.maps = []
            for p in range(self.size):
                mem, _ = self.win.Shared_query(p)
                self.maps.append(np.frombuffer(mem, np.uint8))
            unlink_backing_file(comm, address(self.maps[0]))
        else:
            self.win = MPI.Win.Allocate(self.pool_bytes, 1, comm=comm)
            self.maps = [None] * self.size
            self.maps[self.me] = np.frombuffer(self.win.tomemory(), np.uint8)
        self.win.Lock_all()            # one passive-target epoch for the pool's lifetime
        self.types = _mpi_types(MPI)
        self._regions: dict = {}       # (shape, strides, element) -> committed MPI datatype
        self._elements: dict = {}      # numpy dtype -> MPI type of one element
        self._lock = threading.Lock()

    def element_type(self, dtype):
        """The MPI type of one element: MPI's own where it has one (so
        ``MPI_Accumulate`` can add it), else the element's bytes (BF16, FP16)."""
        dtype = np.dtype(dtype)
        t = self.types.get(dtype) or self._elements.get(dtype)
        if t is None:
            with self._lock:
                t = self._elements.get(dtype)
                if t is None:
                    t = self.MPI.BYTE.Create_contiguous(dtype.itemsize)
                    t.Commit()
                    self._elements[dtype] = t
        return t

    def region_type(self, shape: tuple, strides: tuple, base):
        """A committed MPI datatype for a strided region of ``base`` elements
        (``strides`` in bytes), cached: kernels move the same regions in loops."""
        key = (shape, strides, base.handle)    # element types live as long as the pool
        t = self._regions.get(key)
        if t is None:
            with self._lock:
                t = self._regions.get(key)
                if t is None:
                    # innermost dimension first: n blocks of one inner type, s bytes apart
                    steps = []
                    t = base
                    for n, s in reversed(list(zip(shape, strides))):
                        t = t.Create_hvector(n, 1, s)
                        steps.append(t)
                    t.Commit()
                    for inner in steps[:-1]:       # the committed type keeps what it needs
                        inner.Free()
                    self._regions[key] = t
        return t

    def free(self):
        for t in list(self._regions.values()) + list(self._elements.values()):
            t.Free()
        self._regions.clear()
        self._elements.clear()
        self.maps = []
        self.win.Unlock_all()
        self.win.Free()


class MpiHost(TransportHost):
    """The controller's side (every process builds one, collectively; only
    process 0's allocates and reads cells)."""

    name = "mpi"

    def __init__(self, world: int, new_segment=None, comm=None, pool_bytes: int | None = None,
                 direct: bool = True):
        MPI = require_mpi()
        self.comm = comm if comm is not None else MPI.COMM_WORLD
        check_job(self.comm, world)
        self.world = world
        self.pool = _Pool(self.comm, pool_bytes or DEFAULT_POOL_BYTES, direct)
        self._next = 0
        self._kept = 0                 # end of the windows that outlive runs

    def start_run(self, run) -> None:
        self._next = self._kept        # the previous run's windows are gone, kept ones stay

    def allocate(self, run, nbytes, members):
        off = self._next
        end = off + -(-int(nbytes) // ALIGN) * ALIGN
        if end > self.pool.pool_bytes:
            raise RuntimeFault(
                f"the MPI window pool is exhausted: this run's window buffers need more than "
                f"{self.pool.pool_bytes} bytes per process (a buffer of {int(nbytes)} bytes at "
                f"offset {off})", code="TC510",
                hint="set TILECOMM_MPI_POOL_MB to a larger pool (MiB per process)")
        self._next = end
        handles = tuple((m, off) for m in members)
        self.zero(handles, nbytes)     # zero-filled before any rank can see the handle
        return handles

    def allocate_kept(self, source, nbytes, members):
        # below the floor every later run starts from (persistent domains are
        # allocated between runs or as a persistent worker's only windows)
        handles = self.allocate(source, nbytes, members)
        self._kept = self._next
        return handles

    def zero(self, handles, nbytes):
        pool = self.pool
        for m, off in handles:
            if pool.maps[m] is not None:
                pool.maps[m][off:off + nbytes] = 0
            else:
                zeros = np.zeros(int(nbytes), np.uint8)
                pool.win.Put([zeros, pool.MPI.BYTE], m, [off, int(nbytes), pool.MPI.BYTE])
                pool.win.Flush(m)
        return True

    def read_cell(self, handle, byte_offset):
        proc, off = handle
        return _read(self.pool, proc, off + byte_offset)

    def endpoint(self, device, world):
        return MpiEndpoint(self.pool, device)

    def close(self):
        if self.pool is not None:
            # the first collective step of closing a set of ranks
            jobwatch.gate(jobwatch.CLOSE)
            self.pool.free()           # collective: every process of the job closes its host
            self.pool = None


def _read(pool, proc: int, disp: int) -> int:
    """Current value of an int32 cell: a load where the pool is shared
    memory, else an MPI atomic read (which also drives MPI progress: in an
    ordinary window, RMA aimed at this process may need this process to
    call MPI before it lands)."""
    m = pool.maps[proc]
    if m is not None and pool.shared:
        return native.load_i32(address(m) + disp)
    MPI = pool.MPI
    out = np.zeros(1, np.int32)
    pool.win.Fetch_and_op([np.zeros(1, np.int32), MPI.INT32_T], [out, MPI.INT32_T], proc, disp,
                          MPI.NO_OP)
    pool.win.Flush(proc)
    return int(out[0])


class _Remote:
    """The handle of a peer's copy: its process, the copy's offset in that
    pool, and this rank's own copy (same layout) to derive regions from."""

    __slots__ = ("proc", "offset", "layout")

    def __init__(self, proc: int, offset: int, layout: np.ndarray):
        self.proc = proc
        self.offset = offset
        self.layout = layout


class MpiEndpoint(Endpoint):
    name = "mpi"

    def __init__(self, pool: _Pool, device: int):
        self.pool = pool
        self.device = device
        self.win = pool.win
        self.MPI = pool.MPI
        self._views: dict = {}
        self._op = {NOTIFY_SET: pool.MPI.REPLACE}
        self._sum = pool.MPI.SUM

    # ----------------------------------------------------------- memory
    def _view(self, key: WindowKey, member: int) -> np.ndarray | None:
        v = self._views.get((key, member))
        if v is None:
            proc, off = key.segments[member]
            m = self.pool.maps[proc]
            if m is None:
                return None
            n = int(np.prod(key.shape, dtype=np.int64)) * key.dtype.itemsize
            v = self._views[(key, member)] = m[off:off + n].view(key.dtype).reshape(key.shape)
        return v

    def local(self, key, member):
        if key.segments[member][0] != self.device:
            raise ValueError(f"member {member}'s copy is not rank {self.device}'s own")
        return self._view(key, member)

    def peer_view(self, key, member):
        if not self.pool.shared:
            return None                          # peers are reached by RMA calls only
        return self._view(key, member)

    def window(self, key, member):
        proc, off = key.segments[member]
        own = next(m for m, (p, _) in enumerate(key.segments) if p == self.device)
        return _Remote(proc, off, self._view(key, own))

    def _target(self, h: _Remote, index: tuple):
        """(byte displacement, count, MPI datatype, element type, region) of
        ``copy[index]`` at the target, derived from the same region of this
        rank's own copy."""
        region = h.layout[index] if index else h.layout
        disp = h.offset + (address(region) - address(h.layout) if region.size else 0)
        elem = self.pool.element_type(region.dtype)
        if region.flags.c_contiguous:
            return disp, region.size, elem, elem, region
        return disp, 1, self.pool.region_type(region.shape, region.strides, elem), elem, region

    # ----------------------------------------------------------- data
    def put(self, window, index, src, atomic):
        if window.proc == self.device and not atomic:
            # this rank's own copy: a plain copy (an atomic add still goes
            # through MPI, so that it is atomic with peers' adds to the same
            # elements)
            write_region(window.layout[index] if index else window.layout, src, False)
            return
        dtype = window.layout.dtype
        if atomic:
            check_atomic(dtype)
        disp, count, t, elem, region = self._target(window, index)
        if region.size == 0:
            return
        if src.shape != region.shape:
            src = src.reshape(region.shape)
        data = np.ascontiguousarray(src if src.dtype == dtype else
                                    src.astype(dtype, casting="unsafe" if atomic else "same_kind"))
        if not atomic:
            self.win.Put([data, data.size, elem], window.proc, [disp, count, t])
        elif np.dtype(dtype) in self.pool.types:
            self.win.Accumulate([data, data.size, elem], window.proc, [disp, count, t],
                                self._sum)
        else:
            self._cas_add(window.proc, region, disp, data)
            return
        self.win.Flush(window.proc)

    def _cas_add(self, proc: int, region: np.ndarray, disp: int, data: np.ndarray) -> None:
        """``+=`` of 16-bit elements that MPI cannot reduce: compare-and-swap on
        the aligned 32-bit word holding each element, retried per word until
        no other process changed it in between."""
        MPI = self.MPI
        # byte displacement of every element of the region at the target
        idx = np.indices(region.shape).reshape(region.ndim, -1).T
        rel = (idx * np.array(region.strides, np.int64)).sum(axis=1) if region.ndim else \
            np.zeros(1, np.int64)
        elem = disp + rel
        add = data.reshape(-1)
        words = {}
        for e, a in zip(elem.tolist(), add):
            w, half = e & ~3, (e & 2) >> 1
            words.setdefault(w, [None, None])[half] = a
        dtype = data.dtype
        old = np.zeros(1, np.uint32)
        new = np.zeros(1, np.uint32)
        got = np.zeros(1, np.uint32)
        for w, halves in words.items():
            self.win.Fetch_and_op([got, MPI.UINT32_T], [old, MPI.UINT32_T], proc, w, MPI.NO_OP)
            self.win.Flush(proc)
            while True:
                parts = old.view(dtype).copy()          # two elements, little-endian
                for h, a in enumerate(halves):
                    if a is not None:
                        parts[h] = (np.float32(parts[h]) + np.float32(float(a))).astype(dtype)
                new[:] = parts.view(np.uint32)
                self.win.Compare_and_swap([new, MPI.UINT32_T], [old, MPI.UINT32_T],
                                          [got, MPI.UINT32_T], proc, w)
                self.win.Flush(proc)
                if got[0] == old[0]:
                    break
                old[:] = got                        # someone else added first: redo on theirs

    def get(self, window, index, dst):
        if window.proc == self.device:
            np.copyto(dst, window.layout[index] if index else window.layout)
            return
        disp, count, t, elem, region = self._target(window, index)
        if region.size == 0:
            return
        buf = dst if dst.flags.c_contiguous and dst.dtype == region.dtype else \
            np.empty(region.shape, region.dtype)
        self.win.Get([buf, buf.size, elem], window.proc, [disp, count, t])
        self.win.Flush(window.proc)
        if buf is not dst:
            np.copyto(dst, buf.reshape(dst.shape) if buf.shape != dst.shape else buf)

    def flush(self):
        self.win.Flush_all()

    # ----------------------------------------------------------- signals
    def cell(self, key, member, byte_offset):
        proc, off = key.segments[member]
        m = self.pool.maps[proc] if self.pool.shared else None   # polled by address if shared
        return (proc, off + byte_offset, address(m) + off + byte_offset if m is not None else 0)

    def signal(self, cell, op, value):
        # an MPI atomic at the target, complete (flushed) before returning, so
        # the data this rank flushed before it is visible to whoever sees it;
        # fetch-and-op, as the value the cell took is the notify's result
        # (buffers per call: a rank's cores are threads sharing this endpoint)
        fetched = np.empty(1, np.int32)
        self.win.Fetch_and_op([np.array([value], np.int32), self.MPI.INT32_T],
                              [fetched, self.MPI.INT32_T], cell[0], cell[1],
                              self._op.get(op, self._sum))
        self.win.Flush(cell[0])
        if op == NOTIFY_SET:
            return int(value)
        return int((fetched + np.int32(value))[0])   # INT32 wraps, as the cell did

    def read_cell(self, cell):
        return _read(self.pool, cell[0], cell[1])

    def try_wait(self, cell, cmp, expected, spin):
        if cell[2]:
            return _wait_i32(cell[2], cmp, expected, 0, SPIN_WINDOW_NS, spin)[0]
        for _ in range(max(1, min(spin, 64))):
            if holds(cmp, _read(self.pool, cell[0], cell[1]), expected):
                return True
        return False

    def wait(self, cell, cmp, expected, hooks: WaitHooks):
        hooks.blocked()
        try:
            slice_ns = FIRST_SLICE_NS
            while True:
                if cell[2]:
                    # spins nothing, then sleeps until the slice ends (no
                    # process wakes it: MPI updates are polled)
                    ok, value = _wait_i32(cell[2], cmp, expected, 0, slice_ns, 0)
                else:
                    value = _read(self.pool, cell[0], cell[1])
                    ok = holds(cmp, value, expected)
                    if not ok:
                        time.sleep(slice_ns / 1e9)
                if ok:
                    return
                hooks.check(value)
                slice_ns = min(slice_ns * 2, MAX_SLICE_NS)
        finally:
            hooks.unblocked()

    def end_run(self):
        self._views.clear()


