"""Interleaving exploration (tilecomm.testing.explore): four protocol bugs
that ordinary runs pass are found, with a failure that replays; their
correct twins are verified.  Checked against numpy references of what a
correct run leaves in the outputs."""
import re
import time

import numpy as np
import pytest

from tilecomm.errors import ConfigError, DataRaceError, DeadlockError, RankFailure
from tilecomm.testing import explore, replay
from tilecomm.check.schedules import ADD, WRITE, Prefix, Search
from tilecomm.runtime import DistributedConfig, RunConfig
from tilecomm.testing.exploration import _Runs, decode, encode

from programs_explore import (PROTOCOLS, collective_main, collective_reference, deferred,
                              deferred_barrier_main, gated_tasks, host_of, inputs, overrun_chip, ring_reference,
                              send_then_receive)

ERRORS = {"deadlock": DeadlockError, "race": DataRaceError}


def checker(reference, xs):
    want = reference(xs)

    def check(args):
        np.testing.assert_array_equal(args[1], want)
    return check


@pytest.mark.parametrize("name", sorted(PROTOCOLS))
def test_the_bug_is_found_and_its_schedule_replays(name):
    bug, _, reference, n, kind = PROTOCOLS[name]
    xs, ys = inputs(n)
    start = time.monotonic()
    res = explore(bug(), xs, ys, world_size=n, check=checker(reference, xs), time_budget_s=60)
    assert time.monotonic() - start < 60
    assert not res.verified and res.failure is not None, res
    f = res.failure
    assert f.kind == kind, f.report
    assert isinstance(f.error, ERRORS[kind])
    # the report: the failure's own text, then the schedule, step by step with lines
    assert str(f.error) in f.report
    steps = re.findall(r"^\s+\d+\. rank (\d+): .* at (\S+):(\d+)$", f.report, re.M)
    assert len(steps) == len(f.steps) > 0
    assert {int(r) for r, _, _ in steps} <= set(range(n))
    assert all(path.endswith("programs_explore.py") for _, path, _ in steps)
    token = decode(f.schedule)
    assert (token.world, token.choices) == (n, tuple(s.actor for s in f.steps))
    if kind == "race":      # the racing read is a step of its own, where the program made it
        assert any(": pl.load wbuf[0:1, 0:8] on rank 1  at" in s.text for s in f.steps), f.report
    # the same failure every time
    for _ in range(3):
        with pytest.raises(type(f.error)) as again:
            f.replay()
        assert str(again.value) == str(f.error)
    # ... and from the token alone, in a fresh call
    with pytest.raises(type(f.error)):
        replay(bug(), *inputs(n), schedule=f.schedule)
    # the caller's tensors are untouched: every schedule ran on copies
    np.testing.assert_array_equal(ys, 0)


@pytest.mark.parametrize("name", sorted(PROTOCOLS))
def test_the_correct_twin_is_verified(name):
    _, twin, reference, _, _ = PROTOCOLS[name]
    xs, ys = inputs(2)
    res = explore(twin(), xs, ys, world_size=2, check=checker(reference, xs), time_budget_s=60)
    assert res.failure is None, res.failure.report
    # at 2 ranks the search ends with nothing pruned: every order of dependent steps ran
    assert res.verified and res.complete, res
    assert res.schedules >= 1 and res.bound is not None and res.world_size == 2


@pytest.mark.parametrize("name", sorted(PROTOCOLS))
def test_at_three_ranks_the_twin_is_verified_up_to_a_bound(name):
    _, twin, reference, _, _ = PROTOCOLS[name]
    xs, ys = inputs(3)
    res = explore(twin(), xs, ys, world_size=3, check=checker(reference, xs), time_budget_s=60,
                  preemption_bound=1)
    assert res.failure is None, res.failure.report
    assert res.verified and res.bound <= 1 and res.requested_bound == 1, res
    assert "preemption bound" in res.coverage


def token_of(program, n, choices=(), bound=None):
    """A token for ``choices`` on ``program`` at ``n`` ranks, as explore writes them."""
    runs = _Runs(program, inputs(n), n, None, 100)
    return encode(n, choices, runs.program, bound)


