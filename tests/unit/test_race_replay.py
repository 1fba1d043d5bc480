"""The race check's replay on hand-made event logs: which notifies a wait
needs (Set, AtomicAdd prefix, Eq, a condition true before any notify), in
either modification order; barriers, tasks, dispatch waits; the byte runs of
regions; and the report's fields."""
import tracemalloc

import numpy as np
import pytest

from tilecomm import _native_core as native
from tilecomm.check.events import (ACCESS, AFTER, ATOMIC, BARRIER, BASE, CLOSE, COND, DONE,
                                   MAIN, NOTIFY, READ, SUBMIT, WAIT, WRITE, byte_runs)
from tilecomm.check.races import _Shadow, find_races, region_text
from tilecomm.errors import DataRaceError, InternalError
from tilecomm.waits import CMP_EQ, CMP_GE, CMP_GE_U

ADD, SET = native.OP_ADD, native.OP_SET
DATA = (7, 0)                       # buffer 7, rank 0's copy
CELL = (8, 0, 0)                    # buffer 8, rank 0's copy, byte 0
NAMES = {7: "data", 8: "sig"}


def acc(thr, runs, kind, line, where=DATA, op=None):
    op = op or ("pl.load" if kind == READ else "pld.remote_store")
    return (ACCESS, thr, where, runs, kind, op, f"f.py:{line}", "k", (4, 8), 4)


def notify(thr, op, value, result, seq, line, cell=CELL):
    return (NOTIFY, thr, cell, op, value, result, seq, f"f.py:{line}", "k")


def wait(thr, cmp, expected, seen, line, cell=CELL):
    return (WAIT, thr, cell, cmp, expected, seen, f"f.py:{line}", "k", "sig[0] on rank 0")


ROW0 = ((0, 32),)                   # row 0 of a [4, 8] float32 view
ROW1 = ((32, 64),)


def pairs(races):
    return {frozenset(((r.first.rank, r.first.line), (r.second.rank, r.second.line)))
            for r in races}


def two_producers(first: int, threshold: int):
    """Ranks 1 and 2 each store a row of rank 0's window and add 1 into its
    counter; rank 0 waits ``Ge threshold`` and reads both rows.  ``first``:
    the producer whose add took effect first."""
    seq = {first: 1, 3 - first: 2}
    logs = {
        1: [acc(MAIN, ROW0, WRITE, 11), notify(MAIN, ADD, 1, seq[1], seq[1], 12)],
        2: [acc(MAIN, ROW1, WRITE, 21), notify(MAIN, ADD, 1, seq[2], seq[2], 22)],
        0: [wait(MAIN, CMP_GE, threshold, 2, 30), acc(MAIN, ROW0, READ, 31),
            acc(MAIN, ROW1, READ, 32)],
    }
    return logs


def notify_p(thr, op, value, result, seq, line, prev, cell=CELL):
    """A notify with the value it changed (what the rank records)."""
    return notify(thr, op, value, result, seq, line, cell) + (prev,)


BOTH = {frozenset({(1, "f.py:11"), (0, "f.py:31")}), frozenset({(2, "f.py:21"), (0, "f.py:32")})}


@pytest.mark.parametrize("first", [1, 2])
def test_ge_1_on_two_adds_orders_after_neither_producer_in_either_order(first):
    """Either add alone satisfies Ge 1: in some order the waiter looks before
    the other producer's add, so both rows race -- whichever order this run
    saw."""
    races, omitted = find_races(two_producers(first, 1), NAMES)
    assert omitted == 0 and pairs(races) == BOTH
    for race in races:
        assert race.buffer == "data" and race.owner == 0
        assert race.second.kind == "read" and race.first.kind == "write"
        assert f"without rank {race.first.rank}'s notify at f.py:{race.first.rank}2" in race.why
    assert {r.region for r in races} == {"[0:1, 0:8]", "[1:2, 0:8]"}


@pytest.mark.parametrize("first", [1, 2])
def test_ge_2_needs_both_adds(first):
    assert find_races(two_producers(first, 2), NAMES) == ((), 0)


