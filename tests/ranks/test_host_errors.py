"""An exception raised by the user's own HOST-orchestrator code keeps its type
and is pointed at the user's line, like a rank failure."""
import os
import traceback

import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from conftest import config_for

NR = pl.dynamic("NR")
FILE = os.path.abspath(__file__)


@pl.jit.incore
def scale_step(x: pl.Tensor[[1, 4], pl.FP32], y: pl.Out[pl.Tensor[[1, 4], pl.FP32]],
               w: pld.DistributedTensor[[1, 4], pl.FP32],
               k: pl.Scalar[pl.INT32]) -> pl.Tensor[[1, 4], pl.FP32]:
    y = pl.store(pl.mul(pl.load(x, [0, 0], [1, 4]), k), [0, 0], y)
    return y


@pl.jit
def scale_chip(x: pl.Tensor[[1, 4], pl.FP32], y: pl.Out[pl.Tensor[[1, 4], pl.FP32]],
               w: pld.DistributedTensor[[1, 4], pl.FP32], k: pl.Scalar[pl.INT32]):
    return scale_step(x, y, w, k)


@pl.jit.host
def scale(xs: pl.Tensor[[NR, 1, 4], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, 4], pl.FP32]]):
    wbuf = pld.alloc_window_buffer([1, 4], dtype=pl.FP32)
    for r in pl.range(pld.world_size()):
        k = 4 // (pld.world_size() - 2)  # H:div
        scale_chip(xs[r], ys[r], pld.window(wbuf, [1, 4], dtype=pl.FP32), k, device=r)
    return ys


def marker_line(tag):
    with open(FILE) as f:
        hits = [i + 1 for i, text in enumerate(f) if text.rstrip().endswith(f"# H:{tag}")]
    assert len(hits) == 1
    return hits[0]


def test_an_exception_in_host_code_points_at_the_users_line():
    n = 2
    xs, ys = np.ones((n, 1, 4), np.float32), np.zeros((n, 1, 4), np.float32)
    with pytest.raises(ZeroDivisionError) as ei:      # its own type: except clauses still work
        scale(xs, ys, config=config_for(n))
    e = ei.value
    line = marker_line("div")
    assert os.path.abspath(e.span.file) == FILE and e.span.line == line
    printed = "".join(traceback.format_exception(e))
    assert f"raised in the HOST orchestrator at {e.span}" in printed
    assert f'File "{FILE}", line {line}, in scale' in printed, printed
    assert "k = 4 // (pld.world_size() - 2)" in printed


def test_the_same_host_code_runs_where_it_does_not_raise():
    n = 3                                               # 4 // (3 - 2) == 4
    xs = np.arange(n * 4, dtype=np.float32).reshape(n, 1, 4)
    ys = np.zeros_like(xs)
    scale(xs, ys, config=config_for(n))
    np.testing.assert_array_equal(ys, 4 * xs)
