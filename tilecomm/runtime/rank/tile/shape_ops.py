"""Numpy implementations of the region and shape ops: ``pl.slice``,
``pl.assemble``, ``pl.tile.reshape`` and ``pl.tile.row_sum``.

A tensor slice is a view (writes through it reach the tensor, as a GM
window does on the chip); a tile slice is a new tile.  Tiles keep the
invariant of ``values.Tile``: outside the valid extent the elements are the
pad value (zero unless ``pad_value`` says otherwise)."""
from __future__ import annotations

import numpy as np

from ....transport.memops import write_region
from .regions import region
from ...values import Tile, make_tile, valid_region

PAD_NULL, PAD_ZERO, PAD_MAX, PAD_MIN = 0, 1, 2, 3


def _pad_fill(dtype: np.dtype, pad: int):
    if pad == PAD_ZERO:
        return 0
    kind_float = dtype.kind == "f" or "float" in dtype.name
    if pad == PAD_MAX:
        return np.inf if kind_float else np.iinfo(dtype).max
    return -np.inf if kind_float else np.iinfo(dtype).min


def _drop(shape, drop_dims):
    drop = {int(d) for d in drop_dims}
    return tuple(s for i, s in enumerate(shape) if i not in drop)


class ShapeOps:
    """Mixin of ``KernelOps``."""

    def slice_(self, input, shape, offset, valid_shape=None, drop_dims=None, pad_value=None,
               clamp=False):
        a = getattr(input, "local", input)
        view = region(a, offset, shape, "pl.slice region")
        if not isinstance(input, Tile):
            return view.reshape(_drop(view.shape, drop_dims)) if drop_dims else view
        # the slice is valid where the source is and, if given, within valid_shape
        src_valid = valid_region(input)
        valid = [max(0, min(int(s), int(v) - int(o))) for s, v, o in zip(shape, src_valid, offset)]
        if valid_shape is not None:
            valid = [min(v, int(w)) for v, w in zip(valid, valid_shape)]
        out = view.copy()
        pad = PAD_ZERO if pad_value is None else int(pad_value)
        if pad != PAD_NULL and tuple(valid) != out.shape:
            mask = np.ones(out.shape, bool)
            mask[tuple(slice(0, v) for v in valid)] = False
            out[mask] = _pad_fill(out.dtype, pad)
        if drop_dims:
            out = out.reshape(_drop(out.shape, drop_dims))
            valid = _drop(valid, drop_dims)
        return make_tile(out, valid)

    def assemble(self, target, source, offset, atomic=0):
        a = getattr(target, "local", target)
        if isinstance(source, Tile):
            v = valid_region(source)
            src = np.asarray(source)[tuple(slice(0, int(n)) for n in v)]
        else:
            src = np.asarray(getattr(source, "local", source))
        dst = region(a, offset, src.shape, "pl.assemble region")
        write_region(dst, src, atomic)
        return target

    def reshape(self, tile, shape):
        out = np.array(tile).reshape(tuple(int(s) for s in shape))
        return make_tile(out) if isinstance(tile, Tile) else out

    def row_sum(self, tile, tmp_tile):
        x = np.asarray(tile)
        v = valid_region(tile)
        x = x[tuple(slice(0, int(n)) for n in v)]
        wide = np.float32 if x.dtype.kind == "f" or "float" in x.dtype.name else np.int64
        sums = x.astype(wide).sum(axis=-1, keepdims=True, dtype=wide).astype(x.dtype)
        out = np.zeros(tile.shape[:-1] + (1,), dtype=x.dtype)
        out[tuple(slice(0, int(n)) for n in v[:-1])] = sums
        return make_tile(out, tuple(v[:-1]) + (1,))


__all__ = ["ShapeOps"]
