"""DistributedWorker: every member of the reference's table and its errors."""
import threading
import time

import numpy as np
import pytest

from tilecomm.errors import ArgumentError, ConfigError, DeadlockError, RuntimeFault
from tilecomm.runtime import (DeviceTensor, DistributedRunHandle, DistributedWorker,
                              RegistrationHandle, StackedDeviceTensor)
from conftest import WORLD_SIZES, children, config_for
from worker_programs import accumulate_main, add_main, add_on, decode, prefill, relay_main

W = 8


def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.integers(-5, 5, size=(n, 1, W)).astype(np.float32),
            np.full((n, 1, W), np.nan, np.float32))


def _add_program(n):
    xs, ys = _data(n)
    return add_main.compile(xs, xs, ys, config=config_for(n))


def _accumulate_program(n):
    xs, ys = _data(n)
    return accumulate_main.compile(xs, ys, 1, config=config_for(n))


def assert_only_rank_0_blocked(err, value, expected):
    """``err`` is the deadlock report of a call whose rank 0 waits, alone, for
    its signal cell (at ``value``) to reach ``expected``."""
    assert isinstance(err, DeadlockError), repr(err)
    assert str(err).startswith("deadlock: every live rank is blocked"), str(err)
    assert [(b["rank"], b["value"], b["expected"]) for b in err.blocked] == \
        [(0, value, expected)], str(err)


# ------------------------------------------------------------------ construction
def test_worker_without_a_program_is_a_value_error():
    with pytest.raises(ValueError, match="requires at least one compiled program") as ei:
        DistributedWorker()
    assert ei.value.code == "TC417"
    with pytest.raises(ValueError, match="at least one"):
        DistributedWorker([])


def test_reset_without_persistent_is_a_value_error():
    with pytest.raises(ValueError, match=r"reset_persistent_windows=True requires "
                                         r"persistent=True") as ei:
        _add_program(1).prepare(reset_persistent_windows=True)
    assert ei.value.code == "TC417"
    assert children() == set()


def test_programs_on_different_devices_cannot_share_a_worker():
    with pytest.raises(ValueError, match="same platform/device_ids/runtime") as ei:
        DistributedWorker([_add_program(1), _add_program(2)])
    assert ei.value.code == "TC417"


def test_unknown_callback_names_are_refused_with_the_available_ones():
    with pytest.raises(ValueError, match=r"\['nope'\] are not sub-workers of this program\. "
                                         r"Available sub-workers: \[\]") as ei:
        _add_program(1).prepare(callbacks={"nope": print})
    assert ei.value.code == "TC423"
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="sub-workers"):
        _add_program(1).prepare(sub_worker_overrides={"nope": print})


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), "1"])
def test_startup_timeout_must_be_positive(bad):
    with pytest.raises(ValueError, match="startup_timeout_s") as ei:
        _add_program(1).prepare(startup_timeout_s=bad)
    assert ei.value.code == "TC417"


def test_prepare_takes_the_config_positionally():
    prog = _add_program(2)
    xs, ys = _data(2)
    with prog.prepare(config_for(2), startup_timeout_s=5.0) as rt:
        rt(xs, xs, ys)
        np.testing.assert_array_equal(ys, xs + xs)


# ------------------------------------------------------------------ calls and handles
@pytest.mark.parametrize("n", WORLD_SIZES)
def test_call_run_and_registration_handle_agree_with_numpy(n):
    prog = _add_program(n)
    with prog.prepare() as rt:
        handle = rt.register(prog)
        assert isinstance(handle, RegistrationHandle) and handle.compiled is prog
        for call in (lambda *a: rt(*a), lambda *a: rt.run(prog, *a), handle):
            xs, ys = _data(n, seed=n)
            ws, _ = _data(n, seed=n + 1)
            assert call(xs, ws, ys) is ys            # the host function returns ys
            np.testing.assert_array_equal(ys, xs + ws)
        assert not handle.closed
    assert handle.closed