@pytest.mark.parametrize("first", [1, 2])
def test_adds_of_2_and_1_with_ge_2_race_with_the_1_adder_in_either_order(first):
    """Rank 1 adds 2, rank 2 adds 1, rank 0 waits Ge 2: rank 1's add is
    needed in every order, rank 2's in none."""
    seq = {first: 1, 3 - first: 2}
    res = {1: 2 if first == 1 else 3, 2: 1 if first == 2 else 3}
    logs = {1: [acc(MAIN, ROW0, WRITE, 11), notify(MAIN, ADD, 2, res[1], seq[1], 12)],
            2: [acc(MAIN, ROW1, WRITE, 21), notify(MAIN, ADD, 1, res[2], seq[2], 22)],
            0: [wait(MAIN, CMP_GE, 2, 2, 30), acc(MAIN, ROW0, READ, 31),
                acc(MAIN, ROW1, READ, 32)]}
    assert pairs(find_races(logs, NAMES)[0]) == {frozenset({(2, "f.py:21"), (0, "f.py:32")})}
    logs[0][0] = wait(MAIN, CMP_GE, 3, 2, 30)
    assert find_races(logs, NAMES) == ((), 0)


@pytest.mark.parametrize("first", [1, 2])
def test_two_ranks_setting_the_cell_order_neither(first):
    """Rank 1 and rank 2 each Set 1 after their store; Eq 1 holds after
    either: both rows race, whichever Set landed first."""
    seq = {first: 1, 3 - first: 2}
    logs = {1: [acc(MAIN, ROW0, WRITE, 11), notify_p(MAIN, SET, 1, 1, seq[1], 12,
                                                     0 if first == 1 else 1)],
            2: [acc(MAIN, ROW1, WRITE, 21), notify_p(MAIN, SET, 1, 1, seq[2], 22,
                                                     0 if first == 2 else 1)],
            0: [wait(MAIN, CMP_EQ, 1, 2, 30), acc(MAIN, ROW0, READ, 31),
                acc(MAIN, ROW1, READ, 32)]}
    assert pairs(find_races(logs, NAMES)[0]) == BOTH


def test_a_set_of_a_value_only_it_writes_is_needed():
    # rank 1 sets 1, rank 2 sets 2; Eq 2 holds only after rank 2's Set
    logs = {
        1: [acc(MAIN, ROW0, WRITE, 11), notify_p(MAIN, SET, 1, 1, 1, 12, 0)],
        2: [acc(MAIN, ROW1, WRITE, 21), notify_p(MAIN, SET, 2, 2, 2, 22, 1)],
        0: [wait(MAIN, CMP_EQ, 2, 2, 30), acc(MAIN, ROW0, READ, 31), acc(MAIN, ROW1, READ, 32)],
    }
    assert pairs(find_races(logs, NAMES)[0]) == {frozenset({(1, "f.py:11"), (0, "f.py:31")})}


@pytest.mark.parametrize("cmp", [CMP_EQ, CMP_GE])
def test_a_set_to_the_value_the_cell_already_holds_orders_nothing(cmp):
    """ "Done" announced with Set 0 into a fresh cell, or a flag of 1 kept from
    an earlier call and Set to 1 again: the wait held before the notify."""
    for value in (0, 1):
        logs = {1: [acc(MAIN, ROW0, WRITE, 11), notify_p(MAIN, SET, value, value, 1, 12, value)],
                0: [wait(MAIN, cmp, value, 1, 30), acc(MAIN, ROW0, READ, 31)]}
        assert pairs(find_races(logs, NAMES)[0]) == {frozenset({(1, "f.py:11"),
                                                                (0, "f.py:31")})}
        # the threshold raised past what the cell held: ordered
        logs[1][1] = notify_p(MAIN, SET, value + 1, value + 1, 1, 12, value)
        logs[0][0] = wait(MAIN, cmp, value + 1, 1, 30)
        assert find_races(logs, NAMES) == ((), 0)


