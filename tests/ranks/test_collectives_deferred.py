"""Split-phase collectives (``defer=True``): the call in a pl.at task pushes
its data and arrivals and returns; the task's TaskId completes when every
peer has arrived (the epilogue then clears the signal), and tasks with
``deps=[tid]`` read the result.  Checked against numpy at 1-4 ranks:

* allgather with a consumer ordered by deps, and independent work submitted
  between issue and consume;
* back-to-back deferred calls on one signal (ordered by the second call's
  dependency on the first), and the signal all zero after them;
* a deferred call in each arm of a rank-uniform ``if``;
* all_to_all and barrier with defer=True;
* a prepared worker called repeatedly with kept windows.
"""
import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.errors import RankFailure

from programs_prims import WORLD_SIZES, config_for

NR = pl.dynamic("NR")
S = 24
FP32, INT32 = pl.FP32, pl.INT32
ROW = pl.Tensor[[1, S], FP32]
ROWS = pl.Tensor[[NR, S], FP32]
TGT = pl.InOut[pld.DistributedTensor[[NR, S], FP32]]
SIG = pl.InOut[pld.DistributedTensor[[NR, 1], INT32]]
OUTS = 4                         # result slots per rank


@pl.jit
def gather_chip(x: ROW, x2: ROW, rows: ROWS, flag: pl.Tensor[[1, 1], INT32],
                out: pl.Out[pl.Tensor[[OUTS, NR, S], FP32]],
                cells: pl.Out[pl.Tensor[[NR, 1], INT32]],
                side: pl.Out[pl.Tensor[[1, S], FP32]],
                t1: TGT, t2: TGT, t3: TGT, sig: SIG):
    with pl.manual_scope():
        # issue, independent work, consume
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="gather") as g1:
            t1 = pld.tensor.allgather(x, t1, sig, defer=True)
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="independent"):
            side = pl.store(pl.mul(pl.load(x, [0, 0], [1, S]), 2.0), [0, 0], side)
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="consume", deps=[g1]) as c1:
            out = pl.store(pl.load(t1, [0, 0], [NR, S]), [0, 0, 0], out)
        # back to back on the same signal: the second issues after the first
        # completed (its epilogue cleared the cells), and after this rank's
        # reader of t1 -- so once it completes every rank has read its t1
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="gather2", deps=[g1, c1]) as g2:
            t2 = pld.tensor.allgather(x2, t2, sig, defer=True)
        # all_to_all, deferred, after that
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="a2a", deps=[g2]) as g3:
            t3 = pld.tensor.all_to_all(rows, t3, sig, defer=True)
        # a deferred call in each arm of a rank-uniform if, into t1 again:
        # after every rank's first reader of t1 (through g2's barrier)
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="branch", deps=[g3]) as g4:
            f: pl.Scalar[INT32] = pl.read(flag, [0, 0])
            if f > 0:
                t1 = pld.tensor.allgather(x2, t1, sig, defer=True)
            else:
                t1 = pld.tensor.allgather(x, t1, sig, defer=True)
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="consume2", deps=[g2, g3, g4]):
            out = pl.store(pl.load(t2, [0, 0], [NR, S]), [1, 0, 0], out)
            out = pl.store(pl.load(t3, [0, 0], [NR, S]), [2, 0, 0], out)
            out = pl.store(pl.load(t1, [0, 0], [NR, S]), [3, 0, 0], out)
        # a deferred barrier, then the signal: every call has cleared it
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="bar", deps=[g4]) as g5:
            sig = pld.tensor.barrier(sig, defer=True)
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="cells", deps=[g5]):
            cells = pl.store(pl.load(sig, [0, 0], [NR, 1]), [0, 0], cells)
    return out


@pl.jit.host
def gather_main(x: pl.Tensor[[NR, 1, S], FP32], x2: pl.Tensor[[NR, 1, S], FP32],
                rows: pl.Tensor[[NR, NR, S], FP32], flags: pl.Tensor[[NR, 1, 1], INT32],
                out: pl.Out[pl.Tensor[[NR, OUTS, NR, S], FP32]],
                cells: pl.Out[pl.Tensor[[NR, NR, 1], INT32]],
                side: pl.Out[pl.Tensor[[NR, 1, S], FP32]]):
    t1 = pld.alloc_window_buffer([NR, S], dtype=FP32)
    t2 = pld.alloc_window_buffer([NR, S], dtype=FP32)
    t3 = pld.alloc_window_buffer([NR, S], dtype=FP32)
    sig = pld.alloc_window_buffer([NR, 1], dtype=INT32)
    for r in pl.range(pld.world_size()):
        gather_chip(x[r], x2[r], rows[r], flags[r], out[r], cells[r], side[r],
                    pld.window(t1, [NR, S], dtype=FP32), pld.window(t2, [NR, S], dtype=FP32),
                    pld.window(t3, [NR, S], dtype=FP32), pld.window(sig, [NR, 1], dtype=INT32),
                    device=r)
    return out


