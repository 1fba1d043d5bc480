"""The pl subset inside distributed programs: load/store, read/write, elementwise
ops, casts, tile makers, slicing and slice assignment, loops with carried
values, unroll, scalar helpers, branches, early return, host intermediates.

These ops are rank-local, so 1 and 2 ranks are enough; every rank gets its own
inputs and its rank index so a mix-up between ranks would show."""
import ml_dtypes
import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld

from programs_prims import config_for

NR = pl.dynamic("NR")
LOCAL_SIZES = [1, 2]


def local_program(kernel, x_shape, x_dt, y_shape, y_dt):
    """HOST + chip wrappers around ``kernel(x, y, r)``, one dispatch per rank."""

    @pl.jit
    def chip(x: pl.Tensor[list(x_shape), x_dt], y: pl.InOut[pl.Tensor[list(y_shape), y_dt]],
             r: pl.Scalar[pl.INT32]):
        return kernel(x, y, r)

    @pl.jit.host
    def main(xs: pl.Tensor[[NR, *x_shape], x_dt], ys: pl.InOut[pl.Tensor[[NR, *y_shape], y_dt]]):
        for r in pl.range(pld.world_size()):
            chip(xs[r], ys[r], r, device=r)
        return ys

    return main


def run_local(main, xs, ys, n):
    main(xs, ys, config=config_for(n))
    return ys


# --------------------------------------------------------------- load / store
@pl.jit.incore
def load_store_kernel(x: pl.Tensor[[4, 8], pl.FP32], y: pl.InOut[pl.Tensor[[8, 8], pl.FP32]],
                      r: pl.Scalar[pl.INT32]):
    t = pl.load(x, [1, 2], [2, 4])
    pl.store(t, [0, 0], y)
    # atomic accumulate twice onto what the caller passed in
    pl.store(t, [0, 4], y, atomic=pld.AtomicType.Add)
    pl.store(t, [0, 4], y, atomic=pld.AtomicType.Add)
    # ragged tile: valid [2, 3] of a physical [2, 8]
    v = pl.load(x, [0, 0], [2, 8], valid_shape=[2, 3])
    pl.store(v, [2, 0], y)                        # valid region only
    pl.store(v, [4, 0], y, [2, 8])                # the whole physical tile (zero tail)
    # run-time offsets
    row = pl.load(x, offsets=[r, 0], shapes=[1, 8])
    y = pl.store(row, [6 + r, 0], y)
    return y


LOAD_STORE = local_program(load_store_kernel, [4, 8], pl.FP32, [8, 8], pl.FP32)


@pytest.mark.parametrize("n", LOCAL_SIZES)
def test_load_store_valid_shape_atomic(n):
    rng = np.random.default_rng(200 + n)
    xs = rng.integers(-9, 10, size=(n, 4, 8)).astype(np.float32)
    y0 = rng.integers(-9, 10, size=(n, 8, 8)).astype(np.float32)
    ys = run_local(LOAD_STORE, xs, y0.copy(), n)
    for r in range(n):
        x, exp = xs[r], y0[r].copy()
        exp[0:2, 0:4] = x[1:3, 2:6]
        exp[0:2, 4:8] += 2 * x[1:3, 2:6]
        exp[2:4, 0:3] = x[0:2, 0:3]
        exp[4:6, :] = 0
        exp[4:6, 0:3] = x[0:2, 0:3]
        exp[6 + r, :] = x[r, :]
        np.testing.assert_array_equal(ys[r], exp)


# --------------------------------------------------------------- read / write
@pl.jit.incore
def read_write_kernel(x: pl.Tensor[[4, 8], pl.FP32], y: pl.InOut[pl.Tensor[[2, 8], pl.FP32]],
                      r: pl.Scalar[pl.INT32]):
    pl.write(y, [0, 0], pl.read(x, [1, 2]))
    pl.write(y, [0, 1], pl.read(x, [r, r + 1]) * 2.0)
    v: pl.Scalar[pl.FP32] = pl.read(x, [3, 7])
    pl.write(y, [0, 2], v - 1.0)
    t = pl.load(x, [2, 0], [1, 8])
    pl.write(t, [0, 3], pl.read(t, [0, 5]))       # tiles too
    pl.store(t, [1, 0], y)
    return y


