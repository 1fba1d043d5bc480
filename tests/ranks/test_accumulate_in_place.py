"""Accumulations computed in place (lower/sites.py, "accumulations"):
``acc = pl.add(acc, ...)`` steps between ``acc``'s binding and
``pl.store(acc, ...)`` compute into the stored region where nothing in
between writes, synchronises or reads that region -- and only there.  The
lowered code shows which form each kernel got; every result equals numpy's,
also where a wrong in-place step would have shown (a notify, a wait, a store
into the region or a read of it between the steps, the output sharing memory
with what the steps read), and the race check sees the same accesses."""
import re

import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld

from tilecomm.errors import DataRaceError

from programs_prims import config_for, line_of

NR = pl.dynamic("NR")
S = 2048                    # 8 KiB of FP32
SMALL = 4                   # 16 B: the in-place steps have no minimum size
REPS = 3


def lowered_kernel(main, *args, name, config) -> str:
    src = main.compile(*args, config=config).lowered(*args).source
    start = src.index(f"def f_{name}(")
    end = src.find("\ndef ", start + 1)
    return src[start:] if end < 0 else src[start:end]


def in_place(body: str) -> bool:
    forms = ("_rt.accum_begin(", "_rt.accum_at(", "_rt.accum_store_at(")
    got = [f in body for f in forms]
    assert all(got) or not any(got), body
    return all(got)


