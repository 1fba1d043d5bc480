"""Inputs and numpy references shared by the collective semantics tests.

Inputs are chosen so that every reduction is exact in FP32 and FP16 (small
integers for Sum, +-1/+-2 for Prod, arbitrary values for Max/Min, which never
round); one Sum slot uses non-integer values and is compared with a
tolerance, so accumulation in the target dtype is exercised as well."""
from __future__ import annotations

import numpy as np

# ReduceOp slots of the allreduce programs, in the order the kernels run them
SUM, MAX, MIN, PROD, SUM_REAL = range(5)
SLOTS = 5

# element counts of the allreduce targets: [1, N] streams and one 2-D target
# whose per-rank slice spans several copy pieces at every world size
STREAM_SIZES = (1, 17, 4097, 65537)
GRID = (257, 1031)

TOL = {np.float32: dict(rtol=1e-5, atol=1e-5), np.float16: dict(rtol=2e-2, atol=2e-2)}


def reduce_inputs(rng, n: int, rows: int, cols: int, dtype) -> np.ndarray:
    """``[n, SLOTS * rows, cols]``: block ``k`` of rank ``r`` is what rank ``r``
    contributes to the reduction in slot ``k``."""
    shape = (n, rows, cols)
    blocks = [rng.integers(-8, 9, shape),                    # Sum: exact
              rng.standard_normal(shape) * 100,              # Max: exact in any dtype
              rng.standard_normal(shape) * 100,              # Min
              rng.choice([-2, -1, 1, 2], shape),              # Prod: |x| <= 16 at 4 ranks
              rng.standard_normal(shape)]                    # Sum with rounding
    return np.concatenate(blocks, axis=1).astype(np.float32).astype(dtype)


def reduce_reference(xs: np.ndarray, rows: int) -> list:
    """The expected result of every slot (one array, the same on every rank)."""
    dtype = xs.dtype.type
    b = [xs[:, k * rows:(k + 1) * rows].astype(np.float64) for k in range(SLOTS)]
    return [b[SUM].sum(0).astype(dtype), b[MAX].max(0).astype(dtype),
            b[MIN].min(0).astype(dtype), b[PROD].prod(0).astype(dtype),
            b[SUM_REAL].sum(0).astype(dtype)]


def check_reduced(outs: np.ndarray, xs: np.ndarray, rows: int, what: str = "") -> None:
    """Every rank's output blocks equal the reference; exact except SUM_REAL."""
    ref = reduce_reference(xs, rows)
    for r in range(outs.shape[0]):
        for k in range(SLOTS):
            got = outs[r, k * rows:(k + 1) * rows]
            msg = f"{what} rank {r} slot {k}"
            if k == SUM_REAL:
                np.testing.assert_allclose(got.astype(np.float64), ref[k].astype(np.float64),
                                           err_msg=msg, **TOL[xs.dtype.type])
            else:
                np.testing.assert_array_equal(got, ref[k], err_msg=msg)


def a2av_counts(n: int, rounds: int, cap: int) -> np.ndarray:
    """``[rounds, n(src), n(dest)]`` send counts.  Read row-major, each round
    walks a cycle of 0, above ``cap``, within it, exactly ``cap``, just above,
    within: every round of two or more ranks has all three kinds, and three
    rounds of a rank alone send 0, above and within."""
    cycle = np.array([0, cap + 2, 1, cap, cap + 1, 2], np.int32)
    flat = np.arange(n * n).reshape(n, n)
    return np.stack([cycle[(flat + rd) % len(cycle)] for rd in range(rounds)])


def check_a2av(inp: np.ndarray, counts: np.ndarray, out: np.ndarray, got: np.ndarray,
               cap: int, what: str = "") -> None:
    """One all_to_all_v round: ``inp[src]`` ``[n*cap, S]`` was sent with
    ``counts[src, dest]``; ``out[r]`` / ``got[r]`` are rank r's target and
    recv_counts.  Rows beyond a count are stale and not looked at."""
    n = inp.shape[0]
    for r in range(n):
        for s in range(n):
            k = min(int(counts[s, r]), cap)
            assert got[r, s, 0] == k, \
                f"{what} rank {r}: recv_counts[{s}] = {got[r, s, 0]}, want {k}"
            np.testing.assert_array_equal(out[r, s * cap:s * cap + k],
                                          inp[s, r * cap:r * cap + k],
                                          err_msg=f"{what} rank {r} block from {s}")
