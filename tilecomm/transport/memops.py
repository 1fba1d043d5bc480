"""Writes into window memory that every transport performs the same way once
it holds the destination bytes: plain copies and element-wise atomic adds."""
from __future__ import annotations

import numpy as np

from .. import _native_core as native
from .. import dtypes as D
from ..errors import RuntimeFault


def address(a: np.ndarray) -> int:
    """Address of an array's first element: through the buffer protocol in
    the native core (``__array_interface__`` builds a dict per call, twenty
    times the cost, and the recorder asks this of most operands); an array
    that exports no buffer (object dtype) is asked the slow way."""
    try:
        return native.address(a)
    except (TypeError, ValueError, BufferError):
        return a.__array_interface__["data"][0]


def check_atomic(dtype):
    """The dtype's code for the native atomic-add loop; RuntimeFault if none."""
    dt = D.from_numpy(dtype)
    if dt is None or dt.atomic_code is None:
        raise RuntimeFault(f"atomic add is not supported for dtype {dtype}", code="TC503")
    return dt.atomic_code


def atomic_add(dst: np.ndarray, src: np.ndarray) -> None:
    """``dst += src`` with per-element atomicity across processes."""
    code = check_atomic(dst.dtype)
    src = np.ascontiguousarray(np.broadcast_to(src.reshape(dst.shape) if src.size == dst.size
                                               else src, dst.shape), dtype=dst.dtype)
    if dst.ndim == 0:
        dst, src = dst.reshape(1), src.reshape(1)
    lead = dst.shape[:-2] if dst.ndim > 2 else ()
    for li in np.ndindex(*lead):
        d2 = dst[li] if lead else dst
        s2 = src[li] if lead else src
        if d2.ndim == 1:
            d2, s2 = d2.reshape(1, -1), s2.reshape(1, -1)
        rows, cols = d2.shape
        if d2.strides[1] == d2.itemsize or cols == 1:
            native.atomic_add_2d(address(d2), d2.strides[0], address(s2), s2.strides[0],
                                 rows, cols, code)
        else:                                     # strided inner dim: one element per row
            for r in range(rows):
                native.atomic_add_2d(address(d2[r]), d2.strides[1], address(s2[r]),
                                     s2.itemsize, cols, 1, code)


def write_region(dst: np.ndarray, src: np.ndarray, atomic) -> None:
    if src.shape != dst.shape:
        src = src.reshape(dst.shape)
    if atomic:
        atomic_add(dst, src)
    elif src.dtype == dst.dtype:
        np.copyto(dst, src)
    else:
        np.copyto(dst, src, casting="same_kind")
