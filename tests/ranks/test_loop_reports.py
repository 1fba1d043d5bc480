"""Reports of a race or a deadlock inside a ``pl.range`` loop name the
iteration of each access and of each blocked wait, beside its line; the
near-miss twins of the programs (the same loop, correctly ordered) raise
nothing and compute what numpy says."""
import re

import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.check.events import ITERATIONS_READ
from tilecomm.errors import DataRaceError, DeadlockError

from programs_prims import config_for, line_of

NR = pl.dynamic("NR")
S = 16
ROUNDS = 3
ADD = pld.NotifyOp.AtomicAdd
GE = pld.WaitCmp.Ge


# ------------------------------------------------------------------ races
# rank 0 hands one row per round to rank 1 (its window's row ``step``), and
# counts the round in rank 1's signal; rank 1 waits for the count and copies
# the row out.  Racy: the count goes up before the row is stored.
@pl.jit.incore
def hand_rows(x: pl.Tensor[[ROUNDS, S], pl.FP32], y: pl.Out[pl.Tensor[[ROUNDS, S], pl.FP32]],
              win: pl.InOut[pld.DistributedTensor[[ROUNDS, S], pl.FP32]],
              sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
              early: pl.Scalar[pl.INT32]):
    me = pld.rank(pld.get_comm_ctx(win))
    for step in pl.range(ROUNDS):
        if me == 0:
            if early == 1:
                pld.system.notify(sig, 1, [0, 0], 1, op=ADD)  # early-notify
            pld.tile.remote_store(pl.load(x, [step, 0], [1, S]), win, 1, [step, 0])  # hand-store
            if early == 0:
                pld.system.notify(sig, 1, [0, 0], 1, op=ADD)
        if me == 1:
            pld.system.wait(sig, [0, 0], step + 1, cmp=GE)
            pl.store(pl.load(win, [step, 0], [1, S]), [step, 0], y)  # hand-load
    return y


@pl.jit
def hand_chip(x: pl.Tensor[[ROUNDS, S], pl.FP32], y: pl.Out[pl.Tensor[[ROUNDS, S], pl.FP32]],
              win: pl.InOut[pld.DistributedTensor[[ROUNDS, S], pl.FP32]],
              sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
              early: pl.Scalar[pl.INT32]):
    return hand_rows(x, y, win, sig, early)


def hand_main(early: int):
    @pl.jit.host
    def main(xs: pl.Tensor[[NR, ROUNDS, S], pl.FP32],
             ys: pl.Out[pl.Tensor[[NR, ROUNDS, S], pl.FP32]]):
        wbuf = pld.alloc_window_buffer([ROUNDS, S], dtype=pl.FP32)
        sbuf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            hand_chip(xs[r], ys[r], pld.window(wbuf, [ROUNDS, S], dtype=pl.FP32),
                      pld.window(sbuf, [1, 1], dtype=pl.INT32), early, device=r)
        return ys
    return main


hand_racy, hand_safe = hand_main(1), hand_main(0)


def hand_inputs(n):
    return np.random.default_rng(n).integers(-9, 10, (n, ROUNDS, S)).astype(np.float32)


@pytest.mark.parametrize("n", [2, 3])
def test_a_race_in_a_loop_names_the_iteration_of_both_accesses(n):
    xs, ys = hand_inputs(n), np.zeros((n, ROUNDS, S), np.float32)
    with pytest.raises(DataRaceError) as ei:
        hand_racy(xs, ys, config=config_for(n, detect_races=True))
    store, load = line_of(hand_rows, "hand-store"), line_of(hand_rows, "hand-load")
    hits = [r for r in ei.value.races
            if {(a.rank, int(a.line.rsplit(":", 1)[1])) for a in (r.first, r.second)} ==
            {(0, store), (1, load)}]
    assert hits, str(ei.value)
    for race in hits:
        steps = {a.iteration for a in (race.first, race.second)}
        # the rows of two rounds are disjoint: a race is within one round
        assert len(steps) == 1 and steps.pop() in {f"step={k}" for k in range(ROUNDS)}, race
        it = race.first.iteration
        assert f":{store} (iteration {it})" in str(ei.value)
        assert f":{load} (iteration {it})" in str(ei.value)
    # the wait the load comes after is named with its round too, and the
    # early notify that satisfies it
    text = str(ei.value)
    assert f":{line_of(hand_rows, 'early-notify')} (iteration step=" in text