@pytest.mark.parametrize("windows", ["fresh", "zeroed"])
def test_submit_keeps_two_calls_in_flight_and_a_third_waits_for_the_oldest(windows):
    """Fresh windows pipeline: the second call is on the same ranks as the
    first, so the first one's failure stops it (TC426).  Zeroed persistent
    windows do not: the second runs after the first failed, on new ranks."""
    n = 2
    prog = _accumulate_program(n)
    with prog.prepare(persistent=windows == "zeroed") as rt:
        xs, ys = _data(n)
        rt(xs, ys, 1)                                # warm: compiled and mapped
        gate = threading.Event()
        started = []
        # a call that blocks in rank 0's wait until ``expected`` is reached:
        # expected 2 never is on fresh windows, so the call deadlocks and the
        # first handle fails; that keeps it in flight long enough to look
        outs = [np.full_like(ys, np.nan) for _ in range(3)]
        h1 = rt.submit(prog, xs, outs[0], 2)
        h2 = rt.submit(prog, xs, outs[1], 1)
        assert isinstance(h1, DistributedRunHandle)

        def third():
            started.append(time.monotonic())
            h = rt.submit(prog, xs, outs[2], 1)
            started.append(time.monotonic())
            gate.set()
            h.result()

        th = threading.Thread(target=third)
        th.start()
        time.sleep(0.05)
        # the first call is still waiting for its deadlock to be reported
        assert not h1.done and not gate.is_set(), "a third call was admitted"
        with pytest.raises(DeadlockError) as ei:
            h1.result()
        # every rank added 1 to its own count cell on rank 0: the first it waits on holds 1
        assert_only_rank_0_blocked(ei.value, 1, 2)
        th.join(10)
        assert gate.is_set()
        if windows == "fresh":
            with pytest.raises(RuntimeFault) as stopped:
                h2.result(timeout=10)
            assert stopped.value.code == "TC426"
            np.testing.assert_array_equal(outs[2][0], xs.sum(axis=0))
        else:
            h2.result(timeout=10)
            for out in outs[1:]:
                np.testing.assert_array_equal(out[0], xs.sum(axis=0))
        assert h2.done
        with pytest.raises(type(ei.value)):          # the error is kept: asked again, raised again
            h1.wait()


def test_handle_timeouts():
    n = 2
    prog = _accumulate_program(n)
    with prog.prepare() as rt:
        xs, ys = _data(n)
        h = rt.submit(prog, xs, ys, 2)               # deadlocks: reported after quiescence
        with pytest.raises(TimeoutError):
            h.result(timeout=0)
        for bad in (-1, float("inf"), float("nan")):
            with pytest.raises(ValueError, match="timeout") as ei:
                h.wait(bad)
            assert ei.value.code == "TC421"
        with pytest.raises(DeadlockError) as ei:
            h.result(timeout=30)
        assert_only_rank_0_blocked(ei.value, 1, 2)
        assert h.done
        rt(xs, ys, 1)                                # the worker restarted its ranks
        np.testing.assert_array_equal(ys[0], xs.sum(axis=0))


def test_rt_call_is_ambiguous_on_a_multi_program_worker():
    n = 2
    a, b = _add_program(n), _accumulate_program(n)
    xs, ys = _data(n)
    with a.prepare(extra_compiled=[b]) as rt:
        with pytest.raises(TypeError, match=r"ambiguous on a multi-program") as ei:
            rt(xs, xs, ys)
        assert ei.value.code == "TC416"
        rt.run(b, xs, ys, 1)
        np.testing.assert_array_equal(ys[0], xs.sum(axis=0))


def test_unregistered_program_is_a_value_error_for_run_submit_and_register():
    n = 2
    a, b = _add_program(n), _accumulate_program(n)
    xs, ys = _data(n)
    with a.prepare() as rt:
        for op in (lambda: rt.run(b, xs, ys, 1), lambda: rt.submit(b, xs, ys, 1),
                   lambda: rt.register(b)):
            with pytest.raises(ValueError, match="registered when this worker was constructed") \
                    as ei:
                op()
            assert ei.value.code == "TC415"


def test_wrong_argument_count_is_a_type_error():
    prog = _add_program(2)
    xs, ys = _data(2)
    with prog.prepare() as rt:
        with pytest.raises(TypeError, match=r"expects 3 arguments \(in-place, one per "
                                            r"parameter\), got 2"):
            rt(xs, ys)


