"""Tests of tilecomm._native_core: atomics, notify/wait, atomic_add_2d, the ABI constants.

References are independent of the native code: plain Python integer
arithmetic for the cell operations and numpy (ml_dtypes for bfloat16) for the
typed atomic adds.  Cross-process behaviour is exercised with os.fork()ed
children operating on a shared-memory Segment.
"""
from __future__ import annotations

import itertools
import os
import random
import signal
import threading
import time
import traceback

import ml_dtypes
import numpy as np
import pytest

from tilecomm import _native_core as nc
from tilecomm.transport.segments import Segment, segment_name, sweep

EQ, GE, GE_U = nc.CMP_EQ, nc.CMP_GE, nc.CMP_GE_U
ADD, SET = nc.OP_ADD, nc.OP_SET
SEC = 1_000_000_000

_CALL_IDS = itertools.count(random.randrange(1 << 40))
_USED_CALL_IDS: list[int] = []


# -- fixtures / helpers ----------------------------------------------------------


@pytest.fixture
def make_seg():
    """Factory of fresh segments; everything is closed and unlinked afterwards."""
    call_id = next(_CALL_IDS)
    _USED_CALL_IDS.append(call_id)
    segs: list[Segment] = []

    def make(size: int = 1 << 16) -> Segment:
        s = Segment.create(segment_name(os.getpid(), call_id, len(segs)), size)
        segs.append(s)
        return s

    yield make
    for s in segs:
        s.close()
        s.unlink()
    assert sweep(os.getpid(), call_id) == 0


@pytest.fixture
def seg(make_seg):
    return make_seg()


def fork_children(n: int, fn) -> list[int]:
    """Run fn(i) in n forked children; each child exits 0 iff fn returned."""
    pids = []
    for i in range(n):
        pid = os.fork()
        if pid == 0:  # child: never return into pytest
            code = 1
            try:
                fn(i)
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        pids.append(pid)
    return pids


def join_children(pids: list[int], timeout: float = 8.0) -> None:
    deadline = time.monotonic() + timeout
    codes = {}
    pending = list(pids)
    while pending:
        for pid in list(pending):
            r, status = os.waitpid(pid, os.WNOHANG)
            if r:
                codes[pid] = os.waitstatus_to_exitcode(status)
                pending.remove(pid)
        if pending and time.monotonic() > deadline:
            for pid in pending:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            pytest.fail(f"children {pending} did not finish within {timeout}s")
        if pending:
            time.sleep(0.0005)
    assert all(c == 0 for c in codes.values()), codes


def run_children(n: int, fn, timeout: float = 8.0) -> None:
    join_children(fork_children(n, fn), timeout)


