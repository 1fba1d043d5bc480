"""Both transports through the interface alone, in one process: the controller
side allocates a 2-member window, two endpoints (devices 0 and 1) move data
and signals.  The copy transport's endpoint must never map a peer's copy."""
import contextlib
import os
import pickle
import threading

import numpy as np
import pytest

from tilecomm.errors import RuntimeFault
from tilecomm.transport import TRANSPORTS, make_host
from tilecomm.transport.base import CMP_EQ, CMP_GE, NOTIFY_ADD, NOTIFY_SET, WaitHooks, WindowKey
from tilecomm.transport.segments import Segment, segment_name
from tilecomm.transport.shm import Copies

_ids = iter(range(10_000, 20_000))


class FakeRun:
    """What a transport host needs of a run: fresh segments, released at the end."""

    def __init__(self):
        self.id = next(_ids)
        self.segments = []

    def new_segment(self, nbytes):
        seg = Segment.create(segment_name(os.getpid(), self.id, len(self.segments)), nbytes)
        self.segments.append(seg)
        return seg

    def release(self):
        for seg in self.segments:
            seg.close()
            seg.unlink()


class Hooks(WaitHooks):
    def __init__(self, stop_after=None):
        self.events, self.stop_after = [], stop_after

    def blocked(self):
        self.events.append("blocked")

    def check(self, value):
        self.events.append(("check", value))
        if self.stop_after is not None and len(self.events) > self.stop_after:
            raise TimeoutError(value)

    def unblocked(self):
        self.events.append("unblocked")


@contextlib.contextmanager
def two_members(name, nbytes):
    """A transport host with one 2-member window of ``nbytes`` allocated, and
    both members' endpoints; everything released on exit."""
    own, run = FakeRun(), FakeRun()
    host = make_host(name, 2, own.new_segment)
    host.start_run(run)
    eps = []
    try:
        names = host.allocate(run, nbytes, (0, 1))
        eps = [host.endpoint(d, 2) for d in range(2)]
        yield host, eps, names
    finally:
        for ep in eps:
            ep.close()
        host.end_run(run)
        run.release()
        host.close()
        own.release()


# each case marked with its transport's name, as the multi-rank tests are
@pytest.fixture(params=[pytest.param(t, marks=getattr(pytest.mark, t))
                        for t in sorted(TRANSPORTS)])
def world2(request):
    with two_members(request.param, 64) as (host, eps, names):
        key = WindowKey(names, (0, 1), (4, 4), np.dtype(np.float32))
        sig = WindowKey(names, (0, 1), (16,), np.dtype(np.int32))
        yield request.param, host, eps, key, sig


def test_put_get_and_atomic_add_reach_the_peer(world2):
    name, host, (e0, e1), key, _ = world2
    w1 = e0.window(key, 1)
    e0.put(w1, (slice(1, 3), slice(0, 4)), np.arange(8, dtype=np.float32).reshape(2, 4), False)
    e0.put(w1, (slice(1, 2), slice(0, 4)), np.ones((1, 4), np.float32), True)
    local1 = e1.local(key, 1)
    np.testing.assert_array_equal(local1[1], [1, 2, 3, 4])
    np.testing.assert_array_equal(local1[2], [4, 5, 6, 7])
    back = np.zeros((2, 4), np.float32)
    e0.get(w1, (slice(1, 3), slice(0, 4)), back)
    np.testing.assert_array_equal(back, local1[1:3])
    np.testing.assert_array_equal(e0.local(key, 0), 0)          # own copy untouched


def test_signals_set_add_read_and_wake_a_sleeper(world2):
    name, host, (e0, e1), _, sig = world2
    remote = e0.cell(sig, 1, 8)                                   # cell 2 of rank 1's copy
    mine = e1.cell(sig, 1, 8)
    e0.signal(remote, NOTIFY_SET, 5)
    e0.signal(remote, NOTIFY_ADD, -2)
    assert e0.read_cell(remote) == e1.read_cell(mine) == 3
    assert host.read_cell(sig.segments[1], 8) == 3
    assert e1.try_wait(mine, CMP_EQ, 3, 10)
    assert not e1.try_wait(mine, CMP_GE, 4, 10)
    hooks = Hooks()
    t = threading.Thread(target=e1.wait, args=(mine, CMP_GE, 4, hooks))
    t.start()
    while "blocked" not in hooks.events:
        threading.Event().wait(0.001)
    e0.signal(remote, NOTIFY_ADD, 1)
    t.join(5)
    assert not t.is_alive()
    assert hooks.events[0] == "blocked" and hooks.events[-1] == "unblocked"


