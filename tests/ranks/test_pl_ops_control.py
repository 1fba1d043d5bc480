"""Control flow and placement: ``while`` loops, ``pl.while_`` + ``pl.cond``,
``pl.parallel``, ``pl.split_aiv`` lanes (a notify outside a lane guard
fires once per lane, as on the chip), tensor ops in a ``pl.at(CORE_GROUP)``
block of a chip orchestration, and a spinning loop that stops when another
rank fails.  References are plain Python / numpy; lane counts are checked on
the signal cells every rank ends up with, at world sizes 1-4."""
import time

import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.errors import RankFailure
from tilecomm.runtime.messages import EXIT_ABORTED

from programs_prims import config_for

NR = pl.dynamic("NR")
WORLD_SIZES = [1, 2, 3, 4]
LOCAL_SIZES = [1, 2]


# ------------------------------------------------------------------ loops
@pl.jit.incore
def loops_kernel(y: pl.InOut[pl.Tensor[[1, 8], pl.INDEX]], r: pl.Scalar[pl.INDEX]):
    # Collatz steps of r + 6: a while loop with a data-dependent trip count
    v = r + 6
    steps = 0
    while v != 1:
        if v % 2 == 0:
            v = v // 2
        else:
            v = 3 * v + 1
        steps += 1
    pl.write(y, [0, 0], steps)
    # pl.while_ with carried values: the first power of 3 above 50 * (r + 1)
    for (p, k) in pl.while_(init_values=(1, 0)):
        pl.cond(p <= 50 * (r + 1))
        p_out, k_out = pl.yield_(p * 3, k + 1)
    pl.write(y, [0, 1], p_out)
    pl.write(y, [0, 2], k_out)
    # a pl.while_ whose condition is false at once keeps its init values
    for (q,) in pl.while_(init_values=(r + 40,)):
        pl.cond(q < 0)
        q_out = pl.yield_(q - 1)
    pl.write(y, [0, 3], q_out)
    # pl.parallel with carried values
    for i, (acc,) in pl.parallel(5, init_values=(0,)):
        total = pl.yield_(acc + i * r)
    pl.write(y, [0, 4], total)
    return y


@pl.jit
def loops_chip(y: pl.InOut[pl.Tensor[[1, 8], pl.INDEX]], r: pl.Scalar[pl.INDEX]):
    return loops_kernel(y, r)


@pl.jit.host
def loops_main(ys: pl.InOut[pl.Tensor[[NR, 1, 8], pl.INDEX]]):
    for r in pl.range(pld.world_size()):
        loops_chip(ys[r], r, device=r)
    return ys


def collatz(v):
    n = 0
    while v != 1:
        v = v // 2 if v % 2 == 0 else 3 * v + 1
        n += 1
    return n


@pytest.mark.parametrize("n", LOCAL_SIZES)
def test_while_loops_and_parallel(n):
    ys = np.full((n, 1, 8), -5, np.int64)
    loops_main(ys, config=config_for(n))
    for r in range(n):
        p, k = 1, 0
        while p <= 50 * (r + 1):
            p, k = p * 3, k + 1
        assert list(ys[r, 0, :5]) == [collatz(r + 6), p, k, r + 40, sum(i * r for i in range(5))]


# ------------------------------------------------------------------ AIV lanes
@pl.jit.incore
def lanes_kernel(cells: pl.InOut[pld.DistributedTensor[[2, 1], pl.INT32]],
                 out: pl.InOut[pl.Tensor[[1, 8], pl.INT32]]):
    ctx = pld.get_comm_ctx(cells)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    nxt = (me + 1) % n
    for aiv_id in pl.split_aiv(2, mode=pl.SplitMode.NONE):
        # outside a lane guard: both lanes notify, the peer's counter reads 2
        pld.system.notify(cells, nxt, [0, 0], 1, op=pld.NotifyOp.AtomicAdd)
        if aiv_id == 0:                           # guarded: once
            pld.system.notify(cells, nxt, [1, 0], 1, op=pld.NotifyOp.AtomicAdd)
        pl.write(out, [0, 2 + aiv_id], 10 * (aiv_id + 1) + pl.tile.get_subblock_idx())
    pl.write(out, [0, 4], pl.tile.get_subblock_idx())         # back to 0 after the region
    pld.system.wait(cells, [0, 0], 2, cmp=pld.WaitCmp.Ge)
    pld.system.wait(cells, [1, 0], 1, cmp=pld.WaitCmp.Ge)
    pl.write(out, [0, 0], pl.read(cells, [0, 0]))
    pl.write(out, [0, 1], pl.read(cells, [1, 0]))
    return out