# --------------------------------------------------------------- the mesh sum
def build_mesh(cols: int, between: int):
    """Stage x, barrier, y = own copy + every peer's copy, barrier.  ``between``
    puts something between the steps: 0 nothing (the steps go in place), 1 a
    notify, 2 a wait, 3 a store into y's row, 4 a load of y's row."""

    @pl.jit.incore
    def mesh_kernel(x: pl.Tensor[[1, cols], pl.FP32], y: pl.Out[pl.Tensor[[2, cols], pl.FP32]],
                    data: pl.InOut[pld.DistributedTensor[[1, cols], pl.FP32]],
                    sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
                    side: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
        ctx = pld.get_comm_ctx(data)
        me = pld.rank(ctx)
        n = pld.nranks(ctx)
        for rnd in pl.range(REPS):
            pl.store(pl.load(x, [0, 0], [1, cols]), [0, 0], data)
            for p in pl.range(n):
                if p != me:
                    pld.system.notify(sig, p, [me, 0], 1, op=pld.NotifyOp.AtomicAdd)
            for p in pl.range(n):
                if p != me:
                    pld.system.wait(sig, [p, 0], 2 * rnd + 1, cmp=pld.WaitCmp.Ge)
            acc = pl.load(data, [0, 0], [1, cols])
            for p in pl.range(n):
                if p != me:
                    acc = pl.add(acc, pld.tile.remote_load(data, p, [0, 0], [1, cols]))
                    if between == 1:
                        pld.system.notify(side, me, [me, 0], 1, op=pld.NotifyOp.AtomicAdd)
                    if between == 2:
                        pld.system.wait(sig, [p, 0], 2 * rnd + 1, cmp=pld.WaitCmp.Ge)
                    if between == 3:
                        pl.store(pl.load(x, [0, 0], [1, cols]), [1, 0], y)
                    if between == 4:
                        acc = pl.add(acc, pl.load(y, [1, 0], [1, cols]))
            y = pl.store(acc, [1, 0], y)
            for p in pl.range(n):
                if p != me:
                    pld.system.notify(sig, p, [me, 0], 1, op=pld.NotifyOp.AtomicAdd)
            for p in pl.range(n):
                if p != me:
                    pld.system.wait(sig, [p, 0], 2 * rnd + 2, cmp=pld.WaitCmp.Ge)
        return y

    @pl.jit
    def mesh_chip(x: pl.Tensor[[1, cols], pl.FP32], y: pl.Out[pl.Tensor[[2, cols], pl.FP32]],
                  data: pl.InOut[pld.DistributedTensor[[1, cols], pl.FP32]],
                  sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
                  side: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
        return mesh_kernel(x, y, data, sig, side)

    @pl.jit.host
    def mesh_main(xs: pl.Tensor[[NR, 1, cols], pl.FP32],
                  ys: pl.Out[pl.Tensor[[NR, 2, cols], pl.FP32]]):
        data = pld.alloc_window_buffer([1, cols], dtype=pl.FP32)
        sig = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
        side = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            mesh_chip(xs[r], ys[r], pld.window(data, [1, cols], dtype=pl.FP32),
                      pld.window(sig, [NR, 1], dtype=pl.INT32),
                      pld.window(side, [NR, 1], dtype=pl.INT32), device=r)
        return ys

    return mesh_main


def mesh_want(xs, between):
    """What the copying program leaves in row 1 of every rank's y."""
    n = xs.shape[0]
    total = xs.sum(axis=0)
    if between == 3:                  # the store into y's row is overwritten
        return np.broadcast_to(total, xs.shape)
    if between == 4:                  # every step adds y's row 1 as it was
        want = np.empty_like(xs)
        for r in range(n):
            row = np.full_like(xs[r], 7.0)
            for _ in range(REPS):
                row = total + (n - 1) * row
            want[r] = row
        return want
    return np.broadcast_to(total, xs.shape)


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("between,expect", [(0, True), (1, False), (2, False), (3, False),
                                            (4, False)],
                         ids=["nothing", "notify", "wait", "store", "load"])
def test_steps_go_in_place_only_where_nothing_intervenes(tmp_path, n, between, expect):
    main = build_mesh(S, between)
    rng = np.random.default_rng(between + 10 * n)
    xs = rng.integers(-9, 9, (n, 1, S)).astype(np.float32)
    ys = np.full((n, 2, S), 7.0, np.float32)
    cfg = config_for(n, cache_dir=str(tmp_path))
    body = lowered_kernel(main, xs, ys, name="mesh_kernel", config=cfg)
    assert in_place(body) is expect, body
    main(xs, ys, config=cfg)
    np.testing.assert_array_equal(ys[:, 1:], mesh_want(xs, between))
    np.testing.assert_array_equal(ys[:, :1], np.full((n, 1, S), 7.0, np.float32))


@pytest.mark.parametrize("cols", [SMALL, S])
def test_the_race_check_sees_the_same_accesses(tmp_path, cols):
    n = 2
    main = build_mesh(cols, 0)
    xs = np.arange(n * cols, dtype=np.float32).reshape(n, 1, cols) % 11
    ys = np.full((n, 2, cols), 7.0, np.float32)
    cfg = config_for(n, cache_dir=str(tmp_path), detect_races=True)
    assert in_place(lowered_kernel(main, xs, ys, name="mesh_kernel", config=cfg))
    main(xs, ys, config=cfg)                   # ordered by the barriers: clean
    np.testing.assert_array_equal(ys[:, 1:], mesh_want(xs, 0))


# ------------------------------------------------------ the output a window
# The sum goes into window ``out``.  With ``early`` rank 0 says it is done
# before its sum is stored; rank 1 then reads rank 0's ``out`` -- a race the
# check must report at the final store, as when the steps copy.
@pl.jit.incore
def win_kernel(x: pl.Tensor[[1, S], pl.FP32], y: pl.Out[pl.Tensor[[1, S], pl.FP32]],
               data: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
               out: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
               sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
               early: pl.Scalar[pl.INT32]):
    ctx = pld.get_comm_ctx(data)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    pl.store(pl.load(x, [0, 0], [1, S]), [0, 0], data)
    for p in pl.range(n):
        if p != me:
            pld.system.notify(sig, p, [me, 0], 1, op=pld.NotifyOp.AtomicAdd)
    for p in pl.range(n):
        if p != me:
            pld.system.wait(sig, [p, 0], 1, cmp=pld.WaitCmp.Ge)
    if me == 0:
        if early == 1:
            pld.system.notify(sig, 1, [0, 0], 1, op=pld.NotifyOp.AtomicAdd)
        acc = pl.load(x, [0, 0], [1, S])
        for p in pl.range(n):
            if p != me:
                acc = pl.add(acc, pld.tile.remote_load(data, p, [0, 0], [1, S]))
        pl.store(acc, [0, 0], out)  # the sum
        if early == 0:
            pld.system.notify(sig, 1, [0, 0], 1, op=pld.NotifyOp.AtomicAdd)
    if me == 1:
        pld.system.wait(sig, [0, 0], 2, cmp=pld.WaitCmp.Ge)
        y = pl.store(pld.tile.remote_load(out, 0, [0, 0], [1, S]), [0, 0], y)  # read
    return y


@pl.jit
def win_chip(x: pl.Tensor[[1, S], pl.FP32], y: pl.Out[pl.Tensor[[1, S], pl.FP32]],
             data: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
             out: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
             sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
             early: pl.Scalar[pl.INT32]):
    return win_kernel(x, y, data, out, sig, early)


@pl.jit.host
def win_main(xs: pl.Tensor[[NR, 1, S], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, S], pl.FP32]],
             early: pl.Scalar[pl.INT32]):
    data = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
    out = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
    sig = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        win_chip(xs[r], ys[r], pld.window(data, [1, S], dtype=pl.FP32),
                 pld.window(out, [1, S], dtype=pl.FP32),
                 pld.window(sig, [NR, 1], dtype=pl.INT32), early, device=r)
    return ys