def test_a_blocked_wait_ends_when_its_check_raises(world2):
    _, _, (_, e1), _, sig = world2
    hooks = Hooks(stop_after=2)
    with pytest.raises(TimeoutError):
        e1.wait(e1.cell(sig, 1, 0), CMP_EQ, 1, hooks)
    assert hooks.events[-1] == "unblocked"


def test_only_shm_hands_out_peer_views(world2):
    name, _, (e0, e1), key, _ = world2
    view = e0.peer_view(key, 1)
    if name == "shm":
        view[0, 0] = 9
        assert e1.local(key, 1)[0, 0] == 9
    else:
        assert view is None
        with pytest.raises(ValueError):
            e0.local(key, 1)


@pytest.mark.parametrize("world2", [pytest.param("copy", marks=pytest.mark.copy)], indirect=True)
def test_copy_endpoint_maps_only_its_own_copies(world2):
    name, _, (e0, _), key, sig = world2
    w1 = e0.window(key, 1)
    e0.put(w1, (), np.ones((4, 4), np.float32), False)
    e0.get(w1, (), np.zeros((4, 4), np.float32))
    e0.signal(e0.cell(sig, 1, 0), NOTIFY_SET, 1)
    e0.local(key, 0)
    assert set(e0._own) == {key.segments[0]}


def test_a_rank_keeps_exactly_the_descriptors_its_transport_names(world2):
    name, host, _, _, _ = world2
    fds = host.child_fds(1)
    assert fds == ([] if name == "shm" else [host._links[1][1].fileno()])
    for fd in fds:
        os.fstat(fd)                                     # open


def test_remote_errors_come_back_to_the_caller(world2):
    name, _, (e0, _), key, _ = world2
    w1 = e0.window(key, 1)
    with pytest.raises((ValueError, RuntimeFault)):
        e0.put(w1, (slice(0, 2), slice(0, 4)), np.ones((3, 4), np.float32), False)


@pytest.mark.parametrize("shape", [(3100, 1024), (1, 1_600_000)],
                         ids=["rows-in-staged-chunks", "one-row-larger-than-the-stage"])
def test_copy_transport_moves_regions_larger_than_its_staging_buffer(shape):
    with two_members("copy", 4 * shape[0] * shape[1]) as (host, eps, names):
        key = WindowKey(names, (0, 1), shape, np.dtype(np.float32))
        w1 = eps[0].window(key, 1)
        rng = np.random.default_rng(0)
        src = rng.integers(-9, 9, size=shape).astype(np.float32)
        index = (slice(0, shape[0]), slice(1, shape[1]))
        eps[0].put(w1, index, src[:, 1:], False)
        eps[0].put(w1, index, np.ones_like(src[:, 1:]), True)
        mine = eps[1].local(key, 1)
        np.testing.assert_array_equal(mine[:, 1:], src[:, 1:] + 1)
        assert (mine[:, 0] == 0).all()
        back = np.zeros(shape, np.float32)
        eps[0].get(w1, (), back)
        np.testing.assert_array_equal(back, mine)


# ---------------------------------------------------------------- shm layout
def _rss_kb(addr: int) -> int:
    """Resident kB of this process's mapping that starts at ``addr``."""
    with open("/proc/self/smaps") as f:
        inside = False
        for line in f:
            head = line.split(maxsplit=1)[0]
            if "-" in head and not head.endswith(":"):
                inside = int(head.split("-")[0], 16) == addr
            elif inside and head == "Rss:":
                return int(line.split()[1])
    raise AssertionError(f"no mapping at 0x{addr:x}")


