"""``pl.cast`` with the device's rounding modes.

Modes (upstream names and codes): ``none`` 0 and ``rint`` 1 round to
nearest, ties to even; ``round`` 2 rounds to nearest, ties away from zero;
``floor`` 3, ``ceil`` 4 and ``trunc`` 5 round toward -inf, +inf and zero;
``odd`` 6 rounds an inexact value to the neighbour whose last bit is odd
(the von Neumann rounding used before a second narrowing).  The same rule
serves every lossy conversion: the exact value (float64 holds every FP32,
FP16, BF16, FP8 and 32-bit integer value) lies between two neighbours of the
target type and the mode picks one.  Float -> integer saturates at the
integer's range (NaN gives 0), as the vector unit's conversion does;
integer -> integer wraps.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ...values import Tile, make_tile

MODES = {"none": 0, "rint": 1, "round": 2, "floor": 3, "ceil": 4, "trunc": 5, "odd": 6}
NONE, RINT, ROUND, FLOOR, CEIL, TRUNC, ODD = range(7)


def mode_code(mode) -> int:
    return MODES[mode] if isinstance(mode, str) else int(mode)


def _is_float(dt: np.dtype) -> bool:
    return dt.kind == "f" or (dt.kind == "V" and "float" in dt.name)


def _step(y: np.ndarray, up: np.ndarray) -> np.ndarray:
    """The next value of ``y``'s (float) dtype toward +inf where ``up``, toward
    -inf elsewhere.  Floats are sign-magnitude, so a step that grows the
    magnitude adds one to the bit pattern and one that shrinks it subtracts."""
    uint = np.dtype(f"u{y.dtype.itemsize}")
    u = y.view(uint).astype(np.int64)
    neg = np.signbit(y.astype(np.float64))
    grows = up != neg
    out = np.where(grows, u + 1, u - 1)
    # the sign is the top bit of the format (bit 3 of a 4-bit float's byte)
    bits = 8 * y.dtype.itemsize
    if y.dtype.kind == "V":
        import ml_dtypes
        bits = ml_dtypes.finfo(y.dtype).bits
    sign_bit = 1 << (bits - 1)
    out = np.where(y.astype(np.float64) == 0, np.where(up, 1, sign_bit | 1), out)
    return out.astype(uint).view(y.dtype)


def _pick(x, lo, hi, nearest, code):
    """Between neighbours ``lo`` <= x <= ``hi`` (float64 views), the one the
    mode selects; ``nearest`` is the ties-to-even choice."""
    if code in (NONE, RINT):
        return nearest
    if code == FLOOR:
        return lo
    if code == CEIL:
        return hi
    if code == TRUNC:
        return np.where(x >= 0, lo, hi)
    if code == ROUND:
        tie = (x - lo) == (hi - x)
        return np.where(tie, np.where(x >= 0, hi, lo), nearest)
    raise AssertionError(code)


def _to_float(x64: np.ndarray, dt: np.dtype, code: int) -> np.ndarray:
    nearest = x64.astype(dt)
    if code in (NONE, RINT):
        return nearest
    n64 = nearest.astype(np.float64)
    exact = (n64 == x64) | ~np.isfinite(x64) | ~np.isfinite(n64)
    other = _step(nearest, n64 < x64)
    lo = np.where(n64 <= x64, nearest, other)
    hi = np.where(n64 <= x64, other, nearest)
    if code == ODD:
        uint = np.dtype(f"u{dt.itemsize}")
        lo_odd = (lo.view(uint) & 1).astype(bool)
        chosen = np.where(lo_odd, lo, hi)
    else:
        chosen = _pick(x64, lo.astype(np.float64), hi.astype(np.float64), nearest, code)
        chosen = np.asarray(chosen).astype(dt) if np.asarray(chosen).dtype != dt else chosen
    return np.where(exact, nearest, chosen).astype(dt)


def _to_int(x64: np.ndarray, dt: np.dtype, code: int) -> np.ndarray:
    lo, hi = np.floor(x64), np.ceil(x64)
    if code == ODD:
        r = np.where(np.fmod(lo, 2) != 0, lo, hi)
    else:
        r = _pick(x64, lo, hi, np.rint(x64), code)
    if dt.kind == "V":                    # INT4 / UINT4 (ml_dtypes)
        import ml_dtypes
        info = ml_dtypes.iinfo(dt)
    else:
        info = np.iinfo(dt)
    r = np.clip(np.nan_to_num(r, nan=0.0), info.min, info.max)
    return r.astype(dt)


@lru_cache(maxsize=256)
def astype_exact(src: np.dtype, dt: np.dtype, mode) -> bool:
    """Whether ``astype`` alone converts ``src`` to ``dt`` in ``mode``: a
    widening conversion (every value of src is one of dt's) is exact in any
    mode, and round-to-nearest-even into a float dtype is astype's own
    rounding.  Both skip the neighbour search, which costs 30-250x astype."""
    return bool(np.can_cast(src, dt, "safe")) or \
        (mode_code(mode) in (NONE, RINT) and _is_float(dt))


def convert(x: np.ndarray, dt: np.dtype, mode) -> np.ndarray:
    """``x`` as ``dt`` with the rounding ``mode``."""
    code = mode_code(mode)
    if astype_exact(x.dtype, dt, mode):
        return x.astype(dt)
    src_float = _is_float(x.dtype)
    if _is_float(dt):
        if not src_float and x.dtype.kind not in "iub":
            return x.astype(dt)
        return _to_float(x.astype(np.float64), dt, code)
    if src_float:
        return _to_int(x.astype(np.float64), dt, code)
    return x.astype(dt)                   # integer -> integer: wraps, as on the device


class CastOps:
    """Mixin of ``KernelOps``."""

    def cast(self, input, target_type, mode="round"):
        npdt = target_type.np_dtype
        if type(input) is Tile and input.valid is None and astype_exact(input.dtype, npdt, mode):
            return input.astype(npdt, order="C")   # a Tile (astype keeps the subclass)
        x = getattr(input, "local", input)
        if not isinstance(x, np.ndarray):
            out = convert(np.asarray(x, dtype=np.float64 if isinstance(x, float) else np.int64),
                          npdt, mode)
            return float(out) if target_type.is_float else int(out)
        out = convert(x, npdt, mode)
        return make_tile(out, getattr(input, "valid", None)) if isinstance(input, Tile) else out


__all__ = ["CastOps", "MODES", "convert", "mode_code"]