def test_a_schedule_run_passes_and_leaves_the_results():
    _, twin, reference, _, _ = PROTOCOLS["set_overwrite"]
    xs, ys = inputs(2)
    replay(twin(), xs, ys, schedule=token_of(twin(), 2))
    np.testing.assert_array_equal(ys, reference(xs))


def test_a_token_of_another_world_size_or_program_is_refused():
    bug, twin, _, _, _ = PROTOCOLS["set_overwrite"]
    two = token_of(twin(), 2)
    with pytest.raises(ConfigError, match="recorded on 2 ranks") as e:
        replay(twin(), *inputs(3), schedule=two, world_size=3)
    assert e.value.code == "TC605"
    with pytest.raises(ConfigError, match="recorded for another program") as e:
        replay(bug(), *inputs(2), schedule=two)
    assert e.value.code == "TC605"


def test_the_search_widens_its_bound_until_nothing_is_pruned():
    # the round-reset twin needs preemptions to see every order
    _, twin, reference, _, _ = PROTOCOLS["round_reset"]
    xs, ys = inputs(2)
    res = explore(twin(), xs, ys, world_size=2, check=checker(reference, xs))
    assert res.verified and res.complete and res.bound >= 1


def test_a_wrong_result_is_a_check_failure():
    _, twin, reference, _, _ = PROTOCOLS["read_before_wait"]
    xs, ys = inputs(2)

    def wrong(args):
        np.testing.assert_array_equal(args[1], reference(xs) + 1)
    res = explore(twin(), xs, ys, world_size=2, check=wrong)
    assert res.failure.kind == "check" and isinstance(res.failure.error, AssertionError)
    assert res.schedules == 1


def test_a_time_budget_that_ends_first_verifies_nothing():
    _, twin, _, _, _ = PROTOCOLS["round_reset"]
    res = explore(twin(), *inputs(2), world_size=2, time_budget_s=0)
    assert not res.verified and res.failure is None and res.schedules == 0
    assert not res.complete and res.bound is None and "incomplete" in res.coverage


def test_a_search_complete_only_to_a_bound_is_not_verified_without_one():
    """The round-reset twin needs preemptions: bound 0 prunes, so a search
    cut there verifies nothing unless bound 0 is what was asked for."""
    _, twin, reference, _, _ = PROTOCOLS["round_reset"]
    xs, ys = inputs(2)
    at0 = explore(twin(), xs, ys, world_size=2, check=checker(reference, xs),
                  preemption_bound=0)
    assert at0.verified and at0.bound == 0 and not at0.complete, at0
    assert "orders with more preemptions" not in at0.coverage
    assert "complete up to preemption bound 0" in at0.coverage


@pytest.mark.parametrize("token", ["", "tcs1-2-0x1", "tcs2-2", "tcs2-2-abcdef012345-u-0y1",
                                   "tcs2-2-abcdef012345-u-0x-1", "tcs2-2-abcdef012345-u-1x0",
                                   "tcs2-2-abcdef012345-u-", "tcs2-2-abcdef012345-u-2x1",
                                   "tcs2-0-abcdef012345-u-d", "tcs2-2-ABCDEF012345-u-d", "x"])
def test_a_bad_schedule_token_is_a_config_error(token):
    _, twin, _, _, _ = PROTOCOLS["round_reset"]
    with pytest.raises(ConfigError, match="schedule token") as e:
        replay(twin(), *inputs(2), schedule=token)
    assert e.value.code == "TC605"


@pytest.mark.parametrize("bound", [-1, True, 1.5])
def test_a_bad_preemption_bound_is_a_config_error(bound):
    _, twin, _, _, _ = PROTOCOLS["round_reset"]
    with pytest.raises(ConfigError, match="preemption_bound") as e:
        explore(twin(), *inputs(2), preemption_bound=bound)
    assert e.value.code == "TC604"


@pytest.mark.parametrize("n", [0, 17, True, 2.0])
def test_a_bad_world_size_is_a_config_error(n):
    _, twin, _, _, _ = PROTOCOLS["round_reset"]
    with pytest.raises(ConfigError, match="world_size") as e:
        explore(twin(), *inputs(2), world_size=n)
    assert e.value.code == "TC604"


