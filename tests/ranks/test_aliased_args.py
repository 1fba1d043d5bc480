"""The same host array passed as two parameters is one tensor for the ranks."""
import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from conftest import WORLD_SIZES, config_for

NR = pl.dynamic("NR")


@pl.jit.incore
def double_into(x: pl.Tensor[[1, 4], pl.FP32], y: pl.Out[pl.Tensor[[1, 4], pl.FP32]],
                w: pld.DistributedTensor[[1, 4], pl.FP32]) -> pl.Tensor[[1, 4], pl.FP32]:
    t = pl.load(x, [0, 0], [1, 4])
    y = pl.store(pl.mul(t, 2.0), [0, 0], y)
    return y


@pl.jit
def chip(x: pl.Tensor[[1, 4], pl.FP32], y: pl.Out[pl.Tensor[[1, 4], pl.FP32]],
         w: pld.DistributedTensor[[1, 4], pl.FP32]):
    return double_into(x, y, w)


@pl.jit.host
def main(xs: pl.Tensor[[NR, 1, 4], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, 4], pl.FP32]]):
    wbuf = pld.alloc_window_buffer([1, 4], dtype=pl.FP32)
    for r in pl.range(pld.world_size()):
        chip(xs[r], ys[r], pld.window(wbuf, [1, 4], dtype=pl.FP32), device=r)
        # reads xs again: when xs and ys are one array it sees the first result
        chip(xs[r], ys[r], pld.window(wbuf, [1, 4], dtype=pl.FP32), device=r)
    return ys


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_same_array_in_and_out_is_updated_in_place(n):
    data = np.arange(n * 4, dtype=np.float32).reshape(n, 1, 4)
    expected = data * 4                 # doubled twice through the shared array
    main(data, data, config=config_for(n))
    np.testing.assert_array_equal(data, expected)


@pytest.mark.parametrize("n", [2])
def test_distinct_arrays_stay_distinct(n):
    xs = np.arange(n * 4, dtype=np.float32).reshape(n, 1, 4)
    ys = np.zeros_like(xs)
    main(xs, ys, config=config_for(n))
    np.testing.assert_array_equal(ys, xs * 2)
