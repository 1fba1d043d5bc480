"""The per-rank context a worker runs kernels with (``_rt`` in lowered code):
local ops from ``KernelOps`` plus the communicating ``pld`` ops.

Every remote access goes through the transport endpoint; this module keeps
only the bounds and type checks (on the rank's own copy, whose layout every
member shares) and what a blocked wait publishes for the monitor."""
from __future__ import annotations

import os
import time
from dataclasses import replace
from math import prod

import numpy as np

from ...errors import RuntimeFault
from ...transport.base import WaitHooks
from ...transport.memops import check_atomic
from .. import control as C
from . import iterations
from .async_puts import AsyncTransfers
from .collective_calls import RankCollectives
from .tile.site_ops import POOL_MIN
from .tile.kernel_ops import KernelOps, arr, fault, index_shape, region_index, tile_valid
from .taskops import TaskOps
from .touched import transfer
from ..values import Tile, WindowView, make_tile


_LOOP_FIELDS = ("loop0", "loop1", "loop2", "loop3")


class RankAborted(BaseException):
    """Raised inside a rank when the controller aborts the call."""


class _Blocked(WaitHooks):
    """A blocked wait's link to the control plane: publish the record, give up
    on abort or time-out, mark the rank running again."""

    __slots__ = ("rc", "record", "start")

    def __init__(self, rc, record: C.WaitRecord):
        self.rc = rc
        self.record = record

    def blocked(self):
        self.start = time.monotonic()
        self.rc.control.publish_wait(self.rc.device, self.record)

    def check(self, value):
        C.check_wait(self.rc, self.start, self.record, value, RankAborted)

    def unblocked(self):
        self.rc.control.set_state(self.rc.device, C.RUNNING)


def _sendable(dtype, src, atomic):
    """``src`` as the window's dtype, with the checks a local store applies,
    before anything leaves this rank."""
    if atomic:
        check_atomic(dtype)
        return src
    return src.astype(dtype, casting="same_kind")


