"""A prepared worker on kept windows records what its HOST orchestrator sent
and replays it for a later call with the same arguments
(runtime/controller/plans.py): the results must be exactly those of running
the orchestrator, including dispatches ordered by host tensors across ranks
(whose dispatch numbers a replay shifts), and calls that cannot be replayed
must run the orchestrator every time."""
import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from conftest import WORLD_SIZES, config_for
from programs_host_deps import N, chip_consume, chip_produce

NR = pl.dynamic("NR")
SLOW = 2000          # iterations per rank index: rank r+1 produces long after rank r


@pl.jit.host
def relay(xs: pl.Tensor[[NR, 1, N], pl.FP32], tmp: pl.InOut[pl.Tensor[[NR, 1, N], pl.FP32]],
          ys: pl.Out[pl.Tensor[[NR, 1, N], pl.FP32]], steps: pl.Scalar[pl.INT32]):
    """Rank r produces tmp[r] (slower the higher r), then consumes what rank
    r+1 produced: a host-tensor dependency on another rank's dispatch."""
    wb = pld.alloc_window_buffer([1, N], dtype=pl.FP32)
    for r in pl.range(pld.world_size()):
        chip_produce(xs[r], tmp[r], pld.window(wb, [1, N], dtype=pl.FP32), r * steps, device=r)
    for r in pl.range(pld.world_size()):
        chip_consume(tmp[(r + 1) % pld.world_size()], ys[r],
                     pld.window(wb, [1, N], dtype=pl.FP32), device=r)
    return ys


@pl.jit.host
def relay_with_scratch(xs: pl.Tensor[[NR, 1, N], pl.FP32],
                       ys: pl.Out[pl.Tensor[[NR, 1, N], pl.FP32]], steps: pl.Scalar[pl.INT32]):
    """The same through a host intermediate: a segment of its own every run."""
    wb = pld.alloc_window_buffer([1, N], dtype=pl.FP32)
    tmp = pl.create_tensor([NR, 1, N], dtype=pl.FP32)
    for r in pl.range(pld.world_size()):
        chip_produce(xs[r], tmp[r], pld.window(wb, [1, N], dtype=pl.FP32), r * steps, device=r)
    for r in pl.range(pld.world_size()):
        chip_consume(tmp[(r + 1) % pld.world_size()], ys[r],
                     pld.window(wb, [1, N], dtype=pl.FP32), device=r)
    return ys


@pl.jit.incore
def publish_kernel(x: pl.Tensor[[1, N], pl.FP32], w: pl.InOut[pld.DistributedTensor[[1, N], pl.FP32]]):
    w = pl.store(pl.load(x, [0, 0], [1, N]), [0, 0], w)
    return w


@pl.jit
def publish(x: pl.Tensor[[1, N], pl.FP32], w: pl.InOut[pld.DistributedTensor[[1, N], pl.FP32]]):
    return publish_kernel(x, w)


@pl.jit.incore
def read_back_kernel(y: pl.Out[pl.Tensor[[1, N], pl.FP32]],
                     w: pl.InOut[pld.DistributedTensor[[1, N], pl.FP32]]):
    y = pl.store(pl.load(w, [0, 0], [1, N]), [0, 0], y)
    return y


@pl.jit
def read_back(y: pl.Out[pl.Tensor[[1, N], pl.FP32]],
              w: pl.InOut[pld.DistributedTensor[[1, N], pl.FP32]]):
    return read_back_kernel(y, w)