READ_WRITE = local_program(read_write_kernel, [4, 8], pl.FP32, [2, 8], pl.FP32)


@pytest.mark.parametrize("n", LOCAL_SIZES)
def test_read_write(n):
    rng = np.random.default_rng(210 + n)
    xs = rng.standard_normal((n, 4, 8)).astype(np.float32)
    y0 = np.full((n, 2, 8), 7.0, np.float32)
    ys = run_local(READ_WRITE, xs, y0.copy(), n)
    for r in range(n):
        x, exp = xs[r], y0[r].copy()
        exp[0, 0] = x[1, 2]
        exp[0, 1] = x[r, r + 1] * 2.0
        exp[0, 2] = x[3, 7] - np.float32(1.0)
        exp[1] = x[2]
        exp[1, 3] = x[2, 5]
        np.testing.assert_allclose(ys[r], exp, rtol=1e-6)


# --------------------------------------------------------------- elementwise
@pl.jit.incore
def elementwise_kernel(x: pl.Tensor[[2, 8], pl.FP32], y: pl.InOut[pl.Tensor[[16, 8], pl.FP32]],
                       r: pl.Scalar[pl.INT32]):
    a = pl.load(x, [0, 0], [1, 8])
    b = pl.load(x, [1, 0], [1, 8])
    rf = pl.cast(r, pl.FP32)
    pl.store(pl.add(a, b), [0, 0], y)
    pl.store(pl.sub(a, b), [1, 0], y)
    pl.store(pl.mul(a, b), [2, 0], y)
    pl.store(pl.div(a, b), [3, 0], y)
    pl.store(pl.maximum(a, b), [4, 0], y)
    pl.store(pl.minimum(a, b), [5, 0], y)
    pl.store(pl.add(a, 1.5), [6, 0], y)
    pl.store(pl.sub(a, 2.0), [7, 0], y)
    pl.store(pl.mul(a, 3.0), [8, 0], y)
    pl.store(pl.div(a, 4.0), [9, 0], y)
    pl.store(pl.maximum(a, 0.0), [10, 0], y)
    pl.store(pl.minimum(a, 0.5), [11, 0], y)
    pl.store(pl.add(a, rf), [12, 0], y)
    pl.store(pl.tile.sub(pl.tile.mul(b, rf), a), [13, 0], y)
    # tensor-level ops on subscripted views, written back by slice assignment
    y[14:15, 0:8] = pl.add(x[0:1, 0:8], x[1:2, 0:8])
    y[15:16, 0:8] = pl.tensor.mul(x[1:2, 0:8], 0.5)
    return y


ELEMENTWISE = local_program(elementwise_kernel, [2, 8], pl.FP32, [16, 8], pl.FP32)


@pytest.mark.parametrize("n", LOCAL_SIZES)
def test_elementwise_fp32(n):
    rng = np.random.default_rng(220 + n)
    xs = rng.standard_normal((n, 2, 8)).astype(np.float32)
    xs[:, 1] = np.where(np.abs(xs[:, 1]) < 0.25, 1.0, xs[:, 1])   # no division by ~0
    ys = run_local(ELEMENTWISE, xs, np.zeros((n, 16, 8), np.float32), n)
    f = np.float32
    for r in range(n):
        a, b = xs[r, 0], xs[r, 1]
        exp = np.stack([a + b, a - b, a * b, a / b, np.maximum(a, b), np.minimum(a, b),
                        a + f(1.5), a - f(2.0), a * f(3.0), a / f(4.0), np.maximum(a, f(0)),
                        np.minimum(a, f(0.5)), a + f(r), b * f(r) - a, a + b, b * f(0.5)])
        assert exp.dtype == np.float32
        np.testing.assert_array_equal(ys[r], exp)


