"""``import tilecomm.language.distributed as pld`` -- the distributed surface.

Canonical names are three segments (``pld.system.notify``); the two-segment
short forms exist only for the ops listed in ``__all__`` below."""
from types import SimpleNamespace as _NS

from ...ir.enums import AtomicType, NotifyOp, ReduceOp, WaitCmp
from ...ir.types import CommCtxType
from ...ops import collective_ops as _coll, pld_ops as _ops
from ..typing import CommCtx, DistributedTensor

system = _NS(__tilecomm_namespace__="pld.system", world_size=_ops.world_size,
             get_comm_ctx=_ops.get_comm_ctx, rank=_ops.rank, nranks=_ops.nranks,
             notify=_ops.notify, wait=_ops.wait, defer_wait=_ops.defer_wait)
tensor = _NS(__tilecomm_namespace__="pld.tensor", alloc_window_buffer=_ops.alloc_window_buffer,
             window=_ops.window, remote_store=_ops.tensor_remote_store, put=_ops.put,
             get=_ops.get, allreduce=_coll.allreduce, barrier=_coll.barrier,
             broadcast=_coll.broadcast, allgather=_coll.allgather,
             reduce_scatter=_coll.reduce_scatter, all_to_all=_coll.all_to_all,
             all_to_all_v=_coll.all_to_all_v)
tile = _NS(__tilecomm_namespace__="pld.tile", remote_load=_ops.remote_load,
           remote_store=_ops.remote_store, put=_ops.tile_put, get=_ops.tile_get)

world_size = _ops.world_size
get_comm_ctx = _ops.get_comm_ctx
rank = _ops.rank
nranks = _ops.nranks
alloc_window_buffer = _ops.alloc_window_buffer
window = _ops.window
remote_load = _ops.remote_load
remote_store = _ops.remote_store_short

__tilecomm_namespace__ = "pld"

__all__ = ["AtomicType", "CommCtx", "CommCtxType", "DistributedTensor", "NotifyOp", "ReduceOp",
           "WaitCmp", "alloc_window_buffer", "get_comm_ctx", "nranks", "rank", "remote_load",
           "remote_store", "system", "tensor", "tile", "window", "world_size"]
