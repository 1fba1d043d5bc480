"""Programs of the asynchronous-put tests (test_put_async.py, test_races_async.py,
tests/explore, tests/mpi): pld.tensor.put_async / pld.tile.put_async, issued
on a session and completed by pld.system.wait_async_event.

Every ring program sends rank r's row to rank (r + 1) % n; ``ring_reference``
is what a correct run leaves in ``y``: row 0 the left neighbour's ``x``, row
1 the local work done while the transfer was in flight (``2 * x``).
"""
import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld

NR = pl.dynamic("NR")
S = 32

X = pl.Tensor[[1, S], pl.FP32]
Y2 = pl.Out[pl.Tensor[[2, S], pl.FP32]]
WIN = pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]]
SIG = pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]
XS = pl.Tensor[[NR, 1, S], pl.FP32]
YS2 = pl.Out[pl.Tensor[[NR, 2, S], pl.FP32]]


def ring_main(kernel):
    """The host program of the ring kernels: windows ``src`` and ``dst``
    [1, S] and a signal cell per rank, one dispatch per rank."""
    @pl.jit
    def chip(x: X, y: Y2, src: WIN, dst: WIN, sig: SIG):
        return kernel(x, y, src, dst, sig)

    @pl.jit.host
    def main(xs: XS, ys: YS2):
        src_buf = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
        dst_buf = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
        sig_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            chip(xs[r], ys[r], pld.window(src_buf, [1, S], dtype=pl.FP32),
                 pld.window(dst_buf, [1, S], dtype=pl.FP32),
                 pld.window(sig_buf, [1, 1], dtype=pl.INT32), device=r)
        return ys
    return main


def ring_reference(xs):
    return np.stack([np.roll(xs[:, 0, :], 1, axis=0), 2 * xs[:, 0, :]], axis=1)


# ---------------------------------------------------------------- the ring, correct
@pl.jit.incore
def ring_kernel(x: X, y: Y2, src: WIN, dst: WIN, sig: SIG) -> pl.Tensor[[2, S], pl.FP32]:
    ctx = pld.get_comm_ctx(src)
    me = pld.rank(ctx)
    nxt = (me + 1) % pld.nranks(ctx)
    src = pl.store(pl.load(x, [0, 0], [1, S]), [0, 0], src)
    sess = pld.system.async_session()
    evt = pld.tensor.put_async(dst, nxt, src, sess)
    # local work while the transfer is in flight
    t = pl.load(x, [0, 0], [1, S])
    y = pl.store(pl.add(t, t), [1, 0], y)
    pld.system.wait_async_event(evt, sess)          # the data has landed ...
    pld.system.notify(sig, nxt, [0, 0], 1, op=pld.NotifyOp.Set)    # ... then publish it
    pld.system.wait(sig, [0, 0], 1, cmp=pld.WaitCmp.Eq)
    y = pl.store(pl.load(dst, [0, 0], [1, S]), [0, 0], y)
    return y


ring = ring_main(ring_kernel)


# ---------------------------------------------------------------- the ring, racy
@pl.jit.incore
def racy_ring_kernel(x: X, y: Y2, src: WIN, dst: WIN, sig: SIG) -> pl.Tensor[[2, S], pl.FP32]:
    ctx = pld.get_comm_ctx(src)
    me = pld.rank(ctx)
    nxt = (me + 1) % pld.nranks(ctx)
    src = pl.store(pl.load(x, [0, 0], [1, S]), [0, 0], src)
    sess = pld.system.async_session()
    evt = pld.tensor.put_async(dst, nxt, src, sess)
    t = pl.load(x, [0, 0], [1, S])
    y = pl.store(pl.add(t, t), [1, 0], y)
    # BUG: the notify publishes the data before the event says it landed
    pld.system.notify(sig, nxt, [0, 0], 1, op=pld.NotifyOp.Set)
    pld.system.wait_async_event(evt, sess)
    pld.system.wait(sig, [0, 0], 1, cmp=pld.WaitCmp.Eq)
    y = pl.store(pl.load(dst, [0, 0], [1, S]), [0, 0], y)
    return y


racy_ring = ring_main(racy_ring_kernel)