def test_a_condition_true_before_any_notify_orders_nothing():
    logs = {
        1: [acc(MAIN, ROW0, WRITE, 11), notify(MAIN, ADD, 1, 6, 1, 12)],   # 5 -> 6
        0: [wait(MAIN, CMP_GE, 5, 1, 30), acc(MAIN, ROW0, READ, 31)],
    }
    assert pairs(find_races(logs, NAMES)[0]) == {frozenset({(1, "f.py:11"), (0, "f.py:31")})}


GO = (9, 1, 0)                      # rank 1's "go" cell (and rank 2's)


def test_an_add_needs_every_add_back_to_the_last_set():
    # rank 3's add is waited for, then reset (Set 0) by rank 0, which then
    # lets ranks 1 and 2 go; their adds after the reset make Ge 2: both are
    # needed, and rank 3's write is ordered by the first wait
    logs = {
        3: [acc(MAIN, ROW1, WRITE, 41), notify_p(MAIN, ADD, 1, 1, 1, 42, 0)],
        0: [wait(MAIN, CMP_GE, 1, 1, 29), notify_p(MAIN, SET, 0, 0, 2, 30, 1),
            notify_p(MAIN, SET, 1, 1, 5, 31, 0, cell=GO),
            wait(MAIN, CMP_GE, 2, 4, 33), acc(MAIN, ROW0, READ, 34), acc(MAIN, ROW1, READ, 35),
            acc(MAIN, ((64, 96),), READ, 36)],
        1: [wait(MAIN, CMP_GE, 1, 5, 10, cell=GO), acc(MAIN, ROW0, WRITE, 11),
            notify_p(MAIN, ADD, 1, 1, 3, 12, 0)],
        2: [wait(MAIN, CMP_GE, 1, 5, 20, cell=GO), acc(MAIN, ((64, 96),), WRITE, 21),
            notify_p(MAIN, ADD, 1, 2, 4, 22, 1)],
    }
    assert find_races(logs, NAMES) == ((), 0)


def credit_ring(rounds: int, ahead: int, store_first: bool = True) -> dict:
    """The logs of two ranks running the self-clearing credit ring over
    ``rounds``: store into the peer's half for the round (double-buffered),
    +1 into the peer's cell, wait Ge 1 on your own cell, -1 on your own
    cell, read what the peer stored.  Rank ``ahead`` moves whenever it can,
    so it pre-credits the other's next round before that rank's -1 lands."""
    cells = {0: (8, 0, 0), 1: (8, 1, 0)}
    data = {0: (7, 0), 1: (7, 1)}
    value = {0: 0, 1: 0}
    seq = [0]
    logs = {0: [], 1: []}
    steps = {r: [] for r in (0, 1)}
    for r in (0, 1):
        for k in range(rounds):
            half = ((0, 32),) if k % 2 == 0 else ((32, 64),)
            mine = [("store", half), ("credit", 1 - r, 1)]
            steps[r] += (mine if store_first else mine[::-1]) + \
                [("wait",), ("credit", r, -1), ("read", half)]

    def move(r) -> bool:
        step = steps[r][0]
        if step[0] == "wait" and value[r] < 1:
            return False
        steps[r].pop(0)
        line = {"store": 10, "credit": 11, "wait": 12, "read": 14}[step[0]] + 100 * r
        if step[0] == "store":
            logs[r].append(acc(MAIN, step[1], WRITE, line, where=data[1 - r]))
        elif step[0] == "read":
            logs[r].append(acc(MAIN, step[1], READ, line, where=data[r]))
        elif step[0] == "wait":
            logs[r].append(wait(MAIN, CMP_GE, 1, seq[0], line, cell=cells[r]))
        else:
            cell, delta = step[1], step[2]
            seq[0] += 1
            prev = value[cell]
            value[cell] += delta
            logs[r].append(notify_p(MAIN, ADD, delta, value[cell], seq[0], line + delta, prev,
                                    cell=cells[cell]))
        return True

    while steps[0] or steps[1]:
        if not (steps[ahead] and move(ahead)):
            assert move(1 - ahead), "the ring is stuck"
    return logs


