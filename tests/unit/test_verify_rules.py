"""Whole-program verifier rules that depend on the platform profile."""
import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.errors import ProgramValueError
from tilecomm.runtime import DistributedConfig, RunConfig


@pl.jit.incore
def scaled(k: pl.Scalar[pl.INT32], x: pl.Tensor[[1, 4], pl.FP32],
           y: pl.Out[pl.Tensor[[1, 4], pl.FP32]],
           w: pld.DistributedTensor[[1, 4], pl.FP32]) -> pl.Tensor[[1, 4], pl.FP32]:
    y = pl.store(pl.mul(pl.load(x, [0, 0], [1, 4]), pl.cast(k, pl.FP32)), [0, 0], y)
    return y


@pl.jit
def chip(k: pl.Scalar[pl.INT32],
         x: pl.Tensor[[1, 4], pl.FP32],  # E:late-tensor
         y: pl.Out[pl.Tensor[[1, 4], pl.FP32]], w: pld.DistributedTensor[[1, 4], pl.FP32]):
    return scaled(k, x, y, w)


@pl.jit.host
def main(xs: pl.Tensor[[2, 1, 4], pl.FP32], ys: pl.Out[pl.Tensor[[2, 1, 4], pl.FP32]]):
    wb = pld.alloc_window_buffer([1, 4], dtype=pl.FP32)
    for r in pl.range(pld.world_size()):
        chip(r + 1, xs[r], ys[r], pld.window(wb, [1, 4], dtype=pl.FP32), device=r)
    return ys


def _cfg(platform):
    return RunConfig(platform=platform, distributed_config=DistributedConfig(device_ids=[0, 1]))


@pytest.mark.parametrize("platform", ["a2a3", "a5", "a2a3sim", "a5sim"])
def test_scalar_before_tensor_rejected_on_chip_profiles(platform):
    xs = np.ones((2, 1, 4), np.float32)
    with pytest.raises(ProgramValueError) as ei:
        main.compile(xs, np.zeros_like(xs), config=_cfg(platform))
    line = next(i for i, l in enumerate(open(__file__), 1) if "# E:late-tensor" in l)
    assert (ei.value.code, ei.value.line) == ("TC215", line)
    assert "'x'" in ei.value.message and "'k'" in ei.value.message


def test_scalar_before_tensor_runs_on_the_cpu_platform():
    xs = np.arange(8, dtype=np.float32).reshape(2, 1, 4)
    ys = np.zeros_like(xs)
    main(xs, ys, config=_cfg("cpu"))
    np.testing.assert_array_equal(ys, xs * np.array([1, 2], np.float32)[:, None, None])
