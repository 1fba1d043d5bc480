"""The task-snapshot areas of the shared-memory control plane
(``ControlPlane.write_area`` / ``read_area``, what ``taskplane`` publishes
through): each rank's own, read back byte for byte, refused when too large,
and a scheduler snapshot round-trips through them."""
import itertools
import os

import pytest

from tilecomm.runtime import control as C
from tilecomm.runtime import taskplane
from tilecomm.transport.segments import Segment, segment_name

WORLD = 3


@pytest.fixture
def plane():
    seg = Segment.create(segment_name(os.getpid(), 999, 0),
                         C.control_size(WORLD) + taskplane.area_size(WORLD))
    p = C.ShmControlPlane(seg, WORLD)
    yield p
    seg.unlink()
    p.close()


def test_each_rank_reads_back_its_own_area(plane):
    assert [plane.read_area(r) for r in range(WORLD)] == [None] * WORLD
    data = [os.urandom(17 * (r + 1)) for r in range(WORLD)]
    for r in (2, 0, 1):
        plane.write_area(r, data[r])
    assert [plane.read_area(r) for r in range(WORLD)] == data
    plane.write_area(1, b"short")               # a shorter rewrite is read at its length
    assert plane.read_area(1) == b"short" and plane.read_area(2) == data[2]
    # the areas lie after the records and counters: none of it moved
    assert plane.snapshot(range(WORLD)) == [C.RankStatus(C.IDLE, 0, None)] * WORLD


def test_an_area_holds_area_bytes_minus_its_length_and_no_more(plane):
    most = os.urandom(plane.area_bytes - 8)
    plane.write_area(2, most)
    assert plane.read_area(2) == most
    with pytest.raises(ValueError):
        plane.write_area(0, b"x" * (plane.area_bytes - 7))
    assert plane.read_area(0) is None


def test_taskplane_reads_what_it_publishes(plane, monkeypatch):
    published = []

    class Rc:
        control, device, func_id = plane, 1, 4

    snap = {"cores": 2, "running": [], "deferred": [], "ready": [], "held": [], "queued": [],
            "counts": {"deferred": 0, "ready": 0, "held": 0, "queued": 0}, "slots": 0}
    monkeypatch.setattr(plane, "publish_wait", lambda rank, rec: published.append((rank, rec)))
    monkeypatch.setattr(taskplane, "snapshot", lambda sched: snap)
    taskplane.publish(Rc, None)
    assert taskplane.read(plane, 1) == snap
    assert published[0][0] == 1 and published[0][1].buffer == taskplane.TASKS
    assert taskplane.read(plane, 0) is None


@pytest.mark.parametrize("order", list(itertools.permutations(range(WORLD))),
                         ids=lambda o: "-".join(map(str, o)))
def test_the_rank_that_finishes_a_run_last_and_only_it_wakes_the_controller(plane, order):
    # one rank at a time: each finds every count >= the run's only when it is
    # the last, whichever rank that is and wherever its scan of the counts starts
    woken = []
    plane.wake_controller = lambda: woken.append(done[-1])
    for run in (1, 2):
        done = []
        for rank in order:
            done.append(rank)
            plane.finish_run(rank)
        assert woken == [order[-1]] * run
        assert plane.wait_runs(run, 0) and [plane.runs_finished(r) for r in range(WORLD)] == \
            [run] * WORLD
