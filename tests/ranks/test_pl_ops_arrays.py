"""``pl.array.create`` / ``pl.Array``: on-core scalar arrays with functional
update (``arr[i] = v`` rebinds ``arr``; an earlier binding keeps its
contents), element reads, and arrays as loop-carried values -- the
per-expert histogram of an expert-parallel dispatch, checked against
``numpy.bincount``.  Arrays are rank-local, so 1 and 2 ranks suffice; each
rank gets its own data so a mix-up between ranks would show."""
import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld

from programs_prims import config_for

NR = pl.dynamic("NR")
T, E = 24, 6
LOCAL_SIZES = [1, 2]


@pl.jit.incore
def histogram_kernel(ids: pl.Tensor[[1, T], pl.INT32], y: pl.InOut[pl.Tensor[[3, E], pl.INT32]],
                     r: pl.Scalar[pl.INT32]):
    h: pl.Array[E, pl.INT32] = pl.array.create(E, pl.INT32)
    # explicit loop-carried form
    for t, (acc,) in pl.range(T, init_values=(h,)):
        e = pl.read(ids, [0, t])
        acc[e] = acc[e] + 1
        counts = pl.yield_(acc)
    # implicit form: plain rebinding in the loop body, weights r + 1 per token
    w = pl.array.create(E, pl.INT32)
    for t in pl.range(T):
        e = pl.read(ids, [0, t])
        w[e] = w[e] + r + 1
    # functional update: the old binding is unchanged
    before = counts
    counts[0] = counts[0] + 100
    for j in pl.range(E):
        pl.write(y, [0, j], counts[j])
        pl.write(y, [1, j], before[j])
        pl.write(y, [2, j], w[j] + h[j])          # h is still all zeros
    return y


@pl.jit
def histogram_chip(ids: pl.Tensor[[1, T], pl.INT32], y: pl.InOut[pl.Tensor[[3, E], pl.INT32]],
                   r: pl.Scalar[pl.INT32]):
    # an array in chip orchestration: exclusive prefix sums of a constant table
    offs = pl.array.create(4, pl.INT32)
    for i in pl.range(1, 4):
        offs[i] = offs[i - 1] + i * 2
    y = histogram_kernel(ids, y, r)
    pl.write(y, [2, 0], pl.read(y, [2, 0]) + offs[3] * 1000)
    return y


@pl.jit.host
def histogram_main(ids: pl.Tensor[[NR, 1, T], pl.INT32], ys: pl.InOut[pl.Tensor[[NR, 3, E], pl.INT32]]):
    for r in pl.range(pld.world_size()):
        histogram_chip(ids[r], ys[r], r, device=r)
    return ys


@pytest.mark.parametrize("n", LOCAL_SIZES)
def test_histogram_in_arrays(n):
    rng = np.random.default_rng(31 + n)
    ids = rng.integers(0, E, size=(n, 1, T)).astype(np.int32)
    ids[:, 0, :3] = E - 1                       # one expert surely used, some maybe empty
    ys = np.full((n, 3, E), -7, np.int32)
    histogram_main(ids, ys, config=config_for(n))
    for r in range(n):
        hist = np.bincount(ids[r, 0], minlength=E).astype(np.int32)
        bumped = hist.copy()
        bumped[0] += 100
        np.testing.assert_array_equal(ys[r, 0], bumped)
        np.testing.assert_array_equal(ys[r, 1], hist)
        weighted = hist * (r + 1)
        weighted[0] += (2 + 4 + 6) * 1000
        np.testing.assert_array_equal(ys[r, 2], weighted)


@pl.jit.incore
def bounds_kernel(ids: pl.Tensor[[1, T], pl.INT32], y: pl.InOut[pl.Tensor[[3, E], pl.INT32]],
                  r: pl.Scalar[pl.INT32]):
    h = pl.array.create(E, pl.INT32)
    h[r + E - 1] = 1                              # index E on rank 1
    pl.write(y, [0, 0], h[E - 1])
    return y


@pl.jit
def bounds_chip(ids: pl.Tensor[[1, T], pl.INT32], y: pl.InOut[pl.Tensor[[3, E], pl.INT32]],
                r: pl.Scalar[pl.INT32]):
    return bounds_kernel(ids, y, r)


@pl.jit.host
def bounds_main(ids: pl.Tensor[[NR, 1, T], pl.INT32], ys: pl.InOut[pl.Tensor[[NR, 3, E], pl.INT32]]):
    for r in pl.range(pld.world_size()):
        bounds_chip(ids[r], ys[r], r, device=r)
    return ys


def test_runtime_index_out_of_bounds_is_a_located_fault():
    from tilecomm.errors import RankFailure
    ids = np.zeros((2, 1, T), np.int32)
    ys = np.zeros((2, 3, E), np.int32)
    with pytest.raises(RankFailure) as ei:
        bounds_main(ids, ys, config=config_for(2, deadlock_timeout_s=30))
    e = ei.value
    assert e.rank == 1 and e.error_code == "TC502" and "index 6" in str(e), str(e)
    assert "h[r + E - 1] = 1" in str(e)
    ys = np.zeros((1, 3, E), np.int32)
    bounds_main(ids[:1], ys, config=config_for(1))
    assert ys[0, 0, 0] == 1


@pl.jit
def captured_chip(ids: pl.Tensor[[1, T], pl.INT32], y: pl.InOut[pl.Tensor[[3, E], pl.INT32]],
                  r: pl.Scalar[pl.INT32]):
    # an orchestration array captured by a task: the task sees the value at submission
    offs = pl.array.create(E, pl.INT32)
    for j in pl.range(E):
        offs[j] = j * 10 + r
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="consume"):
        for j in pl.range(E):
            pl.write(y, [0, j], offs[j])
    offs[0] = -1                                  # a later update is a new value
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="again"):
        pl.write(y, [1, 0], offs[0])
    return y


@pl.jit.host
def captured_main(ids: pl.Tensor[[NR, 1, T], pl.INT32], ys: pl.InOut[pl.Tensor[[NR, 3, E], pl.INT32]]):
    for r in pl.range(pld.world_size()):
        captured_chip(ids[r], ys[r], r, device=r)
    return ys


@pytest.mark.parametrize("n", LOCAL_SIZES)
def test_orchestration_array_captured_by_tasks(n):
    ids = np.zeros((n, 1, T), np.int32)
    ys = np.zeros((n, 3, E), np.int32)
    captured_main(ids, ys, config=config_for(n))
    for r in range(n):
        assert list(ys[r, 0]) == [j * 10 + r for j in range(E)]
        assert ys[r, 1, 0] == -1