def gather_args(n, seed, flag):
    rng = np.random.default_rng(seed)
    args = [rng.standard_normal((n, 1, S)).astype(np.float32),
            rng.standard_normal((n, 1, S)).astype(np.float32),
            rng.standard_normal((n, n, S)).astype(np.float32),
            np.full((n, 1, 1), flag, np.int32)]
    outs = [np.full((n, OUTS, n, S), np.nan, np.float32), np.full((n, n, 1), -1, np.int32),
            np.full((n, 1, S), np.nan, np.float32)]
    return args, outs


def check_gather(args, outs):
    x, x2, rows, flags = args
    out, cells, side = outs
    n = x.shape[0]
    for r in range(n):
        what = f"rank {r}"
        np.testing.assert_array_equal(out[r, 0], x[:, 0], what)
        np.testing.assert_array_equal(out[r, 1], x2[:, 0], what)
        np.testing.assert_array_equal(out[r, 2], rows[:, r, :], what)
        np.testing.assert_array_equal(out[r, 3], (x2 if flags[0, 0, 0] > 0 else x)[:, 0], what)
        np.testing.assert_array_equal(side[r], 2 * x[r], what)
    np.testing.assert_array_equal(cells, 0)


@pytest.mark.parametrize("n", WORLD_SIZES)
@pytest.mark.parametrize("flag", [1, 0])
def test_deferred_collectives_match_numpy(n, flag):
    args, outs = gather_args(n, 9100 + n, flag)
    gather_main(*args, *outs, config=config_for(n))
    check_gather(args, outs)


@pytest.mark.parametrize("n", WORLD_SIZES)
@pytest.mark.parametrize("reset", [False, True])
def test_a_prepared_worker_with_kept_windows(n, reset):
    """Repeated calls of a prepared worker on persistent windows: with the
    windows kept as they are between calls (reset=False) each call starts on
    the signal the previous call's epilogues cleared."""
    args, outs = gather_args(n, 9300 + n, 1)
    compiled = gather_main.compile(*args, *outs, config=config_for(n))
    with compiled.prepare(persistent=True, reset_persistent_windows=reset) as rt:
        for call in range(4):
            args, outs = gather_args(n, 9400 + 10 * n + call, call % 2)
            rt(*args, *outs)
            check_gather(args, outs)
        assert rt.persistent_domains == 4       # t1, t2, t3, sig: allocated once, kept


# --------------------------------------------------------------- all_to_all_v
CAP = 3                          # MAX_RECV rows per source


def make_a2av(nr):
    """all_to_all_v needs the rank count as a compile-time constant."""

    @pl.jit
    def a2av_chip(inp: pl.Tensor[[nr * CAP, S], FP32], counts: pl.Tensor[[nr], INT32],
                  out: pl.Out[pl.Tensor[[nr * CAP, S], FP32]],
                  got: pl.Out[pl.Tensor[[nr, 1], INT32]],
                  cells: pl.Out[pl.Tensor[[nr, 1], INT32]],
                  target: pl.InOut[pld.DistributedTensor[[nr * CAP, S], FP32]],
                  sig: pl.InOut[pld.DistributedTensor[[nr, 1], INT32]],
                  recv: pl.InOut[pld.DistributedTensor[[nr, 1], INT32]]):
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="exchange") as x:
            target = pld.tensor.all_to_all_v(inp, target, sig, counts, recv, defer=True)
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="consume", deps=[x]):
            out = pl.store(pl.load(target, [0, 0], [nr * CAP, S]), [0, 0], out)
            got = pl.store(pl.load(recv, [0, 0], [nr, 1]), [0, 0], got)
            cells = pl.store(pl.load(sig, [0, 0], [nr, 1]), [0, 0], cells)
        return out

    @pl.jit.host
    def a2av_main(inps: pl.Tensor[[nr, nr * CAP, S], FP32], counts: pl.Tensor[[nr, nr], INT32],
                  outs: pl.Out[pl.Tensor[[nr, nr * CAP, S], FP32]],
                  gots: pl.Out[pl.Tensor[[nr, nr, 1], INT32]],
                  cells: pl.Out[pl.Tensor[[nr, nr, 1], INT32]]):
        target = pld.alloc_window_buffer([nr * CAP, S], dtype=FP32)
        sig = pld.alloc_window_buffer([nr, 1], dtype=INT32)
        recv = pld.alloc_window_buffer([nr, 1], dtype=INT32)
        for r in pl.range(pld.world_size()):
            a2av_chip(inps[r], counts[r], outs[r], gots[r], cells[r],
                      pld.window(target, [nr * CAP, S], dtype=FP32),
                      pld.window(sig, [nr, 1], dtype=INT32),
                      pld.window(recv, [nr, 1], dtype=INT32), device=r)
        return outs

    return a2av_main


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_deferred_all_to_all_v(n):
    rng = np.random.default_rng(9600 + n)
    inps = rng.standard_normal((n, n * CAP, S)).astype(np.float32)
    counts = rng.integers(0, CAP + 2, (n, n)).astype(np.int32)     # some above the cap
    outs = np.full((n, n * CAP, S), np.nan, np.float32)
    gots = np.full((n, n, 1), -1, np.int32)
    cells = np.full((n, n, 1), -1, np.int32)
    make_a2av(n)(inps, counts, outs, gots, cells, config=config_for(n))
    for r in range(n):
        for src in range(n):
            k = min(counts[src, r], CAP)
            assert gots[r, src, 0] == k
            np.testing.assert_array_equal(outs[r, src * CAP:src * CAP + k],
                                          inps[src, r * CAP:r * CAP + k])
            # the rows past the count keep what the (fresh) target held
            np.testing.assert_array_equal(outs[r, src * CAP + k:(src + 1) * CAP], 0)
    # read after the TaskId completed: the epilogue has cleared this rank's
    # cells, and a peer's next call could only pre-credit by one (none comes)
    np.testing.assert_array_equal(cells, 0)


