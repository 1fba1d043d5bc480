"""Kernels the benchmarks share (the front end reads their source, so they
live at module level here rather than being rebuilt per script).

* ``pingpong_kernel``: rank 0 sets the peer's cell to i+1 and waits for its
  own cell to reach i+1; rank 1 mirrors.  Values start at 1 so the
  zero-filled window never satisfies a wait early.
* ``selfsig_kernel``: the same two ops on one rank signalling itself: the
  per-op cost of notify + wait with no cross-process latency.
* ``trivial_main``: ``m`` rounds of a one-notify kernel on every rank: the
  cost of a dispatch, and of a whole call on a prepared worker.
"""
import tilecomm.language as pl
import tilecomm.language.distributed as pld


@pl.jit.incore
def pingpong_kernel(out: pl.Out[pl.Tensor[[1, 1], pl.INT32]],
                    sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
                    n: pl.Scalar[pl.INT32]) -> pl.Tensor[[1, 1], pl.INT32]:
    ctx = pld.get_comm_ctx(sig)
    me = pld.rank(ctx)
    peer = 1 - me
    for i in pl.range(n):
        if me == 0:
            pld.system.notify(sig, peer=peer, offsets=[0, 0], value=i + 1, op=pld.NotifyOp.Set)
            pld.system.wait(sig, offsets=[0, 0], expected=i + 1, cmp=pld.WaitCmp.Eq)
        else:
            pld.system.wait(sig, offsets=[0, 0], expected=i + 1, cmp=pld.WaitCmp.Eq)
            pld.system.notify(sig, peer=peer, offsets=[0, 0], value=i + 1, op=pld.NotifyOp.Set)
    last = pl.read(sig, [0, 0])
    pl.write(out, [0, 0], last)
    return out


@pl.jit.incore
def selfsig_kernel(out: pl.Out[pl.Tensor[[1, 1], pl.INT32]],
                   sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
                   n: pl.Scalar[pl.INT32]) -> pl.Tensor[[1, 1], pl.INT32]:
    ctx = pld.get_comm_ctx(sig)
    me = pld.rank(ctx)
    for i in pl.range(n):
        pld.system.notify(sig, peer=me, offsets=[0, 0], value=i + 1, op=pld.NotifyOp.Set)
        pld.system.wait(sig, offsets=[0, 0], expected=i + 1, cmp=pld.WaitCmp.Eq)
    last = pl.read(sig, [0, 0])
    pl.write(out, [0, 0], last)
    return out


@pl.jit.incore
def trivial_kernel(sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
    ctx = pld.get_comm_ctx(sig)
    me = pld.rank(ctx)
    pld.system.notify(sig, peer=me, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)


@pl.jit
def trivial_chip(sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
    trivial_kernel(sig)


@pl.jit.host
def trivial_main(m: pl.Scalar[pl.INT32]):
    buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for j in pl.range(m):
        for r in pl.range(pld.world_size()):
            trivial_chip(pld.window(buf, [1, 1], dtype=pl.INT32), device=r)
