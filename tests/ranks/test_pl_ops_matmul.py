"""The cube path: ``pl.load(..., target_memory=Mat)``, ``pl.move`` to Left /
Right, ``pl.matmul`` (dtypes, ``out_dtype``, ``a_trans`` / ``b_trans``,
valid shapes, tensor operands) and ``pl.store`` of the accumulator.

The numpy reference multiplies the operands' exact values in float32
(float64 for the integer case) and rounds once to the output dtype, which is
what the cube's FP32 / INT32 accumulator does; an implementation that
multiplied in FP16 / BF16, or rounded per partial sum, would differ.  Ranks
get different operands, so a mix-up between ranks would show."""
import ml_dtypes
import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld

from programs_prims import config_for

NR = pl.dynamic("NR")
M, K, N = 16, 64, 24
LOCAL_SIZES = [1, 2]
MAT, LEFT, RIGHT, VEC = (pl.MemorySpace.Mat, pl.MemorySpace.Left, pl.MemorySpace.Right,
                         pl.MemorySpace.Vec)


def gemm_program(in_dt, out_dt, a_trans, b_trans, out_dtype_arg):
    a_shape = [K, M] if a_trans else [M, K]
    b_shape = [N, K] if b_trans else [K, N]
    requested = out_dt if out_dtype_arg else None

    @pl.jit.incore
    def kernel(a: pl.Tensor[a_shape, in_dt], b: pl.Tensor[b_shape, in_dt],
               c: pl.Out[pl.Tensor[[M, N], out_dt]]):
        ta = pl.load(a, offsets=[0, 0], shapes=a_shape, target_memory=MAT)
        tb = pl.load(b, [0, 0], b_shape, target_memory=pl.MemorySpace.Mat)
        la = pl.move(ta, target_memory=LEFT)
        rb = pl.tile.move(tb, RIGHT)
        tc = pl.matmul(la, rb, out_dtype=requested, a_trans=a_trans, b_trans=b_trans)
        c = pl.store(tc, [0, 0], c)
        return c

    @pl.jit
    def chip(a: pl.Tensor[a_shape, in_dt], b: pl.Tensor[b_shape, in_dt],
             c: pl.Out[pl.Tensor[[M, N], out_dt]]):
        return kernel(a, b, c)

    @pl.jit.host
    def main(a: pl.Tensor[[NR, *a_shape], in_dt], b: pl.Tensor[[NR, *b_shape], in_dt],
             c: pl.Out[pl.Tensor[[NR, M, N], out_dt]]):
        for r in pl.range(pld.world_size()):
            chip(a[r], b[r], c[r], device=r)
        return c

    return main


CASES = [
    # in dtype, out dtype, a_trans, b_trans, pass out_dtype
    (pl.FP32, pl.FP32, False, False, False),
    (pl.FP16, pl.FP32, False, False, False),       # FP32 accumulation is the default result
    (pl.BF16, pl.FP32, True, False, False),
    (pl.BF16, pl.BF16, False, True, True),         # FP32 accumulator rounded once to BF16
    (pl.FP16, pl.FP16, True, True, True),
    (pl.INT8, pl.INT32, False, False, False),
    (pl.FP8E4M3FN, pl.FP32, False, False, False),
]


def _case_id(case):
    i, o, at, bt, od = case
    return f"{i.name}->{o.name}{'-aT' if at else ''}{'-bT' if bt else ''}{'-out' if od else ''}"


@pytest.mark.parametrize("case", CASES, ids=_case_id)
@pytest.mark.parametrize("n", LOCAL_SIZES)
def test_matmul_against_numpy(case, n):
    in_dt, out_dt, a_trans, b_trans, od = case
    main = gemm_program(in_dt, out_dt, a_trans, b_trans, od)
    rng = np.random.default_rng(7 + n)
    a_shape = (K, M) if a_trans else (M, K)
    b_shape = (N, K) if b_trans else (K, N)
    if in_dt is pl.INT8:
        a = rng.integers(-128, 128, size=(n, *a_shape)).astype(np.int8)
        b = rng.integers(-128, 128, size=(n, *b_shape)).astype(np.int8)
    else:
        a = rng.standard_normal((n, *a_shape)).astype(in_dt.np_dtype)
        b = rng.standard_normal((n, *b_shape)).astype(in_dt.np_dtype)
    c = np.zeros((n, M, N), out_dt.np_dtype)
    main(a, b, c, config=config_for(n))
    for r in range(n):
        wide = np.int64 if in_dt is pl.INT8 else np.float64
        aa, bb = a[r].astype(wide), b[r].astype(wide)
        ref = (aa.T if a_trans else aa) @ (bb.T if b_trans else bb)
        if in_dt is pl.INT8:
            np.testing.assert_array_equal(c[r], ref.astype(np.int32))
            continue
        exp = ref.astype(np.float32).astype(out_dt.np_dtype)
        # float32 accumulation differs from the float64 reference by rounding only;
        # summing FP16 / BF16 products in FP16 / BF16 would miss the FP32 tolerance
        got, want = c[r].astype(np.float64), exp.astype(np.float64)
        tol = 1e-5 if out_dt is pl.FP32 else 2 ** -7 if out_dt is pl.BF16 else 2 ** -10
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