@pl.jit.incore
def int_elementwise_kernel(x: pl.Tensor[[2, 8], pl.INT32], y: pl.InOut[pl.Tensor[[8, 8], pl.INT32]],
                           r: pl.Scalar[pl.INT32]):
    a = pl.load(x, [0, 0], [1, 8])
    b = pl.load(x, [1, 0], [1, 8])
    pl.store(pl.add(a, b), [0, 0], y)
    pl.store(pl.sub(a, b), [1, 0], y)
    pl.store(pl.mul(a, b), [2, 0], y)
    pl.store(pl.div(a, b), [3, 0], y)
    pl.store(pl.maximum(a, b), [4, 0], y)
    pl.store(pl.minimum(a, b), [5, 0], y)
    pl.store(pl.add(a, r), [6, 0], y)
    pl.store(pl.mul(b, 3), [7, 0], y)
    return y


INT_ELEMENTWISE = local_program(int_elementwise_kernel, [2, 8], pl.INT32, [8, 8], pl.INT32)


@pytest.mark.parametrize("n", LOCAL_SIZES)
def test_elementwise_int32(n):
    rng = np.random.default_rng(230 + n)
    xs = rng.integers(0, 1000, size=(n, 2, 8)).astype(np.int32)
    xs[:, 1] += 1                                  # non-negative dividend, positive divisor
    ys = run_local(INT_ELEMENTWISE, xs, np.zeros((n, 8, 8), np.int32), n)
    for r in range(n):
        a, b = xs[r, 0], xs[r, 1]
        exp = np.stack([a + b, a - b, a * b, a // b, np.maximum(a, b), np.minimum(a, b),
                        a + r, b * 3]).astype(np.int32)
        np.testing.assert_array_equal(ys[r], exp)


# --------------------------------------------------------------- casts
@pl.jit.incore
def cast_kernel(x: pl.Tensor[[1, 8], pl.FP32], h: pl.Out[pl.Tensor[[1, 8], pl.FP16]],
                b: pl.Out[pl.Tensor[[1, 8], pl.BF16]], i: pl.Out[pl.Tensor[[1, 8], pl.INT32]],
                back: pl.Out[pl.Tensor[[3, 8], pl.FP32]]):
    t = pl.load(x, [0, 0], [1, 8])
    th = pl.cast(t, pl.FP16)
    tb = pl.cast(t, target_type=pl.BF16)
    ti = pl.cast(t, pl.INT32, mode="round")
    pl.store(th, [0, 0], h)
    pl.store(tb, [0, 0], b)
    pl.store(ti, [0, 0], i)
    pl.store(pl.cast(th, pl.FP32), [0, 0], back)
    pl.store(pl.cast(tb, pl.FP32), [1, 0], back)
    pl.store(pl.cast(ti, pl.FP32), [2, 0], back)
    return back


@pl.jit
def cast_chip(x: pl.Tensor[[1, 8], pl.FP32], h: pl.Out[pl.Tensor[[1, 8], pl.FP16]],
              b: pl.Out[pl.Tensor[[1, 8], pl.BF16]], i: pl.Out[pl.Tensor[[1, 8], pl.INT32]],
              back: pl.Out[pl.Tensor[[3, 8], pl.FP32]]):
    return cast_kernel(x, h, b, i, back)


@pl.jit.host
def cast_main(xs: pl.Tensor[[NR, 1, 8], pl.FP32], hs: pl.Out[pl.Tensor[[NR, 1, 8], pl.FP16]],
              bs: pl.Out[pl.Tensor[[NR, 1, 8], pl.BF16]],
              is_: pl.Out[pl.Tensor[[NR, 1, 8], pl.INT32]],
              backs: pl.Out[pl.Tensor[[NR, 3, 8], pl.FP32]]):
    for r in pl.range(pld.world_size()):
        cast_chip(xs[r], hs[r], bs[r], is_[r], backs[r], device=r)
    return backs


