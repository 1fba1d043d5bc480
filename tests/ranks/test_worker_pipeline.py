"""Submitted calls overlap: the second is on the ranks before the first
finished, on kept persistent windows and on fresh ones; nothing is shared
between them that should not be; a call nobody asks for still finishes.

The proof of overlap is a protocol that needs it: in the first call of each
pair rank 0 waits for a signal that rank 1 sends only in the *second* call.
Run one after the other, the first call would never finish (and be reported
as a deadlock); submitted together it completes.  World size 1 has no rank 1."""
import time

import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from conftest import WORLD_SIZES, config_for
from worker_programs import accumulate_main

NR = pl.dynamic("NR")
MULTI = [n for n in WORLD_SIZES if n > 1]


@pl.jit.incore
def handoff_kernel(y: pl.Out[pl.Tensor[[1, 1], pl.INT32]],
                 sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
                 phase: pl.Scalar[pl.INT32], expected: pl.Scalar[pl.INT32]
                 ) -> pl.Tensor[[1, 1], pl.INT32]:
    me = pld.rank(pld.get_comm_ctx(sig))
    if me == 0:
        if phase == 0:
            pld.system.wait(sig, [0, 0], expected, cmp=pld.WaitCmp.Ge)
    if me == 1:
        if phase == 1:
            pld.system.notify(sig, 0, [0, 0], 1, op=pld.NotifyOp.AtomicAdd)
    pl.write(y, [0, 0], phase * 10 + me)
    return y


@pl.jit
def handoff_chip(y: pl.Out[pl.Tensor[[1, 1], pl.INT32]],
               sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
               phase: pl.Scalar[pl.INT32], expected: pl.Scalar[pl.INT32]):
    return handoff_kernel(y, sig, phase, expected)


@pl.jit.host
def handoff_main(ys: pl.Out[pl.Tensor[[NR, 1, 1], pl.INT32]], phase: pl.Scalar[pl.INT32],
               expected: pl.Scalar[pl.INT32]):
    sig = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        handoff_chip(ys[r], pld.window(sig, [1, 1], dtype=pl.INT32), phase, expected, device=r)
    return ys


def _handoff_want(n, phase):
    return (phase * 10 + np.arange(n, dtype=np.int32)).reshape(n, 1, 1)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("n", MULTI)
@pytest.mark.parametrize("take", ["first_then_second", "second_then_first"])
def test_the_second_submitted_call_runs_before_the_first_finished(n, take):
    ys = np.zeros((n, 1, 1), np.int32)
    compiled = handoff_main.compile(ys, 0, 1, config=config_for(n, deadlock_timeout_s=5.0))
    with compiled.prepare(persistent=True, reset_persistent_windows=False) as rt:
        for k in range(1, 4):                    # the signal counts the pairs
            first = np.full((n, 1, 1), -1, np.int32)
            second = np.full((n, 1, 1), -1, np.int32)
            h1 = rt.submit(compiled, first, 0, k)     # rank 0 waits for the k-th signal
            h2 = rt.submit(compiled, second, 1, k)    # rank 1 sends it
            for h in ((h1, h2) if take == "first_then_second" else (h2, h1)):
                h.result()
            assert h1.done and h2.done
            np.testing.assert_array_equal(first, _handoff_want(n, 0))
            np.testing.assert_array_equal(second, _handoff_want(n, 1))


def _data(n, seed, w=8):
    rng = np.random.default_rng(seed)
    return (rng.integers(-5, 5, size=(n, 1, w)).astype(np.float32),
            np.full((n, 1, w), np.nan, np.float32))


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_submitted_calls_on_fresh_windows_never_share_a_window(n):
    """Each call of ``accumulate`` sums into its own zero-filled window and
    waits for count 1: a window shared with the call in flight beside it
    would show the other call's rows, or its count 2."""
    xs, ys = _data(n, 0)
    compiled = accumulate_main.compile(xs, ys, 1, config=config_for(n))
    with compiled.prepare() as rt:
        calls = [_data(n, seed) for seed in range(6)]
        handles = [rt.submit(compiled, x, y, 1) for x, y in calls]   # a third waits
        for h in handles:
            h.result(timeout=60)
        for x, y in calls:
            np.testing.assert_array_equal(y[0], x.sum(axis=0))


@pytest.mark.parametrize("persistent", [False, True], ids=["fresh", "kept"])
def test_a_submitted_call_nobody_asks_for_still_finishes(persistent):
    n = 2
    x, y = _data(n, 3)
    compiled = accumulate_main.compile(x, y, 1, config=config_for(n))
    opts = {"persistent": True, "reset_persistent_windows": False} if persistent else {}
    with compiled.prepare(**opts) as rt:
        h = rt.submit(compiled, x, y, 1)
        deadline = time.monotonic() + 30         # a bound for a hang, not a speed check
        while not h.done and time.monotonic() < deadline:
            time.sleep(0.01)
        assert h.done, "the worker never finished a call nobody asked for"
        np.testing.assert_array_equal(y[0], x.sum(axis=0))   # copied back without result()
        assert h.result(timeout=0) is None or h.result(timeout=0) is y