@pytest.mark.parametrize("n", [2, 3])
def test_the_loop_with_the_notify_after_the_store_raises_nothing(n):
    xs, ys = hand_inputs(n), np.zeros((n, ROUNDS, S), np.float32)
    hand_safe(xs, ys, config=config_for(n, detect_races=True))
    want = np.zeros_like(ys)
    want[1] = xs[0]
    np.testing.assert_array_equal(ys, want)


# ------------------------------------------------------------------ deadlocks
# a ring of counters: in each round every rank counts itself in at its right
# neighbour and waits for its left neighbour's count to reach the round.  The
# deadlocked form stops counting one round early: every rank blocks in the
# last round.
@pl.jit.incore
def ring_rounds(y: pl.Out[pl.Tensor[[1, ROUNDS], pl.INT32]],
                sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
                counted: pl.Scalar[pl.INT32]):
    ctx = pld.get_comm_ctx(sig)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    for step in pl.range(ROUNDS):
        if step < counted:
            pld.system.notify(sig, (me + 1) % n, [0, 0], 1, op=ADD)
        pld.system.wait(sig, [0, 0], step + 1, cmp=GE)  # ring-wait
        pl.write(y, [0, step], step + 1)
    return y


@pl.jit
def ring_chip(y: pl.Out[pl.Tensor[[1, ROUNDS], pl.INT32]],
              sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
              counted: pl.Scalar[pl.INT32]):
    return ring_rounds(y, sig, counted)


def ring_main(counted: int):
    @pl.jit.host
    def main(ys: pl.Out[pl.Tensor[[NR, 1, ROUNDS], pl.INT32]]):
        sbuf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            ring_chip(ys[r], pld.window(sbuf, [1, 1], dtype=pl.INT32), counted, device=r)
        return ys
    return main


ring_short, ring_full = ring_main(ROUNDS - 1), ring_main(ROUNDS)


@pytest.mark.parametrize("n", [2, 3])
def test_a_deadlock_in_a_loop_names_the_iteration_of_each_blocked_wait(n):
    ys = np.zeros((n, 1, ROUNDS), np.int32)
    with pytest.raises(DeadlockError) as ei:
        ring_short(ys, config=config_for(n, deadlock_timeout_s=0.2))
    text = str(ei.value)
    line = line_of(ring_rounds, "ring-wait")
    last = f"step={ROUNDS - 1}"
    for r in range(n):
        assert f"rank {r}: pld.system.wait at " in text
    at = re.findall(rf"rank (\d+): pld\.system\.wait at \S+:{line}:\d+ \(iteration (\S+)\) "
                    rf"in ring_rounds", text)
    assert sorted(at) == [(str(r), last) for r in range(n)], text
    assert [b["iteration"] for b in ei.value.blocked] == [last] * n


@pytest.mark.parametrize("n", [2, 3])
def test_the_ring_that_counts_every_round_completes(n):
    ys = np.zeros((n, 1, ROUNDS), np.int32)
    ring_full(ys, config=config_for(n))
    np.testing.assert_array_equal(ys, np.tile(np.arange(1, ROUNDS + 1, dtype=np.int32),
                                              (n, 1, 1)))


# rank 0 fills its window's rows in a loop, nothing between the rounds; rank 1
# reads the last row.  The replay keeps rank 0's stores as one record (one
# thread, one epoch, one line): the race still names the round that wrote the
# row it is on.  Near miss: rank 1 waits for rank 0's count first.
@pl.jit.incore
def fill_rows(x: pl.Tensor[[ROUNDS, S], pl.FP32], y: pl.Out[pl.Tensor[[ROUNDS, S], pl.FP32]],
              win: pl.InOut[pld.DistributedTensor[[ROUNDS, S], pl.FP32]],
              sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
              early: pl.Scalar[pl.INT32]):
    me = pld.rank(pld.get_comm_ctx(win))
    if me == 0:
        for step in pl.range(ROUNDS):
            pl.store(pl.load(x, [step, 0], [1, S]), [step, 0], win)  # fill-store
        pld.system.notify(sig, 1, [0, 0], 1, op=ADD)
    if me == 1:
        if early == 0:
            pld.system.wait(sig, [0, 0], 1, cmp=GE)
        last = pld.tile.remote_load(win, 0, [ROUNDS - 1, 0], [1, S])  # fill-load
        pl.store(last, [0, 0], y)
    return y


@pl.jit
def fill_chip(x: pl.Tensor[[ROUNDS, S], pl.FP32], y: pl.Out[pl.Tensor[[ROUNDS, S], pl.FP32]],
              win: pl.InOut[pld.DistributedTensor[[ROUNDS, S], pl.FP32]],
              sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
              early: pl.Scalar[pl.INT32]):
    return fill_rows(x, y, win, sig, early)


