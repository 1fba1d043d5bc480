"""The host runtime (``_rt`` of a lowered HOST orchestrator).

It runs in the caller's process: it allocates window segments and host
intermediates, turns host values into descriptors, and sends each dispatch to
the worker of its rank.  Dispatches are asynchronous; per rank they execute in
host program order.  A dispatch that reads a host tensor another rank writes
(or writes one another rank reads) carries an explicit dependency on that
rank's dispatch, since windows are the only place ranks may race by design.
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import RuntimeFault
from ...ir.types import INOUT, OUT
from ..rank.collective_calls import HostCollectives
from ..rank.tile.kernel_ops import ValueOps
from ..messages import Dispatch
from .. import poison
from .subworkers import invoke, wait_dispatches
from ..values import HostRef, WindowBuffer, WindowRef, address


class HostTensor:
    """A host tensor (or a view of one) living in a shared segment."""

    __slots__ = ("segment", "array", "base_addr")

    def __init__(self, segment, array: np.ndarray):
        self.segment = segment
        self.array = array
        self.base_addr = segment.addr

    def ref(self, base: int = 0) -> HostRef:
        a = self.array
        return HostRef(self.segment.name, address(a) - self.base_addr, a.shape, a.strides,
                       a.dtype, base)

    def byte_range(self):
        a = self.array
        lo = address(a) - self.base_addr
        if a.size == 0:
            return lo, lo
        span = sum((n - 1) * s for n, s in zip(a.shape, a.strides) if s > 0)
        neg = sum((n - 1) * s for n, s in zip(a.shape, a.strides) if s < 0)
        return lo + neg, lo + span + a.itemsize


class PlacedTensor(HostTensor):
    """A prepared worker's device tensor (or a view of one): resident on rank
    ``worker_id`` only, so only a dispatch to that rank may take it."""

    __slots__ = ("worker_id",)

    def __init__(self, segment, array: np.ndarray, worker_id: int):
        super().__init__(segment, array)
        self.worker_id = worker_id


class StackedShards:
    """A StackedDeviceTensor in a HOST orchestrator: ``x[i]`` is shard i, placed
    on its own worker; the stack as a whole is no single rank's tensor."""

    __slots__ = ("shards",)

    def __init__(self, shards):
        self.shards = shards


