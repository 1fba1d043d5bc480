"""Programs in modules with postponed annotations (PEP 563) compile; a name
visible only to a factory's annotations gets a precise error with a hint."""
from __future__ import annotations

import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.errors import ProgramTypeError
from tilecomm.runtime import DistributedConfig, RunConfig

COLS = 4


@pl.jit.incore
def bump(x: pl.Tensor[[1, COLS], pl.FP32], y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]],
         w: pld.DistributedTensor[[1, COLS], pl.FP32]) -> pl.Tensor[[1, COLS], pl.FP32]:
    y = pl.store(pl.add(pl.load(x, [0, 0], [1, COLS]), 1.0), [0, 0], y)
    return y


@pl.jit
def chip(x: pl.Tensor[[1, COLS], pl.FP32], y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]],
         w: pld.DistributedTensor[[1, COLS], pl.FP32]):
    return bump(x, y, w)


@pl.jit.host
def main(xs: pl.Tensor[[2, 1, COLS], pl.FP32], ys: pl.Out[pl.Tensor[[2, 1, COLS], pl.FP32]]):
    wbuf = pld.alloc_window_buffer([1, COLS], dtype=pl.FP32)
    for r in pl.range(pld.world_size()):
        chip(xs[r], ys[r], pld.window(wbuf, [1, COLS], dtype=pl.FP32), device=r)
    return ys


def factory():
    rows = 2

    @pl.jit.host
    def entry(xs: pl.Tensor[[rows, 1, COLS], pl.FP32]):  # E:annotation
        pass

    return entry


def test_module_level_postponed_annotations_run():
    xs = np.arange(2 * COLS, dtype=np.float32).reshape(2, 1, COLS)
    ys = np.zeros_like(xs)
    main(xs, ys, config=RunConfig(distributed_config=DistributedConfig(device_ids=[0, 1])))
    np.testing.assert_array_equal(ys, xs + 1)


def test_factory_local_name_in_postponed_annotation_is_explained():
    entry = factory()
    with pytest.raises(ProgramTypeError) as ei:
        entry.compile(config=RunConfig(distributed_config=DistributedConfig(device_ids=[0, 1])))
    e = ei.value
    line = next(i for i, l in enumerate(open(__file__), 1) if "# E:annotation" in l)
    assert (e.code, e.line) == ("TC106", line)
    assert "rows" in e.message and "from __future__ import annotations" in e.hint
