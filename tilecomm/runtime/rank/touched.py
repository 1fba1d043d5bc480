"""The window memory a local kernel op touches, as an ndarray view of its
operand: what the recording layers (the race check, after the op; an
explored run, before it) need to know of ``pl.load`` / ``pl.store`` /
``pl.read`` / ``pl.write`` / element assignment.  Each raises as the op
itself would on a region out of bounds."""
from __future__ import annotations

import numpy as np

from .tile.kernel_ops import arr, tile_valid
from .tile.regions import element_index, region_index


def clip(offsets, extents, shape) -> list:
    """``extents`` cut at the array's edge (what a clamped / partial op moves)."""
    return [max(0, min(int(e), d - int(o))) for o, e, d in zip(offsets, extents, shape)]


def loaded(tensor, offsets, shapes, valid_shape=None):
    """What ``pl.load(tensor, offsets, shapes, valid_shape)`` reads."""
    a = arr(tensor)
    ext = shapes if valid_shape is None else [min(int(v), int(s))
                                              for v, s in zip(valid_shape, shapes)]
    return a[tuple(slice(int(o), int(o) + e) for o, e in zip(offsets, clip(offsets, ext,
                                                                           a.shape)))]


def stored(tile, offsets, output_tensor, shapes=None):
    """What ``pl.store(tile, offsets, output_tensor, shapes)`` writes."""
    a = arr(output_tensor)
    src = tile_valid(tile) if shapes is None else \
        np.asarray(tile)[tuple(slice(0, int(s)) for s in shapes)]
    ext = src.shape if src.ndim <= a.ndim else src.shape[-a.ndim:]
    return a[region_index(a, offsets, ext, "pl.store region")]


def element(tensor, offset, what: str):
    """The element ``pl.read`` / ``pl.write`` (``what``) touches, as a view."""
    a = arr(tensor)
    return a[tuple(slice(int(i), int(i) + 1) for i in element_index(a, offset, what))]


def assigned(base, items):
    """What ``base[items] = value`` writes (None: not an array)."""
    a = arr(base)
    if not isinstance(a, np.ndarray):
        return None
    return a[tuple(i if isinstance(i, slice) else slice(int(i), int(i) + 1) for i in items)]