class HostRuntime(ValueOps, HostCollectives):
    def __init__(self, call):
        self.call = call
        self.world = call.world
        self._rr = 0
        self._seq = list(call.ranks.seq)    # dispatch numbers continue across runs
        self._access: dict = {}      # segment name -> list of (rank, seq, lo, hi, is_write)
        # a backend whose ranks reach host tensors over RMA (MPI across
        # nodes): segments are exposed there as a dispatch first names them
        self._hosts = call.ranks.backend.host_window

    @property
    def seq(self) -> list:
        """Each rank's last dispatch number so far."""
        return list(self._seq)

    # ---------------------------------------------------------------- values
    def world_size(self):
        return self.world

    def alloc_window_buffer(self, buf_id, size, dtype):
        rec = self.call.executable.prog.buffers[buf_id]
        if isinstance(size, tuple):
            n = 1
            for d in size:
                n *= int(d)
            nbytes = n * dtype.get_byte()
        else:
            nbytes = int(size)
        if nbytes <= 0:
            raise RuntimeFault(f"window buffer '{rec.name}' size must be positive; got {nbytes}",
                               code="TC503")
        devices = tuple(sorted(rec.devices))
        poisoned = dtype if self.call.checks.poison and \
            poison.data_window(rec, dtype) else None
        names = self.call.allocate_window(nbytes, devices, rec.name, poisoned)
        buf = WindowBuffer(buf_id, rec.name, nbytes, devices, names)
        self.call.buffers[buf_id] = buf
        return buf

    def window(self, buf, shape, dtype):
        shape = tuple(int(d) for d in shape)
        n = math.prod(shape) * dtype.get_byte()
        if n > buf.nbytes:
            raise RuntimeFault(f"pld.window view of {n} bytes does not fit in window buffer "
                               f"'{buf.name}' of {buf.nbytes} bytes", code="TC502")
        return WindowRef(buf, shape, dtype.np_dtype)

    def get_comm_ctx(self, dist_tensor):
        return dist_tensor

    def create_tensor(self, shape, dtype, layout=None, manual_dep=False, init_value=None):
        shape = tuple(int(d) for d in shape)
        nbytes = max(1, int(np.prod(shape)) * dtype.get_byte())
        seg = self.call.new_segment(nbytes)
        a = seg.ndarray(dtype.np_dtype, shape)
        if init_value is not None:
            a[...] = init_value
        return HostTensor(seg, a)

    def index(self, base, items):
        if isinstance(base, StackedShards):
            first, rest = (items[0], items[1:]) if isinstance(items, tuple) else (items, ())
            i = int(first)
            if not 0 <= i < len(base.shards):
                raise RuntimeFault(f"StackedDeviceTensor index {i} out of range for "
                                   f"{len(base.shards)} shard(s)", code="TC418")
            shard = base.shards[i]
            return self.index(shard, rest) if rest else shard
        if isinstance(base, HostTensor):
            view = ValueOps.index(self, base.array, items)
            if isinstance(view, np.ndarray):
                if isinstance(base, PlacedTensor):
                    return PlacedTensor(base.segment, view, base.worker_id)
                return HostTensor(base.segment, view)
            raise RuntimeFault("a HOST orchestrator cannot read tensor elements: dispatches run "
                               "asynchronously on the ranks", code="TC503")
        raise RuntimeFault(f"cannot index {type(base).__name__} in a HOST orchestrator",
                           code="TC503")

    def assign(self, base, items, value):
        """``ys[r] = chip(..., ys[r], ...)``: the dispatch already writes that view in
        place; copying other data would need values the host never sees."""
        target = self.index(base, items)
        if isinstance(value, HostTensor) and value.segment is target.segment and \
                value.array.shape == target.array.shape and \
                value.byte_range() == target.byte_range():
            return
        raise RuntimeFault("a HOST orchestrator can only assign a dispatch's result back to "
                           "the tensor view that dispatch was given", code="TC503")

    # ---------------------------------------------------------------- dispatch
    def dispatch(self, fname, device, args, loc, ret):
        world = self.world
        if device is None:                      # comm-less: round-robin placement
            device, self._rr = self._rr % world, self._rr + 1
        device = int(device)
        if not 0 <= device < world:
            raise RuntimeFault(f"device={device} is out of range for {world} rank(s)",
                               code="TC501")
        self._seq[device] += 1
        seq = self._seq[device]
        dirs = self.call.executable.directions[fname]
        descs, deps = [], {}
        for a, d in zip(args, dirs):
            if isinstance(a, HostTensor):
                if isinstance(a, PlacedTensor) and a.worker_id != device:
                    raise RuntimeFault(f"a device tensor resident on worker {a.worker_id} was "
                                       f"dispatched to device {device}", code="TC418")
                descs.append(a.ref() if self._hosts is None else
                             a.ref(self._hosts.expose(a.segment)))
                self._track(a, device, seq, d, deps)
            elif isinstance(a, WindowRef):
                descs.append(a)
            elif isinstance(a, StackedShards):
                raise RuntimeFault("a StackedDeviceTensor must be indexed by shard (x[r]) before "
                                   "it is passed to a dispatch", code="TC418")
            elif isinstance(a, (int, float, bool, np.integer, np.floating)):
                descs.append(a.item() if isinstance(a, np.generic) else a)
            else:
                raise RuntimeFault(f"cannot pass {type(a).__name__} to a chip dispatch",
                                   code="TC503")
        self.call.send(device, Dispatch(self.call.executable.image.key, fname, seq, tuple(descs),
                                        tuple(deps.items()), loc))
        self.call.dispatched.setdefault(device, set()).add(fname)
        if isinstance(ret, tuple):
            return tuple(args[i] if i is not None else None for i in ret)
        return args[ret] if isinstance(ret, int) else None

    # ---------------------------------------------------------------- SubWorkers
    def sub_worker(self, fname, args, loc):
        """Run a SubWorker in this (the controller's) process once every
        dispatch sent so far that touches one of its tensors completed."""
        py_name, body, abstract = self.call.executable.sub_workers[fname]
        values, deps = [], {}
        for a in args:
            if isinstance(a, HostTensor):
                lo, hi = a.byte_range()
                for (r, s, l2, h2, _) in self._access.get(a.segment.name, ()):
                    if l2 < hi and lo < h2 and deps.get(r, 0) < s:
                        deps[r] = s          # read after write, and write after read
                values.append(a.array)
            elif isinstance(a, (int, float, bool, np.integer, np.floating)):
                values.append(a)
            else:
                raise RuntimeFault(f"SubWorker {py_name} takes host tensors and scalars; got "
                                   f"{type(a).__name__}", code="TC503")
        self.call.flush()                    # what it waits for must have been sent
        wait_dispatches(self.call, deps)
        invoke(self.call, py_name, body, abstract, values)
        return None

    def _track(self, t: HostTensor, device, seq, direction, deps):
        lo, hi = t.byte_range()
        writes = direction in (OUT, INOUT)
        hist = self._access.setdefault(t.segment.name, [])
        for (r, s, l2, h2, w2) in hist:
            if r == device or h2 <= lo or hi <= l2:
                continue
            if w2 or writes:                    # RAW, WAR or WAW across ranks
                if deps.get(r, 0) < s:
                    deps[r] = s
        hist.append((device, seq, lo, hi, writes))
