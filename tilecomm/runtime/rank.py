"""The per-rank context a worker runs kernels with (``_rt`` in lowered code):
local ops from ``KernelOps`` plus the communicating ``pld`` ops."""
from __future__ import annotations

import os
import time

import numpy as np

from .. import _native_core as native
from ..errors import RuntimeFault
from . import control as C
from .kernel_ops import KernelOps, arr, fault, region, tile_valid, write_region
from .values import WindowView, address, make_tile

_WAIT_SLICE_NS = 20_000_000      # a blocked wait re-checks abort/timeout this often
_notify_i32 = native.notify_i32  # module globals: one lookup less on the hottest path
_wait_i32 = native.wait_i32


class RankAborted(BaseException):
    """Raised inside a rank when the controller aborts the call."""


class RankContext(KernelOps):
    def __init__(self, device: int, world: int, control, transport, config):
        self.device = device
        self.world = world
        self.control = control
        self.transport = transport
        self.config = config
        self.spin = config.spin_iters
        self._sleepers = control.sleepers_addr(device)
        self._sleepers_of = [control.sleepers_addr(d) for d in range(world)]
        # with more ranks than cores a spinning waiter steals the core its
        # releaser needs: yield almost at once instead
        if world > (os.cpu_count() or 1):
            self.spin = min(self.spin, 50)
        self._gen = 0
        self.func_id = 0

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
    # (address, receiver's sleepers count) per (peer, offsets) after the first
    # bounds-checked lookup, so a notify or an already-satisfied wait costs one
    # dict lookup and one native call.
    def notify(self, target, peer, offsets, value, op):
        cell = target.cells.get((peer, offsets))
        if cell is None:
            cell = self._cell(target, peer, offsets, "pld.system.notify")
        addr, sleepers = cell
        # seq_cst store/add; the sleepers count decides whether a futex wake
        # (a syscall) is needed at all
        _notify_i32(addr, op, value, sleepers)

    def wait(self, signal, offsets, expected, cmp, _loc=-1):
        cell = signal.cells.get((signal.rank, offsets))
        if cell is None:
            cell = self._cell(signal, signal.rank, offsets, "pld.system.wait")
        # spin, then yield, without publishing anything: the common case
        if _wait_i32(cell[0], cmp, expected, self._sleepers, 200_000, self.spin)[0]:
            return
        flat = int(np.ravel_multi_index(tuple(int(o) for o in offsets), signal.shape))
        self._block_on(cell[0], int(cmp), int(expected), signal.buffer.id, flat, _loc, -1,
                       signal.shape[-1], len(signal.shape))

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
        base = view.addrs[p] or self._member_addr(view, p)
        cell = (base + off, self._sleepers_of[view.buffer.devices[p]])
        view.cells[(peer, offsets)] = cell
        return cell

    def _member_addr(self, view, p):
        view.addrs[p] = address(self._remote(view, p, "remote access"))
        return view.addrs[p]

    def _remote(self, view: WindowView, peer, op: str) -> np.ndarray:
        """Member ``peer``'s copy of ``view`` (bounds-checked peer; cached on the view)."""
        p = peer if type(peer) is int else int(peer)
        if not 0 <= p < view.nranks:
            self._peer(view, p, op)                      # raises with the details
        a = view.arrays[p]
        if a is None:
            a = view.arrays[p] = self.transport.peer_array(view, p)
        return a

    def wait_dispatch(self, rank: int, seq: int):
        """Wait until ``rank`` has completed its dispatch number ``seq``."""
        addr = self.control.done_seq_addr(rank)
        if not native.wait_i32(addr, 1, seq, self._sleepers, 200_000, self.spin)[0]:
            self._block_on(addr, 1, seq, C.DEP_WAIT, seq, -1, rank, 1, 1)

    def _block_on(self, addr, cmp, expected, buf_id, index, loc, peer, cols, ndim):
        """Slow path of a wait: publish what this rank waits for (the deadlock
        detector reads it), then sleep in slices, re-checking abort/timeout."""
        ctl, d = self.control, self.device
        for slot, v in ((C.W_BUF, buf_id), (C.W_INDEX, index), (C.W_CMP, cmp),
                        (C.W_EXPECTED, expected), (C.W_LOC, loc), (C.W_PEER, peer),
                        (C.W_FUNC, self.func_id), (C.W_COLS, cols), (C.W_NDIM, ndim)):
            ctl.set(d, slot, v)
        self._gen += 1
        ctl.set(d, C.GEN, self._gen)
        ctl.set(d, C.STATE, C.BLOCKED)        # published before the re-check below
        limit = self.config.wait_timeout_s
        start = time.monotonic()
        try:
            while True:
                ok, value = native.wait_i32(addr, cmp, expected, self._sleepers, _WAIT_SLICE_NS, 0)
                if ok:
                    return
                if ctl.aborted():
                    raise RankAborted()
                if limit and time.monotonic() - start > limit:
                    raise RuntimeFault(
                        f"wait timed out after {limit:g} s: cell value {value}, expected "
                        f"{'==' if cmp == 0 else '>='} {expected}", code="TC504",
                        hint="RunConfig.wait_timeout_s bounds a single wait")
        finally:
            ctl.set(d, C.STATE, C.RUNNING)

    # -------------------------------------------------------------- tile RMA
    def remote_load(self, target, peer, offsets, shape, valid_shape=None):
        src = self._remote(target, peer, "pld.tile.remote_load")
        if valid_shape is None:
            return make_tile(region(src, offsets, shape, "pld.tile.remote_load region").copy())
        valid = [max(0, min(int(v), int(s), d - int(o)))
                 for v, s, o, d in zip(valid_shape, shape, offsets, src.shape)]
        t = np.zeros(tuple(shape), dtype=src.dtype)
        t[tuple(slice(0, v) for v in valid)] = region(src, offsets, valid,
                                                      "pld.tile.remote_load region")
        return make_tile(t, valid)

    def remote_store(self, src, target, peer, offsets, atomic=0):
        remote = self._remote(target, peer, "remote_store")
        data = tile_valid(src) if hasattr(src, "valid") else np.asarray(arr(src))
        if data.ndim > 2:
            data = data.reshape(data.shape[-2:])
        dst = region(remote, offsets, data.shape, "remote_store region")
        write_region(dst, data, int(atomic))

    # -------------------------------------------------------------- put / get
    def _transfer(self, op, window, peer, local, dst_offsets, src_offsets, shape, pushing):
        """(dst, src) arrays of a put (pushing) or get; whole tensors or matching
        sub-regions, all bounds-checked."""
        remote = self._remote(window, peer, op)
        dst, src = (remote, local) if pushing else (local, remote)
        if shape is None:
            if dst.shape != src.shape:
                raise fault(f"{op}: src shape {src.shape} differs from dst shape {dst.shape}",
                            code="TC503")
            return dst, src
        return (region(dst, dst_offsets, shape, f"{op} dst region"),
                region(src, src_offsets, shape, f"{op} src region"))

    # chunk_rows/chunk_cols/pipeline size a hardware staging tile; on the CPU
    # one copy of the whole region moves the same bytes, faster
    def put(self, dst, peer, src, dst_offsets=None, src_offsets=None, shape=None, atomic=0,
            chunk_rows=0, chunk_cols=0, pipeline=False):
        d, s = self._transfer("pld.tensor.put", dst, peer, arr(src), dst_offsets, src_offsets,
                              shape, True)
        write_region(d, s, int(atomic))

    def get(self, dst, peer, src, dst_offsets=None, src_offsets=None, shape=None, chunk_rows=0,
            chunk_cols=0, pipeline=False):
        d, s = self._transfer("pld.tensor.get", src, peer, arr(dst), dst_offsets, src_offsets,
                              shape, False)
        np.copyto(d, s)
