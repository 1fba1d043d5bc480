"""Regions, shapes and conversions: ``pl.assemble`` (tile or tensor source,
lower-rank source, run-time offsets, ``atomic=Add``, tile target), region
assignment ``dst[a:b, c:d] = src`` (which is ``pl.assemble``), ``pl.slice``
with ``valid_shape`` / ``pad_value`` / ``drop_dims``, ``pl.tile.reshape``,
``pl.tile.row_sum`` and ``pl.cast(mode=)`` against numpy references.

Rank-local ops, so 1 and 2 ranks; every rank gets its own data."""
import math

import ml_dtypes
import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld

from programs_prims import config_for

NR = pl.dynamic("NR")
LOCAL_SIZES = [1, 2]
ADD = pld.AtomicType.Add


# ------------------------------------------------------------------ assemble
@pl.jit.incore
def assemble_kernel(x: pl.Tensor[[4, 8], pl.FP32], y: pl.InOut[pl.Tensor[[12, 8], pl.FP32]],
                    win: pl.InOut[pld.DistributedTensor[[2, 8], pl.FP32]],
                    r: pl.Scalar[pl.INT32]):
    row = pl.load(x, [r, 0], [1, 8])
    y = pl.assemble(y, row, [0, 0])                               # a tile source
    y = pl.tensor.assemble(y, x[2:4, 0:8], [1, 0])                # a tensor source
    y = pl.assemble(y, pl.slice(row, [1, 8], [0, 0], drop_dims=[0]), [3, 0])   # rank 1 -> row
    y = pl.assemble(y, row, [4 + r, 0])                           # run-time offset
    ragged = pl.load(x, [0, 0], [2, 8], valid_shape=[2, 3])
    y = pl.assemble(y, ragged, [6, 2])                            # only the valid region
    # atomic accumulation into a window's local copy
    pl.assemble(win, row, [0, 0], atomic=ADD)
    pl.assemble(win, row, [0, 0], atomic=ADD)
    y = pl.assemble(y, pl.load(win, [0, 0], [1, 8]), [8, 0])
    # tile target: the tile's own values change
    t = pl.tile.full([2, 8], pl.FP32, 0.5)
    t = pl.tile.assemble(t, row, [1, 0])
    y[9:11, 0:8] = t                                              # region assignment
    y[11, 0:4] = pl.slice(t, [1, 4], [1, 4])                      # index + slice region
    return y


@pl.jit
def assemble_chip(x: pl.Tensor[[4, 8], pl.FP32], y: pl.InOut[pl.Tensor[[12, 8], pl.FP32]],
                  win: pl.InOut[pld.DistributedTensor[[2, 8], pl.FP32]], r: pl.Scalar[pl.INT32]):
    return assemble_kernel(x, y, win, r)


@pl.jit.host
def assemble_main(xs: pl.Tensor[[NR, 4, 8], pl.FP32], ys: pl.InOut[pl.Tensor[[NR, 12, 8], pl.FP32]]):
    buf = pld.alloc_window_buffer([2, 8], dtype=pl.FP32)
    for r in pl.range(pld.world_size()):
        assemble_chip(xs[r], ys[r], pld.window(buf, [2, 8], dtype=pl.FP32), r, device=r)
    return ys


@pytest.mark.parametrize("n", LOCAL_SIZES)
def test_assemble_and_region_assignment(n):
    rng = np.random.default_rng(400 + n)
    xs = rng.integers(-9, 10, size=(n, 4, 8)).astype(np.float32)
    y0 = np.full((n, 12, 8), -1.0, np.float32)
    ys = y0.copy()
    assemble_main(xs, ys, config=config_for(n))
    for r in range(n):
        x, exp = xs[r], y0[r].copy()
        exp[0] = x[r]
        exp[1:3] = x[2:4]
        exp[3] = x[r]
        exp[4 + r] = x[r]
        exp[6:8, 2:5] = x[0:2, 0:3]
        exp[8] = 2 * x[r]
        exp[9] = 0.5
        exp[10] = x[r]
        exp[11, 0:4] = x[r, 4:8]
        np.testing.assert_array_equal(ys[r], exp)


