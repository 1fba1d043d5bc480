"""``import tilecomm.language.distributed as pld`` -- the distributed surface.

Canonical names are three segments (``pld.system.notify``); the two-segment
short forms exist only for the ops listed in ``__all__`` below."""
from types import SimpleNamespace as _NS

from ...ir.enums import AtomicType, NotifyOp, ReduceOp, WaitCmp
from ...ir.types import CommCtxType
from ...ops import (async_ops as _async, collective_ops as _coll, ergonomic_ops as _erg,
                   pld_ops as _ops)
from ..typing import CommCtx, DistributedTensor

system = _NS(__tilecomm_namespace__="pld.system", world_size=_ops.world_size,
             get_comm_ctx=_ops.get_comm_ctx, rank=_ops.rank, nranks=_ops.nranks,
             notify=_ops.notify, wait=_ops.wait, defer_wait=_ops.defer_wait,
             async_session=_async.async_session, wait_async_event=_async.wait_async_event)
tensor = _NS(__tilecomm_namespace__="pld.tensor", alloc_window_buffer=_ops.alloc_window_buffer,
             window=_ops.window, remote_store=_ops.tensor_remote_store, put=_ops.put,
             get=_ops.get, put_async=_async.put_async, allreduce=_coll.allreduce, barrier=_coll.barrier,
             broadcast=_coll.broadcast, allgather=_coll.allgather,
             reduce_scatter=_coll.reduce_scatter, all_to_all=_coll.all_to_all,
             all_to_all_v=_coll.all_to_all_v)
tile = _NS(__tilecomm_namespace__="pld.tile", remote_load=_ops.remote_load,
           remote_store=_ops.remote_store, put=_ops.tile_put, get=_ops.tile_get,
           put_async=_async.tile_put_async, async_session=_async.tile_async_session,
           wait_async_event=_async.tile_wait_async_event)

world_size = _ops.world_size
get_comm_ctx = _ops.get_comm_ctx
rank = _ops.rank
nranks = _ops.nranks
alloc_window_buffer = _ops.alloc_window_buffer
window = _ops.window
remote_load = _ops.remote_load
remote_store = _ops.remote_store_short
# the HOST collectives with their signal allocated for the caller
all_reduce = _erg.all_reduce
all_gather = _erg.all_gather
reduce_scatter = _erg.reduce_scatter
broadcast = _erg.broadcast
barrier = _erg.barrier
all_to_all = _erg.all_to_all
all_to_all_v = _erg.all_to_all_v

__tilecomm_namespace__ = "pld"

__all__ = ["AtomicType", "CommCtx", "CommCtxType", "DistributedTensor", "NotifyOp", "ReduceOp",
           "WaitCmp", "all_gather", "all_reduce", "all_to_all", "all_to_all_v",
           "alloc_window_buffer", "barrier", "broadcast", "get_comm_ctx", "nranks", "rank",
           "reduce_scatter", "remote_load", "remote_store", "system", "tensor", "tile", "window",
           "world_size"]