@pytest.mark.parametrize("ahead", [0, 1])
def test_the_waiters_own_updates_count_self_clearing_credits_over_rounds(ahead):
    """A fast rank's next credit lands before the slow rank's -1 of this
    round: the slow rank's next wait is satisfied by that early credit, with
    its own -1 counted against it -- the credit it needs is the next round's,
    not the first one the cell ever saw."""
    assert find_races(credit_ring(4, ahead), NAMES) == ((), 0)
    # the credit before the store: every round's data races with its read
    assert len(find_races(credit_ring(4, ahead, store_first=False), NAMES)[0]) >= 1


def test_atomic_adds_do_not_race_and_a_plain_store_does():
    one = ((0, 4),)
    logs = {r: [acc(MAIN, one, ATOMIC, 10 + r)] for r in range(3)}
    assert find_races(logs, NAMES) == ((), 0)
    logs[3] = [acc(MAIN, one, WRITE, 13)]
    assert pairs(find_races(logs, NAMES)[0]) == {
        frozenset({(r, f"f.py:{10 + r}"), (3, "f.py:13")}) for r in range(3)}


def test_a_plain_read_of_a_signal_cell_races_with_a_notify_into_it():
    cell_data = (8, 0)
    logs = {1: [notify(MAIN, SET, 1, 1, 1, 12)],
            0: [acc(MAIN, ((0, 4),), READ, 30, where=cell_data, op="pl.read")]}
    (race,) = find_races(logs, NAMES)[0]
    assert {race.first.op, race.second.op} == {"pld.system.notify", "pl.read"}
    # after a wait the notify satisfied, it is ordered
    logs[0].insert(0, wait(MAIN, CMP_GE, 1, 1, 29))
    assert find_races(logs, NAMES) == ((), 0)


def test_a_barrier_orders_what_comes_before_any_arrival_before_any_departure():
    def bar(line):
        return (BARRIER, MAIN, (8, 1, 0, 1), 2, f"f.py:{line}", "pld.tensor.barrier")
    before = {1: [acc(MAIN, ROW0, WRITE, 11), bar(12)], 0: [bar(30), acc(MAIN, ROW0, READ, 31)]}
    assert find_races(before, NAMES) == ((), 0)
    after = {1: [bar(12), acc(MAIN, ROW0, WRITE, 13)], 0: [bar(30), acc(MAIN, ROW0, READ, 31)]}
    assert pairs(find_races(after, NAMES)[0]) == {frozenset({(1, "f.py:13"), (0, "f.py:31")})}


def test_tasks_are_ordered_by_their_predecessors_and_the_scope_end():
    def log(preds):
        return {0: [(SUBMIT, MAIN, 1, "a", 1, (), "f.py:1"),
                    (SUBMIT, MAIN, 2, "b", 1, preds, "f.py:2"),
                    acc((1, 0), ROW0, WRITE, 10), acc((2, 0), ROW0, WRITE, 20),
                    (CLOSE, MAIN, (1, 2)), acc(MAIN, ROW0, READ, 30)]}
    assert find_races(log((1,)), NAMES) == ((), 0)
    (race,) = find_races(log(()), NAMES)[0]
    assert pairs([race]) == {frozenset({(0, "f.py:10"), (0, "f.py:20")})}
    assert "'a' and 'b' run concurrently" in race.why


def test_the_blocks_of_one_task_are_independent():
    logs = {0: [(SUBMIT, MAIN, 1, "rows", 2, (), "f.py:1"),
                acc((1, 0), ROW0, WRITE, 10), acc((1, 1), ((0, 64),), WRITE, 10),
                (CLOSE, MAIN, (1,))]}
    (race,) = find_races(logs, NAMES)[0]
    assert race.region == "[0:1, 0:8]"
    assert "blocks 0 and 1 of task 'rows' on rank 0 run concurrently" in race.why
    logs[0][2] = acc((1, 1), ROW1, WRITE, 10)
    assert find_races(logs, NAMES) == ((), 0)