@pytest.mark.parametrize("mode", ["mesh", "ring"])
def test_a_collective_runs_explored_and_its_barrier_steps_are_scheduled(mode):
    xs, ys = inputs(2)
    res = explore(collective_main(mode, 2), xs, ys, world_size=2,
                  check=checker(collective_reference, xs), time_budget_s=60,
                  preemption_bound=1)
    assert res.failure is None, res.failure.report
    # the barriers' signals are steps: more than one order of them ran
    assert res.verified and res.bound == 1 and res.schedules > 1


def test_a_search_over_tasks_is_the_same_every_time():
    xs, ys = inputs(3)
    runs = [explore(host_of(send_then_receive), xs, ys, world_size=3,
                    check=checker(ring_reference, xs), time_budget_s=30) for _ in range(2)]
    assert all(r.verified and r.complete for r in runs), runs
    assert runs[0].schedules == runs[1].schedules > 1


def test_deferred_waits_are_refused_with_the_reason():
    with pytest.raises(ConfigError, match="defer_wait") as e:
        explore(host_of(deferred), *inputs(2), world_size=2)
    assert e.value.code == "TC604"


def test_deferred_collectives_are_refused_with_the_reason():
    with pytest.raises(ConfigError, match=r"barrier\(defer=True\) hands its barrier to a "
                                          r"watcher") as e:
        explore(deferred_barrier_main, *inputs(2), world_size=2)
    assert e.value.code == "TC604"


def test_a_rank_that_raises_is_an_error_failure_that_replays():
    res = explore(host_of(overrun_chip), *inputs(2), world_size=2)
    f = res.failure
    assert f.kind == "error" and isinstance(f.error, RankFailure), res
    assert f.error.rank == 1 and "out of bounds" in str(f.error)
    with pytest.raises(RankFailure, match="out of bounds"):
        f.replay()


def test_the_budget_scales_with_the_environment(monkeypatch):
    _, twin, _, _, _ = PROTOCOLS["round_reset"]
    monkeypatch.setenv("TILECOMM_EXPLORE_BUDGET", "1e-9")   # what --tilecomm-explore sets
    res = explore(twin(), *inputs(2), world_size=2, time_budget_s=60)
    assert res.schedules == 0 and not res.verified
    monkeypatch.setenv("TILECOMM_EXPLORE_BUDGET", "1")
    assert explore(twin(), *inputs(2), world_size=2, time_budget_s=60).verified


def _outcome(steps, found) -> tuple:
    """What a run showed: each rank's checks with the values they saw, and
    how it ended."""
    seen = sorted((s.actor, s.text.split(": ", 1)[1].split("  at ")[0]) for s in steps
                  if " sees " in s.text)
    return tuple(seen), found[0] if found else None


@pytest.mark.parametrize("name, n, effect", [("eq_counter", 3, ADD), ("set_overwrite", 2, WRITE)])
def test_a_notify_step_carries_its_own_effect(name, n, effect):
    """Adds to one cell commute, so the search need not try both orders of
    two; a set does not.  The step of a kernel's notify says which it was."""
    runs = _Runs(PROTOCOLS[name][0](), inputs(n), n, None, 500)
    try:
        steps, _ = runs.run(Prefix(()))
    finally:
        runs.close()
    notifies = [s for s in steps if ": notify " in s.text]
    assert notifies and {s.effect for s in notifies} == {effect}, notifies


@pytest.mark.parametrize("name, twin, n", [("eq_counter", False, 3), ("set_overwrite", True, 2)])
def test_the_search_reaches_every_outcome_that_some_schedule_reaches(name, twin, n):
    """Brute force on the runtime itself: every choice at every step (the
    model machine's check, tests/unit/test_schedules.py, cannot see how steps
    are named from run to run)."""
    program = PROTOCOLS[name][1 if twin else 0]()
    runs = _Runs(program, inputs(n), n, None, 500)
    try:
        every, todo, schedules = set(), [()], 0
        while todo:
            prefix = todo.pop()
            steps, found = runs.run(Prefix(prefix))
            schedules += 1
            every.add(_outcome(steps, found))
            # each choice this run did not make past its prefix: a schedule of its own
            for k in range(len(prefix), len(steps)):
                todo.extend(tuple(s.actor for s in steps[:k]) + (r,)
                            for r in steps[k].enabled if r != steps[k].actor)
        search, searched = Search(100), set()
        prefix = search.next_prefix()
        while prefix is not None:
            steps, found = runs.run(prefix)
            searched.add(_outcome(steps, found))
            search.record(steps)
            prefix = search.next_prefix()
    finally:
        runs.close()
    assert searched == every
    assert search.runs * 2 <= schedules      # ... in a fraction of the schedules