# ------------------------------------------------------------------ ragged and tensor forms
@pl.jit.incore
def ragged_kernel(a: pl.Tensor[[3, 8], pl.FP32], b: pl.Tensor[[8, 5], pl.FP32],
                  c: pl.InOut[pl.Tensor[[8, 8], pl.FP32]], d: pl.InOut[pl.Tensor[[3, 5], pl.FP32]]):
    # tiles physically larger than the data: only the valid product is stored
    ta = pl.load(a, [0, 0], [8, 8], valid_shape=[3, 8], target_memory=MAT)
    tb = pl.load(b, [0, 0], [8, 8], valid_shape=[8, 5], target_memory=MAT)
    tc = pl.matmul(pl.move(ta, LEFT), pl.move(tb, RIGHT))
    pl.store(tc, [0, 0], c)
    # the accumulator handed to the vector unit, then scaled
    v = pl.move(tc, VEC)
    pl.store(pl.mul(v, 2.0), [4, 0], c, [3, 8])
    # tensor-level matmul, assigned into an output region
    d[0:3, 0:5] = pl.tensor.matmul(a, b)
    return d


@pl.jit
def ragged_chip(a: pl.Tensor[[3, 8], pl.FP32], b: pl.Tensor[[8, 5], pl.FP32],
                c: pl.InOut[pl.Tensor[[8, 8], pl.FP32]], d: pl.InOut[pl.Tensor[[3, 5], pl.FP32]]):
    return ragged_kernel(a, b, c, d)


@pl.jit.host
def ragged_main(a: pl.Tensor[[NR, 3, 8], pl.FP32], b: pl.Tensor[[NR, 8, 5], pl.FP32],
                c: pl.InOut[pl.Tensor[[NR, 8, 8], pl.FP32]],
                d: pl.InOut[pl.Tensor[[NR, 3, 5], pl.FP32]]):
    for r in pl.range(pld.world_size()):
        ragged_chip(a[r], b[r], c[r], d[r], device=r)
    return d


@pytest.mark.parametrize("n", LOCAL_SIZES)
def test_valid_shapes_accumulator_move_and_tensor_matmul(n):
    rng = np.random.default_rng(70 + n)
    a = rng.integers(-4, 5, size=(n, 3, 8)).astype(np.float32)
    b = rng.integers(-4, 5, size=(n, 8, 5)).astype(np.float32)
    c = np.full((n, 8, 8), -1.0, np.float32)
    d = np.zeros((n, 3, 5), np.float32)
    ragged_main(a, b, c, d, config=config_for(n))
    for r in range(n):
        prod = a[r] @ b[r]
        exp = np.full((8, 8), -1.0, np.float32)
        exp[0:3, 0:5] = prod
        exp[4:7, :] = 0
        exp[4:7, 0:5] = 2 * prod
        np.testing.assert_array_equal(c[r], exp)
        np.testing.assert_array_equal(d[r], prod)


# ------------------------------------------------------------------ narrowing store of Acc
@pl.jit.incore
def narrow_kernel(a: pl.Tensor[[M, K], pl.BF16], b: pl.Tensor[[K, N], pl.BF16],
                  c: pl.Out[pl.Tensor[[M, N], pl.BF16]]):
    la = pl.move(pl.load(a, [0, 0], [M, K], target_memory=MAT), LEFT)
    rb = pl.move(pl.load(b, [0, 0], [K, N], target_memory=MAT), RIGHT)
    c = pl.store(pl.matmul(la, rb), [0, 0], c)     # FP32 Acc rounded to BF16 by the store
    return c


@pl.jit
def narrow_chip(a: pl.Tensor[[M, K], pl.BF16], b: pl.Tensor[[K, N], pl.BF16],
                c: pl.Out[pl.Tensor[[M, N], pl.BF16]]):
    return narrow_kernel(a, b, c)


@pl.jit.host
def narrow_main(a: pl.Tensor[[NR, M, K], pl.BF16], b: pl.Tensor[[NR, K, N], pl.BF16],
                c: pl.Out[pl.Tensor[[NR, M, N], pl.BF16]]):
    for r in pl.range(pld.world_size()):
        narrow_chip(a[r], b[r], c[r], device=r)
    return c


@pytest.mark.parametrize("n", LOCAL_SIZES)
def test_accumulator_store_rounds_to_bf16(n):
    rng = np.random.default_rng(90 + n)
    bf = ml_dtypes.bfloat16
    a = rng.standard_normal((n, M, K)).astype(bf)
    b = rng.standard_normal((n, K, N)).astype(bf)
    c = np.zeros((n, M, N), bf)
    narrow_main(a, b, c, config=config_for(n))
    for r in range(n):
        acc = a[r].astype(np.float32) @ b[r].astype(np.float32)
        exp = acc.astype(bf).astype(np.float64)
        np.testing.assert_allclose(c[r].astype(np.float64), exp, rtol=2 ** -7,
                                   atol=2 ** -7 * np.abs(exp).max())
