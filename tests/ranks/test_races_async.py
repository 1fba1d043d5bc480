"""Race detection of asynchronous puts beyond the early-published notify
(that pair is in programs_hb.py / test_races_hb.py): the issuing rank's own
accesses between the issue and the wait of the event race with the
transfer -- a read of the destination, a store into the source -- and the
same programs with the access after the wait are clean and match numpy."""
import numpy as np
import pytest

import programs_async as P
from programs_prims import config_for, line_of
from tilecomm.errors import DataRaceError

WORLDS = [2, 3, 4]


def inputs(n):
    return np.random.default_rng(20 + n).integers(-9, 10, (n, 1, P.S)).astype(np.float32)


def sides(race):
    return {(a.rank, a.op, int(a.line.rsplit(":", 1)[1])) for a in (race.first, race.second)}


@pytest.mark.parametrize("n", WORLDS)
def test_a_read_of_the_destination_before_the_wait_races_with_the_transfer(n):
    with pytest.raises(DataRaceError) as ei:
        P.early(inputs(n), np.zeros((n, 2, P.S), np.float32),
                config=config_for(n, detect_races=True))
    races = ei.value.races
    assert {r.owner for r in races} == set(range(n)), str(ei.value)
    for r in races:
        assert {a.op for a in (r.first, r.second)} == {"pld.tensor.put_async", "pl.load"}
        assert r.first.rank == r.second.rank == r.owner
        assert "may land at any time" in r.why


@pytest.mark.parametrize("n", WORLDS)
def test_a_store_into_the_source_before_the_wait_races_with_the_transfer(n):
    xs = inputs(n)
    with pytest.raises(DataRaceError) as ei:
        P.reuse_early(xs, np.zeros((n, 2, P.S), np.float32),
                      config=config_for(n, detect_races=True))
    put = line_of(P.reuse_early_kernel, "reuse-put")
    store = line_of(P.reuse_early_kernel, "reuse-store")
    found = [sides(r) for r in ei.value.races if r.buffer == "src_buf"]
    assert any(s == {(r, "pld.tensor.put_async", put), (r, "pl.store", store)}
               for s in found for r in range(n)), str(ei.value)


@pytest.mark.parametrize("n", WORLDS)
def test_the_same_accesses_after_the_wait_are_clean(n):
    xs = inputs(n)
    ys = np.zeros((n, 2, P.S), np.float32)
    P.reuse_after(xs, ys, config=config_for(n, detect_races=True))
    np.testing.assert_array_equal(ys[:, 0], np.roll(xs[:, 0], 1, axis=0))
    np.testing.assert_array_equal(ys[:, 1], 2 * xs[:, 0])