def test_every_member_after_close_is_a_runtime_error():
    prog = _add_program(1)
    xs, ys = _data(1)
    rt = prog.prepare()
    t = rt.alloc_tensor([1, W], np.float32)
    handle = rt.register(prog)
    rt.close()
    rt.close()                                       # idempotent
    members = {
        "__call__": lambda: rt(xs, xs, ys), "run": lambda: rt.run(prog, xs, xs, ys),
        "submit": lambda: rt.submit(prog, xs, xs, ys), "register": lambda: rt.register(prog),
        "alloc_tensor": lambda: rt.alloc_tensor([1], np.float32),
        "free_tensor": lambda: rt.free_tensor(t),
        "alloc_stacked_tensor": lambda: rt.alloc_stacked_tensor(xs),
        "free_stacked_tensor": lambda: rt.free_stacked_tensor(None),
        "copy_stacked_from": lambda: rt.copy_stacked_from(None, xs),
        "copy_to": lambda: rt.copy_to(1, 1, 1), "copy_from": lambda: rt.copy_from(1, 1, 1),
        "malloc": lambda: rt.malloc(8), "free": lambda: rt.free(1),
        "release_inherited_host_tensor_refs": rt.release_inherited_host_tensor_refs,
    }
    for name, op in members.items():
        with pytest.raises(RuntimeError, match=rf"DistributedWorker\.{name}\(\) called after "
                                               rf"close\(\)") as ei:
            op()
        assert ei.value.code == "TC413"
    assert handle.closed
    with pytest.raises(RuntimeError, match="after close"):
        handle(xs, xs, ys)
    assert t.freed
    assert children() == set()


def test_close_drains_submitted_calls_in_order():
    n = 2
    prog = _add_program(n)
    rt = prog.prepare()
    xs, _ = _data(n)
    outs = [np.full_like(xs, np.nan) for _ in range(2)]
    handles = [rt.submit(prog, xs, xs + k, outs[k]) for k in range(2)]
    rt.close()
    for k, h in enumerate(handles):
        assert h.done
        np.testing.assert_array_equal(outs[k], xs + xs + k)


def test_context_manager_closes_and_leaves_nothing():
    prog = _add_program(2)
    with prog.prepare() as rt:
        assert len(children()) == 2
    assert rt.closed and children() == set()


# ------------------------------------------------------------------ device tensors
@pytest.mark.parametrize("n", WORLD_SIZES)
def test_stacked_tensor_shards_live_on_their_workers(n):
    prog = _add_program(n)
    xs, ys = _data(n)
    ws, _ = _data(n, seed=7)
    with prog.prepare() as rt:
        sw = rt.alloc_stacked_tensor(ws)
        assert isinstance(sw, StackedDeviceTensor) and sw.worker_ids == tuple(range(n))
        for seed in range(2):                        # resident across calls
            xs, _ = _data(n, seed=seed)
            rt(xs, sw, ys)
            np.testing.assert_array_equal(ys, xs + ws)
        back = np.zeros_like(ws)
        rt.copy_stacked_from(sw, back)
        np.testing.assert_array_equal(back, ws)
        if n > 1:                                    # shard i must go to worker_ids[i]
            rolled = rt.alloc_stacked_tensor(ws, worker_ids=[(i + 1) % n for i in range(n)])
            with pytest.raises(RuntimeFault, match="resident on worker 1 was dispatched to "
                                                   "device 0") as ei:
                rt(xs, rolled, ys)
            assert ei.value.code == "TC418"
        rt.free_stacked_tensor(sw)
        with pytest.raises(TypeError, match="was freed") as ei:
            rt(xs, sw, ys)
        assert ei.value.code == "TC414"


@pytest.mark.parametrize("ids, match", [([0], "1 worker_ids for 2 shards"),
                                        ([1, 1], "distinct"), ([0, 5], r"\[0, 2\)")])