@pytest.mark.parametrize("n", LOCAL_SIZES)
def test_cast_fp32_fp16_bf16_int32(n):
    rng = np.random.default_rng(240 + n)
    # away from .5 ties, so float -> int rounding has one right answer; wide range so
    # fp16/bf16 rounding really drops bits
    base = rng.integers(-2000, 2000, size=(n, 1, 8)).astype(np.float32)
    frac = rng.choice(np.float32([0.1, 0.3, 0.7, 0.9]), size=(n, 1, 8))
    xs = (base + frac).astype(np.float32)
    hs = np.zeros((n, 1, 8), np.float16)
    bs = np.zeros((n, 1, 8), ml_dtypes.bfloat16)
    is_ = np.zeros((n, 1, 8), np.int32)
    backs = np.zeros((n, 3, 8), np.float32)
    cast_main(xs, hs, bs, is_, backs, config=config_for(n))
    np.testing.assert_array_equal(hs, xs.astype(np.float16))
    np.testing.assert_array_equal(bs.astype(np.float32),
                                  xs.astype(ml_dtypes.bfloat16).astype(np.float32))
    np.testing.assert_array_equal(is_, np.rint(xs).astype(np.int32))
    np.testing.assert_array_equal(backs[:, 0], xs[:, 0].astype(np.float16).astype(np.float32))
    np.testing.assert_array_equal(backs[:, 1], xs[:, 0].astype(ml_dtypes.bfloat16)
                                  .astype(np.float32))
    np.testing.assert_array_equal(backs[:, 2], np.rint(xs[:, 0]))


# --------------------------------------------------------------- tile makers, slicing
@pl.jit.incore
def makers_kernel(x: pl.Tensor[[4, 8], pl.FP32], y: pl.InOut[pl.Tensor[[10, 8], pl.FP32]],
                  r: pl.Scalar[pl.INT32]):
    pl.store(pl.tile.full([2, 8], pl.FP32, 2.5), [0, 0], y)
    pl.store(pl.tile.full([1, 8], pl.FP32, pl.cast(r, pl.FP32) + 0.25), [2, 0], y)
    scratch = pl.tile.create([1, 8], pl.FP32)
    for j in pl.range(8):
        pl.write(scratch, [0, j], pl.read(x, [3, 7 - j]))
    pl.store(scratch, [3, 0], y)
    # pl.slice: shape first, then offset; on a tensor and on a tile
    view = pl.slice(x, [2, 4], [1, 2])
    pl.store(pl.load(view, [0, 0], [2, 4]), [4, 0], y)
    whole = pl.load(x, [0, 0], [4, 8])
    pl.store(pl.slice(whole, [2, 3], [2, 5]), [4, 4], y, [2, 3])
    # subscripts give tensor views; a tile is written back by slice assignment
    part = pl.load(x[1:3, 2:6], [0, 0], [2, 4])
    y[6:8, 0:4] = part
    y[6:7, 4:8] = pl.load(x[0:1, 4:8], [0, 0], [1, 4])
    y[8, 0] = pl.read(x[2:4, 0:8], [1, 6])
    y[9:10, 0:8] = x[0:1, 0:8]                  # tensor region to tensor region
    return y


MAKERS = local_program(makers_kernel, [4, 8], pl.FP32, [10, 8], pl.FP32)


@pytest.mark.parametrize("n", LOCAL_SIZES)
def test_tile_makers_slices_and_slice_assignment(n):
    rng = np.random.default_rng(250 + n)
    xs = rng.standard_normal((n, 4, 8)).astype(np.float32)
    y0 = np.full((n, 10, 8), -1.0, np.float32)
    ys = run_local(MAKERS, xs, y0.copy(), n)
    for r in range(n):
        x, exp = xs[r], y0[r].copy()
        exp[0:2] = np.float32(2.5)
        exp[2] = np.float32(r) + np.float32(0.25)
        exp[3] = x[3, ::-1]
        exp[4:6, 0:4] = x[1:3, 2:6]
        exp[4:6, 4:7] = x[2:4, 5:8]
        exp[6:8, 0:4] = x[1:3, 2:6]
        exp[6, 4:8] = x[0, 4:8]
        exp[8, 0] = x[3, 6]
        exp[9] = x[0]
        np.testing.assert_array_equal(ys[r], exp)


