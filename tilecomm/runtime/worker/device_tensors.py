"""Worker-resident memory of a prepared worker: device tensors and raw blocks.

``rt.alloc_tensor`` / ``rt.malloc`` give memory that lives as long as the
worker (across calls, and across a restart of its ranks after a failed call),
placed on one worker (rank) ``worker_id``.  Each block is a shared segment
owned by the worker: the ranks map it when a dispatch uses it, as they map
host tensors, so passing a device tensor to a call moves no data.  A block has
an opaque *device address* in a per-worker address space, so the raw-pointer
members of the reference (``copy_to`` / ``copy_from`` / ``free``) have a
meaning here: a device address is checked against the block it falls in (its
worker, its bounds) before any byte moves; the host side of those copies is a
raw host address (``arr.ctypes.data`` / ``tensor.data_ptr()``), as upstream.

A ``DeviceTensor`` may only be dispatched to the rank it was placed on, and a
``StackedDeviceTensor``'s shard ``i`` only to ``worker_ids[i]`` (the host
orchestrator checks each dispatch: upstream the data would simply not be on
that device).
"""
from __future__ import annotations

import ctypes
import itertools

import numpy as np

from ... import dtypes as D
from ...errors import ConfigError
from ..executable import to_numpy
from ..controller.arguments import Resident
from ..controller.orchestrator import PlacedTensor, StackedShards

# device addresses: block k of a worker starts at (k + 1) << ADDRESS_BITS, so an
# address names its block by a shift and no two blocks' ranges meet
ADDRESS_BITS = 40
_TENSOR_IDS = itertools.count(1)


def _err(message: str, hint: str | None = None) -> ConfigError:
    return ConfigError(message, code="TC418", hint=hint)


class DeviceBlock:
    """One resident allocation: a segment on worker ``worker_id``."""

    __slots__ = ("address", "nbytes", "worker_id", "segment", "freed")

    def __init__(self, address, nbytes, worker_id, segment):
        self.address = address
        self.nbytes = nbytes
        self.worker_id = worker_id
        self.segment = segment
        self.freed = False


class DeviceTensor(Resident):
    """A tensor resident in worker ``worker_id`` of one DistributedWorker."""

    __slots__ = ("shape", "dtype", "worker_id", "_block", "_owner", "id")

    def __init__(self, shape, dtype, worker_id, block, owner):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.worker_id = worker_id
        self._block = block
        self._owner = owner
        self.id = next(_TENSOR_IDS)

    @property
    def nbytes(self) -> int:
        return self._block.nbytes

    @property
    def data_ptr(self) -> int:
        """The tensor's device address (for ``copy_to`` / ``copy_from``)."""
        return self._block.address

    @property
    def freed(self) -> bool:
        return self._block.freed

    def array(self) -> np.ndarray:
        """The controller's view of the resident bytes (no copy)."""
        return self._block.segment.ndarray(self.dtype, self.shape)

    def host_value(self) -> PlacedTensor:
        return PlacedTensor(self._block.segment, self.array(), self.worker_id)

    def __repr__(self):
        state = " freed" if self.freed else ""
        return (f"<DeviceTensor {self.dtype}{list(self.shape)} on worker {self.worker_id}"
                f"{state}>")


class StackedDeviceTensor(Resident):
    """``host[i]`` resident on worker ``worker_ids[i]``; in a program ``x[i]``
    is that shard, to be dispatched with ``device=worker_ids[i]``."""

    __slots__ = ("shape", "dtype", "worker_ids", "shards", "_owner")

    def __init__(self, shape, dtype, worker_ids, shards, owner):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.worker_ids = tuple(worker_ids)
        self.shards = list(shards)
        self._owner = owner

    @property
    def freed(self) -> bool:
        return any(s.freed for s in self.shards)

    def host_value(self) -> StackedShards:
        return StackedShards([s.host_value() for s in self.shards])

    def __repr__(self):
        return (f"<StackedDeviceTensor {self.dtype}{list(self.shape)} on workers "
                f"{list(self.worker_ids)}>")


