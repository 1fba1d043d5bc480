"""The memory an op touches, computed from its arguments: the ``region`` of
each ``ir.effects.Touch`` the op records declare (``ops/*.py``), which the
rank's recorder (``recorder.py``) evaluates to tell every sink what an op
reads and writes.  A local region is an ndarray view of the operand's
memory; a remote one an index into the peer's copy (laid out as this rank's
copy).  None: the call touches no memory through that operand.  Each raises
as the op itself would on a region out of bounds."""
from __future__ import annotations

import numpy as np

from ..values import Tile
from .tile.kernel_ops import arr, tile_valid
from .tile.regions import element_index, fault, region_index


def clip(offsets, extents, shape) -> list:
    """``extents`` cut at the array's edge (what a clamped / partial op moves)."""
    return [max(0, min(int(e), d - int(o))) for o, e, d in zip(offsets, extents, shape)]


def whole(x):
    """All of operand ``x``, if it is an array (a window: this rank's copy)."""
    a = arr(x)
    return a if isinstance(a, np.ndarray) else None


# ------------------------------------------------------------------ local
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


def read_element(src, offset):
    return element(src, offset, "pl.read")


def written_element(dst, offset):
    return element(dst, offset, "pl.write")


def assembled(target, source, offset):
    """What ``pl.assemble(target, source, offset)`` writes: the source's valid
    extent at ``offset`` of the target."""
    src = tile_valid(source) if isinstance(source, Tile) else np.asarray(arr(source))
    a = arr(target)
    return a[region_index(a, offset, src.shape, "pl.assemble region")]


def sliced(input):
    """What ``pl.slice`` reads: a tile is copied; a tensor's slice is a view
    (its reads are those of the ops that use it)."""
    return np.asarray(input) if isinstance(input, Tile) else None


def assigned(base, items):
    """What ``base[items] = value`` writes (None: not an array)."""
    a = arr(base)
    if not isinstance(a, np.ndarray):
        return None
    return a[tuple(i if isinstance(i, slice) else slice(int(i), int(i) + 1) for i in items)]


def indexed(base, items):
    """What ``base[items]`` read as a value reads: an element (a sub-array
    is a view, read by whatever uses it)."""
    a = arr(base)
    if not isinstance(a, np.ndarray) or len(items) != a.ndim or \
            any(isinstance(i, slice) for i in items):
        return None
    return a[tuple(slice(int(i), int(i) + 1) for i in items)]


# ------------------------------------------------------------------ remote
def remote_loaded(target, offsets, shape, valid_shape=None):
    """The index into the peer's copy that ``remote_load`` reads."""
    ext = shape if valid_shape is None else [min(int(v), int(s))
                                             for v, s in zip(valid_shape, shape)]
    return tuple(slice(int(o), int(o) + e) for o, e in
                 zip(offsets, clip(offsets, ext, target.local.shape)))


def store_source(src):
    """The data a remote store sends: a tile's valid extent, a tensor's all
    (its last two dims, as the op reshapes it)."""
    data = tile_valid(src) if isinstance(src, Tile) else np.asarray(arr(src))
    return data.reshape(data.shape[-2:]) if data.ndim > 2 else data


def remote_stored(src, target, offsets):
    """The index into the peer's copy that a remote store writes."""
    return region_index(target.local, offsets, store_source(src).shape, "remote_store region")


def transfer(op, window, local, dst_offsets, src_offsets, shape, pushing) -> tuple:
    """(index into the peer's copy of ``window``, the region of ``local``) of
    a put (``pushing``) or get: whole tensors or matching sub-regions, all
    bounds-checked."""
    remote = window.local                # same layout as every member's copy
    if shape is None:
        dshape, sshape = (remote.shape, local.shape) if pushing else (local.shape, remote.shape)
        if dshape != sshape:
            raise fault(f"{op}: src shape {sshape} differs from dst shape {dshape}",
                        code="TC503")
        return (), local
    r_off, l_off = (dst_offsets, src_offsets) if pushing else (src_offsets, dst_offsets)
    r_what, l_what = (f"{op} dst region", f"{op} src region") if pushing else \
        (f"{op} src region", f"{op} dst region")
    if pushing:
        ridx = region_index(remote, r_off, shape, r_what)
        lidx = region_index(local, l_off, shape, l_what)
    else:
        lidx = region_index(local, l_off, shape, l_what)
        ridx = region_index(remote, r_off, shape, r_what)
    return ridx, local[lidx]


def put_remote(dst, src, dst_offsets, src_offsets, shape):
    return transfer("pld.tensor.put", dst, arr(src), dst_offsets, src_offsets, shape, True)[0]


def put_local(dst, src, dst_offsets, src_offsets, shape):
    return transfer("pld.tensor.put", dst, arr(src), dst_offsets, src_offsets, shape, True)[1]


def get_remote(dst, src, dst_offsets, src_offsets, shape):
    return transfer("pld.tensor.get", src, arr(dst), dst_offsets, src_offsets, shape, False)[0]


def get_local(dst, src, dst_offsets, src_offsets, shape):
    return transfer("pld.tensor.get", src, arr(dst), dst_offsets, src_offsets, shape, False)[1]