def test_stacked_tensor_worker_ids_are_checked(ids, match):
    with _add_program(2).prepare() as rt:
        with pytest.raises(ValueError, match=match) as ei:
            rt.alloc_stacked_tensor(np.zeros((2, 1, W), np.float32), worker_ids=ids)
        assert ei.value.code == "TC418"
        with pytest.raises(ValueError, match="rank >= 2"):
            rt.alloc_stacked_tensor(np.zeros(4, np.float32))


def test_device_tensor_upload_dispatch_free_and_foreign_tensors():
    n = 2
    xs, ys = _data(n)
    x0, y0 = xs[0].copy(), np.zeros((1, W), np.float32)
    on0 = add_on(0).compile(x0, x0, y0, config=config_for(n))
    on1 = add_on(1).compile(x0, x0, y0, config=config_for(n))
    with DistributedWorker([on0, on1]) as rt, on1.prepare() as other:
        w = rt.alloc_tensor([1, W], np.float32, init=xs[1], worker_id=1)
        assert isinstance(w, DeviceTensor) and w.worker_id == 1
        rt.run(on1, x0, w, y0)
        np.testing.assert_array_equal(y0, x0 + xs[1])
        with pytest.raises(RuntimeFault, match="worker 1 was dispatched to device 0"):
            rt.run(on0, x0, w, y0)
        zero = rt.alloc_tensor((1, W), "float32")    # zero-filled by default
        rt.run(on0, x0, zero, y0)
        np.testing.assert_array_equal(y0, x0)
        with pytest.raises(TypeError, match="another DistributedWorker") as ei:
            other(x0, w, y0)
        assert ei.value.code == "TC414"
        with pytest.raises(TypeError, match="One-shot calls cannot accept DeviceTensor") as ei:
            on1(x0, w, y0)
        assert ei.value.code == "TC414"
        with pytest.raises(ValueError, match="not worker 0") as ei:
            rt.free_tensor(w)
        assert ei.value.code == "TC418"
        rt.free_tensor(w, worker_id=1)
        rt.free_tensor(w, worker_id=1)               # idempotent
        with pytest.raises(ValueError, match="init="):
            rt.alloc_tensor([2, W], np.float32, init=xs[1])


def test_raw_device_memory_round_trip_and_bounds():
    with _add_program(2).prepare() as rt:
        src = np.arange(16, dtype=np.uint8)
        dst = np.zeros(16, np.uint8)
        ptr = rt.malloc(16, worker_id=1)
        rt.copy_to(ptr, src.ctypes.data, 16, worker_id=1)
        rt.copy_from(dst.ctypes.data, ptr + 4, 8, worker_id=1)
        np.testing.assert_array_equal(dst[:8], src[4:12])
        cases = [lambda: rt.copy_to(ptr, src.ctypes.data, 17, worker_id=1),   # past the end
                 lambda: rt.copy_to(ptr, src.ctypes.data, 4, worker_id=0),    # other worker
                 lambda: rt.copy_from(dst.ctypes.data, ptr + 1 << 50, 1, worker_id=1),
                 lambda: rt.malloc(0), lambda: rt.copy_to(ptr, src.ctypes.data, -1, worker_id=1),
                 lambda: rt.free(ptr + 1, worker_id=1)]
        for op in cases:
            with pytest.raises(ValueError) as ei:
                op()
            assert ei.value.code == "TC419"
        rt.free(ptr, worker_id=1)
        with pytest.raises(ValueError, match="not in a live allocation"):
            rt.copy_from(dst.ctypes.data, ptr, 1, worker_id=1)
        # a device tensor's address takes raw copies too
        t = rt.alloc_tensor([4], np.float32)
        vals = np.array([1.5, -2, 3, 4], np.float32)
        rt.copy_to(t.data_ptr, vals.ctypes.data, vals.nbytes)
        got = np.zeros(4, np.float32)
        rt.copy_from(got.ctypes.data, t.data_ptr, 16)
        np.testing.assert_array_equal(got, vals)