# --------------------------------------------------------------- loops and scalars
@pl.jit.incore
def control_kernel(x: pl.Tensor[[4, 8], pl.FP32], y: pl.InOut[pl.Tensor[[6, 8], pl.FP32]],
                   r: pl.Scalar[pl.INT32]):
    # loop-carried tile and scalar; the results are read under the pl.yield_ names
    zero = pl.tile.full([1, 8], pl.FP32, 0.0)
    for i, (acc, cnt) in pl.range(4, init_values=(zero, pl.const(0, pl.INT32))):
        nxt_acc = pl.add(acc, pl.load(x, [i, 0], [1, 8]))
        total, count = pl.yield_(nxt_acc, cnt + i + 1)
    pl.store(total, [0, 0], y)
    pl.write(y, [1, 0], pl.cast(count, pl.FP32))
    # implicit carry by rebinding
    run = pl.load(x, [0, 0], [1, 8])
    for i in pl.range(1, 4):
        run = pl.maximum(run, pl.load(x, [i, 0], [1, 8]))
    pl.store(run, [2, 0], y)
    for j in pl.unroll(4):
        pl.write(y, [1, j + 1], pl.read(x, [j, j]))
    for k in pl.range(1, 8, 3):
        pl.write(y, [3, k], pl.cast(k * 10, pl.FP32))
    for k in pl.parallel(2):
        pl.write(y, [3, 2 * k], pl.read(x, [k, 0]))
    c = pl.const(-4, pl.INT32)
    pl.write(y, [4, 0], pl.cast(c * (r + 1), pl.FP32))
    pl.write(y, [4, 1], pl.cast(pl.min(r, 1) + pl.max(r + 3, 2 * r), pl.FP32))
    pl.write(y, [4, 2], pl.max(pl.read(x, [0, 0]), pl.read(x, [0, 1])))
    pl.write(y, [4, 3], pl.min(pl.read(x, [0, 0]), pl.read(x, [0, 1])))
    pl.write(y, [4, 4], pl.cast(7 // 2 + 7 % 3 - (r + 5) // 2 + (r + 5) % 3, pl.FP32))
    # branches on a run-time scalar
    if r % 2 == 0:
        pl.write(y, [5, 0], 100.0)
    else:
        pl.write(y, [5, 0], -100.0)
    if r > 0 and r < 5:
        pl.write(y, [5, 1], 1.0)
    if r == 0 or r == 3:
        pl.write(y, [5, 2], 2.0)
    elif r == 1:
        pl.write(y, [5, 2], 3.0)
    return y


CONTROL = local_program(control_kernel, [4, 8], pl.FP32, [6, 8], pl.FP32)


@pytest.mark.parametrize("n", LOCAL_SIZES)
def test_loops_carried_values_unroll_scalars_branches(n):
    rng = np.random.default_rng(260 + n)
    xs = rng.integers(-50, 50, size=(n, 4, 8)).astype(np.float32)
    y0 = np.full((n, 6, 8), -7.0, np.float32)
    ys = run_local(CONTROL, xs, y0.copy(), n)
    for r in range(n):
        x, exp = xs[r], y0[r].copy()
        exp[0] = x.sum(axis=0)
        exp[1, 0] = sum(i + 1 for i in range(4))
        exp[2] = x.max(axis=0)
        for j in range(4):
            exp[1, j + 1] = x[j, j]
        for k in range(1, 8, 3):
            exp[3, k] = k * 10
        for k in range(2):
            exp[3, 2 * k] = x[k, 0]
        exp[4, 0] = -4 * (r + 1)
        exp[4, 1] = min(r, 1) + max(r + 3, 2 * r)
        exp[4, 2] = max(x[0, 0], x[0, 1])
        exp[4, 3] = min(x[0, 0], x[0, 1])
        exp[4, 4] = 7 // 2 + 7 % 3 - (r + 5) // 2 + (r + 5) % 3
        exp[5, 0] = 100.0 if r % 2 == 0 else -100.0
        if 0 < r < 5:
            exp[5, 1] = 1.0
        if r in (0, 3):
            exp[5, 2] = 2.0
        elif r == 1:
            exp[5, 2] = 3.0
        np.testing.assert_array_equal(ys[r], exp)


# --------------------------------------------------------------- early return
@pl.jit.incore
def early_return_kernel(x: pl.Tensor[[1, 8], pl.FP32], y: pl.InOut[pl.Tensor[[2, 8], pl.FP32]],
                        r: pl.Scalar[pl.INT32]):
    t = pl.load(x, [0, 0], [1, 8])
    if r == 0:
        return pl.store(t, [0, 0], y)
    pl.store(pl.mul(t, 2.0), [0, 0], y)
    y = pl.store(pl.add(t, 1.0), [1, 0], y)
    return y


EARLY_RETURN = local_program(early_return_kernel, [1, 8], pl.FP32, [2, 8], pl.FP32)


@pytest.mark.parametrize("n", LOCAL_SIZES)
def test_early_return(n):
    rng = np.random.default_rng(270 + n)
    xs = rng.standard_normal((n, 1, 8)).astype(np.float32)
    y0 = np.full((n, 2, 8), 9.0, np.float32)
    ys = run_local(EARLY_RETURN, xs, y0.copy(), n)
    for r in range(n):
        exp = y0[r].copy()
        if r == 0:
            exp[0] = xs[r, 0]                              # returned before the rest
        else:
            exp[0] = xs[r, 0] * np.float32(2.0)
            exp[1] = xs[r, 0] + np.float32(1.0)
        np.testing.assert_array_equal(ys[r], exp)


# --------------------------------------------------------------- host intermediates
@pl.jit.incore
def double_kernel(x: pl.Tensor[[1, 8], pl.FP32], t: pl.Out[pl.Tensor[[1, 8], pl.FP32]]):
    t = pl.store(pl.mul(pl.load(x, [0, 0], [1, 8]), 2.0), [0, 0], t)
    return t


@pl.jit.incore
def add_kernel(a: pl.Tensor[[1, 8], pl.FP32], b: pl.Tensor[[1, 8], pl.FP32],
               y: pl.Out[pl.Tensor[[1, 8], pl.FP32]]):
    y = pl.store(pl.add(pl.load(a, [0, 0], [1, 8]), pl.load(b, [0, 0], [1, 8])), [0, 0], y)
    return y


@pl.jit
def produce_chip(x: pl.Tensor[[1, 8], pl.FP32], t: pl.Out[pl.Tensor[[1, 8], pl.FP32]]):
    return double_kernel(x, t)


@pl.jit
def consume_chip(a: pl.Tensor[[1, 8], pl.FP32], b: pl.Tensor[[1, 8], pl.FP32],
                 y: pl.Out[pl.Tensor[[1, 8], pl.FP32]]):
    return add_kernel(a, b, y)


@pl.jit
def chained_chip(x: pl.Tensor[[1, 8], pl.FP32], y: pl.Out[pl.Tensor[[1, 8], pl.FP32]]):
    # an orchestration-level intermediate between two kernels of one rank
    t = pl.create_tensor([1, 8], dtype=pl.FP32)
    t = double_kernel(x, t)
    return add_kernel(t, x, y)


@pl.jit.host
def intermediates_main(xs: pl.Tensor[[NR, 1, 8], pl.FP32],
                       ys: pl.Out[pl.Tensor[[NR, 3, 8], pl.FP32]]):
    tmp = pl.create_tensor([NR, 1, 8], dtype=pl.FP32)
    never_written = pl.create_tensor([NR, 1, 8], dtype=pl.FP32)
    for r in pl.range(pld.world_size()):
        produce_chip(xs[r], tmp[r], device=r)
    for r in pl.range(pld.world_size()):
        # rank r consumes what rank r + 1 produced in the previous loop
        consume_chip(tmp[(r + 1) % pld.world_size()], xs[r], ys[r, 0], device=r)
        consume_chip(never_written[r], xs[r], ys[r, 1], device=r)
        chained_chip(xs[r], ys[r, 2], device=r)
    return ys


@pytest.mark.parametrize("n", LOCAL_SIZES)
def test_create_tensor_intermediates(n):
    rng = np.random.default_rng(280 + n)
    xs = rng.standard_normal((n, 1, 8)).astype(np.float32)
    ys = np.full((n, 3, 8), np.nan, np.float32)
    intermediates_main(xs, ys, config=config_for(n))
    two = np.float32(2.0)
    np.testing.assert_array_equal(ys[:, 0], np.roll(xs[:, 0] * two, -1, axis=0) + xs[:, 0])
    np.testing.assert_array_equal(ys[:, 1], xs[:, 0])       # created zero-initialised
    np.testing.assert_array_equal(ys[:, 2], xs[:, 0] * two + xs[:, 0])
