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

    @staticmethod
    def _cell_offset(view: WindowView, offsets, what):
        """Byte offset of one signal cell, bounds-checked (the hot path of
        notify/wait: plain integer arithmetic, no numpy)."""
        shape = view.shape
        if len(offsets) != len(shape):
            raise fault(f"{what}: {len(offsets)} offsets for a rank-{len(shape)} window",
                        code="TC503")
        off = 0
        for i, (o, d, s) in enumerate(zip(offsets, shape, view.strides)):
            if not 0 <= o < d:
                raise fault(f"{what}: index {o} is out of bounds for dimension {i} of size {d}")
            off += o * s
        return off

    # -------------------------------------------------------------- signals
    def notify(self, target, peer, offsets, value, op):
        p = peer if type(peer) is int else int(peer)
        if not 0 <= p < target.nranks:
            self._peer(target, p, "pld.system.notify")
        base = target.addrs[p] or self._member_addr(target, p)
        addr = base + self._cell_offset(target, offsets, "pld.system.notify cell")
        # seq_cst store/add; the receiver's sleepers count decides whether a
        # futex wake (a syscall) is needed at all
        native.notify_i32(addr, op, value, self._sleepers_of[target.buffer.devices[p]])

    def _member_addr(self, view, p):
        view.addrs[p] = address(self.transport.peer_array(view, p))
        return view.addrs[p]

    def wait(self, signal, offsets, expected, cmp, _loc=-1):
        addr = signal.addrs[signal.rank] + self._cell_offset(signal, offsets,
                                                             "pld.system.wait cell")
        if native.wait_i32(addr, cmp, expected, self._sleepers, 0, 0)[0]:
            return                                   # already satisfied: no bookkeeping
        flat = int(np.ravel_multi_index(tuple(int(o) for o in offsets), signal.shape))
        self._block_on(addr, int(cmp), int(expected), signal.buffer.id, flat, _loc, -1,
                       signal.shape[-1], len(signal.shape))

    def wait_dispatch(self, rank: int, seq: int):
        """Wait until ``rank`` has completed its dispatch number ``seq``."""
        self._block_on(self.control.done_seq_addr(rank), 1, seq, C.DEP_WAIT, seq, -1, rank, 1, 1)

    def _block_on(self, addr, cmp, expected, buf_id, index, loc, peer, cols, ndim):
        # fast path: spin/yield briefly without publishing anything
        ok, _ = native.wait_i32(addr, cmp, expected, self._sleepers, 200_000, self.spin)
        if ok:
            return
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
        p = self._peer(target, peer, "pld.tile.remote_load")
        src = self.transport.peer_array(target, p)
        if valid_shape is None:
            return make_tile(region(src, offsets, shape, "pld.tile.remote_load region").copy())
        valid = [max(0, min(int(v), int(s), d - int(o)))
                 for v, s, o, d in zip(valid_shape, shape, offsets, src.shape)]
        t = np.zeros(tuple(shape), dtype=src.dtype)
        t[tuple(slice(0, v) for v in valid)] = region(src, offsets, valid,
                                                      "pld.tile.remote_load region")
        return make_tile(t, valid)

    def remote_store(self, src, target, peer, offsets, atomic=0):
        p = self._peer(target, peer, "remote_store")
        data = tile_valid(src) if hasattr(src, "valid") else np.asarray(arr(src))
        if data.ndim > 2:
            data = data.reshape(data.shape[-2:])
        dst = region(self.transport.peer_array(target, p), offsets, data.shape,
                     "remote_store region")
        write_region(dst, data, int(atomic))

    # -------------------------------------------------------------- put / get
    def _transfer(self, op, window, peer, local, dst_offsets, src_offsets, shape, pushing):
        """(dst, src) arrays of a put (pushing) or get; whole tensors or matching
        sub-regions, all bounds-checked."""
        p = self._peer(window, peer, op)
        remote = self.transport.peer_array(window, p)
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
