"""pld.tensor.put_async / pld.tile.put_async on a session, completed by
pld.system.wait_async_event: the ring of upstream's example, the tile form,
sub-region rows to every peer with several transfers of a loop, the
destination before the wait (the transfer lands at the wait on the CPU), and
the mistakes found while ranks run: an event never waited (TC508), an event
waited on another session (TC509).  Results against numpy."""
import numpy as np
import pytest

from programs_async import (S, early, make_rows, other_session, ring, ring_reference,
                            task_ring, tile_ring, unwaited)
from programs_prims import config_for, line_of
from tilecomm.errors import RankFailure

WORLDS = [2, 3, 4]


def inputs(n, seed=0):
    return np.random.default_rng(seed + n).standard_normal((n, 1, S)).astype(np.float32)


@pytest.mark.parametrize("n", WORLDS)
def test_ring_put_async_matches_numpy(n):
    xs = inputs(n)
    ys = np.zeros((n, 2, S), np.float32)
    ring(xs, ys, config=config_for(n))
    np.testing.assert_array_equal(ys, ring_reference(xs))


@pytest.mark.parametrize("n", WORLDS)
def test_tile_form_with_scratch_and_session_options(n):
    # sync_id=7 and block_bytes=64: the largest flag id and a chunk size far
    # below the transfer; the result is the same bytes as the tensor form's
    xs = inputs(n, 1)
    ys = np.zeros((n, 2, S), np.float32)
    tile_ring(xs, ys, config=config_for(n))
    np.testing.assert_array_equal(ys, ring_reference(xs))


@pytest.mark.parametrize("n", WORLDS)
def test_in_a_task_of_a_chip_function(n):
    xs = inputs(n, 5)
    ys = np.zeros((n, 2, S), np.float32)
    task_ring(xs, ys, config=config_for(n))
    np.testing.assert_array_equal(ys, ring_reference(xs))


@pytest.mark.parametrize("n", WORLDS)
def test_sub_region_rows_to_every_peer(n):
    xs = inputs(n, 2)
    ys = np.zeros((n, n, S), np.float32)
    make_rows(n)(xs, ys, config=config_for(n))
    for r in range(n):
        np.testing.assert_array_equal(ys[r], xs[:, 0, :])


@pytest.mark.parametrize("n", WORLDS)
def test_the_destination_is_old_until_the_event_is_waited(n):
    xs = inputs(n, 3) + 1.0
    ys = np.full((n, 2, S), -1.0, np.float32)
    early(xs, ys, config=config_for(n))
    np.testing.assert_array_equal(ys[:, 0, :], np.zeros((n, S), np.float32))
    np.testing.assert_array_equal(ys[:, 1, :], xs[:, 0, :])


@pytest.mark.parametrize("n", [2])
def test_an_event_never_waited_fails_the_kernel(n):
    import programs_async as P
    with pytest.raises(RankFailure) as ei:
        unwaited(inputs(n), np.zeros((n, 2, S), np.float32), config=config_for(n))
    e = ei.value
    assert e.error_code == "TC508", str(e)
    line = line_of(P.unwaited_kernel, "ERROR: never waited")
    assert f"programs_async.py:{line} into rank" in str(e), str(e)
    assert "never waited" in str(e)


@pytest.mark.parametrize("n", [2])
def test_an_event_waited_on_another_session_fails(n):
    with pytest.raises(RankFailure) as ei:
        other_session(inputs(n), np.zeros((n, 2, S), np.float32), config=config_for(n))
    assert ei.value.error_code == "TC509", str(ei.value)
    assert "another session" in str(ei.value)


@pytest.mark.parametrize("n", [2, 3])
def test_a_traced_run_has_the_issue_and_the_wait_and_the_same_result(tmp_path, n):
    import glob
    import json
    xs = inputs(n, 4)
    ys = np.zeros((n, 2, S), np.float32)
    cp = ring.compile(xs, ys, config=config_for(n, cache_dir=str(tmp_path / "cache")))
    cp(xs, ys, config=config_for(n, enable_chip_swimlane=4, enable_dump_args=2))
    np.testing.assert_array_equal(ys, ring_reference(xs))
    files = glob.glob(f"{cp.output_dir}/dfx_outputs/rank*/d0/chip_swimlane_records.json")
    assert len(files) == n
    for f in files:
        names = [e.get("name") for e in json.load(open(f))["traceEvents"]]
        assert "pld.tensor.put_async" in names and "pld.system.wait_async_event" in names
