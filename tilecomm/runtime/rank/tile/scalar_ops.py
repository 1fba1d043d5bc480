"""Scalar semantics of device code: integer division and on-core arrays.

Kernels and chip orchestration functions are device code on the chip (the
kernel compiles to PTO, the orchestration to C++ on the AI CPU), where
integer ``//`` and ``%`` are ``arith.divsi`` / ``arith.remsi``: they truncate
toward zero and the remainder takes the dividend's sign.  Python floors.  The
two agree whenever both operands are non-negative, which is why a program
that computes ``(my_rank - 1) % nranks`` looks right on a CPU that uses
Python semantics and fails on the chip; the lowering of device code calls
these helpers instead of Python's operators so the CPU fails the same way.
HOST orchestrators stay Python (upstream generates Python for them).
"""
from __future__ import annotations

import numpy as np

from ....errors import RuntimeFault


def trunc_div(a: int, b: int) -> int:
    """Integer division truncating toward zero (-1 // 4 == 0 here, -1 in Python)."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def trunc_rem(a: int, b: int) -> int:
    """The remainder of ``trunc_div``: the dividend's sign (-1 % 4 == -1 here)."""
    return a - b * trunc_div(a, b)


def trunc_divide(a, b):
    """Element-wise integer division truncating toward zero (numpy floors)."""
    if np.any(np.asarray(b) == 0):
        raise RuntimeFault("integer division by zero in an element-wise pl.div", code="TC520",
                           hint="an integer divisor tile must not hold 0")
    q = np.floor_divide(a, b)
    inexact = np.remainder(a, b) != 0
    return q + (inexact & ((np.asarray(a) < 0) != (np.asarray(b) < 0))).astype(q.dtype)


def _zero_divisor(op: str, a) -> RuntimeFault:
    return RuntimeFault(f"integer {'division' if op == '//' else 'modulo'} by zero in device "
                        f"code ({a} {op} 0)", code="TC520",
                        hint="the divisor is a run-time value; guard it or keep it positive")


class ScalarOps:
    """Mixin of ``KernelOps`` (``_rt`` of device code)."""

    subblock_idx = 0        # the AIV lane running a pl.split_aiv body (0 outside one)

    def get_subblock_idx(self):
        return self.subblock_idx

    def aiv_lanes(self, n):
        """The lanes of a ``pl.split_aiv`` region, one after the other: each runs
        the whole body (SplitMode.NONE), with its index readable through
        ``pl.tile.get_subblock_idx()``."""
        try:
            for lane in range(int(n)):
                self.subblock_idx = lane
                yield lane
        finally:
            self.subblock_idx = 0

    def still_running(self):
        """Raised out of a long device loop once the call was aborted."""
        if self.control.aborted():
            raise self._aborted_exc()

    # both start from Python's flooring result, which is already right when the
    # operands have the same sign (the common case costs one comparison)

    @staticmethod
    def divsi(a, b):
        """``a // b`` in device code on integer scalars."""
        if b == 0:
            raise _zero_divisor("//", a)
        q = a // b
        if q < 0 and q * b != a:
            q += 1                        # floor -> toward zero
        return q

    @staticmethod
    def remsi(a, b):
        """``a % b`` in device code on integer scalars."""
        if b == 0:
            raise _zero_divisor("%", a)
        r = a % b
        if r and (r < 0) != (a < 0):
            r -= b                        # the dividend's sign, not the divisor's
        return r

    @staticmethod
    def array_set(array, index, value):
        """``arr[i] = v`` on a ``pl.Array``: a new array (the old one is a value
        other names may still hold), the element stored with the array's
        dtype as a register store would (integers wrap to its width)."""
        i = int(index)
        n = array.shape[0]
        if not 0 <= i < n:
            raise RuntimeFault(f"pl.Array index {i} is out of bounds for an array of {n} "
                               f"element(s)", code="TC502",
                               hint="check the index computed at run time")
        out = array.copy()
        try:
            out[i] = value
        except OverflowError:
            # a Python int beyond the element type: wrap it the way the device's
            # register store truncates to the element's width
            out[i] = np.array(int(value), dtype=np.int64).astype(out.dtype)
        return out


__all__ = ["ScalarOps", "trunc_div", "trunc_divide", "trunc_rem"]
