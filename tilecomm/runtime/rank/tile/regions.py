"""Region helpers of the local ops: every region is bounds-checked before
memory is touched (numpy would silently truncate an out-of-range slice, and
on a shared window that could hide a protocol bug or write another buffer's
bytes)."""
from __future__ import annotations

import numpy as np

from ....errors import RuntimeFault
from ...values import WindowView, valid_region


def arr(x):
    return x.local if isinstance(x, WindowView) else x


def fault(msg, code="TC502", hint=None):
    return RuntimeFault(msg, code=code, hint=hint)


def region_index(a: np.ndarray, offsets, extents, what: str) -> tuple:
    """The slices of ``a[offsets : offsets + extents]`` after checking they lie
    inside ``a``.  A shorter ``extents`` applies to the innermost dims (leading
    extents 1)."""
    nd = a.ndim
    if len(offsets) == nd and len(extents) == nd:
        # the common case first: in-bounds Python ints, no leading extents
        idx = []
        for o, e, d in zip(offsets, extents, a.shape):
            if type(o) is not int or type(e) is not int or o < 0 or e < 0 or o + e > d:
                break
            idx.append(slice(o, o + e))
        else:
            return tuple(idx)
    if len(offsets) != nd:
        raise fault(f"{what}: {len(offsets)} offsets for a rank-{nd} tensor", code="TC503")
    ext = (1,) * (nd - len(extents)) + tuple(extents)
    idx = []
    for i, (o, e, d) in enumerate(zip(offsets, ext, a.shape)):
        o, e = int(o), int(e)
        if o < 0 or e < 0 or o + e > d:
            raise fault(f"{what} is out of bounds in dimension {i}: offset {o} + extent {e} > "
                        f"size {d}", hint="check the offsets computed at run time")
        idx.append(slice(o, o + e))
    return tuple(idx)


def region(a: np.ndarray, offsets, extents, what: str) -> np.ndarray:
    """``a[offsets : offsets + extents]``, bounds-checked (see ``region_index``)."""
    return a[region_index(a, offsets, extents, what)]


def index_shape(idx: tuple) -> tuple:
    return tuple(s.stop - s.start for s in idx)


def element_index(a: np.ndarray, offset, what: str) -> tuple:
    if type(offset) is tuple and len(offset) == a.ndim:
        # the common case first: in-bounds Python ints (kernels read and write
        # single elements in their inner loops)
        for o, d in zip(offset, a.shape):
            if type(o) is not int or not 0 <= o < d:
                break
        else:
            return offset
    if isinstance(offset, (int, np.integer)):
        n = int(offset)
        if not 0 <= n < a.size:
            raise fault(f"{what}: flat index {n} is out of bounds for {a.size} elements")
        return np.unravel_index(n, a.shape)
    if len(offset) != a.ndim:
        raise fault(f"{what}: {len(offset)} indices for a rank-{a.ndim} tensor", code="TC503")
    for i, (o, d) in enumerate(zip(offset, a.shape)):
        if not 0 <= int(o) < d:
            raise fault(f"{what}: index {int(o)} is out of bounds for dimension {i} of size {d}")
    return tuple(int(o) for o in offset)


def py_scalar(v):
    # integers first: they are most scalar reads (signal cells, counts, indices),
    # and the checks below cost ~3 us on an integer (dtype.name is a slow property)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, (np.floating, float)) or (hasattr(v, "dtype") and v.dtype.kind == "V"):
        return float(v)
    if isinstance(v, np.generic) and v.dtype.name == "bfloat16":
        return float(v)
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, np.bool_):
        return bool(v)
    return v


def tile_valid(t) -> np.ndarray:
    v = valid_region(t)
    if tuple(v) == t.shape:
        return np.asarray(t)
    return np.asarray(t)[tuple(slice(0, int(n)) for n in v)]
