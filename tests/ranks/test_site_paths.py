"""The kernel data path per call site keeps the plain ops' semantics: a
loaded tile is a value snapshot even when the source changes afterwards (by
this rank or by a peer), tiles a loop produces again and again stay
distinct values, and an elementwise result stored straight into its region
(also one that reads that region) equals numpy's; the race check sees the
accesses of the call-site forms."""
import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld

from tilecomm.errors import DataRaceError

from programs_prims import config_for, line_of

NR = pl.dynamic("NR")
S = 16384                   # 64 KiB of FP32: site tiles this large are pooled
ROUNDS = 3


@pl.jit.incore
def snap_kernel(x: pl.Tensor[[1, S], pl.FP32],
                before: pl.Out[pl.Tensor[[2, S], pl.FP32]],
                after: pl.Out[pl.Tensor[[2, S], pl.FP32]],
                acc: pl.InOut[pl.Tensor[[1, S], pl.FP32]],
                data: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
                sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
                done: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    ctx = pld.get_comm_ctx(data)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    nxt = (me + 1) % n
    prv = (me + n - 1) % n
    pl.store(pl.load(x, [0, 0], [1, S]), [0, 0], data)
    pld.system.notify(sig, prv, [me, 0], 1, op=pld.NotifyOp.AtomicAdd)
    pld.system.wait(sig, [nxt, 0], 1, cmp=pld.WaitCmp.Ge)
    # snapshots of the own copy and of the next rank's copy
    own = pl.load(data, [0, 0], [1, S])
    peer = pld.tile.remote_load(data, nxt, [0, 0], [1, S])
    # every rank doubles its own copy once the previous rank has loaded it:
    # both sources change after the loads
    pld.system.notify(done, nxt, [me, 0], 1, op=pld.NotifyOp.AtomicAdd)
    pld.system.wait(done, [prv, 0], 1, cmp=pld.WaitCmp.Ge)
    pl.store(pl.add(own, own), [0, 0], data)
    pld.system.notify(sig, prv, [me, 0], 1, op=pld.NotifyOp.AtomicAdd)
    pld.system.wait(sig, [nxt, 0], 2, cmp=pld.WaitCmp.Ge)
    # both snapshots still hold the staged values
    pl.store(own, [0, 0], before)
    pl.store(peer, [1, 0], before)
    pl.store(pl.load(data, [0, 0], [1, S]), [0, 0], after)
    pl.store(pld.tile.remote_load(data, nxt, [0, 0], [1, S]), [1, 0], after)
    # a loop whose sites produce a new tile each round, every one kept apart
    # from the one before; the last store adds into the region it reads
    t = pl.load(x, [0, 0], [1, S])
    for i in pl.range(ROUNDS):
        prev = t
        t = pl.add(t, pl.load(x, [0, 0], [1, S]))
        acc = pl.store(pl.sub(pl.load(acc, [0, 0], [1, S]), pl.mul(prev, prev)), [0, 0], acc)
    acc = pl.store(pl.add(pl.load(acc, [0, 0], [1, S]), t), [0, 0], acc)
    return acc


@pl.jit
def snap_chip(x: pl.Tensor[[1, S], pl.FP32], before: pl.Out[pl.Tensor[[2, S], pl.FP32]],
              after: pl.Out[pl.Tensor[[2, S], pl.FP32]],
              acc: pl.InOut[pl.Tensor[[1, S], pl.FP32]],
              data: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
              sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
              done: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    return snap_kernel(x, before, after, acc, data, sig, done)


@pl.jit.host
def snap_main(xs: pl.Tensor[[NR, 1, S], pl.FP32], before: pl.Out[pl.Tensor[[NR, 2, S], pl.FP32]],
              after: pl.Out[pl.Tensor[[NR, 2, S], pl.FP32]],
              acc: pl.InOut[pl.Tensor[[NR, 1, S], pl.FP32]]):
    data_buf = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    done_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        snap_chip(xs[r], before[r], after[r], acc[r], pld.window(data_buf, [1, S], dtype=pl.FP32),
                  pld.window(sig_buf, [NR, 1], dtype=pl.INT32),
                  pld.window(done_buf, [NR, 1], dtype=pl.INT32), device=r)
    return acc


@pytest.mark.parametrize("n", [2, 3])
def test_loaded_tiles_are_snapshots_and_site_tiles_stay_distinct(n):
    rng = np.random.default_rng(7 + n)
    xs = rng.integers(1, 9, (n, 1, S)).astype(np.float32)
    acc0 = rng.integers(-50, 50, (n, 1, S)).astype(np.float32)
    before = np.full((n, 2, S), np.nan, np.float32)
    after = np.full((n, 2, S), np.nan, np.float32)
    acc = acc0.copy()
    snap_main(xs, before, after, acc, config=config_for(n))

    nxt = np.roll(xs, -1, axis=0)
    np.testing.assert_array_equal(before[:, 0], xs[:, 0])
    np.testing.assert_array_equal(before[:, 1], nxt[:, 0])
    np.testing.assert_array_equal(after[:, 0], 2 * xs[:, 0])
    np.testing.assert_array_equal(after[:, 1], 2 * nxt[:, 0])
    want = acc0.copy()
    t = xs.copy()
    for _ in range(ROUNDS):
        prev = t
        t = t + xs
        want = want - prev * prev
    np.testing.assert_array_equal(acc, want + t)


# ------------------------------------------------------------------ race check
# rank 0 stages a row into its window and says so; rank 1 pulls it with
# remote_load (a view where peers are mapped) and adds it to its own input.
# early=1 says so before the store: the race check, which sees the call-site
# forms' accesses, must name the store and the pull.
@pl.jit.incore
def pull_kernel(x: pl.Tensor[[1, S], pl.FP32], y: pl.Out[pl.Tensor[[1, S], pl.FP32]],
                data: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
                sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
                early: pl.Scalar[pl.INT32]):
    me = pld.rank(pld.get_comm_ctx(data))
    if me == 0:
        if early == 1:
            pld.system.notify(sig, 1, [0, 0], 1, op=pld.NotifyOp.AtomicAdd)
        pl.store(pl.load(x, [0, 0], [1, S]), [0, 0], data)  # stage
        if early == 0:
            pld.system.notify(sig, 1, [0, 0], 1, op=pld.NotifyOp.AtomicAdd)
    if me == 1:
        pld.system.wait(sig, [0, 0], 1, cmp=pld.WaitCmp.Ge)
        y = pl.store(pl.add(pld.tile.remote_load(data, 0, [0, 0], [1, S]),  # pull
                            pl.load(x, [0, 0], [1, S])), [0, 0], y)
    return y


@pl.jit
def pull_chip(x: pl.Tensor[[1, S], pl.FP32], y: pl.Out[pl.Tensor[[1, S], pl.FP32]],
              data: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
              sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
              early: pl.Scalar[pl.INT32]):
    return pull_kernel(x, y, data, sig, early)


@pl.jit.host
def pull_main(xs: pl.Tensor[[NR, 1, S], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, S], pl.FP32]],
              early: pl.Scalar[pl.INT32]):
    data_buf = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        pull_chip(xs[r], ys[r], pld.window(data_buf, [1, S], dtype=pl.FP32),
                  pld.window(sig_buf, [NR, 1], dtype=pl.INT32), early, device=r)
    return ys


