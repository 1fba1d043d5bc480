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

from ..errors import RuntimeFault


def trunc_div(a: int, b: int) -> int:
    """Integer division truncating toward zero (-1 // 4 == 0 here, -1 in Python)."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def trunc_rem(a: int, b: int) -> int:
    """The remainder of ``trunc_div``: the dividend's sign (-1 % 4 == -1 here)."""
    return a - b * trunc_div(a, b)


def _zero_divisor(op: str, a) -> RuntimeFault:
    return RuntimeFault(f"integer {'division' if op == '//' else 'modulo'} by zero in device "
                        f"code ({a} {op} 0)", code="TC520",
                        hint="the divisor is a run-time value; guard it or keep it positive")


class ScalarOps:
    """Mixin of ``KernelOps`` (``_rt`` of device code)."""

    @staticmethod
    def divsi(a, b):
        """``a // b`` in device code on integer scalars."""
        if b == 0:
            raise _zero_divisor("//", a)
        return trunc_div(int(a), int(b))

    @staticmethod
    def remsi(a, b):
        """``a % b`` in device code on integer scalars."""
        if b == 0:
            raise _zero_divisor("%", a)
        return trunc_rem(int(a), int(b))

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
        if out.dtype.kind in "iu" and not isinstance(value, (np.integer, np.ndarray)):
            # a Python int may exceed the element type; wrap it the way the
            # device's register store truncates to the element's width
            value = np.array(int(value), dtype=np.int64).astype(out.dtype)
        out[i] = value
        return out


__all__ = ["ScalarOps", "trunc_div", "trunc_rem"]