# --------------------------------------------------------------- broadcast
ONE = pl.InOut[pld.DistributedTensor[[1, S], FP32]]


@pl.jit
def bcast_chip(x: ROW, y: pl.Out[pl.Tensor[[2, S], FP32]], t: ONE, sig: SIG):
    with pl.manual_scope():
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="stage") as s0:
            if pld.rank(pld.get_comm_ctx(t)) == 0:
                t = pl.store(pl.load(x, [0, 0], [1, S]), [0, 0], t)
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="bcast", deps=[s0]) as g1:
            t = pld.tensor.broadcast(t, sig, root=0, defer=True)
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="read", deps=[g1]) as c1:
            y = pl.store(pl.load(t, [0, 0], [1, S]), [0, 0], y)
        # every rank (the root too) overwrites its copy once it has read it and
        # broadcasts again: the root's copy is not read by a slow peer any more
        # once its TaskId completed
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="restage", deps=[c1]) as s1:
            t = pl.store(pl.mul(pl.load(x, [0, 0], [1, S]), 3.0), [0, 0], t)
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="bcast2", deps=[s1]) as g2:
            t = pld.tensor.broadcast(t, sig, root=0, defer=True)
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="read2", deps=[g2]):
            y = pl.store(pl.load(t, [0, 0], [1, S]), [1, 0], y)
    return y


@pl.jit.host
def bcast_main(xs: pl.Tensor[[NR, 1, S], FP32], ys: pl.Out[pl.Tensor[[NR, 2, S], FP32]]):
    t = pld.alloc_window_buffer([1, S], dtype=FP32)
    sig = pld.alloc_window_buffer([NR, 1], dtype=INT32)
    for r in pl.range(pld.world_size()):
        bcast_chip(xs[r], ys[r], pld.window(t, [1, S], dtype=FP32),
                   pld.window(sig, [NR, 1], dtype=INT32), device=r)
    return ys


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_deferred_broadcast(n):
    xs = np.random.default_rng(9700 + n).standard_normal((n, 1, S)).astype(np.float32)
    ys = np.full((n, 2, S), np.nan, np.float32)
    bcast_main(xs, ys, config=config_for(n))
    for r in range(n):
        np.testing.assert_array_equal(ys[r, 0], xs[0, 0], f"rank {r}")
        np.testing.assert_array_equal(ys[r, 1], 3 * xs[0, 0], f"rank {r}")


# --------------------------------------------------------------- unordered calls
@pl.jit
def unordered_chip(x: ROW, t1: TGT, t2: TGT, sig: SIG):
    # rank 0 issues two deferred gathers on one signal with nothing ordering
    # the second after the first; the other ranks never join, so the first
    # is still pending when the second starts, whatever the timing
    with pl.manual_scope():
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="first"):
            if pld.rank(pld.get_comm_ctx(sig)) == 0:
                t1 = pld.tensor.allgather(x, t1, sig, defer=True)
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="second"):
            if pld.rank(pld.get_comm_ctx(sig)) == 0:
                t2 = pld.tensor.allgather(x, t2, sig, defer=True)
    return t2


@pl.jit.host
def unordered_main(x: pl.Tensor[[NR, 1, S], FP32]):
    t1 = pld.alloc_window_buffer([NR, S], dtype=FP32)
    t2 = pld.alloc_window_buffer([NR, S], dtype=FP32)
    sig = pld.alloc_window_buffer([NR, 1], dtype=INT32)
    for r in pl.range(pld.world_size()):
        unordered_chip(x[r], pld.window(t1, [NR, S], dtype=FP32),
                       pld.window(t2, [NR, S], dtype=FP32),
                       pld.window(sig, [NR, 1], dtype=INT32), device=r)


@pytest.mark.parametrize("n", [2, 3])
def test_a_second_call_on_a_signal_with_a_deferred_call_pending_is_refused(n):
    with pytest.raises(RankFailure) as ei:
        # one core: the two tasks run one after the other
        unordered_main(np.zeros((n, 1, S), np.float32), config=config_for(n, cores=1))
    e = ei.value
    assert e.error_code == "TC507", e
    assert "while a defer=True collective on that signal is still pending" in str(e), e
    assert "in task 'second'" in str(e), e
