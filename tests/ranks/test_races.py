"""Race detection (RunConfig(detect_races=True), or TILECOMM_DETECT_RACES=1):
pairs of a racy program and its safe twin (programs_races.py).

Precision: a safe form raises nothing and computes what numpy says -- disjoint
regions of one window, ordering through a chain of notifies, many atomic adds
into one element, a collective's signal reused across rounds, double
buffering with per-slot flags, task pipelines ordered only by deps= or by a
deferred wait.  Recall: the racy twin of each, and the classic mistakes
(notify before the store, a wait on the wrong cell, a Ge threshold too low for
two producers, a buffer refilled before the reader acknowledged it, an atomic
and a plain store to one element, a put into a window while a collective runs
on it, two tasks writing one region without a dependency) raise
DataRaceError naming both accesses -- rank and source line -- after the data
results are written back.  Detection is off by default."""
import numpy as np
import pytest

from tilecomm.errors import DataRaceError, TilecommError

from programs_races import CASES, RECALL, SENTINEL, YR, S, inputs
from programs_prims import config_for

WORLDS = [2, 3, 4]
KINDS = {"read", "write", "atomic"}


def run(main, n, **config):
    xs = inputs(n)
    ys = np.full((n, YR, S), SENTINEL, np.float32)
    main(xs, ys, config=config_for(n, **config))
    return xs, ys


def racing(race) -> frozenset:
    """The (rank, line number) pairs of a race's two accesses."""
    return frozenset((a.rank, int(a.line.rsplit(":", 1)[1]) if ":" in a.line else a.line)
                     for a in (race.first, race.second))


def check_report(err, n):
    """What every DataRaceError says, whatever the program."""
    assert isinstance(err, TilecommError)
    assert err.code == "TC601"
    assert isinstance(err.races, tuple) and err.races
    assert isinstance(err.omitted, int) and err.omitted >= 0
    for race in err.races:
        assert isinstance(race.buffer, str) and race.buffer
        assert 0 <= race.owner < n
        assert isinstance(race.region, str) and race.region
        assert isinstance(race.why, str) and race.why
        a, b = race.first, race.second
        for acc in (a, b):
            assert 0 <= acc.rank < n
            assert acc.kind in KINDS
            assert isinstance(acc.task, str) and acc.task
            assert isinstance(acc.op, str) and acc.op
            assert acc.line == "?" or acc.line.rsplit(":", 1)[0].endswith(".py") \
                and int(acc.line.rsplit(":", 1)[1]) > 0
        # a race has a writer, and two atomics never race
        assert {a.kind, b.kind} != {"read"}
        assert not (a.kind == b.kind == "atomic")
        # two accesses of one rank race only from different tasks
        assert a.rank != b.rank or a.task != b.task


@pytest.mark.parametrize("n", WORLDS)
@pytest.mark.parametrize("name", list(CASES))
def test_safe_form_raises_nothing_and_computes(name, n):
    case = CASES[name]
    xs, ys = run(case.safe, n, detect_races=True)
    np.testing.assert_array_equal(ys, case.reference(xs))


@pytest.mark.parametrize("n", WORLDS)
@pytest.mark.parametrize("name", list(CASES))
def test_racy_form_names_both_accesses(name, n):
    case = CASES[name]
    xs = inputs(n)
    ys = np.full((n, YR, S), SENTINEL, np.float32)
    with pytest.raises(DataRaceError) as ei:
        case.racy(xs, ys, config=config_for(n, detect_races=True))
    err = ei.value
    check_report(err, n)
    found = {racing(r): r for r in err.races}
    wanted = [frozenset(p) for p in case.racy_pairs(n)]
    hits = [found[p] for p in wanted if p in found]
    assert hits, (f"none of {wanted} among the reported races {sorted(map(sorted, found))} "
                  f"(+{err.omitted} omitted):\n{err}")
    for race in hits:
        assert race.buffer == case.buffer
        assert race.owner == case.owner(n)
        assert all(a.line.rsplit(":", 1)[0].endswith("programs_races.py")
                   for a in (race.first, race.second))
    if name == "put_during_allreduce":
        assert {a.op for a in (hits[0].first, hits[0].second)} == {"pld.tensor.put",
                                                                   "pld.tensor.allreduce"}
    if name == "atomic_adds":
        assert {a.kind for a in (hits[0].first, hits[0].second)} == {"write", "atomic"}
    # the data results were written back: the elements the program writes
    # (whatever their values) are no longer the caller's
    np.testing.assert_array_equal(ys != SENTINEL, case.reference(xs) != SENTINEL)


@pytest.mark.parametrize("n", [2, 4])
def test_detection_is_off_by_default(n, monkeypatch):
    monkeypatch.delenv("TILECOMM_DETECT_RACES", raising=False)
    for case in CASES.values():
        xs, ys = run(case.racy, n)
        np.testing.assert_array_equal(ys != SENTINEL, case.reference(xs) != SENTINEL)


@pytest.mark.parametrize("n", [2, 3])
def test_the_environment_variable_turns_detection_on(n, monkeypatch):
    monkeypatch.setenv("TILECOMM_DETECT_RACES", "1")
    case = RECALL[0]
    with pytest.raises(DataRaceError) as ei:
        run(case.racy, n)
    assert frozenset(case.racy_pairs(n)[0]) in {racing(r) for r in ei.value.races}
    run(case.safe, n)