class RankContext(KernelOps, RankCollectives, TaskOps, AsyncTransfers):
    def __init__(self, device: int, world: int, control, transport, config):
        self.device = device
        self.image = None                # the program being run (set per dispatch)
        self.world = world
        self.control = control
        self.transport = transport
        self.configure(config.rank_knobs())
        self.func_id = 0
        self.sites: dict = {}            # call site -> tile.site_ops.Site
        self.accums: dict = {}           # call site -> site_ops.Accumulation, per dispatch
        # call site -> the views it resolved for this dispatch's tensors
        # (tile/site_ops.py): a view load's tile, a view remote load's tile
        # per peer, a copy's two regions.  Task threads' copies of this
        # context share these dicts; their entries are immutable tuples
        # (the per-peer dict aside, whose items are whole), so a thread
        # only ever sees an entry complete.
        self.held_loads: dict = {}
        self.held_remote: dict = {}
        self.held_copies: dict = {}
        if transport is not None:
            # bound once: the notify / satisfied-wait path is one dict lookup
            # plus one of these calls
            self._signal = transport.signal
            self._try_wait = transport.try_wait

    _aborted_exc = RankAborted

    def configure(self, knobs) -> None:
        """Run with ``knobs`` (``config.RankKnobs``) from now on.  Called
        between runs only: a scheduler made for other cores is shut down (its
        threads are idle), and the next task scope makes one for these."""
        old = self.__dict__.get("knobs")
        self.knobs = knobs
        self.spin = knobs.spin_iters
        # with more ranks than cores a spinning waiter steals the core its
        # releaser needs: yield almost at once instead
        if self.world > (os.cpu_count() or 1):
            self.spin = min(self.spin, 50)
        sched = self.__dict__.get("_scheduler")
        if sched is not None and old is not None and old != knobs:
            sched.shutdown()
            del self._scheduler

    def _hooks(self, record):
        # a task's wait is one of its scheduler's agents; the rank's own
        # thread publishes into the rank's record
        if self.agent is None:
            return _Blocked(self, record)
        return self.sched.hooks(self.agent, record, self)

    # -------------------------------------------------------------- contexts
    def get_comm_ctx(self, dist_tensor):
        return dist_tensor

    def rank(self, ctx):
        return ctx.rank

    def nranks(self, ctx):
        return ctx.nranks

    def _peer(self, view: WindowView, peer, op: str) -> int:
        p = int(peer)
        if not 0 <= p < view.nranks:
            raise RuntimeFault(f"{op}: peer {p} is out of range; the comm domain of window "
                               f"'{view.buffer.name}' has {view.nranks} rank(s)", code="TC501",
                               hint="peer is a rank index within the window's comm domain")
        return p

    # -------------------------------------------------------------- signals
    # A kernel touches few distinct cells, usually in a loop: each view caches
    # the transport's cell handle per (peer, offsets) after the first
    # bounds-checked lookup.
    def notify(self, target, peer, offsets, value, op):
        """Returns the value the cell took."""
        cell = target.cells.get((peer, offsets))
        if cell is None:
            cell = self._cell(target, peer, offsets, "pld.system.notify")
        return self._signal(cell, op, value)

    def wait(self, signal, offsets, expected, cmp, _loc=-1):
        cell = signal.cells.get((signal.rank, offsets))
        if cell is None:
            cell = self._cell(signal, signal.rank, offsets, "pld.system.wait")
        # spin, then yield, without publishing anything: the common case
        if self._try_wait(cell, cmp, expected, self.spin):
            return
        flat = int(np.ravel_multi_index(tuple(int(o) for o in offsets), signal.shape))
        record = C.WaitRecord(signal.buffer.id, flat, int(cmp), int(expected), _loc, -1,
                              self.func_id, signal.shape[-1], len(signal.shape))
        self._block_on(cell, int(cmp), int(expected), record)

    def _block_on(self, cell, cmp: int, expected: int, record: C.WaitRecord) -> None:
        """The blocking part of a wait, published for the monitor as ``record``
        with the iteration of the loops the wait is in (read off the stack
        here, past the wait's spin: a wait that does not block never looks)."""
        loops = iterations.current(self.image)
        if loops:
            record = replace(record, **dict(zip(_LOOP_FIELDS, iterations.pack(loops))))
        self.transport.wait(cell, cmp, expected, self._hooks(record))

    def _cell(self, view: WindowView, peer, offsets, op):
        p = self._peer(view, peer, op)
        shape = view.shape
        if len(offsets) != len(shape):
            raise fault(f"{op} cell: {len(offsets)} offsets for a rank-{len(shape)} window",
                        code="TC503")
        off = 0
        for i, (o, d, s) in enumerate(zip(offsets, shape, view.strides)):
            if not 0 <= o < d:
                raise fault(f"{op} cell: index {o} is out of bounds for dimension {i} of size "
                            f"{d}")
            off += int(o) * s
        cell = self.transport.cell(view.key, p, off)
        view.cells[(peer, offsets)] = cell
        return cell

    def _member(self, view: WindowView, peer, op: str):
        """The transport's handle of member ``peer``'s copy (peer bounds-checked;
        cached on the view)."""
        p = peer if type(peer) is int else int(peer)
        if not 0 <= p < view.nranks:
            self._peer(view, p, op)                      # raises with the details
        h = view.peers[p]
        if h is None:
            h = view.peers[p] = self.transport.window(view.key, p)
        return h

    def dispatch_done(self, seq: int) -> None:
        """Publish that this rank completed its dispatch number ``seq`` (for
        the ranks whose dispatches wait on it)."""
        # they hold the dispatch's arguments
        for held in (self.accums, self.held_loads, self.held_remote, self.held_copies):
            if held:
                held.clear()
        self.control.publish_done(self.device, seq)

    def wait_dispatch(self, rank: int, seq: int):
        """Wait until ``rank`` has completed its dispatch number ``seq``."""
        ctl = self.control
        if not ctl.wait_done(rank, seq, self.spin, None):
            record = C.WaitRecord(C.DEP_WAIT, seq, 1, seq, -1, rank, self.func_id, 1, 1)
            ctl.wait_done(rank, seq, 0, self._hooks(record))

    # -------------------------------------------------------------- tile RMA
    def remote_load(self, target, peer, offsets, shape, valid_shape=None):
        h = self._member(target, peer, "pld.tile.remote_load")
        local = target.local
        if valid_shape is None:
            idx = region_index(local, offsets, shape, "pld.tile.remote_load region")
            t = np.empty(index_shape(idx), dtype=local.dtype)
            self.transport.get(h, idx, t)
            return make_tile(t)
        valid = [max(0, min(int(v), int(s), d - int(o)))
                 for v, s, o, d in zip(valid_shape, shape, offsets, local.shape)]
        t = np.zeros(tuple(shape), dtype=local.dtype)
        idx = region_index(local, offsets, valid, "pld.tile.remote_load region")
        dst = t[tuple(slice(0, v) for v in valid)]
        if dst.shape != index_shape(idx):
            dst = dst.reshape(index_shape(idx))
        self.transport.get(h, idx, dst)
        return make_tile(t, valid)

    def remote_load_at(self, site, view, target, peer, offsets, shape, valid_shape=None):
        """``remote_load`` at a call site (``tile/site_ops.py``): the region's
        check once per site, the peer's memory itself where the lowering proved
        a view safe and the transport maps it, else a copy into a tile the
        site reuses once nobody holds it."""
        if view:
            # the view this site made of the same window's region in peer's copy
            h = self.held_remote.get(site)
            if h is not None and h[0] is target and h[1] == offsets and h[2] == shape and \
                    valid_shape is None and type(peer) is int:
                t = h[3].get(peer)
                if t is not None:
                    return t
        if valid_shape is not None:
            return self.remote_load(target, peer, offsets, shape, valid_shape)
        if type(peer) is not int or not 0 <= peer < target.nranks:
            peer = self._peer(target, peer, "pld.tile.remote_load")
        local = target.local
        s = self.sites.get(site) or self._new_site(site)
        idx = s.region(local, offsets, shape, "pld.tile.remote_load region")
        if view:
            mapped = target.views[peer]
            if mapped is None:           # first use: False where peers are not mapped
                v = self.transport.peer_view(target.key, peer)
                mapped = target.views[peer] = False if v is None else v
            if mapped is not False:
                t = mapped[idx].view(Tile)
                h = self.held_remote.get(site)
                if h is None or h[0] is not target or h[1] != offsets or h[2] != shape:
                    h = self.held_remote[site] = (target, offsets, shape, {})
                h[3][peer] = t           # peer: an int in range by now
                return t
        shape = index_shape(idx)
        t = s.fresh(shape, local.dtype) if local.itemsize * prod(shape) >= POOL_MIN else \
            np.empty(shape, local.dtype).view(Tile)
        self.transport.get(self._member(target, peer, "pld.tile.remote_load"), idx, t)
        return t

    def remote_store(self, src, target, peer, offsets, atomic=0):
        h = self._member(target, peer, "remote_store")
        data = tile_valid(src) if hasattr(src, "valid") else np.asarray(arr(src))
        if data.ndim > 2:
            data = data.reshape(data.shape[-2:])
        idx = region_index(target.local, offsets, data.shape, "remote_store region")
        self._put(target, h, idx, data, int(atomic))

    def _put(self, view, h, idx, src, atomic):
        if atomic or src.dtype != view.local.dtype:
            src = _sendable(view.local.dtype, src, atomic)
        self.transport.put(h, idx, src, atomic)

    # -------------------------------------------------------------- put / get
    def _transfer(self, op, window, peer, local, dst_offsets, src_offsets, shape, pushing):
        """(the peer copy's transport handle, index into it, the local array) of
        a put (pushing) or get (``touched.transfer``)."""
        h = self._member(window, peer, op)
        ridx, region = transfer(op, window, local, dst_offsets, src_offsets, shape, pushing)
        return h, ridx, region

    # chunk_rows/chunk_cols/pipeline size a hardware staging tile; on the CPU
    # one copy of the whole region moves the same bytes, faster
    def put(self, dst, peer, src, dst_offsets=None, src_offsets=None, shape=None, atomic=0,
            chunk_rows=0, chunk_cols=0, pipeline=False):
        h, idx, s = self._transfer("pld.tensor.put", dst, peer, arr(src), dst_offsets,
                                   src_offsets, shape, True)
        if atomic or s.dtype != dst.local.dtype:
            s = _sendable(dst.local.dtype, s, int(atomic))
        self.transport.put(h, idx, s, int(atomic))

    def get(self, dst, peer, src, dst_offsets=None, src_offsets=None, shape=None, chunk_rows=0,
            chunk_cols=0, pipeline=False):
        h, idx, d = self._transfer("pld.tensor.get", src, peer, arr(dst), dst_offsets,
                                   src_offsets, shape, False)
        self.transport.get(h, idx, d)

    # the tile forms name the staging tiles a chip moves the data through; the
    # CPU copies directly and leaves them as they were
    def tile_put(self, dst, peer, src, stage, stage2=None, dst_offsets=None, src_offsets=None,
                 shape=None, atomic=0):
        self.put(dst, peer, src, dst_offsets, src_offsets, shape, atomic)

    def tile_get(self, dst, peer, src, stage, stage2=None, dst_offsets=None, src_offsets=None,
                 shape=None):
        self.get(dst, peer, src, dst_offsets, src_offsets, shape)