class ResidentMemory:
    """The blocks of one worker, by device address."""

    def __init__(self, new_segment, world: int, owner):
        self._new_segment = new_segment
        self.world = world
        self.owner = owner
        self._blocks: dict[int, DeviceBlock] = {}
        self._next = 1

    # ------------------------------------------------------------ raw blocks
    def _worker(self, worker_id) -> int:
        if isinstance(worker_id, bool) or not isinstance(worker_id, (int, np.integer)) \
                or not 0 <= int(worker_id) < self.world:
            raise _err(f"worker_id must be an int in [0, {self.world}), got {worker_id!r}")
        return int(worker_id)

    @staticmethod
    def _size(nbytes) -> int:
        if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)) or nbytes <= 0:
            raise ConfigError(f"nbytes must be a positive int, got {nbytes!r}", code="TC419")
        return int(nbytes)

    def malloc(self, nbytes, worker_id=0) -> DeviceBlock:
        nbytes, worker = self._size(nbytes), self._worker(worker_id)
        seg = self._new_segment(nbytes)
        block = DeviceBlock(self._next << ADDRESS_BITS, nbytes, worker, seg)
        self._next += 1
        self._blocks[block.address] = block
        return block

    def find(self, address, nbytes, worker_id, what: str) -> tuple:
        """(block, offset) of ``nbytes`` at device ``address`` on ``worker_id``."""
        worker = self._worker(worker_id)
        if isinstance(address, bool) or not isinstance(address, (int, np.integer)):
            raise ConfigError(f"{what}: a device address is an int from malloc() or "
                              f"DeviceTensor.data_ptr, got {type(address).__name__}", code="TC419")
        address = int(address)
        block = self._blocks.get((address >> ADDRESS_BITS) << ADDRESS_BITS)
        if block is None or block.freed:
            raise ConfigError(f"{what}: device address {address:#x} is not in a live allocation "
                              f"of this worker", code="TC419")
        if block.worker_id != worker:
            raise ConfigError(f"{what}: device address {address:#x} belongs to worker "
                              f"{block.worker_id}, not worker {worker}", code="TC419")
        offset = address - block.address
        if offset + nbytes > block.nbytes:
            raise ConfigError(f"{what}: {nbytes} bytes at offset {offset} run past the end of "
                              f"the {block.nbytes}-byte allocation", code="TC419")
        return block, offset

    def free_address(self, address, worker_id=0) -> None:
        block, offset = self.find(address, 0, worker_id, "free")
        if offset:
            raise ConfigError(f"free: {int(address):#x} is inside an allocation, not its start",
                              code="TC419")
        self.release(block)

    def release(self, block: DeviceBlock) -> None:
        if block.freed:
            return
        block.freed = True
        self._blocks.pop(block.address, None)
        block.segment.close()
        block.segment.unlink()

    def copy_to(self, dst_address, src_host_ptr, nbytes, worker_id=0) -> None:
        nbytes = self._size(nbytes)
        block, offset = self.find(dst_address, nbytes, worker_id, "copy_to")
        ctypes.memmove(block.segment.addr + offset, _host_ptr(src_host_ptr), nbytes)

    def copy_from(self, dst_host_ptr, src_address, nbytes, worker_id=0) -> np.ndarray:
        """Returns the host bytes written (a view of ``dst_host_ptr``)."""
        nbytes = self._size(nbytes)
        block, offset = self.find(src_address, nbytes, worker_id, "copy_from")
        ctypes.memmove(_host_ptr(dst_host_ptr), block.segment.addr + offset, nbytes)
        return np.ctypeslib.as_array(ctypes.cast(int(dst_host_ptr),
                                                 ctypes.POINTER(ctypes.c_uint8)), (nbytes,))

    # ------------------------------------------------------------ tensors
    def alloc_tensor(self, shape, dtype, init, worker_id) -> DeviceTensor:
        shape = _shape(shape)
        np_dtype = _np_dtype(dtype)
        nbytes = max(1, int(np.prod(shape, dtype=np.int64)) * np_dtype.itemsize)
        data = None
        if init is not None:
            data = _contiguous_host(init, "init")
            if data.shape != shape or data.dtype != np_dtype:
                raise _err(f"alloc_tensor init= is {data.dtype}{list(data.shape)}, the tensor is "
                           f"{np_dtype}{list(shape)}")
        t = DeviceTensor(shape, np_dtype, self._worker(worker_id),
                         self.malloc(nbytes, worker_id), self.owner)
        if data is not None:
            np.copyto(t.array(), data)
        return t

    def alloc_stacked(self, host, worker_ids) -> StackedDeviceTensor:
        data = _contiguous_host(host, "alloc_stacked_tensor")
        if data.ndim < 2 or data.shape[0] < 1:
            raise _err(f"alloc_stacked_tensor needs a host tensor of rank >= 2 with a leading "
                       f"dim >= 1 (one shard per worker), got shape {list(data.shape)}")
        b = data.shape[0]
        ids = list(range(b)) if worker_ids is None else list(worker_ids)
        if len(ids) != b:
            raise _err(f"alloc_stacked_tensor: {len(ids)} worker_ids for {b} shards")
        if len(set(ids)) != len(ids):
            raise _err(f"alloc_stacked_tensor: worker_ids must be distinct, got {ids}")
        ids = [self._worker(i) for i in ids]
        shards = []
        try:
            for i, w in enumerate(ids):
                shards.append(self.alloc_tensor(data.shape[1:], data.dtype, data[i], w))
        except BaseException:
            for s in shards:
                self.release(s._block)
            raise
        return StackedDeviceTensor(data.shape, data.dtype, ids, shards, self.owner)

    def close(self) -> None:
        for block in list(self._blocks.values()):
            self.release(block)


def _host_ptr(ptr) -> int:
    if isinstance(ptr, bool) or not isinstance(ptr, (int, np.integer)) or ptr <= 0:
        raise ConfigError(f"a host address is a positive int (arr.ctypes.data, "
                          f"tensor.data_ptr()), got {ptr!r}", code="TC419")
    return int(ptr)


def _shape(shape) -> tuple:
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        out = tuple(int(d) for d in shape)
    except TypeError:
        raise _err(f"shape must be a sequence of ints, got {shape!r}") from None
    if any(d < 0 for d in out):
        raise _err(f"shape must not have negative dims, got {list(out)}")
    return out


def _np_dtype(dtype) -> np.dtype:
    """numpy dtype of a pl dtype, a numpy dtype or a torch dtype."""
    np_attr = getattr(dtype, "np_dtype", None)
    if np_attr is not None:
        return np.dtype(np_attr)
    if type(dtype).__module__ == "torch":
        import torch
        return np.dtype(torch.empty(0, dtype=dtype).numpy().dtype) if dtype != torch.bfloat16 \
            else np.dtype(D.BF16.np_dtype)
    try:
        return np.dtype(dtype)
    except TypeError:
        raise _err(f"unsupported dtype {dtype!r}") from None


def _contiguous_host(x, what) -> np.ndarray:
    a = to_numpy(x)
    if a is None:
        raise ConfigError(f"{what}: expected a CPU numpy array or torch tensor, got "
                          f"{type(x).__name__}", code="TC418")
    if not a.flags.c_contiguous:
        raise ConfigError(f"{what}: the host tensor must be C-contiguous", code="TC418")
    return a


__all__ = ["DeviceTensor", "ResidentMemory", "StackedDeviceTensor", "StackedShards"]