@pl.jit
def lanes_chip(cells: pl.InOut[pld.DistributedTensor[[2, 1], pl.INT32]],
               out: pl.InOut[pl.Tensor[[1, 8], pl.INT32]]):
    return lanes_kernel(cells, out)


@pl.jit.host
def lanes_main(outs: pl.InOut[pl.Tensor[[NR, 1, 8], pl.INT32]]):
    buf = pld.alloc_window_buffer([2, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        lanes_chip(pld.window(buf, [2, 1], dtype=pl.INT32), outs[r], device=r)
    return outs


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_split_aiv_runs_each_lane(n):
    outs = np.full((n, 1, 8), -1, np.int32)
    lanes_main(outs, config=config_for(n))
    for r in range(n):
        assert list(outs[r, 0, :5]) == [2, 1, 10, 21, 0], (r, outs[r])


# ------------------------------------------------------------------ tensor ops in pl.at
@pl.jit
def placed_chip(x: pl.Tensor[[2, 8], pl.FP32], y: pl.InOut[pl.Tensor[[2, 8], pl.FP32]]):
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="scale"):
        y[0:2, 0:8] = pl.add(pl.mul(x, 2.0), 1.0)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="shift"):
        y[1:2, 0:8] = y[1:2, 0:8] - x[0:1, 0:8]
    return y


@pl.jit.host
def placed_main(xs: pl.Tensor[[NR, 2, 8], pl.FP32], ys: pl.InOut[pl.Tensor[[NR, 2, 8], pl.FP32]]):
    for r in pl.range(pld.world_size()):
        placed_chip(xs[r], ys[r], device=r)
    return ys


@pytest.mark.parametrize("n", LOCAL_SIZES)
def test_tensor_ops_run_as_tasks_inside_pl_at(n):
    rng = np.random.default_rng(500 + n)
    xs = rng.integers(-9, 10, size=(n, 2, 8)).astype(np.float32)
    ys = np.zeros((n, 2, 8), np.float32)
    placed_main(xs, ys, config=config_for(n))
    for r in range(n):
        exp = 2 * xs[r] + 1
        exp[1] -= xs[r, 0]
        np.testing.assert_array_equal(ys[r], exp)


# ------------------------------------------------------------------ a spinning loop is stopped
@pl.jit.incore
def spin_kernel(cells: pl.InOut[pld.DistributedTensor[[2, 1], pl.INT32]],
                out: pl.InOut[pl.Tensor[[1, 8], pl.INT32]]):
    me = pld.rank(pld.get_comm_ctx(cells))
    if me == 0:
        pld.system.notify(cells, 99, [0, 0], 1, op=pld.NotifyOp.Set)    # fails: no peer 99
    spins = 0
    while pl.read(cells, [1, 0]) == 0:             # nobody ever writes it
        spins += 1
    pl.write(out, [0, 0], spins)
    return out


@pl.jit
def spin_chip(cells: pl.InOut[pld.DistributedTensor[[2, 1], pl.INT32]],
              out: pl.InOut[pl.Tensor[[1, 8], pl.INT32]]):
    return spin_kernel(cells, out)


@pl.jit.host
def spin_main(outs: pl.InOut[pl.Tensor[[NR, 1, 8], pl.INT32]]):
    buf = pld.alloc_window_buffer([2, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        spin_chip(pld.window(buf, [2, 1], dtype=pl.INT32), outs[r], device=r)
    return outs


@pytest.mark.parametrize("n", [2, 3])
def test_a_spinning_while_loop_stops_when_another_rank_fails(n):
    outs = np.zeros((n, 1, 8), np.int32)
    t0 = time.monotonic()
    with pytest.raises(RankFailure) as ei:
        spin_main(outs, config=config_for(n, deadlock_timeout_s=60))
    assert time.monotonic() - t0 < 10
    assert ei.value.rank == 0 and ei.value.error_code == "TC501", str(ei.value)
    # the spinning ranks noticed the abort themselves (they were not killed)
    assert {r: ei.value.exit_codes[r] for r in range(1, n)} == {r: EXIT_ABORTED
                                                                 for r in range(1, n)}