def test_two_tasks_of_a_rank_needed_at_once_are_refused_not_called_a_deadlock():
    """Explored ranks run their tasks on one core: a program that needs a
    second core of a rank gets no verdict (an ordinary run with two cores
    completes it), rather than a deadlock report that is not true."""
    main = host_of(gated_tasks)
    xs, ys = inputs(2)
    main(xs, ys, config=RunConfig(distributed_config=DistributedConfig(device_ids=[0, 1]),
                                  cores=2))
    np.testing.assert_array_equal(ys[:, 0], xs[:, 0])
    with pytest.raises(ConfigError) as ei:
        explore(main, *inputs(2), world_size=2, time_budget_s=30)
    e = ei.value
    assert e.code == "TC604"
    assert "task 'produce' holds the core" in e.message and "task 'release'" in e.message
    assert "programs_explore.py" in e.message


def test_an_explored_run_keeps_the_programs_own_config_but_what_turns_need():
    _, twin, _, _, _ = PROTOCOLS["round_reset"]
    own = RunConfig(distributed_config=DistributedConfig(device_ids=[0, 1]), spin_iters=7,
                    wait_timeout_s=3.5, platform="a2a3", enable_chip_swimlane=2,
                    transport="copy")
    compiled = twin().compile(*inputs(2), config=own)
    cfg = _Runs(compiled, inputs(2), None, None, 100).config
    assert (cfg.spin_iters, cfg.wait_timeout_s) == (7, 3.5)          # carried over
    assert (cfg.transport, cfg.platform, cfg.cores, cfg.detect_races) == ("shm", "cpu", 1, True)
    assert cfg.deadlock_timeout_s == 0.05 and not cfg.dfx_enabled
    assert explore(compiled, *inputs(2), preemption_bound=0).verified


@pytest.mark.parametrize("n", [1, 2])
def test_a_missing_task_dependency_is_found_and_its_order_replays(n):
    """Which ready task a rank's core takes next is the search's choice: the
    hand-over through a plain tensor without deps= fails in the order that
    runs 'consume' first, and that order replays from its token."""
    from programs_explore import handover_missing_dep, handover_reference
    xs, ys = inputs(n)
    res = explore(host_of(handover_missing_dep), xs, ys, world_size=n,
                  check=checker(handover_reference, xs), time_budget_s=60)
    assert not res.verified and res.failure is not None, res
    f = res.failure
    assert f.kind == "check", f.report
    assert "runs task 'consume' of the ready 'produce', 'consume'" in f.report, f.report
    assert decode(f.schedule).picks, f.schedule          # the order is in the token
    with pytest.raises(AssertionError):
        f.replay()

    def check(args):
        np.testing.assert_array_equal(args[1], handover_reference(xs))
    with pytest.raises(AssertionError):
        got = inputs(n)
        replay(host_of(handover_missing_dep), *got, schedule=f.schedule)
        check(got)


@pytest.mark.parametrize("n", [1, 2])
def test_a_task_dependency_makes_every_order_right(n):
    from programs_explore import handover_reference, handover_with_dep
    xs, ys = inputs(n)
    res = explore(host_of(handover_with_dep), xs, ys, world_size=n,
                  check=checker(handover_reference, xs), time_budget_s=60)
    assert res.failure is None, res.failure.report
    assert res.verified and res.complete, res


@pytest.mark.parametrize("n", [3, 4])
def test_a_mesh_allreduce_is_verified_complete_at_three_and_four_ranks(n):
    """Every order of the collective's dependent steps runs (nothing pruned,
    nothing cut by the budget) and every one computes the sum."""
    xs, ys = inputs(n)
    res = explore(collective_main("mesh", n), xs, ys, world_size=n,
                  check=checker(collective_reference, xs), time_budget_s=300)
    assert res.failure is None, res.failure.report
    assert res.verified and res.complete and res.requested_bound is None, res.coverage