@pytest.mark.parametrize("n", [2])
def test_the_race_check_sees_call_site_loads_and_stores(n):
    xs = np.arange(n * S, dtype=np.float32).reshape(n, 1, S) % 13
    ys = np.zeros((n, 1, S), np.float32)
    pull_main(xs, ys, 0, config=config_for(n, detect_races=True))      # ordered: clean
    np.testing.assert_array_equal(ys[1], xs[0] + xs[1])
    with pytest.raises(DataRaceError) as ei:
        pull_main(xs, ys, 1, config=config_for(n, detect_races=True))
    pairs = {frozenset((a.rank, int(a.line.rsplit(":", 1)[1])) for a in (r.first, r.second))
             for r in ei.value.races}
    assert frozenset({(0, line_of(pull_kernel, "stage")),
                      (1, line_of(pull_kernel, "pull"))}) in pairs, ei.value


# ------------------------------------------------------ one dispatch, many rounds
# The mesh sum of a different row of x every round, into that round's row of
# y: the regions a call site resolved for the dispatch are used again only
# for the same tensors and offsets (the copy's and the store's change every
# round, the view loads' stay).
ROWS, COLS = 5, 2


@pl.jit.incore
def rows_kernel(x: pl.Tensor[[ROWS, COLS], pl.FP32], y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]],
                data: pl.InOut[pld.DistributedTensor[[1, COLS], pl.FP32]],
                sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    ctx = pld.get_comm_ctx(data)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    for i in pl.range(ROWS):
        pl.store(pl.load(x, [i, 0], [1, COLS]), [0, 0], data)
        for p in pl.range(n):
            if p != me:
                pld.system.notify(sig, p, [me, 0], 1, op=pld.NotifyOp.AtomicAdd)
        for p in pl.range(n):
            if p != me:
                pld.system.wait(sig, [p, 0], 2 * i + 1, cmp=pld.WaitCmp.Ge)
        acc = pl.load(data, [0, 0], [1, COLS])
        for p in pl.range(n):
            if p != me:
                acc = pl.add(acc, pld.tile.remote_load(data, p, [0, 0], [1, COLS]))
        y = pl.store(acc, [i, 0], y)
        for p in pl.range(n):
            if p != me:
                pld.system.notify(sig, p, [me, 0], 1, op=pld.NotifyOp.AtomicAdd)
        for p in pl.range(n):
            if p != me:
                pld.system.wait(sig, [p, 0], 2 * i + 2, cmp=pld.WaitCmp.Ge)
    return y


@pl.jit
def rows_chip(x: pl.Tensor[[ROWS, COLS], pl.FP32], y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]],
              data: pl.InOut[pld.DistributedTensor[[1, COLS], pl.FP32]],
              sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    return rows_kernel(x, y, data, sig)


@pl.jit.host
def rows_main(xs: pl.Tensor[[NR, ROWS, COLS], pl.FP32],
              ys: pl.Out[pl.Tensor[[NR, ROWS, COLS], pl.FP32]]):
    data = pld.alloc_window_buffer([1, COLS], dtype=pl.FP32)
    sig = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        rows_chip(xs[r], ys[r], pld.window(data, [1, COLS], dtype=pl.FP32),
                  pld.window(sig, [NR, 1], dtype=pl.INT32), device=r)
    return ys


@pytest.mark.parametrize("n", [2, 3])
def test_a_loop_of_rounds_reads_each_rounds_regions(n):
    rng = np.random.default_rng(11 + n)
    xs = rng.integers(-9, 9, (n, ROWS, COLS)).astype(np.float32)
    ys = np.full((n, ROWS, COLS), np.nan, np.float32)
    src = rows_main.compile(xs, ys, config=config_for(n)).lowered(xs, ys).source
    body = src[src.index("def f_rows_kernel("):]
    assert "_rt.copy_at(" in body and "_rt.accum_at(" in body, body
    for _ in range(2):                      # a second call: nothing left from the first
        xs = rng.integers(-9, 9, (n, ROWS, COLS)).astype(np.float32)
        rows_main(xs, ys, config=config_for(n))
        np.testing.assert_array_equal(ys, np.broadcast_to(xs.sum(axis=0), xs.shape))
