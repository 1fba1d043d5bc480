"""The monitor's reading of a run's end: completion from the control plane's
run counts, failures and deaths from the channels -- and a message or a
closed channel of a rank that had already finished the run belongs to a
later run, not to this one.  Fakes stand in for the ranks: each scenario is
a sequence of what the channels and the counts show."""
import time
from types import SimpleNamespace

import pytest

from tilecomm.errors import RankFailure
from tilecomm.runtime import control as C
from tilecomm.runtime.controller import monitor as MON
from tilecomm.runtime.messages import Failed


def _failed(rank):
    return Failed(rank, "chip", "ValueError: boom", "Traceback ...", "ValueError", None, None)


class _Control:
    """Run counts that change as the scenario says: ``steps[i]`` are the
    counts after the i-th look at the channels."""

    def __init__(self, counts, steps=()):
        self.counts = list(counts)
        self.steps = list(steps)

    def wait_runs(self, count, timeout):
        return all(c >= count for c in self.counts)

    def runs_finished(self, rank):
        return self.counts[rank]

    def snapshot(self, ranks):
        return [C.RankStatus(C.RUNNING, 0, None) for _ in ranks]

    def advance(self):
        if self.steps:
            self.counts = list(self.steps.pop(0))


class _Launcher:
    def __init__(self, control, messages):
        self.control = control
        self.messages = list(messages)     # per look: [(rank, msg)]
        self.asked = []

    def receive(self, ranks, timeout):
        self.asked.append(list(ranks))
        got = self.messages.pop(0) if self.messages else []
        # the counts move only after the channels were read (the rank
        # finished, then sent or exited, while the monitor looked)
        self.control.advance()
        return [(r, m) for r, m in got if r in ranks]

    def exit_code(self, rank, wait=True):
        return 0


def _run(world, control, launcher, index=1):
    ranks = SimpleNamespace(control=control, launcher=launcher, held=[])
    return SimpleNamespace(ranks=ranks, world=world, index=index, done=set(),
                           config=SimpleNamespace(deadlock_timeout_s=60.0))


@pytest.mark.parametrize("world", [2, 3, 4])
def test_a_complete_run_returns_without_reading_any_channel(world):
    control = _Control([1] * world)
    launcher = _Launcher(control, [])
    run = _run(world, control, launcher)
    MON.monitor(run)
    assert run.done == set(range(world)) and launcher.asked == []


@pytest.mark.parametrize("world", [2, 3, 4])
def test_a_failure_of_an_unfinished_rank_is_raised(world):
    control = _Control([1] * (world - 1) + [0])
    launcher = _Launcher(control, [[(world - 1, _failed(world - 1))]])
    run = _run(world, control, launcher)
    with pytest.raises(RankFailure) as err:
        MON.monitor(run)
    assert err.value.rank == world - 1


@pytest.mark.parametrize("world", [2, 3, 4])
def test_a_closed_channel_of_an_unfinished_rank_is_its_death(world):
    control = _Control([0] * world)
    launcher = _Launcher(control, [[(0, None)]])
    run = _run(world, control, launcher)
    with pytest.raises(RankFailure, match="rank 0 exited"):
        MON.monitor(run)


@pytest.mark.parametrize("world", [2, 3, 4])
def test_a_later_runs_failure_read_early_is_kept_for_that_run(world):
    """Rank 0 finishes run 1 and fails in run 2 while run 1's monitor looks:
    its count, read after its message, says the message is run 2's."""
    control = _Control([0] * world, steps=[[1] + [0] * (world - 1), [1] * world])
    late = _failed(0)
    launcher = _Launcher(control, [[(0, late)]])
    run = _run(world, control, launcher)
    MON.monitor(run)
    assert run.done == set(range(world))
    assert run.ranks.held == [(0, late)]
    # run 2's monitor gets it, without reading the channel for it again
    control2 = _Control([1] * world, steps=[])
    run2 = _run(world, control2, _Launcher(control2, []), index=2)
    run2.ranks.held = run.ranks.held
    with pytest.raises(RankFailure) as err:
        MON.monitor(run2)
    assert err.value.rank == 0 and run2.ranks.held == []


@pytest.mark.parametrize("world", [2, 3, 4])
def test_a_channel_closed_after_the_ranks_last_run_is_no_death(world):
    """A one-shot call: rank 0 finishes and exits while the others still run."""
    control = _Control([0] * world, steps=[[1] + [0] * (world - 1), [1] * world])
    launcher = _Launcher(control, [[(0, None)]])
    run = _run(world, control, launcher)
    t0 = time.monotonic()
    MON.monitor(run)
    assert run.done == set(range(world)) and run.ranks.held == []
    assert time.monotonic() - t0 < 30.0
