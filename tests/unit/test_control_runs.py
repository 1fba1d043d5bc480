"""Run completion through the control plane: per-rank run counts, the one
wake-up of the controller from the rank that finishes a run last, and the
early wake-up after a failure (``ControlPlane.finish_run`` / ``wait_runs`` /
``wake_controller``)."""
import itertools
import os
import random
import threading
import time

import pytest

from tilecomm.runtime import control as C
from tilecomm.transport import segments as S

_IDS = itertools.count(1)
LONG_S = 30.0          # a wait that must end early: reaching this is the failure


_WAITERS: list = []


@pytest.fixture
def plane_of():
    made = []

    def make(world):
        seg = S.Segment.create(S.segment_name(os.getpid(), 900_000 + next(_IDS), 0),
                               C.control_size(world))
        plane = C.ShmControlPlane(seg, world)
        made.append(plane)
        plane.reset()
        return plane

    yield make
    for plane in made:                      # a waiter a failed test left asleep
        plane.wake_controller()
    while _WAITERS:
        _WAITERS.pop().join(LONG_S)
    for plane in made:
        plane.segment.close()
        plane.segment.unlink()


def _in_thread(fn):
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("value", fn()), daemon=True)
    _WAITERS.append(t)
    t.start()
    return t, out


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_a_run_is_complete_once_every_rank_finished_it(plane_of, world):
    plane = plane_of(world)
    order = random.Random(world).sample(range(world), world)
    for i, rank in enumerate(order):
        assert not plane.wait_runs(1, 0)
        plane.finish_run(rank)
        assert [plane.runs_finished(r) for r in range(world)] == \
            [1 if r in order[:i + 1] else 0 for r in range(world)]
    assert plane.wait_runs(1, 0)
    assert not plane.wait_runs(2, 0)


@pytest.mark.parametrize("world", [2, 3, 4])
def test_a_rank_ahead_does_not_complete_the_others_runs(plane_of, world):
    # a pipelined call: rank 0 finishes two runs while the others are still in the first
    plane = plane_of(world)
    plane.finish_run(0)
    plane.finish_run(0)
    assert not plane.wait_runs(1, 0)
    for r in range(1, world):
        plane.finish_run(r)
    assert plane.wait_runs(1, 0)
    assert not plane.wait_runs(2, 0)
    for r in range(1, world):
        plane.finish_run(r)
    assert plane.wait_runs(2, 0)


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_the_last_rank_wakes_a_waiting_controller(plane_of, world):
    plane = plane_of(world)
    t, out = _in_thread(lambda: plane.wait_runs(1, LONG_S))
    time.sleep(0.05)                        # the controller is asleep by now
    for r in range(world):
        plane.finish_run(r)
    t.join(LONG_S / 2)
    assert not t.is_alive() and out["value"] is True


def test_wake_controller_ends_a_wait_before_the_run_is_complete(plane_of):
    plane = plane_of(2)
    plane.finish_run(1)
    t, out = _in_thread(lambda: plane.wait_runs(1, LONG_S))
    time.sleep(0.05)
    plane.wake_controller()                 # rank 0 failed: its message is waiting
    t.join(LONG_S / 2)
    assert not t.is_alive() and out["value"] is False


def test_reset_starts_the_counts_again(plane_of):
    plane = plane_of(2)
    for r in (0, 1, 0):
        plane.finish_run(r)
    plane.reset()
    assert [plane.runs_finished(r) for r in range(2)] == [0, 0]
    assert not plane.wait_runs(1, 0)


@pytest.mark.parametrize("world", [2, 4])
def test_no_completion_is_lost_between_processes(plane_of, world):
    """Ranks in their own processes finish many runs at random moments; the
    controller waits for each run in turn.  A lost wake-up would leave it
    asleep for a whole ``LONG_S`` slice."""
    plane = plane_of(world)
    runs = 300
    pids = []
    for rank in range(world):
        pid = os.fork()
        if pid == 0:                        # a rank: finishes ``runs`` runs, then exits
            code = 1
            try:
                mine = plane.attach()
                rng = random.Random(rank)
                for _ in range(runs):
                    for _ in range(rng.randrange(200)):
                        pass
                    mine.finish_run(rank)
                code = 0
            finally:
                os._exit(code)
        pids.append(pid)
    try:
        for k in range(1, runs + 1):
            # as the monitor does: a wake-up for an earlier run (or a second
            # one for the same run) ends a wait early, so wait again
            deadline = time.monotonic() + LONG_S
            while not plane.wait_runs(k, max(0.0, deadline - time.monotonic())):
                assert time.monotonic() < deadline, \
                    f"run {k}: counts {[plane.runs_finished(r) for r in range(world)]}"
            assert time.monotonic() < deadline, f"run {k}: its wake-up was lost"
    finally:
        codes = [os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in pids]
    assert codes == [0] * world
    assert [plane.runs_finished(r) for r in range(world)] == [runs] * world
