"""Persistent windows of a prepared worker, both ways, and a long prepared
loop that must not grow anything."""
import os

import numpy as np
import pytest

from tilecomm.errors import ConfigError, DataRaceError, DeadlockError
from conftest import WORLD_SIZES, children, config_for, my_segments
from worker_programs import accumulate_main, allreduce_main

W = 8


def _data(n, seed=0, w=W):
    rng = np.random.default_rng(seed)
    return (rng.integers(-5, 5, size=(n, 1, w)).astype(np.float32),
            np.full((n, 1, w), np.nan, np.float32))


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_persistent_windows_are_zeroed_before_every_call_by_default(n):
    xs, ys = _data(n)
    with accumulate_main.compile(xs, ys, 1, config=config_for(n)).prepare(persistent=True) as rt:
        segments = None
        for call in range(4):
            xs, ys = _data(n, seed=call)
            rt(xs, ys, 1)                        # expected 1: only a zeroed signal works
            np.testing.assert_array_equal(ys[0], xs.sum(axis=0))
            assert rt.persistent_domains == 2    # allocated once, kept
            if segments is None:
                segments = set(my_segments())
            assert set(my_segments()) == segments, "a persistent call created segments"


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_kept_windows_carry_contents_and_monotonic_counters_grow(n):
    xs, ys = _data(n)
    compiled = accumulate_main.compile(xs, ys, 1, config=config_for(n))
    with compiled.prepare(persistent=True, reset_persistent_windows=False) as rt:
        total = np.zeros((1, W), np.float32)
        for call in range(1, 5):
            xs, ys = _data(n, seed=call)
            rt(xs, ys, call)                     # the k-th call's counters reach k
            total += xs.sum(axis=0)
            np.testing.assert_array_equal(ys[0], total)


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_self_clearing_collective_stays_correct_on_kept_windows(n):
    xs, ys = _data(n)
    compiled = allreduce_main.compile(xs, ys, config=config_for(n))
    for reset in (False, True):
        with compiled.prepare(persistent=True, reset_persistent_windows=reset) as rt:
            for call in range(3):
                xs, ys = _data(n, seed=call)
                rt(xs, ys)
                np.testing.assert_array_equal(ys, np.broadcast_to(xs.sum(axis=0), ys.shape))


def test_fresh_windows_without_persistent():
    n = 2
    xs, ys = _data(n)
    with accumulate_main.compile(xs, ys, 1, config=config_for(n)).prepare() as rt:
        for call in range(3):
            rt(xs, ys, 1)
            np.testing.assert_array_equal(ys[0], xs.sum(axis=0))
        assert rt.persistent_domains == 0


def test_a_persistent_domain_that_changes_specification_is_refused():
    n = 2
    xs, ys = _data(n)
    compiled = accumulate_main.compile(xs, ys, 1, config=config_for(n))
    with compiled.prepare(persistent=True) as rt:
        rt(xs, ys, 1)
        wide, wide_out = _data(n, w=2 * W)       # W bound anew: the window would grow
        with pytest.raises(ConfigError, match=r"persistent CommDomain .* changed "
                                              r"specification") as ei:
            rt(wide, wide_out, 1)
        assert ei.value.code == "TC420"
        assert isinstance(ei.value, ValueError)


@pytest.mark.parametrize("n", [2, 3])
def test_a_race_report_keeps_the_ranks_and_their_kept_windows(n):
    """A call that reports a race has run to its end: the next call finds the
    counters where that call left them (the ranks are not restarted)."""
    xs, ys = _data(n)
    compiled = accumulate_main.compile(xs, ys, 1, config=config_for(n))
    with compiled.prepare(persistent=True, reset_persistent_windows=False) as rt:
        total = np.zeros((1, W), np.float32)
        for call in range(1, 4):
            xs, ys = _data(n, seed=call)
            total += xs.sum(axis=0)
            if call == 2:
                # expected 0: rank 0 reads the sum without waiting for the adds
                with pytest.raises(DataRaceError):
                    rt(xs, ys, 0, config=config_for(n, detect_races=True))
                continue
            rt(xs, ys, call)                     # waits for the third count: 1, 2, 3
            np.testing.assert_array_equal(ys[0], total)


def test_a_failed_call_restarts_the_ranks_with_fresh_persistent_windows():
    n = 2
    xs, ys = _data(n)
    compiled = accumulate_main.compile(xs, ys, 1, config=config_for(n))
    with compiled.prepare(persistent=True, reset_persistent_windows=False) as rt:
        rt(xs, ys, 1)
        with pytest.raises(DeadlockError) as ei:
            rt(xs, ys, 5)                        # counters are at 2 and never reach 5
        # rank 0 alone waits, on the first count cell (kept from the first call: 1 + 1)
        assert [(b["rank"], b["value"], b["expected"]) for b in ei.value.blocked] == \
            [(0, 2, 5)], str(ei.value)
        assert children() == set()
        rt(xs, ys, 1)                            # new ranks, new (zero) windows
        np.testing.assert_array_equal(ys[0], xs.sum(axis=0))


def _fds():
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("persistent", [True, False])
def test_a_thousand_prepared_calls_grow_no_process_fd_or_segment(persistent):
    n = 2
    xs, ys = _data(n)
    compiled = accumulate_main.compile(xs, ys, 1, config=config_for(n))
    with compiled.prepare(persistent=persistent) as rt:
        rt(xs, ys, 1)
        before = (children(), _fds(), sorted(my_segments()))
        for call in range(1000):
            rt(xs, ys, 1)
        np.testing.assert_array_equal(ys[0], xs.sum(axis=0))
        after = (children(), _fds(), sorted(my_segments()))
    assert after[0] == before[0], "ranks were restarted or added"
    assert after[1] == before[1], "file descriptors leaked"
    if persistent:
        assert after[2] == before[2], "segments were created"
    else:
        assert len(after[2]) == len(before[2]), "segments leaked"