def wrap32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def wrap64(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v


# -- plain atomics ---------------------------------------------------------------


def test_i32_load_set_add_wraps(seg):
    a = seg.addr
    assert nc.load_i32(a) == 0
    assert nc.notify_i32(a, SET, 123, 0) == 123
    assert nc.load_i32(a) == 123
    assert nc.notify_i32(a, ADD, 7, 0) == 130
    assert nc.load_i32(a) == 130
    nc.notify_i32(a, SET, 2**31 - 1, 0)
    assert nc.notify_i32(a, ADD, 1, 0) == -(2**31)
    assert nc.load_i32(a) == -(2**31)
    nc.notify_i32(a, SET, 0xFFFFFFFF, 0)  # unsigned spelling of -1
    assert nc.load_i32(a) == -1
    assert nc.notify_i32(a, ADD, -5, 0) == -6
    # the value is visible to numpy at the same address
    assert seg.ndarray(np.int32, (1,))[0] == -6


def test_i64_load_store_wraps(seg):
    a = seg.addr + 8
    nc.store_i64(a, 2**40 + 3)
    assert nc.load_i64(a) == 2**40 + 3
    nc.store_i64(a, -(2**63))
    assert nc.load_i64(a) == -(2**63)
    nc.store_i64(a, 2**64 - 1)
    assert nc.load_i64(a) == -1
    assert seg.ndarray(np.int64, (2,))[1] == -1


def test_numpy_integers_are_accepted(seg):
    nc.notify_i32(np.int64(seg.addr), np.int64(SET), np.int32(9), np.uint64(0))
    assert nc.load_i32(np.uint64(seg.addr)) == 9


def test_argument_errors(seg):
    a = seg.addr
    with pytest.raises(TypeError):
        nc.load_i32()
    with pytest.raises(TypeError):
        nc.load_i32(a, 1)
    with pytest.raises(TypeError):
        nc.load_i32("x")
    with pytest.raises(TypeError):
        nc.notify_i32(a, SET, 1.5, 0)
    with pytest.raises(TypeError):
        nc.wait_i32(a, EQ, 0, 0, 0)
    with pytest.raises(TypeError):
        nc.notify_i32(a, ADD, None, 0)
    with pytest.raises(OverflowError):
        nc.notify_i32(a, SET, 2**32, 0)
    with pytest.raises(OverflowError):
        nc.notify_i32(a, SET, -(2**31) - 1, 0)
    with pytest.raises(OverflowError):
        nc.store_i64(a, 2**64)
    with pytest.raises(OverflowError):
        nc.load_i32(-4)
    with pytest.raises(ValueError):
        nc.load_i32(0)  # null
    with pytest.raises(ValueError):
        nc.load_i32(a + 2)  # misaligned
    with pytest.raises(ValueError):
        nc.load_i64(a + 4)
    with pytest.raises(ValueError):
        nc.notify_i32(a, 2, 1, 0)  # unknown op
    with pytest.raises(ValueError):
        nc.wait_i32(a, 3, 0, 0, 0, 0)  # unknown cmp
    with pytest.raises(ValueError):
        nc.atomic_add_2d(a, 4, a, 4, 1, 1, 8)  # unknown dtype
    with pytest.raises(ValueError):
        nc.atomic_add_2d(a, 4, a, 4, 1, 1, -1)
    with pytest.raises(ValueError):
        nc.atomic_add_2d(a + 2, 4, a, 4, 1, 1, 0)  # misaligned float32 dst
    with pytest.raises(ValueError):
        nc.atomic_add_2d(a, 4, a, 4, -1, 1, 0)
    assert nc.load_i32(a) == 0  # nothing was modified by the failed calls


# -- notify / wait semantics -----------------------------------------------------


def test_notify_add_and_set_return_new_value(seg):
    cell, sleepers = seg.addr, seg.addr + 64
    assert nc.notify_i32(cell, ADD, 5, sleepers) == 5
    assert nc.notify_i32(cell, ADD, -7, 0) == -2
    assert nc.notify_i32(cell, SET, 42, sleepers) == 42
    assert nc.load_i32(cell) == 42
    nc.notify_i32(cell, SET, 2**31 - 1, 0)
    assert nc.notify_i32(cell, ADD, 1, sleepers) == -(2**31)
    assert nc.notify_i32(cell, SET, 0xFFFFFFFE, 0) == -2
    assert nc.load_i32(sleepers) == 0


def _ref_cond(v: int, cmp: int, expected: int) -> bool:
    if cmp == EQ:
        return v & 0xFFFFFFFF == expected & 0xFFFFFFFF
    if cmp == GE:
        return v >= wrap32(expected)
    return v & 0xFFFFFFFF >= expected & 0xFFFFFFFF


WAIT_CASES = [
    (5, 5), (5, 4), (5, 6), (-1, 0), (0, -1), (-1, -1), (-(2**31), 2**31 - 1),
    (2**31 - 1, -(2**31)), (-1, 0xFFFFFFFF), (-2, 0xFFFFFFFF), (7, 0x80000000),
    (-(2**31), 0x80000000), (0, 0),
]


@pytest.mark.parametrize("cmp", [EQ, GE, GE_U])
@pytest.mark.parametrize("value,expected", WAIT_CASES)
def test_wait_condition_semantics(seg, cmp, value, expected):
    cell = seg.addr
    nc.notify_i32(cell, SET, value, 0)
    want = _ref_cond(value, cmp, expected)
    shown = value & 0xFFFFFFFF if cmp == GE_U else value
    # a pure poll and a short timed wait agree with the reference
    assert nc.wait_i32(cell, cmp, expected, 0, 0, 0) == (want, shown)
    t0 = time.perf_counter()
    assert nc.wait_i32(cell, cmp, expected, seg.addr + 64, 1_000_000, 10) == (want, shown)
    if not want:
        assert time.perf_counter() - t0 >= 0.001
    assert nc.load_i32(seg.addr + 64) == 0


def test_wait_timeout_returns_false_and_last_value(seg):
    cell, sleepers = seg.addr, seg.addr + 64
    nc.notify_i32(cell, SET, 3, 0)
    t0 = time.perf_counter()
    ok, v = nc.wait_i32(cell, GE, 4, sleepers, 30_000_000, 1000)
    dt = time.perf_counter() - t0
    assert (ok, v) == (False, 3)
    # it waited its 30 ms; the upper bound is the only witness of the unit (a
    # nanosecond count read as microseconds waits 30 s): far below that, with
    # room for a loaded machine
    assert 0.030 <= dt < 3.0
    assert nc.load_i32(sleepers) == 0  # the waiter unregistered itself
    # without a sleepers counter as well
    t0 = time.perf_counter()
    assert nc.wait_i32(cell, EQ, 0, 0, 5_000_000, 0) == (False, 3)
    assert time.perf_counter() - t0 >= 0.005


def test_wait_releases_the_gil(seg):
    cell, sleepers = seg.addr, seg.addr + 64
    result = []
    t = threading.Thread(target=lambda: result.append(nc.wait_i32(cell, EQ, 1, sleepers,
                                                                  5 * SEC, 100)))
    t.start()
    # This loop only makes progress if the waiting thread does not hold the GIL.
    deadline = time.monotonic() + 3
    while nc.load_i32(sleepers) == 0 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert nc.load_i32(sleepers) == 1
    nc.notify_i32(cell, SET, 1, sleepers)
    t.join(3)
    assert result == [(True, 1)]


def test_await_readable_polls_for_its_window_then_reports_nothing():
    r, w = os.pipe()
    try:
        t = time.monotonic()
        assert nc.await_readable(r, 20_000_000) is False
        assert time.monotonic() - t >= 0.019          # it polled the whole window
        assert nc.await_readable(r, 0) is False
    finally:
        os.close(r)
        os.close(w)


def test_await_readable_sees_a_write_made_while_it_polls_and_releases_the_gil():
    r, w = os.pipe()
    try:
        # the writer runs while the poller is inside the native call: only
        # possible if the call released the GIL
        writer = threading.Timer(0.05, lambda: os.write(w, b"x"))
        writer.start()
        assert nc.await_readable(r, 30 * SEC) is True
        writer.join()
        assert os.read(r, 1) == b"x"
    finally:
        os.close(r)
        os.close(w)


def test_await_readable_reports_a_hung_up_channel():
    r, w = os.pipe()
    os.close(w)
    try:
        assert nc.await_readable(r, 30 * SEC) is True     # EOF is for the reader to see
        assert os.read(r, 1) == b""
    finally:
        os.close(r)


def test_await_readable_rejects_bad_arguments():
    with pytest.raises(OverflowError):
        nc.await_readable(-1, 0)
    with pytest.raises(OverflowError):
        nc.await_readable(0, -5)
    with pytest.raises(TypeError):
        nc.await_readable(0.5, 0)


def test_wait_is_interruptible_by_signals(seg):
    class Interrupted(Exception):
        pass

    def handler(signum, frame):
        raise Interrupted

    old = signal.signal(signal.SIGALRM, handler)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        t0 = time.perf_counter()
        with pytest.raises(Interrupted):
            nc.wait_i32(seg.addr, EQ, 1, seg.addr + 64, 60 * SEC, 100)
        # an uninterruptible wait raises too, once its 60 s time-out ends it and
        # the handler runs: only the time tells the two apart, and 6 s is an
        # order of magnitude below that, with room for a loaded machine
        assert time.perf_counter() - t0 < 6.0
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert nc.load_i32(seg.addr + 64) == 0


def test_arrive_wait_adds_to_every_out_cell_then_waits_for_every_in_cell(seg):
    outs = [seg.addr + 4 * i for i in range(3)]
    ins = [seg.addr + 64 + 4 * i for i in range(2)]
    flat = tuple(x for a in outs for x in (a, 0))
    # nothing arrived yet: returns the first unsatisfied in-cell, after the adds
    assert nc.arrive_wait_i32(flat, tuple(ins), 1, 1, 0, 0, 0) == 0
    assert [nc.load_i32(a) for a in outs] == [1, 1, 1]
    nc.notify_i32(ins[0], SET, 1, 0)
    assert nc.arrive_wait_i32(flat, tuple(ins), 2, 1, 0, 0, 0) == 1
    assert [nc.load_i32(a) for a in outs] == [3, 3, 3]
    nc.notify_i32(ins[1], SET, 7, 0)
    assert nc.arrive_wait_i32(flat, tuple(ins), -3, 1, 0, 1000, 10) == -1
    assert [nc.load_i32(a) for a in outs] == [0, 0, 0]
    assert nc.arrive_wait_i32((), (), 1, 1, 0, 0, 0) == -1
    with pytest.raises(TypeError):
        nc.arrive_wait_i32((outs[0],), (), 1, 1, 0, 0, 0)     # a pair is addr + sleepers


def test_arrive_wait_is_woken_by_a_peer_process(seg):
    mine, theirs = seg.addr, seg.addr + 64
    res = seg.ndarray(np.int64, (1,), offset=128)

    def child(_):
        # the child arrives in my cell, then waits for my arrival in its cell
        res[0] = nc.arrive_wait_i32((mine, 0), (theirs,), 1, 1, 0, 5 * SEC, 100)

    pids = fork_children(1, child)
    assert nc.wait_i32(mine, GE, 1, 0, 5 * SEC, 100)[0]
    nc.notify_i32(theirs, ADD, 1, 0)
    join_children(pids)
    assert res[0] == -1


def test_futex_wake_without_waiters(seg):
    assert nc.futex_wake(seg.addr, 1) == 0
    assert nc.futex_wake(seg.addr, -1) == 0


# -- cross-process ---------------------------------------------------------------

N_ADDS = 10_000


@pytest.mark.parametrize("nproc", [2, 4])
def test_cross_process_notify_add_is_exact(seg, nproc):
    c32 = seg.addr

    def child(i):
        for _ in range(N_ADDS):
            nc.notify_i32(c32, ADD, 1, c32 + 64)    # sleepers 0: no wake syscalls

    run_children(nproc, child)
    assert nc.load_i32(c32) == nproc * N_ADDS


@pytest.mark.parametrize("nproc", [2, 3])
def test_cross_process_notify_adds_wake_a_sleeping_waiter(seg, nproc):
    cell, sleepers = seg.addr, seg.addr + 64
    pids = fork_children(nproc, lambda i: [nc.notify_i32(cell, ADD, 1, sleepers)
                                           for _ in range(N_ADDS)])
    # The parent blocks until the exact total has arrived; a lost wake-up
    # would show up as a timeout.
    ok, v = nc.wait_i32(cell, GE, nproc * N_ADDS, sleepers, 5 * SEC, 0)
    join_children(pids)
    assert (ok, v) == (True, nproc * N_ADDS)
    assert nc.load_i32(cell) == nproc * N_ADDS
    assert nc.load_i32(sleepers) == 0


def test_child_sleeping_in_wait_is_woken_by_parent_notify(seg):
    cell, sleepers = seg.addr, seg.addr + 64
    res = seg.ndarray(np.int64, (3,), offset=128)

    def child(_):
        ok, v = nc.wait_i32(cell, GE, 5, sleepers, 60 * SEC, 1000)
        res[2] = time.monotonic_ns()
        res[1] = v
        res[0] = 1 if ok else 2

    pids = fork_children(1, child)
    # Wait until the child has registered as a sleeper, i.e. passed the spin
    # and yield phases, then give it time to enter futex_wait.
    deadline = time.monotonic() + 3
    while nc.load_i32(sleepers) == 0 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert nc.load_i32(sleepers) == 1
    time.sleep(0.02)
    assert res[0] == 0  # still waiting
    t_notify = time.monotonic_ns()
    assert nc.notify_i32(cell, ADD, 5, sleepers) == 5
    # a lost wake-up leaves the child asleep until its 60 s time-out, past the
    # join's 8 s (which then fails); 6 s after the notify is an order of
    # magnitude below that time-out, with room for a loaded machine
    join_children(pids)
    assert res[0] == 1 and res[1] == 5
    assert res[2] - t_notify < 6 * SEC   # woken by the notify, not by its time-out
    assert nc.load_i32(sleepers) == 0


def test_futex_wake_wakes_a_sleeping_child(seg):
    cell, sleepers = seg.addr, seg.addr + 64
    pids = fork_children(1, lambda _: None if nc.wait_i32(cell, EQ, 1, sleepers, 5 * SEC, 0)[0]
                         else os._exit(3))
    # A wake without a value change is spurious for the child: it goes back to
    # sleep.  Keep waking until the child is caught inside futex_wait.
    deadline = time.monotonic() + 3
    woken = 0
    while woken == 0 and time.monotonic() < deadline:
        time.sleep(0.002)
        woken = nc.futex_wake(cell, -1)
    assert woken == 1
    seg.ndarray(np.int32, (1,))[0] = 1  # no wake: the child sees it on its next check...
    nc.futex_wake(cell, 1)  # ...but wake it promptly anyway
    join_children(pids)


def test_ping_pong_never_loses_a_wakeup(seg):
    ping, pong, s_child, s_parent = seg.addr, seg.addr + 64, seg.addr + 128, seg.addr + 192
    rounds = 400

    def child(_):
        for i in range(1, rounds + 1):
            ok, _ = nc.wait_i32(ping, GE, i, s_child, 2 * SEC, 0)
            assert ok, i
            if i % 5 == 0:
                time.sleep(0.0002)  # push the parent past spin/yield into futex sleep
            nc.notify_i32(pong, SET, i, s_parent)

    pids = fork_children(1, child)
    for i in range(1, rounds + 1):
        if i % 7 == 0:
            time.sleep(0.0002)  # and the child likewise
        nc.notify_i32(ping, SET, i, s_child)
        ok, v = nc.wait_i32(pong, GE, i, s_parent, 2 * SEC, 0)
        assert (ok, v) == (True, i)
    join_children(pids)


# -- atomic_add_2d ---------------------------------------------------------------

DTYPES = [
    (0, np.dtype(np.float32)),
    (1, np.dtype(np.float16)),
    (2, np.dtype(ml_dtypes.bfloat16)),
    (3, np.dtype(np.int32)),
    (4, np.dtype(np.int16)),
    (5, np.dtype(np.int8)),
    (6, np.dtype(np.float64)),
    (7, np.dtype(np.int64)),
]
DTYPE_IDS = [str(dt) for _, dt in DTYPES]


def _is_int(dt: np.dtype) -> bool:
    return np.issubdtype(dt, np.integer)


def _random(rng: np.random.Generator, dt: np.dtype, shape) -> np.ndarray:
    if _is_int(dt):
        info = np.iinfo(dt)  # full range: exercises wrap-around
        return rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dt)
    x = rng.standard_normal(shape) * rng.choice([1e-3, 1.0, 100.0], size=shape)
    flat = x.reshape(-1)
    specials = [np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-6, 6e-8, 65504.0, 65519.0, 3e38, 1e-40]
    idx = rng.choice(flat.size, size=min(len(specials), flat.size // 4), replace=False)
    flat[idx] = specials[: len(idx)]
    with np.errstate(over="ignore"):
        return x.astype(dt)


def _reference(dst: np.ndarray, src: np.ndarray) -> np.ndarray:
    dt = dst.dtype
    with np.errstate(over="ignore", invalid="ignore"):
        if dt in (np.float16, ml_dtypes.bfloat16):
            return (dst.astype(np.float32) + src.astype(np.float32)).astype(dt)
        return dst + src  # numpy integer arithmetic wraps


def assert_bits_equal(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    ut = np.dtype(f"u{got.dtype.itemsize}")
    g, w = np.ascontiguousarray(got).view(ut), np.ascontiguousarray(want).view(ut)
    if not _is_int(got.dtype):
        gnan, wnan = np.isnan(got.astype(np.float64)), np.isnan(want.astype(np.float64))
        np.testing.assert_array_equal(gnan, wnan)
        g, w = g[~gnan], w[~wnan]
    mismatch = np.flatnonzero(g != w)
    assert mismatch.size == 0, (
        f"{mismatch.size} mismatches, first: got {g.flat[mismatch[0]]:#x} "
        f"want {w.flat[mismatch[0]]:#x}")


def _dst_view(seg: Segment, dt: np.dtype, rows: int, cols: int, col0: int, offset: int = 0):
    """A (rows, cols) view with row padding and a column offset inside seg."""
    full = seg.ndarray(dt, (rows, cols + 5), offset=offset)
    return full[:, col0:col0 + cols]


def _add(dst: np.ndarray, src: np.ndarray, code: int) -> None:
    assert dst.shape == src.shape and dst.strides[1] == src.strides[1] == dst.itemsize
    nc.atomic_add_2d(dst.ctypes.data, dst.strides[0], src.ctypes.data, src.strides[0],
                     dst.shape[0], dst.shape[1], code)


@pytest.mark.parametrize("col0", [0, 1, 2, 3])
@pytest.mark.parametrize("code,dt", DTYPES, ids=DTYPE_IDS)
def test_atomic_add_2d_matches_numpy(seg, code, dt, col0):
    rng = np.random.default_rng(1000 * code + col0)
    rows, cols = 9, 13
    dst = _dst_view(seg, dt, rows, cols, col0)
    dst[...] = _random(rng, dt, (rows, cols))
    guard = seg.ndarray(dt, (rows, cols + 5)).copy()  # to check padding is untouched
    src_full = _random(rng, dt, (2 * rows, cols + 3))
    src = src_full[::2, 1:1 + cols]  # non-contiguous rows
    want = _reference(dst.copy(), src)
    _add(dst, src, code)
    assert_bits_equal(dst, want)
    after = seg.ndarray(dt, (rows, cols + 5))
    mask = np.ones(after.shape, bool)
    mask[:, col0:col0 + cols] = False
    assert_bits_equal(after[mask], guard[mask])


@pytest.mark.parametrize("code,dt", [DTYPES[1], DTYPES[2]], ids=DTYPE_IDS[1:3])
def test_atomic_add_2d_all_half_bit_patterns(make_seg, code, dt):
    # Every fp16 / bf16 bit pattern as the destination, against random and
    # special sources: covers subnormals, ties, overflow to inf and NaNs.
    rng = np.random.default_rng(code)
    seg = make_seg(1 << 17)
    base = np.arange(1 << 16, dtype=np.uint16).view(dt).reshape(256, 256)
    for src in (_random(rng, dt, (256, 256)),
                base[::-1, ::-1].copy(),
                rng.integers(0, 1 << 16, size=(256, 256), dtype=np.uint16).view(dt)):
        dst = seg.ndarray(dt, (256, 256))
        dst[...] = base
        want = _reference(base, src)
        _add(dst, src, code)
        assert_bits_equal(dst, want)


@pytest.mark.parametrize("size,code,dt", [(4093, 5, np.int8), (4094, 1, np.float16),
                                          (4094, 4, np.int16), (8192, 2, ml_dtypes.bfloat16)])
def test_atomic_add_2d_last_element_of_mapping(make_seg, size, code, dt):
    dt = np.dtype(dt)
    s = make_seg(size)
    off = (size - dt.itemsize) // dt.itemsize * dt.itemsize
    dst = s.ndarray(dt, (1, 1), offset=off)
    dst[0, 0] = 3
    src = np.array([[4]], dtype=dt)
    _add(dst, src, code)
    assert dst[0, 0] == 7


def test_atomic_add_2d_empty_is_a_noop():
    nc.atomic_add_2d(0, 0, 0, 0, 0, 5, 0)
    nc.atomic_add_2d(0, 0, 0, 0, 5, 0, 3)


CONCURRENT = [DTYPES[0], DTYPES[3], DTYPES[1], DTYPES[2], DTYPES[4], DTYPES[5]]


@pytest.mark.parametrize("code,dt", CONCURRENT, ids=[str(d) for _, d in CONCURRENT])
def test_atomic_add_2d_concurrent_processes(seg, code, dt):
    # Two processes add into the same elements at the same time; with
    # integer-valued data every result is exact, so any lost update shows.
    rng = np.random.default_rng(code)
    rows, cols, reps, nproc = 8, 37, 20 if dt == ml_dtypes.bfloat16 else 150, 2
    dst = _dst_view(seg, dt, rows, cols, 1, offset=4096)
    start = rng.integers(-50, 50, size=(rows, cols))
    src_int = rng.integers(-3, 4, size=(rows, cols))
    dst[...] = start.astype(dt)
    src = src_int.astype(dt)
    ready = seg.addr

    def child(_):
        nc.notify_i32(ready, ADD, 1, 0)
        ok, _ = nc.wait_i32(ready, EQ, nproc, 0, 2 * SEC, 10_000)  # start together
        assert ok
        for _ in range(reps):
            _add(dst, src, code)

    run_children(nproc, child)
    total = start + nproc * reps * src_int
    if _is_int(dt):
        want = total.astype(dt)  # int64 -> narrow int cast wraps modulo 2**bits
    else:
        exact_limit = 256 if dt == ml_dtypes.bfloat16 else 2048  # 8 / 11 significand bits
        assert np.abs(total).max() <= exact_limit
        want = total.astype(np.float32).astype(dt)
    assert_bits_equal(dst, want)


# -- one ABI -------------------------------------------------------------------


def test_python_encodings_are_the_native_ones():
    """Notify ops, wait comparisons and atomic-add dtype codes: Python's
    definitions must equal the constants the C module exports."""
    from tilecomm import dtypes as D
    from tilecomm.ir.enums import NotifyOp, WaitCmp
    from tilecomm.transport import base
    assert (NotifyOp.AtomicAdd, NotifyOp.Set) == (nc.OP_ADD, nc.OP_SET)
    assert (WaitCmp.Eq, WaitCmp.Ge) == (nc.CMP_EQ, nc.CMP_GE)
    assert len(NotifyOp) == 2 and len(WaitCmp) == 2
    assert (base.NOTIFY_ADD, base.NOTIFY_SET, base.CMP_EQ, base.CMP_GE) == \
        (nc.OP_ADD, nc.OP_SET, nc.CMP_EQ, nc.CMP_GE)
    native = {"FP32": nc.DT_F32, "FP16": nc.DT_F16, "BF16": nc.DT_BF16, "INT32": nc.DT_I32,
              "INT16": nc.DT_I16, "INT8": nc.DT_I8, "FP64": nc.DT_F64, "INT64": nc.DT_I64}
    python = {dt.name: dt.atomic_code for dt in vars(D).values()
              if isinstance(dt, D.DataType) and dt.atomic_code is not None}
    assert python == native


def test_every_native_export_is_used_by_the_package():
    """Exports nobody calls are removed, not kept as dead weight."""
    import re
    import tilecomm
    root = os.path.dirname(tilecomm.__file__)
    source = ""
    for d, _, files in os.walk(root):
        source += "".join(open(os.path.join(d, f)).read() for f in files if f.endswith(".py"))
    functions = {n for n in dir(nc) if callable(getattr(nc, n)) and not n.startswith("_")}
    unused = {n for n in functions if not re.search(rf"\bnative\.{n}\b", source)}
    assert functions and unused == set()


def test_no_segments_left_behind():
    prefixes = [f"tilecomm-{os.getpid()}-{c}-" for c in _USED_CALL_IDS]
    left = [n for n in os.listdir("/dev/shm") if any(n.startswith(p) for p in prefixes)]
    assert left == []