# ------------------------------------------------------------------ slice, reshape, row_sum
@pl.jit.incore
def shapes_kernel(x: pl.Tensor[[4, 8], pl.FP32], y: pl.InOut[pl.Tensor[[10, 8], pl.FP32]],
                  r: pl.Scalar[pl.INT32]):
    t = pl.load(x, [0, 0], [4, 8])
    # valid_shape with each padding; the physical tile is stored whole
    pl.store(pl.slice(t, [2, 8], [1, 0], valid_shape=[2, 3], pad_value=pl.PadValue.max),
             [0, 0], y, [2, 8])
    pl.store(pl.slice(t, [1, 8], [3, 0], valid_shape=[1, 5], pad_value=-math.inf),
             [2, 0], y, [1, 8])
    pl.store(pl.slice(t, [1, 8], [0, 0], valid_shape=[1, 2]), [3, 0], y, [1, 8])
    # the valid region follows the source's: a ragged tile stays ragged
    rag = pl.load(x, [0, 0], [4, 8], valid_shape=[4, 6])
    s = pl.slice(rag, [2, 4], [2, 4], pad_value=0)
    pl.store(s, [4, 0], y, [2, 4])
    # drop_dims: a tensor row as a 1-D view, a tile column as 1-D
    v = pl.tensor.slice(x, [1, 8], [r, 0], drop_dims=[0])
    pl.store(pl.load(v, [0], [8]), [6, 0], y)
    # reshape [4, 1] -> [1, 4] of the row sums (a valid tmp tile at least as large)
    tmp = pl.tile.create([4, 8], pl.FP32)
    sums = pl.tile.row_sum(t, tmp)
    pl.store(pl.tile.reshape(sums, [1, 4]), [7, 0], y)
    # row sums of a ragged tile cover its valid columns only
    pl.store(pl.tile.row_sum(rag, tmp), [0, 7], y)
    # a clamped load past the edge: valid where the source is, stored whole
    edge = pl.load(x, [3, 5], [2, 4], clamp=True)
    pl.store(edge, [8, 0], y, [2, 4])
    return y


@pl.jit
def shapes_chip(x: pl.Tensor[[4, 8], pl.FP32], y: pl.InOut[pl.Tensor[[10, 8], pl.FP32]],
                r: pl.Scalar[pl.INT32]):
    return shapes_kernel(x, y, r)


@pl.jit.host
def shapes_main(xs: pl.Tensor[[NR, 4, 8], pl.FP32], ys: pl.InOut[pl.Tensor[[NR, 10, 8], pl.FP32]]):
    for r in pl.range(pld.world_size()):
        shapes_chip(xs[r], ys[r], r, device=r)
    return ys


@pytest.mark.parametrize("n", LOCAL_SIZES)
def test_slice_options_reshape_row_sum(n):
    rng = np.random.default_rng(410 + n)
    xs = rng.integers(-9, 10, size=(n, 4, 8)).astype(np.float32)
    y0 = np.full((n, 10, 8), -1.0, np.float32)
    ys = y0.copy()
    shapes_main(xs, ys, config=config_for(n))
    for r in range(n):
        x, exp = xs[r], y0[r].copy()
        exp[0:2] = np.inf
        exp[0:2, 0:3] = x[1:3, 0:3]
        exp[2] = -np.inf
        exp[2, 0:5] = x[3, 0:5]
        exp[3] = 0
        exp[3, 0:2] = x[0, 0:2]
        exp[4:6, 0:4] = 0
        exp[4:6, 0:2] = x[2:4, 4:6]
        exp[6] = x[r]
        exp[7, 0:4] = x.sum(axis=1)
        exp[0:4, 7] = x[:, 0:6].sum(axis=1)
        exp[8:10, 0:4] = 0
        exp[8, 0:3] = x[3, 5:8]
        np.testing.assert_array_equal(ys[r], exp)


# ------------------------------------------------------------------ cast modes
MODES = ["round", "rint", "none", "floor", "ceil", "trunc", "odd"]


