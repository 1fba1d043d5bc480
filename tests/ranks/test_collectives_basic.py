"""Every pld.tensor.* collective, inside a kernel and as a HOST builtin, at
every world size: results against numpy, and the signal back to all zeros
after the call (the credit protocol is self-clearing)."""
import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld

from programs_prims import WORLD_SIZES, config_for

NR = pl.dynamic("NR")
S = 37                     # not a multiple of any slice or cache line


# --------------------------------------------------------------- InCore: every collective once
@pl.jit.incore
def all_kernel(x: pl.Tensor[[1, S], pl.FP32], rows: pl.Tensor[[NR, S], pl.FP32],
               out: pl.Out[pl.Tensor[[5, NR, S], pl.FP32]],
               sig_out: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
               data: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
               table: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
               sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    ctx = pld.get_comm_ctx(sig)
    me = pld.rank(ctx)
    # allreduce (Sum) then broadcast of rank 0's result times (rank + 1)
    data = pl.store(pl.load(x, [0, 0], [1, S]), [0, 0], data)
    data = pld.tensor.allreduce(data, sig, op=pld.ReduceOp.Sum)
    pl.store(pl.load(data, [0, 0], [1, S]), [0, 0, 0], out)
    data = pl.store(pl.mul(pl.load(x, [0, 0], [1, S]), 3.0), [0, 0], data)
    data = pld.tensor.broadcast(data, sig, root=0)
    pl.store(pl.load(data, [0, 0], [1, S]), [1, 0, 0], out)
    # allgather of x, then all_to_all of rows, then reduce_scatter of rows
    table = pld.tensor.allgather(x, table, sig)
    pl.store(pl.load(table, [0, 0], [NR, S]), [2, 0, 0], out)
    pld.tensor.barrier(sig)          # nobody overwrites table while a peer reads it
    table = pld.tensor.all_to_all(rows, table, sig)
    pl.store(pl.load(table, [0, 0], [NR, S]), [3, 0, 0], out)
    pld.tensor.barrier(sig)
    table = pl.store(pl.load(rows, [0, 0], [NR, S]), [0, 0], table)
    table = pld.tensor.reduce_scatter(table, sig)
    pl.store(pl.load(table, [0, 0], [NR, S]), [4, 0, 0], out)
    pld.tensor.barrier(sig)
    pl.store(pl.load(sig, [0, 0], [NR, 1]), [0, 0], sig_out)
    return out


@pl.jit
def all_chip(x: pl.Tensor[[1, S], pl.FP32], rows: pl.Tensor[[NR, S], pl.FP32],
             out: pl.Out[pl.Tensor[[5, NR, S], pl.FP32]],
             sig_out: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
             data: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
             table: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
             sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    return all_kernel(x, rows, out, sig_out, data, table, sig)


@pl.jit.host
def all_main(xs: pl.Tensor[[NR, 1, S], pl.FP32], rows: pl.Tensor[[NR, NR, S], pl.FP32],
             outs: pl.Out[pl.Tensor[[NR, 5, NR, S], pl.FP32]],
             sigs: pl.Out[pl.Tensor[[NR, NR, 1], pl.INT32]]):
    data = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
    table = pld.alloc_window_buffer([NR, S], dtype=pl.FP32)
    sig = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        all_chip(xs[r], rows[r], outs[r], sigs[r], pld.window(data, [1, S], dtype=pl.FP32),
                 pld.window(table, [NR, S], dtype=pl.FP32),
                 pld.window(sig, [NR, 1], dtype=pl.INT32), device=r)
    return outs


def expected(xs, rows):
    n = xs.shape[0]
    out = np.zeros((n, 5, n, S), np.float32)
    for r in range(n):
        out[r, 0, 0] = xs.sum(0)[0]
        out[r, 1, 0] = xs[0, 0] * 3
        out[r, 2] = xs[:, 0, :]
        out[r, 3] = rows[:, r, :]             # row src = what src sent to r
        out[r, 4] = rows[r]
        out[r, 4, r] = rows[:, r, :].sum(0)   # only row r is reduced
    return out


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_every_collective_in_a_kernel(n):
    rng = np.random.default_rng(n)
    xs = rng.integers(-8, 8, (n, 1, S)).astype(np.float32)
    rows = rng.integers(-8, 8, (n, n, S)).astype(np.float32)
    outs = np.zeros((n, 5, n, S), np.float32)
    sigs = np.full((n, n, 1), -1, np.int32)
    all_main(xs, rows, outs, sigs, config=config_for(n))
    np.testing.assert_array_equal(outs, expected(xs, rows))
    np.testing.assert_array_equal(sigs, 0)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_window_and_collective_extents_bound_from_the_world_when_compiled_without_tensors(n):
    # every window and collective extent above is NR: compiled from the
    # config alone, the world binds it, and the call runs with tensors of
    # that world
    compiled = all_main.compile(config=config_for(n))
    rng = np.random.default_rng(10 + n)
    xs = rng.integers(-8, 8, (n, 1, S)).astype(np.float32)
    rows = rng.integers(-8, 8, (n, n, S)).astype(np.float32)
    outs = np.zeros((n, 5, n, S), np.float32)
    sigs = np.full((n, n, 1), -1, np.int32)
    compiled(xs, rows, outs, sigs)
    np.testing.assert_array_equal(outs, expected(xs, rows))
    np.testing.assert_array_equal(sigs, 0)


# --------------------------------------------------------------- HOST builtins
@pl.jit.incore
def stage_kernel(x: pl.Tensor[[1, S], pl.FP32], rows: pl.Tensor[[NR, S], pl.FP32],
                 data: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
                 local: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
                 inp: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
                 rs: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]]):
    pl.store(pl.load(x, [0, 0], [1, S]), [0, 0], data)
    pl.store(pl.load(x, [0, 0], [1, S]), [0, 0], local)
    pl.store(pl.load(rows, [0, 0], [NR, S]), [0, 0], inp)
    pl.store(pl.load(rows, [0, 0], [NR, S]), [0, 0], rs)
    return data


