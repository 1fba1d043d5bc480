"""Tests of tilecomm.transport.segments: named /dev/shm segments and their cleanup."""
from __future__ import annotations

import gc
import itertools
import os
import random
import stat
import traceback

import numpy as np
import pytest

from tilecomm.transport import segments
from tilecomm.transport.segments import (PREFIX, SHM_DIR, Segment, segment_name, sweep,
                                         sweep_stale)

PAGE = 4096
_CALL_IDS = itertools.count(random.randrange(1 << 40))
_CREATED: list[str] = []


def _exists(name: str) -> bool:
    return os.path.exists(os.path.join(SHM_DIR, name))


@pytest.fixture
def names():
    """Fresh unique names (own pid, unique call id); all unlinked afterwards."""
    call_id = next(_CALL_IDS)
    made: list[str] = []

    def make(index: int | None = None, owner_pid: int | None = None, call: int | None = None):
        n = segment_name(os.getpid() if owner_pid is None else owner_pid,
                         call_id if call is None else call,
                         len(made) if index is None else index)
        made.append(n)
        _CREATED.append(n)
        return n

    yield make
    for n in made:
        try:
            os.unlink(os.path.join(SHM_DIR, n))
        except FileNotFoundError:
            pass


def _fork(fn) -> int:
    """Run fn() in a forked child; returns the child's exit code."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            fn()
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _dead_pid() -> int:
    """The pid of a child that has exited and been reaped."""
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


# -- naming ----------------------------------------------------------------------


def test_segment_name_format():
    assert PREFIX == "tilecomm"
    assert segment_name(123, 45, 6) == "tilecomm-123-45-6"
    assert segment_name(np.int64(1), 2, np.int32(3)) == "tilecomm-1-2-3"


@pytest.mark.parametrize("bad", ["", "a/b", "..", "x\0y"])
def test_invalid_names_are_rejected(bad):
    with pytest.raises(ValueError):
        Segment.create(bad, 16)
    with pytest.raises(ValueError):
        Segment.attach(bad)


# -- create / attach -------------------------------------------------------------


def test_create_is_zero_filled_page_aligned_and_private_to_user(names):
    n = names()
    s = Segment.create(n, 10_000)
    try:
        assert (s.name, s.size) == (n, 10_000)
        assert s.addr % PAGE == 0
        st = os.stat(os.path.join(SHM_DIR, n))
        assert st.st_size == 10_000
        assert stat.S_IMODE(st.st_mode) == 0o600
        a = s.ndarray(np.uint8, (10_000,))
        assert a.flags.writeable and not a.any()
        a[-1] = 7  # the last byte is writable
    finally:
        s.close()


def test_create_existing_name_fails(names):
    n = names()
    s = Segment.create(n, 64)
    try:
        with pytest.raises(FileExistsError):
            Segment.create(n, 64)
    finally:
        s.close()


def test_create_negative_size_fails(names):
    n = names()
    with pytest.raises(ValueError):
        Segment.create(n, -1)
    assert not _exists(n)


def test_attach_missing_raises_file_not_found(names):
    with pytest.raises(FileNotFoundError):
        Segment.attach(names())


def test_two_mappings_share_memory(names):
    n = names()
    a = Segment.create(n, 3 * PAGE + 5)
    b = Segment.attach(n)
    try:
        assert b.size == a.size and b.addr != a.addr and b.addr % PAGE == 0
        va, vb = a.ndarray(np.int64, (3, 4), offset=PAGE), b.ndarray(np.int64, (3, 4), offset=PAGE)
        va[...] = np.arange(12).reshape(3, 4)
        np.testing.assert_array_equal(vb, np.arange(12).reshape(3, 4))
        vb[2, 3] = -1
        assert va[2, 3] == -1
    finally:
        a.close()
        b.close()


def _resident_kb(addr: int) -> int:
    """Resident kB of this process's mapping that starts at ``addr`` (/proc/self/smaps)."""
    with open("/proc/self/smaps") as f:
        inside = False
        for line in f:
            head = line.split(maxsplit=1)[0]
            if "-" in head and not head.endswith(":"):
                inside = int(head.split("-")[0], 16) == addr
            elif inside and head == "Rss:":
                return int(line.split()[1])
    raise AssertionError(f"no mapping at 0x{addr:x}")


@pytest.mark.parametrize("bound, resident_pages", [(0, 0), (4 * PAGE, 0), (5 * PAGE, 5)])
def test_attach_populates_only_a_segment_within_the_bound(names, bound, resident_pages):
    n = names()
    a = Segment.create(n, 5 * PAGE)
    b = Segment.attach(n, populate_up_to=bound)
    try:
        assert _resident_kb(b.addr) == resident_pages * PAGE // 1024
        b.ndarray(np.uint8, (5 * PAGE,))[:] = 3               # populated or not: shared
        assert (a.ndarray(np.uint8, (5 * PAGE,)) == 3).all()
    finally:
        a.close()
        b.close()


def test_shared_visibility_across_fork(names):
    n = names()
    s = Segment.create(n, PAGE)
    try:
        arr = s.ndarray(np.int32, (4,))
        arr[0] = 11

        def child():
            # the inherited mapping and a fresh attach both see and write shared memory
            assert s.ndarray(np.int32, (4,))[0] == 11
            s.ndarray(np.int32, (4,))[1] = 22
            c = Segment.attach(n)
            assert c.ndarray(np.int32, (4,))[0] == 11
            c.ndarray(np.int32, (4,))[2] = 33
            c.close()

        assert _fork(child) == 0
        np.testing.assert_array_equal(arr, [11, 22, 33, 0])
        # and the other direction: a segment created by a child is attachable here
        m = names()
        assert _fork(lambda: Segment.create(m, 100).ndarray(np.uint8, (100,)).fill(5)) == 0
        c = Segment.attach(m)
        assert c.size == 100 and (c.ndarray(np.uint8, (100,)) == 5).all()
        c.close()
    finally:
        s.close()


