"""Exploration of asynchronous puts: where a transfer lands (at once, or at
the wait of its event) is a choice point of the schedule, a PICK step whose
every option the search runs.  A read of the destination between the issue
and the wait sees the old data under one choice and the new under the other;
a notify made before the event's wait is found, with a schedule that
replays; the twin that waits first is verified.  Checked against numpy."""
import numpy as np
import pytest

from tilecomm.check.schedules import PICK, Prefix
from tilecomm.errors import DataRaceError
from tilecomm.runtime.rank.exploring import LANDINGS
from tilecomm.testing import explore, replay
from tilecomm.testing.exploration import _Runs

from programs_explore import inputs
from programs_explore_async import (peek, peek_reference, peek_twin, published,
                                    published_reference, published_twin)


def checker(reference, xs):
    want = reference(xs)

    def check(args):
        np.testing.assert_array_equal(args[1], want)
    return check


def landing_picks(steps):
    return [s for s in steps if s.effect == PICK and s.options == LANDINGS]


@pytest.mark.parametrize("n", [2, 3])
def test_each_issue_is_a_landing_choice_and_a_read_in_between_sees_either(n):
    runs = _Runs(peek, inputs(n), n, None, 200)
    try:
        steps, found = runs.run(Prefix(()))
        picks = landing_picks(steps)
        assert len(picks) == n and {s.actor for s in picks} == set(range(n))
        assert all(s.picked == 0 for s in picks)
        # the read before the wait races with the transfer on every schedule
        assert found is not None and found[0] == "race"
        seen = {}
        for choice in (0, 1):
            args = list(inputs(n))
            prefix = Prefix(tuple(s.actor for s in steps[:picks[-1].index + 1]),
                            tuple((s.index, choice) for s in picks if choice))
            got, found = runs.run(prefix, args)
            assert found is not None and isinstance(found[1], DataRaceError)
            assert [s.picked for s in landing_picks(got)] == [choice] * n
            seen[choice] = args[1]          # the results are written back before the error
        xs = inputs(n)[0]
        # landing at the wait: the early read saw the window's zeros
        np.testing.assert_array_equal(seen[0][:, 0], np.zeros_like(xs[:, 0]))
        # landing at once: it saw the row
        np.testing.assert_array_equal(seen[1][:, 0], xs[:, 0])
        for choice in (0, 1):                # after the wait, always the row
            np.testing.assert_array_equal(seen[choice][:, 1], xs[:, 0])
    finally:
        runs.close()


def test_the_peek_twin_is_verified_over_both_landings():
    xs, ys = inputs(2)
    res = explore(peek_twin, xs, ys, world_size=2, check=checker(peek_reference, xs),
                  time_budget_s=60)
    assert res.failure is None, res.failure.report
    # two ranks, two landings each: the search ran every combination
    assert res.verified and res.complete and res.schedules >= 4, res


@pytest.mark.parametrize("n", [2, 3])
def test_a_notify_before_the_event_wait_is_found_and_replays(n):
    xs, ys = inputs(n)
    res = explore(published, xs, ys, world_size=n, check=checker(published_reference, xs),
                  time_budget_s=60)
    assert not res.verified and res.failure is not None
    f = res.failure
    assert f.kind == "race", f.report
    assert "may land at any time until the wait of its event" in str(f.error)
    assert any("pld.tensor.put_async into rank" in s.text and "lands" in s.text
               for s in f.steps), f.report
    with pytest.raises(DataRaceError) as again:
        f.replay()
    assert str(again.value) == str(f.error)
    with pytest.raises(DataRaceError):
        replay(published, *inputs(n), schedule=f.schedule)
    np.testing.assert_array_equal(ys, 0)


def test_the_published_twin_is_verified():
    xs, ys = inputs(2)
    res = explore(published_twin, xs, ys, world_size=2,
                  check=checker(published_reference, xs), time_budget_s=60)
    assert res.failure is None, res.failure.report
    assert res.verified and res.complete and res.schedules > 1, res