@pl.jit
def stage_chip(x: pl.Tensor[[1, S], pl.FP32], rows: pl.Tensor[[NR, S], pl.FP32],
               data: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
               local: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
               inp: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
               rs: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]]):
    return stage_kernel(x, rows, data, local, inp, rs)


@pl.jit.incore
def read_kernel(out: pl.Out[pl.Tensor[[4, NR, S], pl.FP32]],
                sig_out: pl.Out[pl.Tensor[[NR], pl.INT32]],
                data: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
                gathered: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
                exchanged: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
                rs: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
                sig: pl.InOut[pld.DistributedTensor[[NR], pl.INT32]]):
    pl.store(pl.load(data, [0, 0], [1, S]), [0, 0, 0], out)
    pl.store(pl.load(gathered, [0, 0], [NR, S]), [1, 0, 0], out)
    pl.store(pl.load(exchanged, [0, 0], [NR, S]), [2, 0, 0], out)
    pl.store(pl.load(rs, [0, 0], [NR, S]), [3, 0, 0], out)
    for i in pl.range(NR):
        pl.write(sig_out, [i], pl.read(sig, [i]))
    return out


@pl.jit
def read_chip(out: pl.Out[pl.Tensor[[4, NR, S], pl.FP32]],
              sig_out: pl.Out[pl.Tensor[[NR], pl.INT32]],
              data: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
              gathered: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
              exchanged: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
              rs: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
              sig: pl.InOut[pld.DistributedTensor[[NR], pl.INT32]]):
    return read_kernel(out, sig_out, data, gathered, exchanged, rs, sig)


