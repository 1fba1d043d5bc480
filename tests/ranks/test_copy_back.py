"""Only outputs are copied back into the caller's tensors, and outputs must be
writable: a read-only input is fine, a read-only output is rejected before any
rank starts, and an input overlapping an output cannot overwrite the result."""
import os

import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
import tilecomm.runtime.controller.forking as forking_mod
from tilecomm.errors import ArgumentError
from conftest import WORLD_SIZES, children, config_for

NR = pl.dynamic("NR")


@pl.jit.incore
def double_into(x: pl.Tensor[[1, 4], pl.FP32], y: pl.Out[pl.Tensor[[1, 4], pl.FP32]],
                w: pld.DistributedTensor[[1, 4], pl.FP32]) -> pl.Tensor[[1, 4], pl.FP32]:
    y = pl.store(pl.mul(pl.load(x, [0, 0], [1, 4]), 2.0), [0, 0], y)
    return y


@pl.jit
def chip(x: pl.Tensor[[1, 4], pl.FP32], y: pl.Out[pl.Tensor[[1, 4], pl.FP32]],
         w: pld.DistributedTensor[[1, 4], pl.FP32]):
    return double_into(x, y, w)


@pl.jit.host
def double(xs: pl.Tensor[[NR, 1, 4], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, 4], pl.FP32]]):
    """ys = 2 * xs, one row per rank."""
    wbuf = pld.alloc_window_buffer([1, 4], dtype=pl.FP32)
    for r in pl.range(pld.world_size()):
        chip(xs[r], ys[r], pld.window(wbuf, [1, 4], dtype=pl.FP32), device=r)
    return ys


@pl.jit.host
def double_inout(xs: pl.Tensor[[NR, 1, 4], pl.FP32], ys: pl.InOut[pl.Tensor[[NR, 1, 4], pl.FP32]]):
    wbuf = pld.alloc_window_buffer([1, 4], dtype=pl.FP32)
    for r in pl.range(pld.world_size()):
        chip(xs[r], ys[r], pld.window(wbuf, [1, 4], dtype=pl.FP32), device=r)
    return ys


@pl.jit.host
def double_out_first(ys: pl.Out[pl.Tensor[[NR, 1, 4], pl.FP32]],
                     xs: pl.Tensor[[NR, 1, 4], pl.FP32]):
    """The same with the output parameter first (so an input is copied after it)."""
    wbuf = pld.alloc_window_buffer([1, 4], dtype=pl.FP32)
    for r in pl.range(pld.world_size()):
        chip(xs[r], ys[r], pld.window(wbuf, [1, 4], dtype=pl.FP32), device=r)
    return ys


def _xs(n):
    return np.arange(n * 4, dtype=np.float32).reshape(n, 1, 4) - 3


@pytest.fixture
def no_ranks(monkeypatch):
    """Fail loudly if a call gets as far as starting rank processes."""
    def refuse(*a, **k):
        raise AssertionError("rank processes were started for an invalid call")
    monkeypatch.setattr(forking_mod, "spawn", refuse)


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_a_read_only_input_is_accepted_and_left_alone(n):
    xs = _xs(n)
    xs.flags.writeable = False
    ys = np.zeros_like(xs)
    double(xs, ys, config=config_for(n))
    np.testing.assert_array_equal(ys, 2 * _xs(n))
    np.testing.assert_array_equal(xs, _xs(n))


@pytest.mark.parametrize("n", [1, 3])
@pytest.mark.parametrize("out_first", [False, True])
def test_an_input_overlapping_an_output_does_not_overwrite_the_result(n, out_first):
    base = np.zeros((n + 1, 1, 4), np.float32)
    base[:n] = _xs(n)
    xs, ys = base[:n], base[1:]                 # row i of ys is row i + 1 of xs
    if out_first:
        double_out_first(ys, xs, config=config_for(n))
    else:
        double(xs, ys, config=config_for(n))
    # the ranks saw xs as it was when the call began; every row of ys is a result
    np.testing.assert_array_equal(base[1:], 2 * _xs(n))
    np.testing.assert_array_equal(base[0], _xs(n)[0])


@pytest.mark.parametrize("main,kind", [(double, "pl.Out"), (double_inout, "pl.InOut")])
def test_a_read_only_output_is_rejected_before_any_rank_starts(main, kind, no_ranks):
    n = 2
    xs, ys = _xs(n), np.zeros((n, 1, 4), np.float32)
    ys.flags.writeable = False
    with pytest.raises(ArgumentError) as ei:
        main(xs, ys, config=config_for(n))
    e = ei.value
    assert e.code == "TC412"
    assert "parameter 'ys'" in str(e) and kind in str(e) and "read-only" in str(e)
    assert e.span is not None and os.path.abspath(e.span.file) == os.path.abspath(__file__)
    assert "hint:" in str(e)


def test_a_read_only_output_of_a_prepared_worker_is_rejected_and_its_ranks_stay():
    n = 2
    xs, ys = _xs(n), np.zeros((n, 1, 4), np.float32)
    with double.compile(xs, ys, config=config_for(n)).prepare(xs, ys) as worker:
        ranks = children()
        frozen = np.zeros_like(ys)
        frozen.flags.writeable = False
        with pytest.raises(ArgumentError, match="parameter 'ys'"):
            worker(xs, frozen)
        assert children() == ranks, "a refused call stopped the prepared ranks"
        worker(xs, ys)
        np.testing.assert_array_equal(ys, 2 * xs)