def test_zero_size_segment(names):
    n = names()
    s = Segment.create(n, 0)
    try:
        assert s.size == 0 and s.addr != 0 and s.addr % PAGE == 0
        assert s.ndarray(np.float32, (0, 3)).shape == (0, 3)
        with pytest.raises(ValueError):
            s.ndarray(np.uint8, (1,))
        t = Segment.attach(n)
        assert t.size == 0 and t.addr % PAGE == 0
        t.close()
    finally:
        s.close()


# -- ndarray bounds ----------------------------------------------------------------


def test_ndarray_bounds_checks(names):
    s = Segment.create(names(), 1000)
    try:
        assert s.ndarray(np.float64, (125,)).nbytes == 1000  # exactly fits
        assert s.ndarray(np.int32, 10, offset=960).shape == (10,)
        assert s.ndarray(np.float32, (2, 3), offset=4, strides=(100, 8)).shape == (2, 3)
        with pytest.raises(ValueError):
            s.ndarray(np.float64, (126,))
        with pytest.raises(ValueError):
            s.ndarray(np.int32, (10,), offset=964)
        with pytest.raises(ValueError):
            s.ndarray(np.uint8, (1,), offset=-1)
        with pytest.raises(ValueError):
            s.ndarray(np.uint8, (2, 2), strides=(999, 1))
        with pytest.raises(ValueError):
            s.ndarray(np.uint8, (2, 2), strides=(1,))
        with pytest.raises(ValueError):
            s.ndarray(np.uint8, (-1,))
        # negative strides are fine as long as every element is inside
        rev = s.ndarray(np.int16, (4,), offset=6, strides=(-2,))
        rev[...] = [1, 2, 3, 4]
        np.testing.assert_array_equal(s.ndarray(np.int16, (4,)), [4, 3, 2, 1])
        with pytest.raises(ValueError):
            s.ndarray(np.int16, (4,), offset=4, strides=(-2,))
        # zero-size views never touch memory
        assert s.ndarray(np.int32, (0, 5)).size == 0
    finally:
        s.close()


# -- close / unlink ----------------------------------------------------------------


def test_close_with_live_views_is_deferred(names):
    n = names()
    s = Segment.create(n, 2 * PAGE)
    view = s.ndarray(np.int32, (8,))
    s.close()  # must not raise nor unmap under the view
    s.close()  # idempotent
    assert s.closed
    view[:] = 3  # still mapped
    assert view.sum() == 24
    with pytest.raises(ValueError):
        s.ndarray(np.int32, (1,))
    t = Segment.attach(n)
    assert (t.ndarray(np.int32, (8,)) == 3).all()
    t.close()
    del view
    gc.collect()


def test_close_without_views_unmaps(names):
    s = Segment.create(names(), PAGE)
    s.ndarray(np.uint8, (10,))[0] = 1  # temporary view, dropped at once
    s.close()
    maps = open("/proc/self/maps").read()
    assert f"/dev/shm/{s.name}" not in maps


def test_unlink_is_idempotent_and_keeps_existing_mappings(names):
    n = names()
    s = Segment.create(n, PAGE)
    try:
        a = s.ndarray(np.uint8, (4,))
        s.unlink()
        assert not _exists(n)
        s.unlink()
        a[:] = 9  # the mapping outlives the name
        assert (s.ndarray(np.uint8, (4,)) == 9).all()
        with pytest.raises(FileNotFoundError):
            Segment.attach(n)
    finally:
        s.close()
    s.unlink()


def test_context_manager_closes(names):
    with Segment.create(names(), 64) as s:
        assert not s.closed
    assert s.closed


# -- sweeping ----------------------------------------------------------------------


def test_sweep_by_owner_and_call(names):
    owner = _dead_pid()
    call_a, call_b = next(_CALL_IDS), next(_CALL_IDS)
    a = [names(i, owner, call_a) for i in range(3)]
    b = [names(i, owner, call_b) for i in range(2)]
    other = names(0, int(f"{owner}1"), call_a)  # pid sharing a decimal prefix with owner
    for n in a + b + [other]:
        Segment.create(n, 8).close()
    assert sweep(owner, call_a) == 3
    assert not any(map(_exists, a)) and all(map(_exists, b)) and _exists(other)
    assert sweep(owner, call_a) == 0
    assert sweep(owner) == 2
    assert not any(map(_exists, b)) and _exists(other)


def test_sweep_stale_removes_only_dead_owners(names):
    dead = _dead_pid()
    stale = [names(i, dead) for i in range(2)]
    live = names()
    odd = f"{PREFIX}-notapid-{next(_CALL_IDS)}-0"
    _CREATED.append(odd)
    for n in stale + [live]:
        Segment.create(n, 8).close()
    Segment.create(odd, 8).close()
    try:
        removed = sweep_stale()
        assert removed >= 2  # other crashed runs' leftovers may go too
        assert not any(map(_exists, stale))
        assert _exists(live) and _exists(odd)
        assert sweep(os.getpid(), int(live.split("-")[2])) == 1
    finally:
        os.unlink(os.path.join(SHM_DIR, odd))


def test_sweep_on_missing_directory(monkeypatch, tmp_path):
    monkeypatch.setattr(segments, "SHM_DIR", str(tmp_path / "absent"))
    assert sweep(1) == 0 and sweep_stale() == 0


def test_nothing_left_in_dev_shm():
    # runs last in this module
    assert [n for n in _CREATED if _exists(n)] == []
