"""Scalar arithmetic follows the device in device code and the host in HOST code.

Kernels and chip orchestration functions divide integers like C
(``arith.divsi`` / ``arith.remsi``: truncation toward zero, the remainder
has the dividend's sign); a HOST orchestrator keeps Python's flooring
semantics.  The references are numpy's ``fmod`` / truncated division (C) and
Python's operators (host), so each check fails if the other rule is used.
The reference's "wrong result only at P > 2" pattern must reproduce here:
``(my_rank - 1) % nranks`` names peer -1 on rank 0 in a kernel.
"""
import os
import re

import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.errors import RankFailure

from programs_prims import config_for

NR = pl.dynamic("NR")
WORLD_SIZES = [1, 2, 3, 4]
FILE = os.path.abspath(__file__)
NCOL = 8


def c_div(a, b):
    return int(np.trunc(a / b))


def c_rem(a, b):
    return int(np.fmod(a, b))


def marker_line(tag):
    with open(FILE) as f:
        hits = [i + 1 for i, t in enumerate(f) if re.search(rf"#\s*M:{tag}\s*$", t)]
    assert len(hits) == 1
    return hits[0]


# ------------------------------------------------------------------ kernel vs host
@pl.jit.incore
def arith_kernel(y: pl.InOut[pl.Tensor[[2, NCOL], pl.INDEX]], r: pl.Scalar[pl.INDEX],
                 n: pl.Scalar[pl.INDEX], host_prev: pl.Scalar[pl.INDEX],
                 host_q: pl.Scalar[pl.INDEX]):
    pl.write(y, [0, 0], (r - 1) % n)             # device: -1 on rank 0 once n > 1
    pl.write(y, [0, 1], (r + n - 1) % n)         # the portable spelling
    pl.write(y, [0, 2], (r - 7) // 2)
    pl.write(y, [0, 3], (r - 7) % 3)
    pl.write(y, [0, 4], (7 - r) // -2)
    pl.write(y, [0, 5], (0 - 7) // 2)            # constants fold with the same rule
    pl.write(y, [0, 6], -7 % 3)
    q = r - 5
    q //= 2                                      # augmented assignment too
    pl.write(y, [0, 7], q)
    pl.write(y, [1, 0], host_prev)               # what the HOST computed, Python rule
    pl.write(y, [1, 1], host_q)
    return y


@pl.jit
def arith_chip(y: pl.InOut[pl.Tensor[[2, NCOL], pl.INDEX]], r: pl.Scalar[pl.INDEX],
               n: pl.Scalar[pl.INDEX], host_prev: pl.Scalar[pl.INDEX],
               host_q: pl.Scalar[pl.INDEX]):
    y = arith_kernel(y, r, n, host_prev, host_q)
    pl.write(y, [1, 2], (r - 1) % n)             # chip orchestration is device code
    pl.write(y, [1, 3], (r - 9) // 4)
    return y


@pl.jit.host
def arith_main(ys: pl.InOut[pl.Tensor[[NR, 2, NCOL], pl.INDEX]]):
    n = pld.world_size()
    for r in pl.range(n):
        arith_chip(ys[r], r, n, (r - 1) % n, (r - 9) // 4, device=r)
    return ys


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_device_code_truncates_host_code_floors(n):
    ys = np.full((n, 2, NCOL), -99, np.int64)
    arith_main(ys, config=config_for(n))
    for r in range(n):
        exp = [c_rem(r - 1, n), c_rem(r + n - 1, n), c_div(r - 7, 2), c_rem(r - 7, 3),
               c_div(7 - r, -2), c_div(-7, 2), c_rem(-7, 3), c_div(r - 5, 2)]
        assert list(ys[r, 0]) == exp, (r, ys[r, 0])
        assert list(ys[r, 1, :4]) == [(r - 1) % n, (r - 9) // 4, c_rem(r - 1, n), c_div(r - 9, 4)]
    # the rules really differ here: rank 0's predecessor is -1 on the device
    if n > 1:
        assert ys[0, 0, 0] == -1 and ys[0, 1, 0] == n - 1


# ------------------------------------------------------------------ the failure pattern
def ring_program(portable: bool):
    @pl.jit.incore
    def ring_kernel(cells: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
                    y: pl.InOut[pl.Tensor[[1, 1], pl.INT32]]):
        ctx = pld.get_comm_ctx(cells)
        me = pld.rank(ctx)
        n = pld.nranks(ctx)
        if portable:
            prev = (me + n - 1) % n
        else:
            prev = (me - 1) % n
        pld.system.notify(cells, prev, [me, 0], 1, op=pld.NotifyOp.Set)  # M:notify
        nxt = (me + 1) % n
        pld.system.wait(cells, [nxt, 0], 1, cmp=pld.WaitCmp.Eq)
        pl.write(y, [0, 0], prev)
        return y

    @pl.jit
    def chip(cells: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
             y: pl.InOut[pl.Tensor[[1, 1], pl.INT32]]):
        return ring_kernel(cells, y)

    @pl.jit.host
    def main(ys: pl.InOut[pl.Tensor[[NR, 1, 1], pl.INT32]]):
        buf = pld.alloc_window_buffer([pld.world_size(), 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            chip(pld.window(buf, [pld.world_size(), 1], dtype=pl.INT32), ys[r], device=r)
        return ys

    return main


PORTABLE, NAIVE = ring_program(True), ring_program(False)


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_portable_predecessor_is_right_at_every_world_size(n):
    ys = np.full((n, 1, 1), -99, np.int32)
    PORTABLE(ys, config=config_for(n))
    assert [int(v) for v in ys.ravel()] == [(r - 1) % n for r in range(n)]


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_negative_dividend_names_peer_minus_one_on_rank_0(n):
    """On one rank the naive spelling happens to work ((0 - 1) % 1 == 0 in C
    too); from two ranks on rank 0 notifies peer -1, as on the chip."""
    ys = np.full((n, 1, 1), -99, np.int32)
    if n == 1:
        NAIVE(ys, config=config_for(n))
        assert int(ys[0, 0, 0]) == 0
        return
    with pytest.raises(RankFailure) as ei:
        NAIVE(ys, config=config_for(n, deadlock_timeout_s=30))
    e = ei.value
    assert e.rank == 0 and e.error_code == "TC501", str(e)
    assert "peer -1" in str(e)
    assert e.span.line == marker_line("notify")


# ------------------------------------------------------------------ division by zero
@pl.jit.incore
def div_kernel(y: pl.InOut[pl.Tensor[[1, 1], pl.INT32]], r: pl.Scalar[pl.INT32]):
    pl.write(y, [0, 0], 10 // (r - 1))  # M:div0
    return y


@pl.jit
def div_chip(y: pl.InOut[pl.Tensor[[1, 1], pl.INT32]], r: pl.Scalar[pl.INT32]):
    return div_kernel(y, r)


@pl.jit.host
def div_main(ys: pl.InOut[pl.Tensor[[NR, 1, 1], pl.INT32]]):
    for r in pl.range(pld.world_size()):
        div_chip(ys[r], r, device=r)
    return ys


@pytest.mark.parametrize("n", [2, 3])
def test_division_by_zero_is_a_located_fault(n):
    ys = np.zeros((n, 1, 1), np.int32)
    with pytest.raises(RankFailure) as ei:
        div_main(ys, config=config_for(n, deadlock_timeout_s=30))
    e = ei.value
    assert e.rank == 1 and e.error_code == "TC520", str(e)
    assert os.path.abspath(e.span.file) == FILE and e.span.line == marker_line("div0")
    assert "division by zero" in str(e) and "ZeroDivisionError" not in str(e)


@pytest.mark.parametrize("n", [1])
def test_division_by_nonzero_divisor_runs(n):
    ys = np.zeros((n, 1, 1), np.int32)
    div_main(ys, config=config_for(n))
    assert int(ys[0, 0, 0]) == c_div(10, -1)


# ------------------------------------------------------------------ element-wise integer division
@pl.jit.incore
def tdiv_kernel(x: pl.Tensor[[2, NCOL], pl.INT32], y: pl.InOut[pl.Tensor[[3, NCOL], pl.INT32]],
                r: pl.Scalar[pl.INT32]):
    a = pl.load(x, [0, 0], [1, NCOL])
    b = pl.load(x, [1, 0], [1, NCOL])
    pl.store(pl.div(a, b), [0, 0], y)
    pl.store(pl.div(a, r - 3), [1, 0], y)
    pl.write(y, [2, 0], pl.div(r - 9, 4))
    return y


@pl.jit
def tdiv_chip(x: pl.Tensor[[2, NCOL], pl.INT32], y: pl.InOut[pl.Tensor[[3, NCOL], pl.INT32]],
              r: pl.Scalar[pl.INT32]):
    return tdiv_kernel(x, y, r)


@pl.jit.host
def tdiv_main(xs: pl.Tensor[[NR, 2, NCOL], pl.INT32], ys: pl.InOut[pl.Tensor[[NR, 3, NCOL], pl.INT32]]):
    for r in pl.range(pld.world_size()):
        tdiv_chip(xs[r], ys[r], r, device=r)
    return ys


@pytest.mark.parametrize("n", [1, 2])
def test_elementwise_integer_division_truncates(n):
    rng = np.random.default_rng(600 + n)
    xs = rng.integers(-50, 50, size=(n, 2, NCOL)).astype(np.int32)
    xs[:, 1] = np.where(xs[:, 1] == 0, -3, xs[:, 1])
    ys = np.zeros((n, 3, NCOL), np.int32)
    tdiv_main(xs, ys, config=config_for(n))
    for r in range(n):
        a, b = xs[r, 0].astype(np.int64), xs[r, 1].astype(np.int64)
        np.testing.assert_array_equal(ys[r, 0], np.trunc(a / b).astype(np.int32))
        np.testing.assert_array_equal(ys[r, 1], np.trunc(a / (r - 3)).astype(np.int32))
        assert ys[r, 2, 0] == c_div(r - 9, 4)
