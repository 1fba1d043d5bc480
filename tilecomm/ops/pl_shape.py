"""``pl`` records of regions and shapes: ``pl.slice``, ``pl.assemble`` (the
target of ``dst[a:b, c:d] = src``), ``pl.tile.reshape`` and
``pl.tile.row_sum``."""
from __future__ import annotations

import math

from ..ir import nodes as N
from ..ir.enums import AtomicType, MemorySpace, PadValue
from ..ir.kinds import INCORE
from ..ir.types import EnumType, TensorType, TileType, is_static, numel
from ..runtime.rank.context import RankContext
from ..ir.effects import reads, writes
from ..runtime.rank import touched as T
from .check import const_value, describe
from .pl_ops import _static_list, vector_tile
from .registry import op

KERNEL = (INCORE,)


# ------------------------------------------------------------------ slice
@op("pl.slice", where=KERNEL, kernel=RankContext.slice_,
    static=("shape", "drop_dims", "pad_value", "clamp"),
    aliases=("pl.tile.slice", "pl.tensor.slice"), touches=(reads("input", T.sliced, ("input",)),),
    raises=("TC102", "TC105", "TC201", "TC202", "TC208", "TC210", "TC214", "TC216", "TC253",
            "TC502", "TC503"))
def slice(input, shape, offset, valid_shape=None, drop_dims=None, pad_value=None, clamp=False):
    """``input[offset : offset + shape]`` (shape first, then offset): a view of a
    tensor, a new tile of a tile.  On a tile, ``valid_shape`` bounds the
    result's valid extent (never beyond the source's), ``pad_value``
    (``pl.PadValue.zero / max / min / null`` or 0, ``math.inf``,
    ``-math.inf``) fills the rest; ``drop_dims`` removes unit dims from the
    result."""


def _pad_value(c):
    """The PadValue a ``pad_value`` argument denotes (literal sugars included);
    the call's argument is replaced by the member, so the implementation sees
    one spelling."""
    a = c.arg("pad_value")
    v = const_value(a)
    if isinstance(v, PadValue):
        return v
    sugar = {0: PadValue.zero, math.inf: PadValue.max, -math.inf: PadValue.min}
    if isinstance(v, (int, float)) and not isinstance(v, bool) and v in sugar:
        member = sugar[v]
        c.args["pad_value"] = N.Const(EnumType(PadValue), a.span, member)
        return member
    c.value_error(f"pl.slice pad_value must be a pl.PadValue member or 0, math.inf, -math.inf; "
                  f"got {v!r}", code="TC214", at="pad_value",
                  hint="the hardware pads with zero, the dtype's max or its min")


@slice.rule
def _slice(c):
    t = c.shaped("input", "source")
    shp = _static_list(c, "shape", t.rank, "shape")
    offs = c.index_list("offset", t.rank, what="offset", target_what="source")
    tensor = isinstance(t, TensorType)
    if c.const("clamp", False) is not False:
        c.value_error("pl.slice clamp=True lets the window run past the source and cuts its valid "
                      "region; a CPU tensor view cannot extend past its tensor and a tile has "
                      "nothing to clamp", code="TC253", at="clamp",
                      hint="slice inside the source, or load with valid_shape= to read a "
                           "ragged edge")
    c.region_in_bounds(offs, shp, t.shape, what="slice", at="offset")
    valid = None
    for name in ("valid_shape", "pad_value"):
        if tensor and c.given(name):
            c.value_error(f"pl.slice {name}= needs a tile: a tensor slice is a view of memory that "
                          f"is valid everywhere", code="TC253", at=name,
                          hint="load the region into a tile (pl.load(..., valid_shape=)) and "
                               "slice that")
    if c.given("valid_shape"):
        valid = c.index_list("valid_shape", t.rank, what="valid_shape", target_what="source")
        for i, (v, s) in enumerate(zip(valid, shp)):
            if is_static(v) and not 0 <= v <= s:
                c.value_error(f"pl.slice valid_shape[{i}] = {v} must be in [0, {s}] (the slice "
                              f"shape)", code="TC202", at="valid_shape")
    if c.given("pad_value"):
        _pad_value(c)
    out_shape, out_valid = list(shp), list(valid) if valid is not None else None
    if c.given("drop_dims"):
        drop = c.const("drop_dims")
        if not isinstance(drop, list) or not all(type(d) is int for d in drop):
            c.type_error(f"pl.slice drop_dims must be a list of static dims; got {drop!r}",
                         code="TC105", at="drop_dims")
        for d in drop:
            if not 0 <= d < len(shp) or drop.count(d) > 1:
                c.value_error(f"pl.slice drop_dims entry {d} is not a distinct dim of a rank-"
                              f"{len(shp)} slice", code="TC201", at="drop_dims")
            if shp[d] != 1 or valid is not None and is_static(valid[d]) and valid[d] != 1:
                c.value_error(f"pl.slice can only drop a unit dim that stays valid; dim {d} has "
                              f"extent {shp[d]}", code="TC208", at="drop_dims")
        out_shape = [s for i, s in enumerate(shp) if i not in drop]
        if out_valid is not None:
            out_valid = [s for i, s in enumerate(out_valid) if i not in drop]
    if tensor:
        return TensorType(tuple(out_shape), t.dtype)
    return TileType(tuple(out_shape), t.dtype,
                    tuple(out_valid) if out_valid is not None else None, t.memory)


