"""Copy-only transport: a rank maps its own window copies and nothing else;
every byte bound for or read from a peer moves through an explicit request, the
way an RMA network backend moves it.

The "network" is a service thread in the controller process (it allocated the
windows, so it can reach every copy), one duplex pipe per rank.  A request is
answered only once it has been applied at the target, so every operation is
complete in program order when the call returns (put-then-notify needs no
flush).  Signal updates at the target are the native seq_cst store / add
followed by an unconditional futex wake, so a rank sleeping on its own cell
(local memory) is woken exactly as with the shared-memory transport; waits
pass no sleepers counter, so no wake can be skipped.

Bulk data travels through a per-rank staging buffer, the analogue of a NIC's
registered memory: the rank maps its own staging buffer (and no peer's
memory), copies a chunk in, and the service copies it on into the target
copy (a get runs the other way).  Regions that cannot be cut into chunks
along their first dimension travel inline in the request instead.

Operations on the rank's own copy (a notify to itself, a put to itself) are
local memory operations, not requests.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from multiprocessing.connection import Pipe, wait as mp_wait

import numpy as np

from .. import _native_core as native
from .base import Endpoint, TransportHost, WindowKey
from .memops import address, write_region
from .segments import Segment, resource_error
from .shm import SPIN_WINDOW_NS, sleep_wait

__all__ = ["CopyEndpoint", "CopyHost"]

STAGE_BYTES = 4 << 20           # staging buffer per rank (pages are touched only when used)


# ------------------------------------------------------------------ requests
@dataclass(frozen=True)
class PutRequest:
    segment: str
    shape: tuple
    dtype: str
    index: tuple
    data: np.ndarray
    atomic: bool


@dataclass(frozen=True)
class GetRequest:
    segment: str
    shape: tuple
    dtype: str
    index: tuple


@dataclass(frozen=True)
class StagedPut:
    """Put the first ``count`` elements of the requester's staging buffer
    (C order) into ``index`` of the target copy."""

    segment: str
    shape: tuple
    dtype: object
    index: tuple
    count: int
    atomic: bool


@dataclass(frozen=True)
class StagedGet:
    """Copy ``index`` of the target copy into the requester's staging buffer."""

    segment: str
    shape: tuple
    dtype: object
    index: tuple


@dataclass(frozen=True)
class SignalRequest:
    segment: str
    byte_offset: int
    op: int
    value: int


@dataclass(frozen=True)
class ReadRequest:
    segment: str
    byte_offset: int


@dataclass(frozen=True)
class Reply:
    value: object = None
    error: BaseException | None = None