# ---------------------------------------------------------------- the tile form
@pl.jit.incore
def tile_ring_kernel(x: X, y: Y2, src: WIN, dst: WIN, sig: SIG) -> pl.Tensor[[2, S], pl.FP32]:
    ctx = pld.get_comm_ctx(src)
    me = pld.rank(ctx)
    nxt = (me + 1) % pld.nranks(ctx)
    src = pl.store(pl.load(x, [0, 0], [1, S]), [0, 0], src)
    scratch = pl.tile.create([1, 256], dtype=pl.INT8)
    sess = pld.tile.async_session(scratch, sync_id=7, block_bytes=64)
    evt = pld.tile.put_async(dst, nxt, src, sess)
    t = pl.load(x, [0, 0], [1, S])
    y = pl.store(pl.add(t, t), [1, 0], y)
    done = pld.tile.wait_async_event(evt, sess, scratch)
    if done:
        pld.system.notify(sig, nxt, [0, 0], 1, op=pld.NotifyOp.Set)
    pld.system.wait(sig, [0, 0], 1, cmp=pld.WaitCmp.Eq)
    y = pl.store(pl.load(dst, [0, 0], [1, S]), [0, 0], y)
    return y


tile_ring = ring_main(tile_ring_kernel)


# ---------------------------------------------------------------- rows to every peer
# Each rank puts its row into row ``me`` of every rank's window (its own
# included), all in flight together on one session, then waits them in
# turn and counts itself in at every peer.

def make_rows(nr: int):
    XR = pl.Tensor[[1, S], pl.FP32]
    YR = pl.Out[pl.Tensor[[nr, S], pl.FP32]]
    WR = pl.InOut[pld.DistributedTensor[[nr, S], pl.FP32]]
    CNT = pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]

    @pl.jit.incore
    def rows_kernel(x: XR, y: YR, win: WR, cnt: CNT) -> pl.Tensor[[nr, S], pl.FP32]:
        ctx = pld.get_comm_ctx(win)
        me = pld.rank(ctx)
        sess = pld.system.async_session(sync_id=1)
        for p in pl.range(nr):
            evt = pld.tensor.put_async(win, p, x, sess, [me, 0], [0, 0], [1, S])
            pld.system.wait_async_event(evt, session=sess)
            pld.system.notify(cnt, p, [0, 0], 1, op=pld.NotifyOp.AtomicAdd)
        pld.system.wait(cnt, [0, 0], nr, cmp=pld.WaitCmp.Ge)
        y = pl.store(pl.load(win, [0, 0], [nr, S]), [0, 0], y)
        return y

    @pl.jit
    def chip(x: XR, y: YR, win: WR, cnt: CNT):
        return rows_kernel(x, y, win, cnt)

    @pl.jit.host
    def main(xs: pl.Tensor[[nr, 1, S], pl.FP32], ys: pl.Out[pl.Tensor[[nr, nr, S], pl.FP32]]):
        wbuf = pld.alloc_window_buffer([nr, S], dtype=pl.FP32)
        cbuf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            chip(xs[r], ys[r], pld.window(wbuf, [nr, S], dtype=pl.FP32),
                 pld.window(cbuf, [1, 1], dtype=pl.INT32), device=r)
        return ys
    return main


# ---------------------------------------------------------------- the destination before the wait
# A rank puts into its own copy and reads the destination before and after
# the wait: on the CPU the transfer lands at the wait, so the first read
# sees what was there before (the window's zeros).

@pl.jit.incore
def early_kernel(x: X, y: Y2, src: WIN, dst: WIN, sig: SIG) -> pl.Tensor[[2, S], pl.FP32]:
    ctx = pld.get_comm_ctx(src)
    me = pld.rank(ctx)
    sess = pld.system.async_session()
    evt = pld.tensor.put_async(dst, me, x, sess)
    y = pl.store(pl.load(dst, [0, 0], [1, S]), [0, 0], y)      # before the wait
    pld.system.wait_async_event(evt, sess)
    y = pl.store(pl.load(dst, [0, 0], [1, S]), [1, 0], y)      # after it
    return y


early = ring_main(early_kernel)