def test_a_deferred_condition_orders_the_waiter_tasks_dependents():
    def log(cond_line):
        rank0 = [(SUBMIT, MAIN, 1, "waiter", 1, (), "f.py:1"),
                 (SUBMIT, MAIN, 2, "consumer", 1, (1,), "f.py:2"),
                 acc((2, 0), ROW0, READ, 20), (CLOSE, MAIN, (1, 2))]
        if cond_line:
            rank0.append((COND, ("cond", 1), CELL, CMP_GE_U, 1, 1, "f.py:5", "waiter", "sig"))
        return {0: rank0, 1: [acc(MAIN, ROW0, WRITE, 11), notify(MAIN, SET, 1, 1, 1, 12)]}
    assert find_races(log(True), NAMES) == ((), 0)
    assert pairs(find_races(log(False), NAMES)[0]) == {frozenset({(1, "f.py:11"),
                                                                  (0, "f.py:20")})}


def test_a_dispatch_that_waits_for_another_ranks_dispatch_is_ordered_after_it():
    logs = {1: [acc(MAIN, ROW0, WRITE, 11), (DONE, MAIN, 1)],
            0: [(AFTER, MAIN, 1, 1), acc(MAIN, ROW0, READ, 31), (DONE, MAIN, 1)]}
    assert find_races(logs, NAMES) == ((), 0)
    del logs[0][0]
    assert len(find_races(logs, NAMES)[0]) == 1


def test_a_wait_whose_notify_was_not_recorded_is_an_internal_error():
    # rank 0's wait needs rank 1's notify, which comes after a barrier
    # rank 0 never reaches: no order of the threads replays it
    logs = {0: [wait(MAIN, CMP_GE, 1, 1, 30)],
            1: [(BARRIER, MAIN, (1, 1, 0, 1), 2, "f.py:1", "pld.tensor.barrier"),
                notify(MAIN, SET, 1, 1, 1, 12)]}
    with pytest.raises(InternalError):
        find_races(logs, NAMES)


def test_the_report_lists_a_limited_number_and_counts_the_rest():
    logs = {r: [acc(MAIN, ((4 * r, 4 * r + 4),), WRITE, r)] for r in range(1, 14)}
    logs[0] = [acc(MAIN, ((0, 64),), READ, 99)]
    races, omitted = find_races(logs, NAMES)
    assert len(races) == 10 and omitted == 3
    err = DataRaceError(races, omitted)
    assert err.code == "TC601" and err.races == races and err.omitted == 3
    assert "13 data race(s)" in str(err) and "... and 3 more" in str(err)


def test_byte_runs_and_region_text():
    a = np.zeros((4, 8), np.float32)
    base = a.__array_interface__["data"][0]
    assert byte_runs(a[1:3], base) == ((32, 96),)
    assert byte_runs(a[1:3, 2:5], base) == ((40, 52), (72, 84))
    assert byte_runs(a[:, 3], base) == tuple((32 * i + 12, 32 * i + 16) for i in range(4))
    assert byte_runs(a[2:2], base) == ()
    assert region_text([(40, 52), (72, 84)], (4, 8), 4) == "[1:3, 2:5]"
    assert region_text([(32, 96)], (4, 8), 4) == "[1:3, 0:8]"
    assert region_text([(36, 40)], (4, 8), 4) == "[1:2, 1:2]"


def test_a_record_merges_runs_in_any_order_into_their_union():
    # a thread's accesses of one epoch become one record: its runs must stay
    # sorted, disjoint and exactly the bytes merged, whatever the order
    rng = np.random.default_rng(7)
    for trial in range(200):
        first = _random_runs(rng)
        rec = _Shadow(None, 1, 0, first, (ACCESS,) + (None,) * 10)
        want = _bytes(first)
        for _ in range(int(rng.integers(1, 12))):
            more = _random_runs(rng)
            rec.merge(more)
            want |= _bytes(more)
        runs = list(rec.runs)
        assert all(a < b for a, b in runs)
        assert all(runs[k][1] < runs[k + 1][0] for k in range(len(runs) - 1)), runs
        assert _bytes(runs) == want
        probe = _random_runs(rng)
        assert _bytes(rec.overlap(probe)) == want & _bytes(probe)


