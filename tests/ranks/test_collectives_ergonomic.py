"""The ergonomic collectives (pld.all_reduce, all_gather, reduce_scatter,
broadcast, barrier, all_to_all, all_to_all_v): the HOST collectives with a
signal allocated per call site, against numpy at every world size and on
both transports; inside a host ``for`` loop (the signal allocated once and
reused every round, as is a mesh allreduce's synthesized one); the race
check sees their signals like any window (a racy use reported, its fenced
twin clean)."""
import functools
import pathlib

import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.errors import DataRaceError

from programs_prims import WORLD_SIZES, config_for

NR = pl.dynamic("NR")
S = 24
ROUNDS = 3
F32 = pl.FP32


@functools.lru_cache(maxsize=None)
def chips(R):
    """Dispatches that publish a plain [R, S] tensor into a window and read a
    window back into an output."""

    @pl.jit.incore
    def put_kernel(x: pl.Tensor[[R, S], F32], w: pl.InOut[pld.DistributedTensor[[R, S], F32]]):
        w = pl.store(pl.load(x, [0, 0], [R, S]), [0, 0], w)
        return w

    @pl.jit
    def publish(x: pl.Tensor[[R, S], F32], w: pl.InOut[pld.DistributedTensor[[R, S], F32]]):
        return put_kernel(x, w)

    @pl.jit.incore
    def get_kernel(o: pl.Out[pl.Tensor[[R, S], F32]],
                   w: pl.InOut[pld.DistributedTensor[[R, S], F32]]):
        o = pl.store(pl.load(w, [0, 0], [R, S]), [0, 0], o)
        return o

    @pl.jit
    def consume(o: pl.Out[pl.Tensor[[R, S], F32]],
                w: pl.InOut[pld.DistributedTensor[[R, S], F32]]):
        return get_kernel(o, w)

    return publish, consume


@functools.lru_cache(maxsize=None)
def make_every_form(NR):
    pub1, con1 = chips(1)
    pubn, conn = chips(NR)

    @pl.jit.host
    def every_form(x: pl.Tensor[[NR, 1, S], F32], rows: pl.Tensor[[NR, NR, S], F32],
                   o_mesh: pl.Out[pl.Tensor[[NR, 1, S], F32]],
                   o_ring: pl.Out[pl.Tensor[[NR, 1, S], F32]],
                   o_gather: pl.Out[pl.Tensor[[NR, NR, S], F32]],
                   o_scatter: pl.Out[pl.Tensor[[NR, NR, S], F32]],
                   o_bcast: pl.Out[pl.Tensor[[NR, 1, S], F32]],
                   o_a2a: pl.Out[pl.Tensor[[NR, NR, S], F32]]):
        mesh = pld.alloc_window_buffer([1, S], dtype=F32)
        ring = pld.alloc_window_buffer([1, S], dtype=F32)
        mine = pld.alloc_window_buffer([1, S], dtype=F32)
        gath = pld.alloc_window_buffer([NR, S], dtype=F32)
        scat = pld.alloc_window_buffer([NR, S], dtype=F32)
        bcst = pld.alloc_window_buffer([1, S], dtype=F32)
        a2in = pld.alloc_window_buffer([NR, S], dtype=F32)
        a2out = pld.alloc_window_buffer([NR, S], dtype=F32)
        for r in pl.range(pld.world_size()):
            pub1(x[r], pld.window(mesh, [1, S], dtype=F32), device=r)
            pub1(x[r], pld.window(ring, [1, S], dtype=F32), device=r)
            pub1(x[r], pld.window(mine, [1, S], dtype=F32), device=r)
            pubn(rows[r], pld.window(scat, [NR, S], dtype=F32), device=r)
            pub1(x[r], pld.window(bcst, [1, S], dtype=F32), device=r)
            pubn(rows[r], pld.window(a2in, [NR, S], dtype=F32), device=r)
        pld.all_reduce(pld.window(mesh, [1, S], dtype=F32), op=pld.ReduceOp.Max)
        pld.all_reduce(pld.window(ring, [1, S], dtype=F32), mode="ring", nranks=NR)
        pld.all_gather(pld.window(mine, [1, S], dtype=F32), pld.window(gath, [NR, S], dtype=F32))
        pld.reduce_scatter(pld.window(scat, [NR, S], dtype=F32))
        pld.broadcast(pld.window(bcst, [1, S], dtype=F32), root=NR - 1)
        pld.all_to_all(pld.window(a2in, [NR, S], dtype=F32),
                       pld.window(a2out, [NR, S], dtype=F32))
        for r in pl.range(pld.world_size()):
            con1(o_mesh[r], pld.window(mesh, [1, S], dtype=F32), device=r)
            con1(o_ring[r], pld.window(ring, [1, S], dtype=F32), device=r)
            conn(o_gather[r], pld.window(gath, [NR, S], dtype=F32), device=r)
            conn(o_scatter[r], pld.window(scat, [NR, S], dtype=F32), device=r)
            con1(o_bcast[r], pld.window(bcst, [1, S], dtype=F32), device=r)
            conn(o_a2a[r], pld.window(a2out, [NR, S], dtype=F32), device=r)
        return o_mesh

    return every_form


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_every_ergonomic_form_computes_what_numpy_does(n):
    rng = np.random.default_rng(700 + n)
    x = rng.integers(-20, 20, (n, 1, S)).astype(np.float32)
    rows = rng.integers(-20, 20, (n, n, S)).astype(np.float32)
    outs = [np.full(shape, np.nan, np.float32)
            for shape in ((n, 1, S), (n, 1, S), (n, n, S), (n, n, S), (n, 1, S), (n, n, S))]
    make_every_form(n)(x, rows, *outs, config=config_for(n))
    mesh, ring, gather, scatter, bcast, a2a = outs
    for r in range(n):
        np.testing.assert_array_equal(mesh[r, 0], x[:, 0].max(0))
        np.testing.assert_array_equal(ring[r, 0], x[:, 0].sum(0))
        np.testing.assert_array_equal(gather[r], x[:, 0])
        want = rows[r].copy()
        want[r] = rows[:, r].sum(0)
        np.testing.assert_array_equal(scatter[r], want)
        np.testing.assert_array_equal(bcast[r, 0], x[n - 1, 0])
        np.testing.assert_array_equal(a2a[r], rows[:, r])