@pl.jit.host
def host_main(xs: pl.Tensor[[NR, 1, S], pl.FP32], rows: pl.Tensor[[NR, NR, S], pl.FP32],
              outs: pl.Out[pl.Tensor[[NR, 4, NR, S], pl.FP32]],
              sigs: pl.Out[pl.Tensor[[NR, NR], pl.INT32]]):
    data = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
    local = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
    inp = pld.alloc_window_buffer([NR, S], dtype=pl.FP32)
    rs = pld.alloc_window_buffer([NR, S], dtype=pl.FP32)
    gathered = pld.alloc_window_buffer([NR, S], dtype=pl.FP32)
    exchanged = pld.alloc_window_buffer([NR, S], dtype=pl.FP32)
    sig = pld.alloc_window_buffer([NR], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        stage_chip(xs[r], rows[r], pld.window(data, [1, S], dtype=pl.FP32),
                   pld.window(local, [1, S], dtype=pl.FP32),
                   pld.window(inp, [NR, S], dtype=pl.FP32),
                   pld.window(rs, [NR, S], dtype=pl.FP32), device=r)
    s = pld.window(sig, [NR], dtype=pl.INT32)
    pld.tensor.allreduce(pld.window(data, [1, S], dtype=pl.FP32), s, op=pld.ReduceOp.Max)
    pld.tensor.allgather(pld.window(local, [1, S], dtype=pl.FP32),
                         pld.window(gathered, [NR, S], dtype=pl.FP32), s)
    pld.tensor.all_to_all(pld.window(inp, [NR, S], dtype=pl.FP32),
                          pld.window(exchanged, [NR, S], dtype=pl.FP32), s)
    pld.tensor.reduce_scatter(pld.window(rs, [NR, S], dtype=pl.FP32), s)
    s = pld.tensor.barrier(s)
    for r in pl.range(pld.world_size()):
        read_chip(outs[r], sigs[r], pld.window(data, [1, S], dtype=pl.FP32),
                  pld.window(gathered, [NR, S], dtype=pl.FP32),
                  pld.window(exchanged, [NR, S], dtype=pl.FP32),
                  pld.window(rs, [NR, S], dtype=pl.FP32), s, device=r)
    return outs


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_every_collective_as_a_host_builtin(n):
    rng = np.random.default_rng(100 + n)
    xs = rng.standard_normal((n, 1, S)).astype(np.float32)
    rows = rng.standard_normal((n, n, S)).astype(np.float32)
    outs = np.zeros((n, 4, n, S), np.float32)
    sigs = np.full((n, n), -1, np.int32)
    host_main(xs, rows, outs, sigs, config=config_for(n))
    for r in range(n):
        np.testing.assert_array_equal(outs[r, 0, 0], xs.max(0)[0])
        np.testing.assert_array_equal(outs[r, 1], xs[:, 0, :])
        np.testing.assert_array_equal(outs[r, 2], rows[:, r, :])
        want = rows[r].copy()
        want[r] = rows[:, r, :].sum(0)
        np.testing.assert_allclose(outs[r, 3], want, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(sigs, 0)


# --------------------------------------------------------------- all_to_all_v, both paths
CAP = 3                    # MAX_RECV rows per source


def make_a2av(NR):
    """all_to_all_v needs the rank count as a compile-time constant."""

    @pl.jit.incore
    def a2av_kernel(inp: pl.Tensor[[NR * CAP, S], pl.FP32], counts: pl.Tensor[[NR], pl.INT32],
                    out: pl.Out[pl.Tensor[[NR * CAP, S], pl.FP32]],
                    got: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
                    target: pl.InOut[pld.DistributedTensor[[NR * CAP, S], pl.FP32]],
                    sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
                    recv: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
        target = pld.tensor.all_to_all_v(inp, target, sig, counts, recv)
        pl.store(pl.load(target, [0, 0], [NR * CAP, S]), [0, 0], out)
        pl.store(pl.load(recv, [0, 0], [NR, 1]), [0, 0], got)
        return out


    @pl.jit
    def a2av_chip(inp: pl.Tensor[[NR * CAP, S], pl.FP32], counts: pl.Tensor[[NR], pl.INT32],
                  out: pl.Out[pl.Tensor[[NR * CAP, S], pl.FP32]],
                  got: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
                  target: pl.InOut[pld.DistributedTensor[[NR * CAP, S], pl.FP32]],
                  sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
                  recv: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
        return a2av_kernel(inp, counts, out, got, target, sig, recv)


    @pl.jit.host
    def a2av_main(inps: pl.Tensor[[NR, NR * CAP, S], pl.FP32],
                  counts: pl.Tensor[[NR, NR], pl.INT32],
                  outs: pl.Out[pl.Tensor[[NR, NR * CAP, S], pl.FP32]],
                  gots: pl.Out[pl.Tensor[[NR, NR, 1], pl.INT32]]):
        target = pld.alloc_window_buffer([NR * CAP, S], dtype=pl.FP32)
        sig = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
        recv = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            a2av_chip(inps[r], counts[r], outs[r], gots[r],
                      pld.window(target, [NR * CAP, S], dtype=pl.FP32),
                      pld.window(sig, [NR, 1], dtype=pl.INT32),
                      pld.window(recv, [NR, 1], dtype=pl.INT32), device=r)
        return outs


    @pl.jit.incore
    def a2av_stage_kernel(inp: pl.Tensor[[NR * CAP, S], pl.FP32], counts: pl.Tensor[[NR], pl.INT32],
                          win: pl.InOut[pld.DistributedTensor[[NR * CAP, S], pl.FP32]],
                          cwin: pl.InOut[pld.DistributedTensor[[NR], pl.INT32]]):
        pl.store(pl.load(inp, [0, 0], [NR * CAP, S]), [0, 0], win)
        for i in pl.range(NR):
            pl.write(cwin, [i], pl.read(counts, [i]))
        return win


    @pl.jit
    def a2av_stage_chip(inp: pl.Tensor[[NR * CAP, S], pl.FP32], counts: pl.Tensor[[NR], pl.INT32],
                        win: pl.InOut[pld.DistributedTensor[[NR * CAP, S], pl.FP32]],
                        cwin: pl.InOut[pld.DistributedTensor[[NR], pl.INT32]]):
        return a2av_stage_kernel(inp, counts, win, cwin)


    @pl.jit.incore
    def a2av_read_kernel(out: pl.Out[pl.Tensor[[NR * CAP, S], pl.FP32]],
                         got: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
                         target: pl.InOut[pld.DistributedTensor[[NR * CAP, S], pl.FP32]],
                         recv: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
        pl.store(pl.load(target, [0, 0], [NR * CAP, S]), [0, 0], out)
        pl.store(pl.load(recv, [0, 0], [NR, 1]), [0, 0], got)
        return out


    @pl.jit
    def a2av_read_chip(out: pl.Out[pl.Tensor[[NR * CAP, S], pl.FP32]],
                       got: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
                       target: pl.InOut[pld.DistributedTensor[[NR * CAP, S], pl.FP32]],
                       recv: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
        return a2av_read_kernel(out, got, target, recv)


    @pl.jit.host
    def a2av_host_main(inps: pl.Tensor[[NR, NR * CAP, S], pl.FP32],
                       counts: pl.Tensor[[NR, NR], pl.INT32],
                       outs: pl.Out[pl.Tensor[[NR, NR * CAP, S], pl.FP32]],
                       gots: pl.Out[pl.Tensor[[NR, NR, 1], pl.INT32]]):
        inp = pld.alloc_window_buffer([NR * CAP, S], dtype=pl.FP32)
        cnt = pld.alloc_window_buffer([NR], dtype=pl.INT32)
        target = pld.alloc_window_buffer([NR * CAP, S], dtype=pl.FP32)
        sig = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
        recv = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            a2av_stage_chip(inps[r], counts[r], pld.window(inp, [NR * CAP, S], dtype=pl.FP32),
                            pld.window(cnt, [NR], dtype=pl.INT32), device=r)
        pld.tensor.all_to_all_v(pld.window(inp, [NR * CAP, S], dtype=pl.FP32),
                                pld.window(target, [NR * CAP, S], dtype=pl.FP32),
                                pld.window(sig, [NR, 1], dtype=pl.INT32),
                                pld.window(cnt, [NR], dtype=pl.INT32),
                                pld.window(recv, [NR, 1], dtype=pl.INT32))
        for r in pl.range(pld.world_size()):
            a2av_read_chip(outs[r], gots[r], pld.window(target, [NR * CAP, S], dtype=pl.FP32),
                           pld.window(recv, [NR, 1], dtype=pl.INT32), device=r)
        return outs

    return a2av_main, a2av_host_main


def check_a2av(inps, counts, outs, gots):
    n = inps.shape[0]
    for r in range(n):
        for src in range(n):
            k = min(counts[src, r], CAP)
            assert gots[r, src, 0] == k
            np.testing.assert_array_equal(outs[r, src * CAP:src * CAP + k],
                                          inps[src, r * CAP:r * CAP + k])


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_all_to_all_v_in_a_kernel(n):
    rng = np.random.default_rng(200 + n)
    inps = rng.standard_normal((n, n * CAP, S)).astype(np.float32)
    counts = rng.integers(0, CAP + 2, (n, n)).astype(np.int32)     # some above the cap
    outs = np.zeros((n, n * CAP, S), np.float32)
    gots = np.full((n, n, 1), -1, np.int32)
    make_a2av(n)[0](inps, counts, outs, gots, config=config_for(n))
    check_a2av(inps, counts, outs, gots)


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_all_to_all_v_as_a_host_builtin(n):
    rng = np.random.default_rng(300 + n)
    inps = rng.standard_normal((n, n * CAP, S)).astype(np.float32)
    counts = rng.integers(0, CAP + 2, (n, n)).astype(np.int32)
    outs = np.zeros((n, n * CAP, S), np.float32)
    gots = np.full((n, n, 1), -1, np.int32)
    make_a2av(n)[1](inps, counts, outs, gots, config=config_for(n))
    check_a2av(inps, counts, outs, gots)