def cast_program(target):
    @pl.jit.incore
    def kernel(x: pl.Tensor[[1, 16], pl.FP32], y: pl.Out[pl.Tensor[[7, 16], target]]):
        t = pl.load(x, [0, 0], [1, 16])
        pl.store(pl.cast(t, target), [0, 0], y)                      # default mode "round"
        pl.store(pl.cast(t, target, mode="rint"), [1, 0], y)
        pl.store(pl.cast(t, target, mode=0), [2, 0], y)
        pl.store(pl.cast(t, target_type=target, mode="floor"), [3, 0], y)
        pl.store(pl.tile.cast(t, target, mode="ceil"), [4, 0], y)
        pl.store(pl.cast(t, target, "trunc"), [5, 0], y)
        pl.store(pl.cast(t, target, mode=6), [6, 0], y)
        return y

    @pl.jit
    def chip(x: pl.Tensor[[1, 16], pl.FP32], y: pl.Out[pl.Tensor[[7, 16], target]]):
        return kernel(x, y)

    @pl.jit.host
    def main(xs: pl.Tensor[[NR, 1, 16], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 7, 16], target]]):
        for r in pl.range(pld.world_size()):
            chip(xs[r], ys[r], device=r)
        return ys

    return main


CAST_INT, CAST_BF16 = cast_program(pl.INT32), cast_program(pl.BF16)


def int_reference(x, mode):
    x = x.astype(np.float64)
    lo, hi = np.floor(x), np.ceil(x)
    if mode == "round":
        return np.where(x >= 0, np.floor(x + 0.5), np.ceil(x - 0.5))
    if mode in ("rint", "none"):
        return np.rint(x)
    if mode == "odd":
        return np.where(lo % 2 != 0, lo, hi)
    return {"floor": lo, "ceil": hi, "trunc": np.trunc(x)}[mode]


def bf16_reference(x, mode):
    """BF16 is the top half of an FP32's bits: each mode by bit arithmetic."""
    bits = x.view(np.uint32).astype(np.uint64)
    low = bits & 0xFFFF
    trunc = bits & 0xFFFF0000                       # toward zero (sign-magnitude)
    inexact = low != 0
    up_mag = trunc + 0x10000                        # one step away from zero
    neg = (bits >> 31) == 1
    if mode == "trunc":
        out = trunc
    elif mode == "floor":
        out = np.where(inexact & neg, up_mag, trunc)
    elif mode == "ceil":
        out = np.where(inexact & ~neg, up_mag, trunc)
    elif mode == "round":
        out = np.where(low >= 0x8000, up_mag, trunc)
    elif mode == "odd":
        out = np.where(inexact, trunc | 0x10000, trunc)
    else:                                           # ties to even
        odd = (trunc >> 16) & 1
        out = np.where((low > 0x8000) | ((low == 0x8000) & (odd == 1)), up_mag, trunc)
    return (out >> 16).astype(np.uint16).view(ml_dtypes.bfloat16)


@pytest.mark.parametrize("n", LOCAL_SIZES)
def test_cast_modes_to_int32(n):
    rng = np.random.default_rng(420 + n)
    xs = rng.uniform(-6, 6, size=(n, 1, 16)).astype(np.float32)
    xs[:, 0, :8] = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.0, -3.0], np.float32)  # ties
    ys = np.zeros((n, 7, 16), np.int32)
    CAST_INT(xs, ys, config=config_for(n))
    for r in range(n):
        for i, mode in enumerate(MODES):
            np.testing.assert_array_equal(ys[r, i], int_reference(xs[r, 0], mode), err_msg=mode)


@pytest.mark.parametrize("n", LOCAL_SIZES)
def test_cast_modes_to_bf16(n):
    rng = np.random.default_rng(430 + n)
    xs = rng.standard_normal((n, 1, 16)).astype(np.float32)
    one = np.float32(1.0).view(np.uint32)
    ties = np.array([one | 0x8000, one | 0x18000, (one | 0x8000) | 0x80000000], np.uint32)
    xs[:, 0, :3] = ties.view(np.float32)           # exact halfway cases
    xs[:, 0, 3] = 2.0                              # exact
    ys = np.zeros((n, 7, 16), ml_dtypes.bfloat16)
    CAST_BF16(xs, ys, config=config_for(n))
    for r in range(n):
        for i, mode in enumerate(MODES):
            want = bf16_reference(xs[r, 0], mode)
            np.testing.assert_array_equal(ys[r, i].view(np.uint16), want.view(np.uint16),
                                          err_msg=mode)


