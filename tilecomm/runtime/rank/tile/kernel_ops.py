"""Local (non-communicating) op implementations on numpy.

Every region is bounds-checked before memory is touched: numpy would silently
truncate an out-of-range slice, and on a shared window that could hide a
protocol bug or write another buffer's bytes.
"""
from __future__ import annotations

import numpy as np

from ....transport.memops import atomic_add, write_region  # noqa: F401  (re-exported)
from .cast_ops import CastOps
from .matmul_ops import MatmulOps
from .regions import (arr, element_index, fault, index_shape, py_scalar,  # noqa: F401
                      region, region_index, tile_valid)
from .scalar_ops import ScalarOps, trunc_divide
from .shape_ops import ShapeOps
from .site_ops import SiteOps
from ...values import Tile, WindowView, make_tile, valid_region


class ValueOps:
    """What code of every function kind calls on its runtime for plain
    values: constants, scalar min / max, bounds-checked indexing.  The base
    of ``KernelOps`` and of the HOST orchestrator's runtime, which needs
    nothing else of the tile ops."""

    def const(self, value, dtype):
        return float(value) if dtype.is_float else int(value)

    def smin(self, lhs, rhs):
        return min(lhs, rhs)

    def smax(self, lhs, rhs):
        return max(lhs, rhs)

    def index(self, base, items):
        a = arr(base)
        if len(items) == 1 and a.ndim == 1 and type(items[0]) is int and \
                0 <= items[0] < a.shape[0]:
            return py_scalar(a[items[0]])      # an element of a pl.Array or a vector
        idx = []
        for i, (it, d) in enumerate(zip(items, a.shape)):
            if isinstance(it, slice):
                lo = 0 if it.start is None else int(it.start)
                hi = d if it.stop is None else int(it.stop)
                if not 0 <= lo <= hi <= d:
                    raise fault(f"slice {lo}:{hi} is out of bounds for dimension {i} of size {d}")
                idx.append(slice(lo, hi))
            else:
                n = int(it)
                if not 0 <= n < d:
                    raise fault(f"index {n} is out of bounds for dimension {i} of size {d}")
                idx.append(n)
        out = a[tuple(idx)]
        if isinstance(out, np.ndarray) and out.ndim == 0 or not isinstance(out, np.ndarray):
            return py_scalar(out)
        return out


