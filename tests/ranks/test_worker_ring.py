"""RunConfig.ring_task_window: each rank's limit of tasks in flight."""
import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.errors import DeadlockError
from conftest import config_for

NR = pl.dynamic("NR")
N = 8


@pl.jit
def gated_pair(x: pl.Tensor[[2, N], pl.INT32], y: pl.Out[pl.Tensor[[2, N], pl.INT32]],
               sig: pl.InOut[pld.DistributedTensor[[1, 4], pl.INT32]]):
    # the first task waits for a cell only the second sets: both must be in
    # flight at once, so a window of one task deadlocks and two complete
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="waits"):
        pld.system.wait(sig, [0, 0], 1, cmp=pld.WaitCmp.Ge)
        y = pl.store(pl.load(x, [1, 0], [1, N]), [0, 0], y)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="opens"):
        y = pl.store(pl.load(x, [0, 0], [1, N]), [1, 0], y)
        pld.system.notify(sig, pld.rank(pld.get_comm_ctx(sig)), [0, 0], 1, op=pld.NotifyOp.Set)
    return y


@pl.jit.host
def gated_main(xs: pl.Tensor[[NR, 2, N], pl.INT32], ys: pl.Out[pl.Tensor[[NR, 2, N], pl.INT32]]):
    sbuf = pld.alloc_window_buffer([1, 4], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        gated_pair(xs[r], ys[r], pld.window(sbuf, [1, 4], dtype=pl.INT32), device=r)
    return ys


@pytest.mark.parametrize("n", [1, 2])
@pytest.mark.parametrize("window", [None, 2, [2, 1, 1, 1], 64])
def test_a_window_that_holds_both_tasks_completes(n, window):
    xs = np.arange(n * 2 * N, dtype=np.int32).reshape(n, 2, N)
    ys = np.zeros_like(xs)
    gated_main(xs, ys, config=config_for(n, cores=2, ring_task_window=window))
    np.testing.assert_array_equal(ys, xs[:, ::-1])


@pytest.mark.parametrize("n", [1, 2])
def test_a_window_of_one_task_serialises_them_and_the_deadlock_is_reported(n):
    xs = np.arange(n * 2 * N, dtype=np.int32).reshape(n, 2, N)
    with pytest.raises(DeadlockError):
        gated_main(xs, np.zeros_like(xs), config=config_for(n, cores=2, ring_task_window=1))