def test_cast_saturates_and_converts_scalars():
    @pl.jit.incore
    def kernel(x: pl.Tensor[[1, 4], pl.FP32], y: pl.Out[pl.Tensor[[2, 4], pl.INT8]]):
        pl.store(pl.cast(pl.load(x, [0, 0], [1, 4]), pl.INT8, mode="trunc"), [0, 0], y)
        pl.write(y, [1, 0], pl.cast(pl.read(x, [0, 3]), pl.INT8, mode="floor"))
        return y

    @pl.jit
    def chip(x: pl.Tensor[[1, 4], pl.FP32], y: pl.Out[pl.Tensor[[2, 4], pl.INT8]]):
        return kernel(x, y)

    @pl.jit.host
    def main(xs: pl.Tensor[[NR, 1, 4], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 2, 4], pl.INT8]]):
        for r in pl.range(pld.world_size()):
            chip(xs[r], ys[r], device=r)
        return ys

    xs = np.array([[[300.0, -300.0, np.nan, -1.5]]], np.float32)
    ys = np.zeros((1, 2, 4), np.int8)
    main(xs, ys, config=config_for(1))
    np.testing.assert_array_equal(ys[0, 0], [127, -128, 0, -1])
    assert ys[0, 1, 0] == -2


# ------------------------------------------------------------------ narrow dtypes
def narrow_program(dt):
    @pl.jit.incore
    def kernel(x: pl.Tensor[[1, 16], pl.FP32], y: pl.Out[pl.Tensor[[1, 16], dt]],
               back: pl.Out[pl.Tensor[[1, 16], pl.FP32]]):
        t = pl.cast(pl.load(x, [0, 0], [1, 16]), dt, mode="rint")
        y = pl.store(t, [0, 0], y)
        pl.store(pl.cast(pl.load(y, [0, 0], [1, 16]), pl.FP32), [0, 0], back)
        return y

    @pl.jit
    def chip(x: pl.Tensor[[1, 16], pl.FP32], y: pl.Out[pl.Tensor[[1, 16], dt]],
             back: pl.Out[pl.Tensor[[1, 16], pl.FP32]]):
        return kernel(x, y, back)

    @pl.jit.host
    def main(xs: pl.Tensor[[NR, 1, 16], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, 16], dt]],
             backs: pl.Out[pl.Tensor[[NR, 1, 16], pl.FP32]]):
        for r in pl.range(pld.world_size()):
            chip(xs[r], ys[r], backs[r], device=r)
        return ys

    return main


@pytest.mark.parametrize("dt", [pl.FP8E4M3FN, pl.FP8E5M2, pl.FP8E8M0, pl.FP4, pl.INT4, pl.UINT4],
                         ids=lambda d: d.name)
@pytest.mark.parametrize("n", LOCAL_SIZES)
def test_fp8_and_int4_round_trip(dt, n):
    rng = np.random.default_rng(440 + n)
    xs = rng.uniform(-20, 20, size=(n, 1, 16)).astype(np.float32)
    if dt in (pl.FP8E8M0, pl.FP4):                # E8M0 is positive only; FP4 spans +-6
        xs = np.abs(xs) + 0.1 if dt is pl.FP8E8M0 else xs * 0.3
    ys = np.zeros((n, 1, 16), dt.np_dtype)
    backs = np.zeros((n, 1, 16), np.float32)
    narrow_program(dt)(xs, ys, backs, config=config_for(n))
    for r in range(n):
        x = xs[r, 0].astype(np.float64)
        if dt.is_int:
            info = ml_dtypes.iinfo(dt.np_dtype)
            want = np.clip(np.rint(x), int(info.min), int(info.max))
        else:
            want = x.astype(dt.np_dtype).astype(np.float64)       # nearest, ties to even
        np.testing.assert_array_equal(ys[r, 0].astype(np.float64), want)
        np.testing.assert_array_equal(backs[r, 0], want.astype(np.float32))