def fill_main(early: int):
    @pl.jit.host
    def main(xs: pl.Tensor[[NR, ROUNDS, S], pl.FP32],
             ys: pl.Out[pl.Tensor[[NR, ROUNDS, S], pl.FP32]]):
        wbuf = pld.alloc_window_buffer([ROUNDS, S], dtype=pl.FP32)
        sbuf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            fill_chip(xs[r], ys[r], pld.window(wbuf, [ROUNDS, S], dtype=pl.FP32),
                      pld.window(sbuf, [1, 1], dtype=pl.INT32), early, device=r)
        return ys
    return main


fill_racy, fill_safe = fill_main(1), fill_main(0)


@pytest.mark.parametrize("n", [2, 3])
def test_a_race_on_one_round_of_a_loop_names_that_round(n):
    xs, ys = hand_inputs(n), np.zeros((n, ROUNDS, S), np.float32)
    with pytest.raises(DataRaceError) as ei:
        fill_racy(xs, ys, config=config_for(n, detect_races=True))
    store = line_of(fill_rows, "fill-store")
    firsts = [r.first for r in ei.value.races if r.first.line.endswith(f":{store}")]
    assert firsts, str(ei.value)
    assert {a.iteration for a in firsts} == {f"step={ROUNDS - 1}"}, str(ei.value)
    assert all(r.second.iteration == "" for r in ei.value.races)     # the load is in no loop


@pytest.mark.parametrize("n", [2, 3])
def test_the_filled_rows_read_after_the_count_raise_nothing(n):
    xs, ys = hand_inputs(n), np.zeros((n, ROUNDS, S), np.float32)
    fill_safe(xs, ys, config=config_for(n, detect_races=True))
    want = np.zeros_like(ys)
    want[1, 0] = xs[0, ROUNDS - 1]
    np.testing.assert_array_equal(ys, want)


# The same fill over more rounds than a thread's loop iterations are read for
# (ITERATIONS_READ of one line between two synchronisations): a race on a row
# stored in an early round names that round; on a later row, the last round
# read "or later" -- and its region is that row either way.
LONG = ITERATIONS_READ + 6


@pl.jit.incore
def fill_long(x: pl.Tensor[[LONG, S], pl.FP32], y: pl.Out[pl.Tensor[[1, S], pl.FP32]],
              win: pl.InOut[pld.DistributedTensor[[LONG, S], pl.FP32]],
              row: pl.Scalar[pl.INT32]):
    me = pld.rank(pld.get_comm_ctx(win))
    if me == 0:
        for step in pl.range(LONG):
            pl.store(pl.load(x, [step, 0], [1, S]), [step, 0], win)  # long-store
    if me == 1:
        pl.store(pld.tile.remote_load(win, 0, [row, 0], [1, S]), [0, 0], y)
    return y


@pl.jit
def fill_long_chip(x: pl.Tensor[[LONG, S], pl.FP32], y: pl.Out[pl.Tensor[[1, S], pl.FP32]],
                   win: pl.InOut[pld.DistributedTensor[[LONG, S], pl.FP32]],
                   row: pl.Scalar[pl.INT32]):
    return fill_long(x, y, win, row)


@pl.jit.host
def fill_long_main(xs: pl.Tensor[[NR, LONG, S], pl.FP32],
                   ys: pl.Out[pl.Tensor[[NR, 1, S], pl.FP32]], row: pl.Scalar[pl.INT32]):
    wbuf = pld.alloc_window_buffer([LONG, S], dtype=pl.FP32)
    for r in pl.range(pld.world_size()):
        fill_long_chip(xs[r], ys[r], pld.window(wbuf, [LONG, S], dtype=pl.FP32), row, device=r)
    return ys


@pytest.mark.parametrize("row,named", [(5, "step=5"),
                                       (LONG - 1, f"step={ITERATIONS_READ - 1} or later")])
def test_a_race_past_the_rounds_read_names_the_last_round_read_or_later(row, named):
    n = 2
    xs = np.random.default_rng(3).integers(-9, 10, (n, LONG, S)).astype(np.float32)
    ys = np.zeros((n, 1, S), np.float32)
    with pytest.raises(DataRaceError) as ei:
        fill_long_main(xs, ys, row, config=config_for(n, detect_races=True))
    store = line_of(fill_long, "long-store")
    races = [r for r in ei.value.races if r.first.line.endswith(f":{store}")]
    assert races, str(ei.value)
    assert {r.first.iteration for r in races} == {named}, str(ei.value)
    assert f"[{row}:{row + 1}, 0:{S}]" in str(ei.value)