# --------------------------------------------------------------- all_to_all_v
CAP = 3


@functools.lru_cache(maxsize=None)
def make_a2av(NR, given):
    RC = NR * CAP

    @pl.jit.incore
    def stage_kernel(x: pl.Tensor[[RC, S], F32], counts: pl.Tensor[[NR], pl.INT32],
                     inp: pl.InOut[pld.DistributedTensor[[RC, S], F32]],
                     cnt: pl.InOut[pld.DistributedTensor[[NR], pl.INT32]]):
        pl.store(pl.load(x, [0, 0], [RC, S]), [0, 0], inp)
        for i in pl.range(NR):
            pl.write(cnt, [i], pl.read(counts, [i]))
        return inp

    @pl.jit
    def stage(x: pl.Tensor[[RC, S], F32], counts: pl.Tensor[[NR], pl.INT32],
              inp: pl.InOut[pld.DistributedTensor[[RC, S], F32]],
              cnt: pl.InOut[pld.DistributedTensor[[NR], pl.INT32]]):
        return stage_kernel(x, counts, inp, cnt)

    @pl.jit.incore
    def drain_kernel(out: pl.Out[pl.Tensor[[RC, S], F32]], got: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
                     target: pl.InOut[pld.DistributedTensor[[RC, S], F32]],
                     recv: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
        pl.store(pl.load(target, [0, 0], [RC, S]), [0, 0], out)
        got = pl.store(pl.load(recv, [0, 0], [NR, 1]), [0, 0], got)
        return got

    @pl.jit
    def drain(out: pl.Out[pl.Tensor[[RC, S], F32]], got: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
              target: pl.InOut[pld.DistributedTensor[[RC, S], F32]],
              recv: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
        return drain_kernel(out, got, target, recv)

    @pl.jit.host
    def a2av(xs: pl.Tensor[[NR, RC, S], F32], counts: pl.Tensor[[NR, NR], pl.INT32],
             outs: pl.Out[pl.Tensor[[NR, RC, S], F32]],
             gots: pl.Out[pl.Tensor[[NR, NR, 1], pl.INT32]]):
        inp = pld.alloc_window_buffer([RC, S], dtype=F32)
        cnt = pld.alloc_window_buffer([NR], dtype=pl.INT32)
        tgt = pld.alloc_window_buffer([RC, S], dtype=F32)
        rcv = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            stage(xs[r], counts[r], pld.window(inp, [RC, S], dtype=F32),
                  pld.window(cnt, [NR], dtype=pl.INT32), device=r)
        i = pld.window(inp, [RC, S], dtype=F32)
        t = pld.window(tgt, [RC, S], dtype=F32)
        c = pld.window(cnt, [NR], dtype=pl.INT32)
        v = pld.window(rcv, [NR, 1], dtype=pl.INT32)
        if given:
            pld.all_to_all_v(i, t, c, v, nranks=NR)
        else:
            pld.all_to_all_v(i, t, c, v)
        for r in pl.range(pld.world_size()):
            drain(outs[r], gots[r], pld.window(tgt, [RC, S], dtype=F32),
                  pld.window(rcv, [NR, 1], dtype=pl.INT32), device=r)
        return outs

    return a2av


@pytest.mark.parametrize("given", [True, False], ids=["nranks", "world"])
@pytest.mark.parametrize("n", WORLD_SIZES)
def test_all_to_all_v_sizes_its_signal_by_nranks_or_the_world(n, given):
    rng = np.random.default_rng(850 + n)
    counts = rng.integers(0, CAP + 2, (n, n)).astype(np.int32)
    xs = rng.integers(-9, 9, (n, n * CAP, S)).astype(np.float32)
    outs = np.full((n, n * CAP, S), np.nan, np.float32)
    gots = np.full((n, n, 1), -7, np.int32)
    make_a2av(n, given)(xs, counts, outs, gots, config=config_for(n))
    for r in range(n):
        for s in range(n):
            k = min(int(counts[s, r]), CAP)
            assert gots[r, s, 0] == k
            np.testing.assert_array_equal(outs[r, s * CAP:s * CAP + k],
                                          xs[s, r * CAP:r * CAP + k])


# --------------------------------------------------------------- in a host loop
@functools.lru_cache(maxsize=None)
def make_loop(NR):
    pub1, con1 = chips(1)

    @pl.jit.incore
    def cells_kernel(o: pl.Out[pl.Tensor[[NR], pl.INT32]],
                     s: pl.InOut[pld.DistributedTensor[[NR], pl.INT32]]):
        for i in pl.range(NR):
            pl.write(o, [i], pl.read(s, [i]))
        return o

    @pl.jit
    def cells(o: pl.Out[pl.Tensor[[NR], pl.INT32]],
              s: pl.InOut[pld.DistributedTensor[[NR], pl.INT32]]):
        return cells_kernel(o, s)

    @pl.jit.host
    def in_a_loop(x: pl.Tensor[[NR, ROUNDS, 1, S], F32],
                  o_sum: pl.Out[pl.Tensor[[NR, ROUNDS, 1, S], F32]],
                  o_min: pl.Out[pl.Tensor[[NR, ROUNDS, 1, S], F32]],
                  o_bar: pl.Out[pl.Tensor[[NR, NR], pl.INT32]]):
        a = pld.alloc_window_buffer([1, S], dtype=F32)
        b = pld.alloc_window_buffer([1, S], dtype=F32)
        g = pld.alloc_window_buffer([NR], dtype=pl.INT32)
        for rd in pl.range(ROUNDS):
            for r in pl.range(pld.world_size()):
                pub1(x[r][rd], pld.window(a, [1, S], dtype=F32), device=r)
                pub1(x[r][rd], pld.window(b, [1, S], dtype=F32), device=r)
            pld.all_reduce(pld.window(a, [1, S], dtype=F32))
            pld.tensor.allreduce(pld.window(b, [1, S], dtype=F32), op=pld.ReduceOp.Min)
            for r in pl.range(pld.world_size()):
                con1(o_sum[r][rd], pld.window(a, [1, S], dtype=F32), device=r)
                con1(o_min[r][rd], pld.window(b, [1, S], dtype=F32), device=r)
            pld.barrier(pld.window(g, [NR], dtype=pl.INT32))
        for r in pl.range(pld.world_size()):
            cells(o_bar[r], pld.window(g, [NR], dtype=pl.INT32), device=r)
        return o_sum

    return in_a_loop


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_synthesized_signals_in_a_host_loop_are_allocated_once_and_reused(n):
    rng = np.random.default_rng(800 + n)
    x = rng.integers(-20, 20, (n, ROUNDS, 1, S)).astype(np.float32)
    o_sum = np.full((n, ROUNDS, 1, S), np.nan, np.float32)
    o_min = np.full_like(o_sum, np.nan)
    o_bar = np.full((n, n), -1, np.int32)
    main = make_loop(n)
    main(x, o_sum, o_min, o_bar, config=config_for(n))
    for r in range(n):
        for rd in range(ROUNDS):
            np.testing.assert_array_equal(o_sum[r, rd, 0], x[:, rd, 0].sum(0))
            np.testing.assert_array_equal(o_min[r, rd, 0], x[:, rd, 0].min(0))
    np.testing.assert_array_equal(o_bar, 0)            # the barrier's cells returned to 0
    # one allocation per call site, above the loop
    lowered = main.compile(config=config_for(n)).lowered(x, o_sum, o_min, o_bar)
    lines = lowered.source.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("def ") and "in_a_loop" in ln)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("def ")),
               len(lines))
    host = lines[start:end]
    allocs = [i for i, ln in enumerate(host) if "alloc_window_buffer" in ln]
    assert len(allocs) == 5, host            # three of the user's, two synthesized
    loop_at = next(i for i, ln in enumerate(host) if ln.lstrip().startswith("for "))
    assert max(allocs) < loop_at, host