def test_a_window_output_races_at_its_store_as_when_copying(tmp_path):
    n = 2
    xs = np.arange(n * S, dtype=np.float32).reshape(n, 1, S) % 5
    ys = np.zeros((n, 1, S), np.float32)
    cfg = config_for(n, cache_dir=str(tmp_path), detect_races=True)
    assert in_place(lowered_kernel(win_main, xs, ys, 0, name="win_kernel", config=cfg))
    win_main(xs, ys, 0, config=cfg)
    np.testing.assert_array_equal(ys[1], xs[0] + xs[1])
    with pytest.raises(DataRaceError) as ei:
        win_main(xs, ys, 1, config=cfg)
    pairs = {frozenset((a.rank, int(a.line.rsplit(":", 1)[1])) for a in (r.first, r.second))
             for r in ei.value.races}
    assert frozenset({(0, line_of(win_kernel, "the sum")),
                      (1, line_of(win_kernel, "read"))}) in pairs, ei.value


# ---------------------------------------------------- the output aliasing a read
# ``a`` and ``b`` are windows of one buffer: the steps read this rank's copy
# of ``a`` -- the memory the sum is stored into through ``b``.  The lowering
# cannot see that; the runtime must decline, or the second step would read
# the first one's result.
@pl.jit.incore
def alias_kernel(x: pl.Tensor[[1, S], pl.FP32],
                 a: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
                 b: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]]):
    me = pld.rank(pld.get_comm_ctx(a))
    acc = pl.load(x, [0, 0], [1, S])
    for k in pl.range(2):
        if k == 0:
            acc = pl.add(acc, pl.load(a, [0, 0], [1, S]))
        else:
            acc = pl.add(acc, pld.tile.remote_load(a, me, [0, 0], [1, S]))
    pl.store(acc, [0, 0], b)


@pl.jit.incore
def copy_kernel(b: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
                y: pl.Out[pl.Tensor[[1, S], pl.FP32]]) -> pl.Tensor[[1, S], pl.FP32]:
    return pl.store(pl.load(b, [0, 0], [1, S]), [0, 0], y)


@pl.jit
def alias_chip(x: pl.Tensor[[1, S], pl.FP32],
               a: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
               b: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
               y: pl.Out[pl.Tensor[[1, S], pl.FP32]]):
    alias_kernel(x, a, b)
    return copy_kernel(b, y)


@pl.jit.host
def alias_main(xs: pl.Tensor[[NR, 1, S], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, S], pl.FP32]]):
    buf = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
    for r in pl.range(pld.world_size()):
        alias_chip(xs[r], pld.window(buf, [1, S], dtype=pl.FP32),
                   pld.window(buf, [1, S], dtype=pl.FP32), ys[r], device=r)
    return ys


def test_an_output_sharing_memory_with_a_read_is_declined_at_run_time(tmp_path):
    n = 2
    xs = np.arange(n * S, dtype=np.float32).reshape(n, 1, S) % 9 + 1
    ys = np.zeros((n, 1, S), np.float32)
    cfg = config_for(n, cache_dir=str(tmp_path))
    assert in_place(lowered_kernel(alias_main, xs, ys, name="alias_kernel", config=cfg))
    alias_main(xs, ys, config=cfg)
    # the window starts zeroed: the copying steps add 0 twice
    np.testing.assert_array_equal(ys, xs)


def test_the_lowering_names_the_tensors_the_steps_read(tmp_path):
    main = build_mesh(S, 0)
    xs = np.zeros((2, 1, S), np.float32)
    ys = np.zeros((2, 2, S), np.float32)
    body = lowered_kernel(main, xs, ys, name="mesh_kernel", config=config_for(
        2, cache_dir=str(tmp_path)))
    assert re.search(r"_acc\d+ = _rt\.accum_begin\(\d+, \(1, 0, \), y, \(data, \)\)", body), body