# ------------------------------------------------------------------ controller
class CopyHost(TransportHost):
    name = "copy"

    def __init__(self, world: int, new_segment):
        self.world = world
        self._links = []                 # (service end, rank end) per rank
        self._wake_r = self._wake_w = None
        self._segments: dict[str, Segment] = {}
        self._lock = threading.Lock()    # the service applies requests; end_run unmaps
        self._thread: threading.Thread | None = None
        self._stop = False
        self._stages = []                # one staging buffer per rank
        try:
            try:
                for _ in range(world):
                    self._links.append(Pipe(duplex=True))
                self._wake_r, self._wake_w = Pipe(duplex=False)
            except OSError as e:         # out of descriptors: typed, with a hint
                typed = resource_error(e, "cannot create the copy transport's links")
                if typed is None:
                    raise
                raise typed from e
            for _ in range(world):
                self._stages.append(new_segment(STAGE_BYTES))
        except BaseException:
            self.close()
            raise

    # -- windows
    def allocate(self, run, nbytes, members):
        names = []
        for _ in members:
            seg = run.new_segment(nbytes)
            with self._lock:
                self._segments[seg.name] = seg
            names.append(seg.name)
        return tuple(names)

    def _seg(self, name: str) -> Segment:
        seg = self._segments.get(name)
        if seg is None:
            raise RuntimeError(f"window segment {name} is not part of the current run")
        return seg

    def read_cell(self, handle, byte_offset):
        with self._lock:
            return native.load_i32(self._seg(handle).addr + byte_offset)

    def wake(self, handle, byte_offset):
        with self._lock:
            seg = self._segments.get(handle)
            if seg is not None:
                native.futex_wake(seg.addr + byte_offset, -1)

    def start_run(self, run):
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="tilecomm-copy-transport",
                                            daemon=True)
            self._thread.start()

    def end_run(self, run):
        with self._lock:                 # the run closes and unlinks them; a submitted
            for seg in run.segments:     # run begun before this one ended keeps its own
                self._segments.pop(seg.name, None)

    # -- ranks
    def endpoint(self, device, world):
        return CopyEndpoint(device, self._links[device][1],
                            Segment.attach(self._stages[device].name))

    def child_fds(self, device):
        return [self._links[device][1].fileno()]

    def in_child(self, device):
        for d, (service, rank_end) in enumerate(self._links):
            service.close()
            if d != device:
                rank_end.close()
        self._wake_r.close()
        self._wake_w.close()

    def started(self):
        """In the controller, once every rank has been forked."""
        for _, rank_end in self._links:
            rank_end.close()

    # -- the service
    def _serve(self):
        conns = [service for service, _ in self._links]
        rank_of = {c: d for d, c in enumerate(conns)}
        live = set(conns)
        while live and not self._stop:
            for conn in mp_wait(list(live) + [self._wake_r]):
                if conn is self._wake_r:
                    return
                try:
                    req = conn.recv()
                except (EOFError, OSError):
                    live.discard(conn)       # that rank is gone
                    continue
                try:
                    with self._lock:
                        reply = Reply(self._apply(req, rank_of[conn]))
                except BaseException as e:   # reported to the requesting rank
                    reply = Reply(error=e)
                try:
                    conn.send(reply)
                except (BrokenPipeError, ConnectionResetError, OSError):
                    live.discard(conn)

    def _apply(self, req, rank):
        if isinstance(req, StagedPut):
            dst = self._seg(req.segment).ndarray(req.dtype, req.shape)[req.index]
            data = self._stages[rank].ndarray(req.dtype, (req.count,))
            write_region(dst, data, req.atomic)
            return None
        if isinstance(req, StagedGet):
            src = self._seg(req.segment).ndarray(req.dtype, req.shape)[req.index]
            np.copyto(self._stages[rank].ndarray(req.dtype, src.shape), src)
            return None
        if isinstance(req, SignalRequest):
            return native.notify_i32(self._seg(req.segment).addr + req.byte_offset, req.op,
                                     req.value, 0)
        if isinstance(req, PutRequest):
            dst = self._seg(req.segment).ndarray(req.dtype, req.shape)[req.index]
            write_region(dst, req.data, req.atomic)
            return None
        if isinstance(req, GetRequest):
            return self._seg(req.segment).ndarray(req.dtype, req.shape)[req.index].copy()
        if isinstance(req, ReadRequest):
            return native.load_i32(self._seg(req.segment).addr + req.byte_offset)
        raise TypeError(f"unknown transport request {type(req).__name__}")

    def close(self):
        self._stop = True
        if self._thread is not None:
            try:
                self._wake_w.send(None)
            except OSError:
                pass
            self._thread.join()
            self._thread = None
        for service, rank_end in self._links:
            service.close()
            rank_end.close()
        for end in (self._wake_r, self._wake_w):
            if end is not None:
                end.close()
        self._segments.clear()
        for stage in self._stages:
            stage.close()
            stage.unlink()
        self._stages = []