# --------------------------------------------------------------- races
@pl.jit.incore
def read_peer_row(o: pl.Out[pl.Tensor[[1, S], F32]],
                  t: pl.InOut[pld.DistributedTensor[[NR, S], F32]]):
    ctx = pld.get_comm_ctx(t)
    peer = (pld.rank(ctx) + 1) % pld.nranks(ctx)
    o = pl.store(pld.tile.remote_load(t, peer, [peer, 0], [1, S]), [0, 0], o)  # peer-read
    return o


@pl.jit
def read_peer(o: pl.Out[pl.Tensor[[1, S], F32]],
              t: pl.InOut[pld.DistributedTensor[[NR, S], F32]]):
    return read_peer_row(o, t)


@functools.lru_cache(maxsize=None)
def make_scatter_then_read(NR, fenced):
    pubn, _ = chips(NR)

    @pl.jit.host
    def scatter_read(rows: pl.Tensor[[NR, NR, S], F32], o: pl.Out[pl.Tensor[[NR, 1, S], F32]]):
        t = pld.alloc_window_buffer([NR, S], dtype=F32)
        f = pld.alloc_window_buffer([NR], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            pubn(rows[r], pld.window(t, [NR, S], dtype=F32), device=r)
        pld.reduce_scatter(pld.window(t, [NR, S], dtype=F32))  # rs-call
        if fenced:
            pld.barrier(pld.window(f, [NR], dtype=pl.INT32))
        for r in pl.range(pld.world_size()):
            read_peer(o[r], pld.window(t, [NR, S], dtype=F32), device=r)
        return o

    return scatter_read


@pytest.mark.parametrize("n", [2, 3])
def test_the_race_check_sees_an_ergonomic_collectives_signal(n):
    """A peer's reduced row is stored after reduce_scatter's last barrier on
    the chip: reading it right after the call races; a barrier in between
    orders it."""
    rng = np.random.default_rng(900 + n)
    rows = rng.integers(-20, 20, (n, n, S)).astype(np.float32)
    want = np.stack([rows[:, (r + 1) % n].sum(0)[None] for r in range(n)])
    o = np.zeros((n, 1, S), np.float32)
    make_scatter_then_read(n, True)(rows, o, config=config_for(n, detect_races=True))
    np.testing.assert_array_equal(o, want)
    o = np.zeros((n, 1, S), np.float32)
    with pytest.raises(DataRaceError) as e:
        make_scatter_then_read(n, False)(rows, o, config=config_for(n, detect_races=True))
    text = str(e.value)
    here = pathlib.Path(__file__).read_text(encoding="utf-8").splitlines()
    for tag in ("# rs-call", "# peer-read"):
        line = next(i + 1 for i, ln in enumerate(here) if ln.endswith(tag))
        assert f"test_collectives_ergonomic.py:{line}" in text, (tag, text)
    assert "pld.tensor.reduce_scatter" in text and "pld.tile.remote_load" in text
    np.testing.assert_array_equal(o, want)              # results are written back first