# ---------------------------------------------------------------- mistakes found while ranks run
@pl.jit.incore
def unwaited_kernel(x: X, y: Y2, src: WIN, dst: WIN, sig: SIG) -> pl.Tensor[[2, S], pl.FP32]:
    ctx = pld.get_comm_ctx(src)
    nxt = (pld.rank(ctx) + 1) % pld.nranks(ctx)
    sess = pld.system.async_session()
    pld.tensor.put_async(dst, nxt, x, sess)         # ERROR: never waited
    y = pl.store(pl.load(x, [0, 0], [1, S]), [0, 0], y)
    return y


unwaited = ring_main(unwaited_kernel)


@pl.jit.incore
def other_session_kernel(x: X, y: Y2, src: WIN, dst: WIN, sig: SIG) -> pl.Tensor[[2, S], pl.FP32]:
    ctx = pld.get_comm_ctx(src)
    nxt = (pld.rank(ctx) + 1) % pld.nranks(ctx)
    a = pld.system.async_session(sync_id=0)
    b = pld.system.async_session(sync_id=1)
    evt = pld.tensor.put_async(dst, nxt, x, a)
    pld.system.wait_async_event(evt, b)             # ERROR: issued on a
    y = pl.store(pl.load(x, [0, 0], [1, S]), [0, 0], y)
    return y


other_session = ring_main(other_session_kernel)


# ---------------------------------------------------------------- in a task of a chip function
@pl.jit
def task_ring_chip(x: X, y: Y2, src: WIN, dst: WIN, sig: SIG):
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="push"):
        ctx = pld.get_comm_ctx(src)
        nxt = (pld.rank(ctx) + 1) % pld.nranks(ctx)
        sess = pld.system.async_session()
        evt = pld.tensor.put_async(dst, nxt, x, sess)
        t = pl.load(x, [0, 0], [1, S])
        y = pl.store(pl.add(t, t), [1, 0], y)
        pld.system.wait_async_event(evt, sess)
        pld.system.notify(sig, nxt, [0, 0], 1, op=pld.NotifyOp.Set)
        pld.system.wait(sig, [0, 0], 1, cmp=pld.WaitCmp.Eq)
        y = pl.store(pl.load(dst, [0, 0], [1, S]), [0, 0], y)
    return y


@pl.jit.host
def task_ring(xs: XS, ys: YS2):
    src_buf = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
    dst_buf = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        task_ring_chip(xs[r], ys[r], pld.window(src_buf, [1, S], dtype=pl.FP32),
                       pld.window(dst_buf, [1, S], dtype=pl.FP32),
                       pld.window(sig_buf, [1, 1], dtype=pl.INT32), device=r)
    return ys


# ---------------------------------------------------------------- the source reused before the wait
def reuse_kernel(early_reuse: bool):
    @pl.jit.incore
    def reuse(x: X, y: Y2, src: WIN, dst: WIN, sig: SIG) -> pl.Tensor[[2, S], pl.FP32]:
        ctx = pld.get_comm_ctx(src)
        nxt = (pld.rank(ctx) + 1) % pld.nranks(ctx)
        src = pl.store(pl.load(x, [0, 0], [1, S]), [0, 0], src)
        sess = pld.system.async_session()
        evt = pld.tensor.put_async(dst, nxt, src, sess)  # reuse-put
        t = pl.load(x, [0, 0], [1, S])
        if early_reuse:
            src = pl.store(pl.add(t, t), [0, 0], src)  # reuse-store
            pld.system.wait_async_event(evt, sess)
        else:
            pld.system.wait_async_event(evt, sess)
            src = pl.store(pl.add(t, t), [0, 0], src)
        pld.system.notify(sig, nxt, [0, 0], 1, op=pld.NotifyOp.Set)
        pld.system.wait(sig, [0, 0], 1, cmp=pld.WaitCmp.Eq)
        y = pl.store(pl.load(dst, [0, 0], [1, S]), [0, 0], y)
        y = pl.store(pl.load(src, [0, 0], [1, S]), [1, 0], y)
        return y
    return reuse


reuse_early_kernel = reuse_kernel(True)
reuse_early = ring_main(reuse_early_kernel)
reuse_after = ring_main(reuse_kernel(False))
