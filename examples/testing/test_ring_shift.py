"""Tests of ring_shift.py as a user's repository holds them: nothing but
pytest and tilecomm's pytest plugin (installed with tilecomm), no conftest.

* ``@pytest.mark.tilecomm(world_sizes=..., transports="all")`` runs a test
  once per transport and world size (``test_...[shm-2]``, ``[copy-4]``); the
  test takes its case through the fixtures ``tilecomm_world`` and
  ``tilecomm_config``.  Every marked case is leak-checked (``leaks=True`` is
  the marker's default): a case that leaves a rank process, a thread, a
  /dev/shm segment or a file descriptor behind errors at teardown.
* A test without the marker asks for the same check by name,
  ``tilecomm_no_leaks``.
* ``pytest --tilecomm-detect-races`` runs every call with the race check on.
* ``tilecomm.testing.explore`` runs the ring under every order of its
  notifies, waits and window accesses that can matter (2 and 3 ranks), and
  ``pytest --tilecomm-explore`` gives it a bigger time budget.

The expected values are numpy's: np.roll gives each rank its left
neighbour's row.
Run: pytest examples/testing
"""
import dataclasses
import threading

import numpy as np
import pytest

from ring_shift import SIZE, ring_shift
from tilecomm.runtime import DistributedConfig, RunConfig
from tilecomm.testing import explore


def rows(n: int, seed: int = 0) -> np.ndarray:
    # small integers: float sums are exact, so results compare equal
    return np.random.default_rng(seed + n).integers(-50, 50, (n, 1, SIZE)).astype(np.float32)


def expected(xs):
    left = np.roll(xs, 1, axis=0)               # rank r gets rank r-1's row
    return left, xs + left


@pytest.mark.tilecomm(world_sizes=[1, 2, 3, 4], transports="all")
def test_every_rank_gets_its_left_neighbours_row_and_the_sum(tilecomm_world, tilecomm_config):
    xs = rows(tilecomm_world)
    got, total = np.zeros_like(xs), np.zeros_like(xs)
    ring_shift(xs, got, total, config=tilecomm_config)
    left, both = expected(xs)
    np.testing.assert_array_equal(got, left)
    np.testing.assert_array_equal(total, both)


@pytest.mark.tilecomm(world_sizes=[2, 3], transports="shm")
def test_the_exchange_is_race_free(tilecomm_world, tilecomm_config):
    """The race check sees every window access: a notify sent before the
    store it announces would raise DataRaceError here, however the run's
    timing fell."""
    xs = rows(tilecomm_world, seed=1)
    got, total = np.zeros_like(xs), np.zeros_like(xs)
    ring_shift(xs, got, total, config=dataclasses.replace(tilecomm_config, detect_races=True))
    np.testing.assert_array_equal(got, expected(xs)[0])


@pytest.mark.tilecomm(world_sizes=[2])
def test_a_prepared_worker_computes_every_call_and_shuts_down(tilecomm_world, tilecomm_config):
    xs = rows(tilecomm_world)
    got, total = np.zeros_like(xs), np.zeros_like(xs)
    compiled = ring_shift.compile(xs, got, total, config=tilecomm_config)
    with compiled.prepare() as worker:          # its ranks must be gone after the with
        for step in range(3):
            xs[:] = rows(tilecomm_world, seed=step)
            worker(xs, got, total)
            np.testing.assert_array_equal(total, expected(xs)[1])


def test_a_call_from_a_thread_leaves_nothing_behind(tilecomm_no_leaks):
    xs = rows(2)
    got, total = np.zeros_like(xs), np.zeros_like(xs)
    config = RunConfig(distributed_config=DistributedConfig(device_ids=[0, 1]))
    caller = threading.Thread(target=ring_shift, args=(xs, got, total), kwargs={"config": config})
    caller.start()
    caller.join()
    np.testing.assert_array_equal(got, expected(xs)[0])


@pytest.mark.parametrize("n", [2, 3])
def test_no_order_of_the_ranks_steps_breaks_the_exchange(n, tilecomm_no_leaks):
    xs = rows(n, seed=2)
    got, total = np.zeros_like(xs), np.zeros_like(xs)

    def check(args):
        left, both = expected(xs)
        np.testing.assert_array_equal(args[1], left)
        np.testing.assert_array_equal(args[2], both)

    res = explore(ring_shift, xs, got, total, world_size=n, check=check, time_budget_s=20)
    assert res.failure is None, res.failure.report
    assert res.verified, res