@contextlib.contextmanager
def shm_world(world, nbytes):
    """An shm host of ``world`` members with one window of ``nbytes`` each."""
    own, run = FakeRun(), FakeRun()
    host = make_host("shm", world, own.new_segment)
    eps = []
    try:
        copies = host.allocate(run, nbytes, tuple(range(world)))
        eps = [host.endpoint(d, world) for d in (0, world - 1)]
        yield host, eps, copies, run
    finally:
        for ep in eps:
            ep.close()
        host.end_run(run)
        run.release()
        host.close()
        own.release()


@pytest.mark.parametrize("nbytes, stride", [(300, 384), (4096, 4096), (5000, 8192), (1, 128)])
def test_a_shm_window_is_one_segment_of_disjoint_aligned_copies(nbytes, stride):
    world = 64
    with shm_world(world, nbytes) as (host, (e0, e_last), copies, run):
        assert len(run.segments) == 1 and len(copies) == world
        seg = run.segments[0]
        assert seg.size == world * stride
        assert [copies[m] for m in range(world)] == [(seg.name, m * stride) for m in range(world)]
        # every member's copy, written through one rank's endpoint, lands in
        # its own bytes of the segment and nowhere else
        key = WindowKey(copies, tuple(range(world)), (nbytes,), np.dtype(np.uint8))
        for m in range(world):
            e0.window(key, m)[:] = m + 1
        raw = seg.ndarray(np.uint8, (world, stride))
        expected = np.zeros((world, stride), np.uint8)
        expected[:, :nbytes] = np.arange(1, world + 1, dtype=np.uint8)[:, None]
        np.testing.assert_array_equal(raw, expected)
        # the other endpoint sees them as each member's own copy
        np.testing.assert_array_equal(e_last.local(key, world - 1), world)
        assert len(e0._segments) == 1                  # one mapping for all 64 copies


def test_shm_signal_cells_land_in_the_members_copy():
    world = 8
    with shm_world(world, 4 * world) as (host, (e0, e_last), copies, run):
        sig = WindowKey(copies, tuple(range(world)), (world,), np.dtype(np.int32))
        for m in range(world):
            e0.signal(e0.cell(sig, m, 4 * m), NOTIFY_SET, 100 + m)
        raw = run.segments[0].ndarray(np.int32, (world, copies.stride // 4))
        np.testing.assert_array_equal(raw[:, :world], np.diag(100 + np.arange(world)))
        assert [host.read_cell(copies[m], 4 * m) for m in range(world)] == \
            [100 + m for m in range(world)]
        assert e_last.try_wait(e_last.cell(sig, world - 1, 4 * (world - 1)), CMP_EQ,
                               100 + world - 1, 10)


def test_a_zero_dimensional_shm_window_is_a_writable_view():
    with shm_world(2, 4) as (host, (e0, e1), copies, run):
        key = WindowKey(copies, (0, 1), (), np.dtype(np.int32))
        view = e0.window(key, 1)
        assert isinstance(view, np.ndarray) and view.shape == ()
        view[()] = 7
        assert e1.local(key, 1)[()] == 7


def test_copies_index_compare_and_travel_as_the_tuple_they_stand_for():
    c = Copies("tilecomm-1-2-3", 256, 4)
    assert list(c) == [("tilecomm-1-2-3", o) for o in (0, 256, 512, 768)]
    assert c[-1] == c[3] and len(c) == 4
    with pytest.raises(IndexError):
        c[4]
    back = pickle.loads(pickle.dumps(c))
    assert back == c and hash(back) == hash(c) and back is not c
    assert c != Copies("tilecomm-1-2-3", 256, 5) and c != tuple(c)


@pytest.mark.parametrize("stride, populated", [(128, True), (8192, False)])
def test_only_a_window_of_small_copies_is_mapped_populated(stride, populated):
    world = 4
    with shm_world(world, stride) as (host, (e0, _), copies, run):
        key = WindowKey(copies, tuple(range(world)), (stride,), np.dtype(np.uint8))
        e0.window(key, 0)                               # maps it, touches nothing
        seg = e0._segments[copies.name]
        size_kb = -(-world * stride // 4096) * 4
        assert _rss_kb(seg.addr) == (size_kb if populated else 0)