# ------------------------------------------------------------------ rank side
class CopyEndpoint(Endpoint):
    name = "copy"

    def __init__(self, device: int, conn, stage: Segment):
        self.device = device
        self._conn = conn
        self._stage = stage
        self._own: dict[str, Segment] = {}
        self._views: dict = {}
        # the tasks of a rank share its channel and staging buffer: one
        # request (and its staged chunks) at a time
        self._lock = threading.RLock()

    def _mine(self, key: WindowKey, member: int) -> bool:
        return key.devices[member] == self.device

    def _own_segment(self, name: str) -> Segment:
        seg = self._own.get(name)
        if seg is None:
            seg = self._own[name] = Segment.attach(name)
        return seg

    def local(self, key, member):
        if not self._mine(key, member):
            raise ValueError(f"rank {self.device} cannot map member {member}'s copy of a window")
        a = self._views.get(key)
        if a is None:
            a = self._views[key] = self._own_segment(key.segments[member]).ndarray(
                key.dtype, key.shape)
        return a

    def _request(self, req):
        with self._lock:
            self._conn.send(req)
            reply = self._conn.recv()
        if reply.error is not None:
            raise reply.error
        return reply.value

    def window(self, key, member):
        if self._mine(key, member):
            return self.local(key, member)          # own memory: an array
        return (key.segments[member], key.shape, key.dtype)

    def put(self, window, index, src, atomic):
        if type(window) is not tuple:
            write_region(window[index], src, atomic)
            return
        with self._lock:
            self._put(window, index, src, atomic)

    def _put(self, window, index, src, atomic):
        seg, shape, dtype = window
        idx, chunks = _chunks(shape, index, np.dtype(dtype).itemsize)
        flat = np.ascontiguousarray(src).reshape(-1)
        if atomic and flat.dtype != dtype:
            flat = flat.astype(dtype)        # what the atomic add itself would do
        if chunks is None or flat.size != _count(idx) or flat.dtype != dtype:
            self._request(PutRequest(seg, shape, dtype, index, np.ascontiguousarray(src),
                                     bool(atomic)))
            return
        per_row = _count(idx[1:])
        for r0, r1 in chunks:
            part = flat[r0 * per_row:r1 * per_row]
            np.copyto(self._stage.ndarray(dtype, part.shape), part)
            sub = (slice(idx[0].start + r0, idx[0].start + r1),) + idx[1:]
            self._request(StagedPut(seg, shape, dtype, sub, part.size, bool(atomic)))

    def get(self, window, index, dst):
        if type(window) is not tuple:
            np.copyto(dst, window[index])
            return
        with self._lock:
            self._get(window, index, dst)

    def _get(self, window, index, dst):
        seg, shape, dtype = window
        idx, chunks = _chunks(shape, index, np.dtype(dtype).itemsize)
        if chunks is None or dst.shape != tuple(s.stop - s.start for s in idx):
            np.copyto(dst, self._request(GetRequest(seg, shape, dtype, index)))
            return
        for r0, r1 in chunks:
            sub = (slice(idx[0].start + r0, idx[0].start + r1),) + idx[1:]
            self._request(StagedGet(seg, shape, dtype, sub))
            part = dst[r0:r1]
            np.copyto(part, self._stage.ndarray(dtype, part.shape))

    def cell(self, key, member, byte_offset):
        if self._mine(key, member):
            return (address(self.local(key, member)) + byte_offset, None, 0)
        return (0, key.segments[member], byte_offset)

    def signal(self, cell, op, value):
        if cell[0]:
            return native.notify_i32(cell[0], op, value, 0)
        return self._request(SignalRequest(cell[1], cell[2], op, value))

    def read_cell(self, cell):
        if cell[0]:
            return native.load_i32(cell[0])
        return self._request(ReadRequest(cell[1], cell[2]))

    def try_wait(self, cell, cmp, expected, spin):
        return native.wait_i32(cell[0], cmp, expected, 0, SPIN_WINDOW_NS, spin)[0]

    def wait(self, cell, cmp, expected, hooks):
        sleep_wait(cell[0], cmp, expected, 0, hooks)

    def end_run(self):
        self._views.clear()
        for seg in self._own.values():
            seg.close()
        self._own.clear()

    def close(self):
        self.end_run()
        self._stage.close()
        self._conn.close()


def _count(idx: tuple) -> int:
    n = 1
    for sl in idx:
        n *= sl.stop - sl.start
    return n


def _chunks(shape: tuple, index: tuple, itemsize: int):
    """(the region as full slices, [(first row, end row)] blocks along its
    first dimension that each fit the staging buffer) -- or None for the
    blocks when a single row is too big."""
    idx = index or tuple(slice(0, n) for n in shape)
    if not idx or len(idx) != len(shape):
        return idx, None
    row = _count(idx[1:]) * itemsize
    rows = idx[0].stop - idx[0].start
    if row > STAGE_BYTES or rows == 0:
        return idx, None
    step = max(1, STAGE_BYTES // max(row, 1))
    return idx, [(r, min(r + step, rows)) for r in range(0, rows, step)]