# ------------------------------------------------------------------ assemble
@op("pl.assemble", where=KERNEL, kernel=RankContext.assemble, effects=("write",),
    writes=("target",), aliases=("pl.tile.assemble", "pl.tensor.assemble"),
    touches=(reads("source"),
             writes("target", T.assembled, ("target", "source", "offset"), atomic="atomic")),
    raises=("TC102", "TC201", "TC202", "TC203", "TC204", "TC214", "TC215", "TC251", "TC502",
            "TC503"))
def assemble(target, source, offset, *, atomic=AtomicType.None_):
    """Write ``source`` (a tile's valid region, or a tensor) into ``target`` at
    ``offset`` and return the updated target (``y = pl.assemble(y, row, [r,
    0])``); ``dst[a:b, c:d] = src`` is this call.  A source of lower rank lands
    on the inner dims.  ``atomic=AtomicType.Add`` accumulates instead."""


@assemble.rule
def _assemble(c):
    t = c.shaped("target", "target")
    s = c.shaped("source", "source")
    if isinstance(t, TileType):
        if not isinstance(s, TileType):
            c.type_error(f"pl.assemble into a tile needs a tile source; got {describe(s)}",
                         at="source", hint="load the tensor into a tile first")
        vector_tile(c, "target", t)
        vector_tile(c, "source", s)
    else:
        vector_tile(c, "source", s, (MemorySpace.Vec, MemorySpace.Acc))
    if s.dtype is not t.dtype:
        c.type_error(f"pl.assemble source dtype {s.dtype.name} differs from target dtype "
                     f"{t.dtype.name}", code="TC204", at="source", hint="convert with pl.cast first")
    if t.rank is not None and s.rank is not None and s.rank > t.rank:
        c.value_error(f"pl.assemble: a rank-{s.rank} source cannot be written into a rank-"
                      f"{t.rank} target", code="TC201", at="source")
    offs = c.index_list("offset", t.rank, what="offset", target_what="target")
    ext = list(s.valid_shape or s.shape) if isinstance(s, TileType) else list(s.shape)
    ext = [1] * (len(offs) - len(ext)) + ext
    c.region_in_bounds(offs, ext, t.shape, what="region", at="offset")
    c.atomic_dtype(c.enum("atomic", AtomicType), t.dtype)
    return t


# ------------------------------------------------------------------ reshape, row_sum
@op("pl.tile.reshape", where=KERNEL, kernel=RankContext.reshape, static=("shape",),
    touches=(reads("tile"),),
    raises=("TC102", "TC201", "TC208", "TC210", "TC216"))
def reshape(tile, shape):
    """The tile's elements in row-major order under another shape of the same
    element count (``[R, 1] -> [1, R]``)."""


@reshape.rule
def _reshape(c):
    t = c.tile("tile", "source tile")
    shp = _static_list(c, "shape", None, "shape")
    n1, n2 = numel(t.shape), numel(shp)
    if n1 is not None and n2 is not None and n1 != n2:
        c.value_error(f"pl.tile.reshape cannot view {describe(t)} ({n1} elements) as "
                      f"{list(shp)} ({n2} elements)", code="TC208", at="shape")
    if t.valid_shape is not None and tuple(t.valid_shape) != tuple(t.shape):
        c.value_error(f"pl.tile.reshape needs a fully valid tile; {describe(t)} is valid only in "
                      f"{list(t.valid_shape)}", code="TC208", at="tile",
                      hint="slice the valid region out first, or fill the tile")
    return TileType(tuple(shp), t.dtype, None, t.memory)


@op("pl.tile.row_sum", where=KERNEL, kernel=RankContext.row_sum, touches=(reads("tile"),),
    raises=("TC102", "TC204", "TC208", "TC251"))
def row_sum(tile, tmp_tile):
    """Row sums of a ``[R, C]`` tile's valid region as an ``[R, 1]`` tile (floats
    summed in FP32).  ``tmp_tile`` is the scratch tile the chip reduces in:
    same dtype and rank, every dim at least the input's."""


@row_sum.rule
def _row_sum(c):
    t = c.tile("tile", "input tile")
    tmp = c.tile("tmp_tile", "scratch tile", hint="create one with pl.tile.create(shape, dtype)")
    vector_tile(c, "tile", t)
    vector_tile(c, "tmp_tile", tmp)
    if t.rank != 2:
        c.value_error(f"pl.tile.row_sum needs a 2-D tile; got {describe(t)}", code="TC208",
                      at="tile")
    if tmp.dtype is not t.dtype:
        c.type_error(f"pl.tile.row_sum tmp_tile dtype {tmp.dtype.name} differs from the input's "
                     f"{t.dtype.name}", code="TC204", at="tmp_tile")
    if tmp.rank != t.rank or any(is_static(a) and is_static(b) and a < b
                                 for a, b in zip(tmp.shape, t.shape)):
        c.value_error(f"pl.tile.row_sum tmp_tile must have the input's rank and cover its shape "
                      f"{list(t.shape)}; got {describe(tmp)}", code="TC208", at="tmp_tile")
    valid = None if t.valid_shape is None else (t.valid_shape[0], 1)
    return TileType((t.shape[0], 1), t.dtype, valid, t.memory)


__all__ = ["assemble", "reshape", "row_sum", "slice"]
