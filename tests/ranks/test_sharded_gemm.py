"""The sharded GEMM of examples/sharded_gemm.py: rank r's row block by the
cube path (Mat loads, moves to Left / Right, matmul with an FP32
accumulator), then an allgather of the blocks, so every rank holds the whole
product.  Checked against a float64 product of the operands' exact values
(the reference's GEMM tolerance, 1e-5) at 1-4 ranks on every transport, for
FP32 and for BF16 / FP16 inputs, with b as given or transposed, and at shapes
that are not multiples of anything."""
import importlib.util
import os

import numpy as np
import pytest

import tilecomm.language as pl

from programs_prims import config_for

EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                       "examples", "sharded_gemm.py")
_spec = importlib.util.spec_from_file_location("sharded_gemm", EXAMPLE)
gemm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gemm)


def product(a, b, b_trans):
    """The whole [nr*m, n] product, element by element in float64."""
    nr, m, k = a.shape
    bt = b.T if b_trans else b
    out = np.zeros((nr * m, bt.shape[1]))
    for r in range(nr):
        for i in range(m):
            out[r * m + i] = (a[r, i].astype(np.float64)[:, None] * bt.astype(np.float64)).sum(0)
    return out


def run_gemm(nr, m, k, n, dtype, b_trans, seed):
    rng = np.random.default_rng(seed)
    a = rng.uniform(-2, 2, (nr, m, k)).astype(dtype.np_dtype)
    b = rng.uniform(-2, 2, (n, k) if b_trans else (k, n)).astype(dtype.np_dtype)
    c = np.full((nr, nr * m, n), np.nan, np.float32)
    gemm.build(nr, m, k, n, dtype=dtype, b_trans=b_trans)(a, b, c, config=config_for(nr))
    return a, b, c


@pytest.mark.parametrize("nr", [1, 2, 3, 4])
@pytest.mark.parametrize("dtype,b_trans", [(pl.FP32, False), (pl.BF16, True), (pl.FP16, False)],
                         ids=["fp32", "bf16-bT", "fp16"])
def test_every_rank_holds_the_whole_product(nr, dtype, b_trans):
    m, k, n = 7, 33, 10
    a, b, c = run_gemm(nr, m, k, n, dtype, b_trans, seed=nr)
    want = product(a, b, b_trans)
    for r in range(nr):
        np.testing.assert_allclose(c[r], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("nr", [2, 4])
def test_larger_blocks(nr):
    m, k, n = 64, 128, 48
    a, b, c = run_gemm(nr, m, k, n, pl.FP32, False, seed=10 + nr)
    want = a.astype(np.float64).reshape(nr * m, k) @ b.astype(np.float64)
    for r in range(nr):
        np.testing.assert_allclose(c[r], want, rtol=1e-5, atol=1e-5)
    # blocks are in rank order: swapping two would not pass
    assert not np.allclose(c[0, :m], c[0, m:2 * m])