def _random_runs(rng) -> tuple:
    """Sorted, disjoint byte runs in [0, 200), 1 to 12 of them."""
    cuts = sorted(set(int(c) for c in rng.integers(0, 200, int(rng.integers(2, 25)))))
    runs = [(cuts[k], cuts[k + 1]) for k in range(0, len(cuts) - 1, 2)]
    return tuple(runs) or ((5, 6),)


def _bytes(runs) -> set:
    return {b for lo, hi in runs for b in range(lo, hi)}


def test_the_replay_reads_the_logs_as_it_goes():
    """A long log is not held: events are read a batch at a time as the
    replay needs them and dropped once replayed (what stays is the notify
    history, each notify's clock, and the accesses nothing covers yet)."""
    rounds, rows = 20000, 8
    made = [0]

    def writer():                    # rank 1: rounds of eight row stores, one notify each
        yield (BASE, None, (0,) * 64)
        for i in range(rounds):
            for row in range(rows):
                made[0] += 1
                yield acc(MAIN, ((32 * row, 32 * row + 32),), WRITE, 11 + row)
            yield notify(MAIN, ADD, 1, i + 1, i + 1, 15)

    def reader():                    # rank 0: waits for the last round, reads everything
        yield (BASE, None, (0,) * 64)
        yield wait(MAIN, CMP_GE, rounds, rounds, 30)
        yield acc(MAIN, ((0, 32 * rows),), READ, 31)

    class Log:                       # read anew by each replay, as a log file is
        def __init__(self, make):
            self.make = make

        def __iter__(self):
            return self.make()

    tracemalloc.start()
    try:
        races = find_races({0: Log(reader), 1: Log(writer)}, NAMES)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert races == ((), 0) and made[0] >= rows * rounds
    # 160 000 access events are ~50 MB as tuples; the replay's peak stays a
    # fraction of that (the 20 000 notifies' history and clocks, ~0.8 KB each)
    assert peak < 20 * 2**20, peak


def test_a_stray_notify_into_a_collectives_signal_lets_a_member_leave_early():
    """Rank 1 stores into rank 0's window, then both pass a collective's
    barrier, then rank 0 reads.  A notify of the program into the cell of
    rank 0's signal that counts rank 1's arrival can stand in for that
    arrival: rank 0 may leave before rank 1 stored, and the read races."""
    sig = 8
    credits = (0, 4)                  # byte offsets of cells [0, 0] and [1, 0]

    def bar(me, line):
        return (BARRIER, MAIN, (sig, 1, 0, 1), 2, f"f.py:{line}", "pld.tensor.barrier", me,
                credits)
    clean = {1: [acc(MAIN, ROW0, WRITE, 11), bar(1, 12)],
             0: [bar(0, 30), acc(MAIN, ROW0, READ, 31)]}
    assert find_races(clean, NAMES) == ((), 0)
    stray = {1: clean[1], 0: clean[0],
             2: [notify_p(MAIN, ADD, 1, 1, 1, 21, 0, cell=(sig, 0, 4))]}
    (race,) = [r for r in find_races(stray, NAMES)[0] if r.buffer == "data"]
    assert pairs([race]) == {frozenset({(1, "f.py:11"), (0, "f.py:31")})}
    assert "rank 2's notify at f.py:21" in race.why and "before rank 1 arrives" in race.why
    # into the cell of rank 0's own arrival (nobody waits on it): no race
    other = {**stray, 2: [notify_p(MAIN, ADD, 1, 1, 1, 21, 0, cell=(sig, 0, 0))]}
    assert [r for r in find_races(other, NAMES)[0] if r.buffer == "data"] == []
