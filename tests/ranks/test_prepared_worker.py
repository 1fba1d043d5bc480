"""Prepared workers: ranks started once and reused across calls."""
import os

import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.errors import DeadlockError, RankFailure
from conftest import WORLD_SIZES, children, config_for

NR = pl.dynamic("NR")
W = pl.dynamic("W")


@pl.jit.incore
def accumulate(x: pl.Tensor[[1, W], pl.FP32], y: pl.Out[pl.Tensor[[1, W], pl.FP32]],
               acc: pl.InOut[pld.DistributedTensor[[1, W], pl.FP32]],
               sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
               bad_peer: pl.Scalar[pl.INT32], tag: pl.Scalar[pl.INT32]) -> pl.Tensor[[1, W], pl.FP32]:
    me = pld.rank(pld.get_comm_ctx(acc))
    n = pld.nranks(pld.get_comm_ctx(acc))
    t = pl.load(x, [0, 0], [1, W])
    # every rank adds its row into rank 0's window; a window that kept its
    # contents between calls would show the previous call's sum too
    pld.tile.remote_store(t, acc, 0, [0, 0], atomic=pld.AtomicType.Add)
    pld.system.notify(sig, 0 + bad_peer, [me, 0], tag, op=pld.NotifyOp.Set)
    if me == 0:
        for src in pl.range(n):
            pld.system.wait(sig, [src, 0], 1, cmp=pld.WaitCmp.Ge)
    y = pl.store(pl.load(acc, [0, 0], [1, W]), [0, 0], y)
    return y


@pl.jit
def chip(x: pl.Tensor[[1, W], pl.FP32], y: pl.Out[pl.Tensor[[1, W], pl.FP32]],
         acc: pl.InOut[pld.DistributedTensor[[1, W], pl.FP32]],
         sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
         bad_peer: pl.Scalar[pl.INT32], tag: pl.Scalar[pl.INT32]):
    return accumulate(x, y, acc, sig, bad_peer, tag)


@pl.jit.host
def main(xs: pl.Tensor[[NR, 1, W], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, W], pl.FP32]],
         bad_peer: pl.Scalar[pl.INT32], tag: pl.Scalar[pl.INT32]):
    acc_buf = pld.alloc_window_buffer([1, W], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        chip(xs[r], ys[r], pld.window(acc_buf, [1, W], dtype=pl.FP32),
             pld.window(sig_buf, [NR, 1], dtype=pl.INT32), bad_peer, tag, device=r)
    return ys


def _data(n, w=8, seed=0):
    xs = np.random.default_rng(seed).integers(-5, 5, size=(n, 1, w)).astype(np.float32)
    return xs, np.full_like(xs, np.nan)


def _check_rank0(xs, ys):
    np.testing.assert_array_equal(ys[0], xs.sum(axis=0))


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_repeated_calls_reuse_the_ranks_and_start_from_zeroed_windows(n):
    xs, ys = _data(n)
    compiled = main.compile(xs, ys, 0, 1, config=config_for(n))
    with compiled.prepare(xs, ys, 0, 1) as worker:
        pids = children()
        assert len(pids) == n
        for call in range(3):
            xs, ys = _data(n, seed=call)
            worker(xs, ys, 0, 1)
            _check_rank0(xs, ys)
            assert children() == pids, "a prepared worker restarted its ranks"
    assert worker.closed


def test_a_new_specialisation_reaches_running_ranks():
    n = 2
    xs, ys = _data(n, w=8)
    with main.compile(xs, ys, 0, 1, config=config_for(n)).prepare(xs, ys, 0, 1) as worker:
        pids = children()
        wide, wide_out = _data(n, w=24, seed=5)        # W bound to 24: compiled after the fork
        worker(wide, wide_out, 0, 1)
        _check_rank0(wide, wide_out)
        assert children() == pids


@pytest.mark.parametrize("n", [2, 3])
def test_a_failed_call_is_reported_and_the_next_call_starts_fresh_ranks(n):
    xs, ys = _data(n)
    with main.compile(xs, ys, 0, 1, config=config_for(n)).prepare() as worker:
        with pytest.raises(RankFailure) as ei:
            worker(xs, ys, n + 3, 1)                    # peer out of range on every rank
        assert ei.value.error_code == "TC501"
        assert children() == set()
        with pytest.raises(DeadlockError):
            worker(xs, ys, 0, 0)                        # tag 0 never satisfies Ge 1
        assert children() == set()
        worker(xs, ys, 0, 1)
        _check_rank0(xs, ys)


def test_closed_worker_refuses_calls_and_leaves_nothing():
    n = 2
    xs, ys = _data(n)
    worker = main.compile(xs, ys, 0, 1, config=config_for(n)).prepare()
    worker(xs, ys, 0, 1)
    worker.close()
    worker.close()                                      # idempotent
    assert children() == set()
    assert not [f for f in os.listdir("/dev/shm") if f.startswith(f"tilecomm-{os.getpid()}-")]
    with pytest.raises(RuntimeError, match=r"after close\(\)"):
        worker(xs, ys, 0, 1)