@pl.jit.host
def summed(xs: pl.Tensor[[NR, 1, N], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, N], pl.FP32]]):
    """A HOST collective between dispatches: builtin dispatches in the plan."""
    data = pld.alloc_window_buffer([1, N], dtype=pl.FP32)
    sig = pld.alloc_window_buffer([pld.world_size(), 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        publish(xs[r], pld.window(data, [1, N], dtype=pl.FP32), device=r)
    pld.tensor.allreduce(pld.window(data, [1, N], dtype=pl.FP32),
                         pld.window(sig, [pld.world_size(), 1], dtype=pl.INT32),
                         op=pld.ReduceOp.Sum)
    for r in pl.range(pld.world_size()):
        read_back(ys[r], pld.window(data, [1, N], dtype=pl.FP32), device=r)
    return ys


def _check_replays(rt, n: int) -> None:
    """That ``n`` of a case's calls replayed.  Counted where ranks are forked
    by the caller: under mpiexec the processes' argument segments and host
    window decide it per world (plans.py lists what a plan needs), and
    there the results alone are checked."""
    if not rt._ranks.backend.spmd:
        assert rt._ranks.plans.replays == n


def _relayed(xs, steps):
    n = xs.shape[0]
    produced = xs + (np.arange(n, dtype=np.float32) * steps)[:, None, None]
    return produced, np.roll(produced, -1, axis=0) * 2


def _inputs(n, seed):
    rng = np.random.default_rng(seed)
    return rng.integers(-4, 4, size=(n, 1, N)).astype(np.float32)


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_a_repeated_call_replays_its_plan_with_the_same_results(n):
    """Fresh inputs every call (the arguments' segments are the same); the
    consumer of another rank's tensor still waits for that rank's producer
    of *this* call."""
    xs = _inputs(n, 0)
    tmp, ys = np.full_like(xs, np.nan), np.full_like(xs, np.nan)
    compiled = relay.compile(xs, tmp, ys, SLOW, config=config_for(n))
    with compiled.prepare(persistent=True, reset_persistent_windows=False) as rt:
        for call in range(4):
            xs = _inputs(n, call)
            tmp, ys = np.full_like(xs, np.nan), np.full_like(xs, np.nan)
            rt(xs, tmp, ys, SLOW)
            want_tmp, want_ys = _relayed(xs, SLOW)
            np.testing.assert_array_equal(tmp, want_tmp)
            np.testing.assert_array_equal(ys, want_ys)
        _check_replays(rt, 3)


@pytest.mark.parametrize("n", [2, 3])
def test_other_scalars_make_another_plan_and_each_replays(n):
    xs = _inputs(n, 1)
    tmp, ys = np.zeros_like(xs), np.zeros_like(xs)
    compiled = relay.compile(xs, tmp, ys, 1, config=config_for(n))
    with compiled.prepare(persistent=True, reset_persistent_windows=False) as rt:
        for steps in (5, 900, 5, 900, 7):
            tmp, ys = np.full_like(xs, np.nan), np.full_like(xs, np.nan)
            rt(xs, tmp, ys, steps)
            want_tmp, want_ys = _relayed(xs, steps)
            np.testing.assert_array_equal(tmp, want_tmp)
            np.testing.assert_array_equal(ys, want_ys)
        _check_replays(rt, 2)


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_a_replayed_host_collective_sums_every_call(n):
    xs = _inputs(n, 2)
    ys = np.zeros_like(xs)
    compiled = summed.compile(xs, ys, config=config_for(n))
    with compiled.prepare(persistent=True, reset_persistent_windows=False) as rt:
        for call in range(3):
            xs = _inputs(n, 10 + call)
            ys = np.zeros_like(xs)
            rt(xs, ys)
            np.testing.assert_array_equal(ys, np.broadcast_to(xs.sum(axis=0), xs.shape))
        _check_replays(rt, 2)


@pytest.mark.parametrize("n", [1, 2])
def test_zeroed_persistent_windows_replay_too(n):
    xs = _inputs(n, 3)
    tmp, ys = np.zeros_like(xs), np.zeros_like(xs)
    compiled = relay.compile(xs, tmp, ys, 3, config=config_for(n))
    with compiled.prepare(persistent=True) as rt:
        for _ in range(3):
            tmp, ys = np.full_like(xs, np.nan), np.full_like(xs, np.nan)
            rt(xs, tmp, ys, 3)
            np.testing.assert_array_equal(ys, _relayed(xs, 3)[1])
        _check_replays(rt, 2)


@pytest.mark.parametrize("n", [2, 3])
def test_host_intermediates_and_fresh_windows_run_the_orchestrator_every_time(n):
    xs = _inputs(n, 4)
    ys = np.zeros_like(xs)
    scratch = relay_with_scratch.compile(xs, ys, SLOW, config=config_for(n))
    with scratch.prepare(persistent=True, reset_persistent_windows=False) as rt:
        for _ in range(3):
            ys = np.full_like(xs, np.nan)
            rt(xs, ys, SLOW)
            np.testing.assert_array_equal(ys, _relayed(xs, SLOW)[1])
        _check_replays(rt, 0)
    tmp = np.zeros_like(xs)
    fresh = relay.compile(xs, tmp, ys, 3, config=config_for(n))
    with fresh.prepare() as rt:                     # windows fresh every call
        for _ in range(3):
            tmp, ys = np.full_like(xs, np.nan), np.full_like(xs, np.nan)
            rt(xs, tmp, ys, 3)
            np.testing.assert_array_equal(ys, _relayed(xs, 3)[1])
        _check_replays(rt, 0)
