"""Race detection where happens-before is more than "a wait after a notify"
(programs_hb.py has the programs and why each racy one is racy on the chip):

* a Set that leaves the condition as it already was orders nothing: Set 0
  into a fresh cell, and a Set-1 flag reused on kept windows of a prepared
  worker (racy from the second call on);
* the verdict does not depend on the modification order this run happened
  to take: counters of different weights, and two Sets of one cell;
* a waiter's own updates of its cell count: the self-clearing credit barrier
  around a ring is race-free whichever rank runs ahead;
* tasks and spmd blocks of one rank race on a plain (non-window) output.

A racy form raises DataRaceError naming both marked lines with their ranks,
on every run (a few runs where the timing could decide); its correct twin
never raises and computes what numpy says."""
import numpy as np
import pytest

from tilecomm.errors import DataRaceError

from programs_hb import (CASES, KEPT_FLAG_RACY, KEPT_FLAG_TWIN, SENTINEL, YR, S, inputs,
                         kept_flag_pairs, ring_row_reference)
from programs_prims import config_for

KEPT_CALLS = 4          # calls of a prepared worker: the first is clean, the rest reuse the flag
RUNS = [(name, n) for name, case in CASES.items() for n in case.worlds]


def run(main, n, seed=0, **config):
    xs = inputs(n, seed)
    ys = np.full((n, YR, S), SENTINEL, np.float32)
    main(xs, ys, 1, config=config_for(n, **config))
    return xs, ys


def side(access) -> tuple:
    """(rank, line number) of one access of a race (line -1 when unknown)."""
    return access.rank, int(access.line.rsplit(":", 1)[1]) if ":" in access.line else -1


def sides(race) -> tuple:
    """The (rank, line number) of a race's two accesses, in a fixed order."""
    return tuple(sorted(side(a) for a in (race.first, race.second)))


def expect_pair(err, wanted, never=(), buffer=None, owner=None):
    """``err`` reports one of the ``wanted`` pairs (on that window copy, when
    given) and no race names a side in ``never``; returns the matching race."""
    assert err.code == "TC601"
    found = {sides(r): r for r in err.races}
    want = [tuple(sorted(p)) for p in wanted]
    hits = [found[p] for p in want if p in found]
    assert hits, (f"none of {want} among the reported races {sorted(found)} "
                  f"(+{err.omitted} omitted):\n{err}")
    race = hits[0]
    assert all(a.line.rsplit(":", 1)[0].endswith("programs_hb.py")
               for a in (race.first, race.second))
    if buffer is not None:
        assert (race.buffer, race.owner) == (buffer, owner), str(race)
    bad = [sides(r) for r in err.races if any(side(a) in never for a in (r.first, r.second))]
    assert not bad, f"races {bad} name an access that is ordered in every execution:\n{err}"
    return race


@pytest.mark.parametrize("name,n", RUNS)
def test_twin_raises_nothing_and_computes(name, n):
    case = CASES[name]
    for seed in range(case.runs):
        xs, ys = run(case.safe, n, seed, detect_races=True)
        np.testing.assert_array_equal(ys, case.reference(xs))


@pytest.mark.parametrize("name,n", RUNS)
def test_racy_form_is_reported_on_every_run_naming_both_lines(name, n):
    case = CASES[name]
    for seed in range(case.runs):
        xs = inputs(n, seed)
        ys = np.full((n, YR, S), SENTINEL, np.float32)
        with pytest.raises(DataRaceError) as ei:
            case.racy(xs, ys, 1, config=config_for(n, detect_races=True))
        race = expect_pair(ei.value, case.racy_pairs(n), case.never(n), case.buffer,
                           case.owner(n))
        if case.buffer is None:                   # two writes of a plain output
            assert (race.first.kind, race.second.kind) == ("write", "write"), str(race)
        # the results were written back: the elements the program writes
        # (whatever their values) are no longer the caller's
        np.testing.assert_array_equal(ys != SENTINEL, case.written(xs) != SENTINEL)


def prepared(main, n):
    xs = inputs(n)
    ys = np.full((n, YR, S), SENTINEL, np.float32)
    return main.compile(xs, ys, 1, config=config_for(n)).prepare(
        persistent=True, reset_persistent_windows=False)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_kept_flag_raised_to_the_call_number_raises_nothing_on_any_call(n):
    with prepared(KEPT_FLAG_TWIN, n) as rt:
        for k in range(1, KEPT_CALLS + 1):
            xs = inputs(n, seed=k)
            ys = np.full((n, YR, S), SENTINEL, np.float32)
            rt(xs, ys, k, config=config_for(n, detect_races=True))
            np.testing.assert_array_equal(ys, ring_row_reference(xs))


@pytest.mark.parametrize("n", [2, 3, 4])
def test_kept_set_flag_is_reported_from_the_second_call_on(n):
    with prepared(KEPT_FLAG_RACY, n) as rt:
        xs = inputs(n, seed=1)
        ys = np.full((n, YR, S), SENTINEL, np.float32)
        # the first call finds the flag at 0: its Set is what the wait needs
        rt(xs, ys, 1, config=config_for(n, detect_races=True))
        np.testing.assert_array_equal(ys, ring_row_reference(xs))
        for k in range(2, KEPT_CALLS + 1):
            xs = inputs(n, seed=k)
            ys = np.full((n, YR, S), SENTINEL, np.float32)
            with pytest.raises(DataRaceError) as ei:
                rt(xs, ys, k, config=config_for(n, detect_races=True))
            expect_pair(ei.value, kept_flag_pairs(n), buffer="wbuf", owner=1)
            np.testing.assert_array_equal(ys != SENTINEL, ring_row_reference(xs) != SENTINEL)