@pytest.mark.parametrize("n", [1, 2, 4])
def test_prefill_and_decode_share_a_kv_cache_on_one_worker(n):
    xs, ys = _data(n)
    pf = prefill.compile(xs, xs, config=config_for(n))
    dc = decode.compile(xs, xs, ys, config=config_for(n))
    with DistributedWorker([pf, dc]) as rt:
        kv = rt.alloc_stacked_tensor(np.zeros_like(xs))
        rt.run(pf, xs, kv)
        for step in range(3):
            qs, _ = _data(n, seed=10 + step)
            rt.run(dc, kv, qs, ys)
            np.testing.assert_array_equal(ys, 2 * xs + qs)
        cache = np.zeros_like(xs)
        rt.copy_stacked_from(kv, cache)
        np.testing.assert_array_equal(cache, 2 * xs)


@pytest.mark.parametrize("n", [2, 3])
def test_submitted_calls_on_kept_windows_are_in_flight_together(n):
    # the first call can only finish once the second one runs on the last rank:
    # proof that the second was sent before the first finished
    ys = np.zeros((n, 1, 1), np.int32)
    compiled = relay_main.compile(ys, 1, 1, config=config_for(n))
    with compiled.prepare(persistent=True, reset_persistent_windows=False) as rt:
        first, second = np.zeros_like(ys), np.zeros_like(ys)
        h1 = rt.submit(compiled, first, 0, 1)        # rank 0 waits for a count of 1
        h2 = rt.submit(compiled, second, 1, 1)       # the last rank adds it
        h1.result(timeout=30)
        h2.result(timeout=30)
        assert first[0, 0, 0] == 1 and second[0, 0, 0] == 1
        rt(first, 1, 2)                              # blocking calls after them still work
        assert first[0, 0, 0] == 2


def test_zeroed_windows_run_submitted_calls_one_after_another():
    n = 2
    ys = np.zeros((n, 1, 1), np.int32)
    compiled = relay_main.compile(ys, 1, 1, config=config_for(n))
    with compiled.prepare(persistent=True) as rt:   # zeroing needs idle ranks: no overlap
        h1 = rt.submit(compiled, np.zeros_like(ys), 0, 1)
        h2 = rt.submit(compiled, np.zeros_like(ys), 1, 1)
        with pytest.raises(DeadlockError) as ei:
            h1.result(timeout=30)
        assert_only_rank_0_blocked(ei.value, 0, 1)   # nobody sends on the first call
        h2.result(timeout=30)                        # on restarted ranks


def test_a_failure_stops_the_pipelined_call_behind_it():
    n = 2
    ys = np.zeros((n, 1, 1), np.int32)
    compiled = relay_main.compile(ys, 1, 1, config=config_for(n))
    with compiled.prepare(persistent=True, reset_persistent_windows=False) as rt:
        h1 = rt.submit(compiled, np.zeros_like(ys), 0, 5)   # never reaches 5: deadlock
        h2 = rt.submit(compiled, np.zeros_like(ys), 0, 0)
        with pytest.raises(DeadlockError) as ei:
            h1.result(timeout=30)
        assert_only_rank_0_blocked(ei.value, 0, 5)
        with pytest.raises(RuntimeFault, match="another call") as ei:
            h2.result(timeout=30)
        assert ei.value.code == "TC426"
        out = np.zeros_like(ys)
        rt(out, 1, 1)                                # new ranks, fresh windows
        assert out[0, 0, 0] == 1


def test_argument_kinds_are_type_errors_before_the_ranks_are_touched():
    prog = _add_program(2)
    xs, ys = _data(2)
    with prog.prepare() as rt:
        pids = children()
        with pytest.raises(TypeError, match="parameter 'ws': expected a numpy array") as ei:
            rt(xs, "weights", ys)
        assert ei.value.code == "TC411"
        with pytest.raises(TypeError, match="parameter 'ws' expects a tensor; got a scalar"):
            rt(xs, 1.0, ys)
        with pytest.raises(TypeError, match="takes a StackedDeviceTensor, got DeviceTensor"):
            rt.free_stacked_tensor(rt.alloc_tensor([1], np.float32))
        with pytest.raises(TypeError, match="takes a DeviceTensor, got ndarray"):
            rt.free_tensor(xs)
        assert children() == pids                    # refused calls keep the ranks
        rt(xs, xs, ys)
        np.testing.assert_array_equal(ys, 2 * xs)