class KernelOps(ValueOps, ScalarOps, MatmulOps, CastOps, ShapeOps, SiteOps):
    """Mixin: the numpy implementations of the local ``pl`` ops."""

    # -------------------------------------------------------------- load/store
    def load(self, tensor, offsets, shapes, valid_shape=None, target_memory=None, clamp=False):
        a = arr(tensor)
        if valid_shape is None and clamp:
            valid_shape = shapes                  # cut at the source's edge below
        if valid_shape is None:
            return make_tile(region(a, offsets, shapes, "pl.load region").copy())
        valid = [min(int(v), int(s)) for v, s in zip(valid_shape, shapes)]
        for i, (o, d) in enumerate(zip(offsets, a.shape)):
            if not 0 <= int(o) <= d:
                raise fault(f"pl.load offset {int(o)} is out of bounds for dimension {i} of "
                            f"size {d}")
        valid = [max(0, min(v, d - int(o))) for v, o, d in zip(valid, offsets, a.shape)]
        t = np.zeros(tuple(shapes), dtype=a.dtype)
        t[tuple(slice(0, v) for v in valid)] = region(a, offsets, valid, "pl.load region")
        return make_tile(t, valid)

    def store(self, tile, offsets, output_tensor, shapes=None, atomic=0):
        a = arr(output_tensor)
        src = tile_valid(tile) if shapes is None else \
            np.asarray(tile)[tuple(slice(0, int(s)) for s in shapes)]
        ext = src.shape if src.ndim <= a.ndim else src.shape[-a.ndim:]
        dst = region(a, offsets, ext, "pl.store region")
        write_region(dst, src, atomic)
        return output_tensor

    def read(self, src, offset):
        a = arr(src)
        return py_scalar(a[element_index(a, offset, "pl.read")])

    def write(self, dst, offset, value):
        a = arr(dst)
        a[element_index(a, offset, "pl.write")] = value

    # -------------------------------------------------------------- elementwise
    @staticmethod
    def _bin(fn, lhs, rhs):
        lhs, rhs = arr(lhs), arr(rhs)
        lt, rt = isinstance(lhs, np.ndarray), isinstance(rhs, np.ndarray)
        if not lt and not rt:
            return fn(lhs, rhs)
        if lt and rt and lhs.shape != rhs.shape:
            raise fault(f"elementwise operands have shapes {lhs.shape} and {rhs.shape}",
                        code="TC503")
        out = fn(lhs, rhs)
        if lt and rt and isinstance(lhs, Tile) and isinstance(rhs, Tile) and \
                (lhs.valid or rhs.valid):
            vl, vr = valid_region(lhs), valid_region(rhs)
            out = make_tile(out, tuple(min(a, b) for a, b in zip(vl, vr)))
        return out

    def add(self, lhs, rhs):
        return self._bin(np.add if _has_array(lhs, rhs) else _py_add, lhs, rhs)

    def sub(self, lhs, rhs):
        return self._bin(np.subtract if _has_array(lhs, rhs) else _py_sub, lhs, rhs)

    def mul(self, lhs, rhs):
        return self._bin(np.multiply if _has_array(lhs, rhs) else _py_mul, lhs, rhs)

    def div(self, lhs, rhs):
        def _div(a, b):
            if isinstance(a, np.ndarray) and a.dtype.kind in "iu" or \
                    isinstance(b, np.ndarray) and b.dtype.kind in "iu":
                return trunc_divide(a, b)         # the vector unit truncates, like C
            if not _has_array(a, b) and isinstance(a, int) and isinstance(b, int):
                return self.divsi(a, b)
            return np.true_divide(a, b) if _has_array(a, b) else a / b
        return self._bin(_div, lhs, rhs)

    def maximum(self, lhs, rhs):
        return self._bin(np.maximum if _has_array(lhs, rhs) else max, lhs, rhs)

    def minimum(self, lhs, rhs):
        return self._bin(np.minimum if _has_array(lhs, rhs) else min, lhs, rhs)

    # -------------------------------------------------------------- makers
    def full(self, shape, dtype, value):
        return make_tile(np.full(tuple(shape), value, dtype=dtype.np_dtype))

    def create_tile(self, shape, dtype, target_memory=None, transpose=None, flat_layout=None):
        return make_tile(np.zeros(tuple(shape), dtype=dtype.np_dtype))

    def create_tensor(self, shape, dtype, layout=None, manual_dep=False, init_value=None):
        a = np.zeros(tuple(shape), dtype=dtype.np_dtype)
        if init_value is not None:
            a[...] = init_value
        return a

    # -------------------------------------------------------------- views
    def assign(self, base, items, value):
        a = arr(base)
        view = self.index(a, items) if len(items) < a.ndim or any(
            isinstance(i, slice) for i in items) else None
        if view is None:
            self.index(a, items)                  # bounds check
            a[tuple(int(i) for i in items)] = value
            return
        if isinstance(value, np.ndarray):
            src = tile_valid(value) if isinstance(value, Tile) else value
            np.copyto(view, src.reshape(view.shape))
        else:
            view[...] = value

    def as_shape(self, x, shape):
        """View ``x`` with a parameter's (same-numel) declared shape."""
        if isinstance(x, WindowView):
            return WindowView(x.buffer, shape, x.dtype, x.local.reshape(shape), x.rank)
        out = x.reshape(shape)
        if not np.shares_memory(out, x):
            raise fault(f"cannot view a non-contiguous tensor of shape {x.shape} as {shape}",
                        code="TC503")
        return out


def _has_array(a, b):
    return isinstance(arr(a), np.ndarray) or isinstance(arr(b), np.ndarray)


def _py_add(a, b):
    return a + b


def _py_sub(a, b):
    return a - b


def _py_mul(a, b):
    return a * b
