"""``pl`` primitives used by distributed programs: tiles, tensors, scalars."""
from __future__ import annotations

from ..dtypes import BF16, DataType, FP16, FP32, INDEX, INT32
from ..ir.enums import AtomicType, MemorySpace
from ..ir.types import (ArrayType, Dim, NONE, ScalarType, TensorType, TileType, is_static)
from .check import const_value, describe
from ..ir.kinds import HOST, INCORE, ORCH
from ..runtime.controller.orchestrator import HostRuntime
from ..runtime.rank.tile.cast_ops import MODES as CAST_MODES
from ..runtime.rank.context import RankContext
from ..ir.effects import reads, writes
from ..runtime.rank import touched as T
from .registry import op

KERNEL = (INCORE,)
ANYWHERE = (HOST, ORCH, INCORE)


def _static_list(c, name, rank, what):
    vals = c.index_list(name, rank, what=what, target_what="tensor")
    for v in vals:
        if isinstance(v, Dim):
            continue                      # symbolic until the call binds pl.dynamic dims
        if not is_static(v):
            c.value_error(f"{c.op} {name} must be compile-time integers; got a runtime value",
                          code="TC216", at=name, hint="tile shapes are fixed when the program is "
                          "compiled; bound dynamic dims with pl.dynamic and real arguments")
        elif v <= 0:
            c.value_error(f"{c.op} {name} entries must be positive; got {v}", code="TC210", at=name)
    return tuple(vals)


def memory_arg(c, name, allowed, what):
    """A static ``MemorySpace`` argument among ``allowed`` (None: Vec)."""
    if not c.given(name):
        return MemorySpace.Vec
    v = c.enum(name, MemorySpace)
    if v not in allowed:
        c.value_error(f"{c.op} {name} must be {' or '.join('MemorySpace.' + m.name for m in allowed)}"
                      f" ({what}); got MemorySpace.{v.name}", code="TC251", at=name)
    return v


def vector_tile(c, name, t, allowed=(MemorySpace.Vec,)):
    """Ops of the vector unit read tiles in ``Vec`` (a store also drains the
    matmul accumulator, ``Acc``): a tile elsewhere is the chip's error too."""
    if isinstance(t, TileType) and t.memory not in allowed:
        c.value_error(f"{c.op} needs its tile {name} in "
                      f"{' or '.join('MemorySpace.' + m.name for m in allowed)}; got a tile in "
                      f"MemorySpace.{t.memory.name}", code="TC251", at=name,
                      hint="move it first: t = pl.move(t, target_memory=pl.MemorySpace.Vec)")


def _dtype_arg(c, name):
    v = c.const(name)
    if not isinstance(v, DataType):
        c.type_error(f"{c.op} {name} must be a dtype such as pl.FP32; got {describe(c.type(name))}",
                     at=name)
    return v


# ------------------------------------------------------------------ load/store
@op("pl.load", where=KERNEL, kernel=RankContext.load, effects=("read",),
    static=("target_memory", "clamp"), aliases=("pl.tile.load",),
    touches=(reads("tensor", T.loaded, ("tensor", "offsets", "shapes", "valid_shape")),),
    raises=("TC102", "TC201", "TC202", "TC210", "TC214", "TC216", "TC251", "TC502", "TC503"))
def load(tensor, offsets, shapes, valid_shape=None, target_memory=None, clamp=False):
    """Read ``tensor[offsets : offsets + shapes]`` into a new tile of physical shape
    ``shapes``; with ``valid_shape`` only that leading extent is read (the rest is 0),
    with ``clamp=True`` the window may run past the source and its valid extent
    stops at the source's edge.  ``target_memory`` is ``Vec`` (default) or ``Mat``.
    On a DistributedTensor it reads this rank's own copy."""


@load.rule
def _load(c):
    t = c.tensor("tensor", "source")
    offs = c.index_list("offsets", t.rank, target_what="source tensor")
    shp = _static_list(c, "shapes", t.rank, "shapes")
    valid = c.index_list("valid_shape", t.rank, what="valid_shape",
                         target_what="source tensor") if c.given("valid_shape") else None
    extents = [v if v is not None else s for v, s in zip(valid, shp)] if valid else list(shp)
    if c.const("clamp", False) is True:
        # clamp=True lets the window run past the source: the valid extent is cut
        # at the source's edge when the load runs, only the offsets must be inside
        extents = [0] * len(extents)
    c.region_in_bounds(offs, extents, t.shape, what="load region", at="shapes")
    mem = memory_arg(c, "target_memory", (MemorySpace.Vec, MemorySpace.Mat),
                     "a load fills the vector buffer or the matrix buffer L1")
    return TileType(shp, t.dtype, tuple(valid) if valid else None, mem)


@op("pl.store", where=KERNEL, kernel=RankContext.store, effects=("write",),
    aliases=("pl.tile.store",), writes=("output_tensor",),
    touches=(reads("tile"),
             writes("output_tensor", T.stored, ("tile", "offsets", "output_tensor", "shapes"),
                    atomic="atomic")),
    raises=("TC102", "TC201", "TC202", "TC203", "TC204", "TC214", "TC215", "TC251", "TC502",
            "TC503"))
def store(tile, offsets, output_tensor, shapes=None, *, atomic=AtomicType.None_):
    """Write the tile's valid region into ``output_tensor`` at ``offsets`` and return
    the updated tensor (``out = pl.store(t, [0, 0], out)``).  A 2-D tile lands on
    the inner two dims of a higher-rank tensor.  An FP32 accumulator tile
    (``Acc``) may be stored into an FP16 / BF16 tensor: it is rounded to
    nearest-even on the way, as the chip's fixpipe does.  ``atomic=AtomicType.Add``
    accumulates instead of overwriting."""


@store.rule
def _store(c):
    tl = c.tile("tile", "source tile")
    vector_tile(c, "tile", tl, (MemorySpace.Vec, MemorySpace.Acc))
    out = c.tensor("output_tensor", "destination")
    offs = c.index_list("offsets", out.rank, target_what="destination tensor")
    if tl.rank > out.rank:
        c.value_error(f"pl.store: a rank-{tl.rank} tile cannot be stored into a rank-{out.rank} "
                      f"tensor", code="TC201", at="tile")
    # the fixpipe that drains the accumulator can round FP32 to FP16 / BF16 on
    # its way to memory; any other dtype change needs an explicit pl.cast
    narrows = tl.memory is MemorySpace.Acc and tl.dtype is FP32 and out.dtype in (FP16, BF16)
    if tl.dtype is not out.dtype and not narrows:
        c.type_error(f"pl.store: tile dtype {tl.dtype.name} differs from destination dtype "
                     f"{out.dtype.name}", code="TC204", hint="convert with pl.cast first")
    ext = c.index_list("shapes", tl.rank, what="shapes", target_what="tile") if c.given("shapes") \
        else list(tl.valid_shape or tl.shape)
    ext = [1] * (out.rank - len(ext)) + list(ext)
    c.region_in_bounds(offs, ext, out.shape, what="store region", at="offsets")
    c.atomic_dtype(c.enum("atomic", AtomicType), out.dtype)
    return out


@op("pl.read", where=(ORCH, INCORE), kernel=RankContext.read, effects=("read",),
    aliases=("pl.tile.read", "pl.tensor.read"),
    touches=(reads("src", T.read_element, ("src", "offset")),),
    raises=("TC102", "TC201", "TC202", "TC502", "TC503"))
def read(src, offset):
    """Read one element of a tensor (a window's local copy) or tile as a scalar."""


@read.rule
def _read(c):
    t = c.shaped("src", "source")
    if c.type("offset") is not None and isinstance(c.type("offset"), ScalarType):
        return ScalarType(t.dtype)
    offs = c.index_list("offset", t.rank, what="offset", target_what="source")
    c.region_in_bounds(offs, [1] * len(offs), t.shape, what="element index", at="offset")
    return ScalarType(t.dtype)


@op("pl.write", where=(ORCH, INCORE), kernel=RankContext.write, effects=("write",),
    aliases=("pl.tile.write", "pl.tensor.write"), writes=("dst",),
    touches=(writes("dst", T.written_element, ("dst", "offset")),),
    raises=("TC102", "TC201", "TC202", "TC502", "TC503"))
def write(dst, offset, value):
    """Write one scalar element of a tensor (a window's local copy) or tile."""


@write.rule
def _write(c):
    t = c.shaped("dst", "destination")
    if not isinstance(c.type("offset"), ScalarType):
        offs = c.index_list("offset", t.rank, what="offset", target_what="destination")
        c.region_in_bounds(offs, [1] * len(offs), t.shape, what="element index", at="offset")
    c.scalar("value")
    return NONE


# ------------------------------------------------------------------ elementwise
def _elementwise(c):
    lt, rt = c.type("lhs"), c.type("rhs")
    lsc, rsc = isinstance(lt, ScalarType), isinstance(rt, ScalarType)
    for side, t in (("lhs", lt), ("rhs", rt)):
        if not isinstance(t, (ScalarType, TileType, TensorType)):
            c.type_error(f"{c.op} expects tiles, tensors or scalars; {side} is {describe(t)}",
                         at=side)
        vector_tile(c, side, t)
    if lsc and rsc:
        dt = lt.dtype if (lt.dtype and lt.dtype.is_float) or not (rt.dtype and rt.dtype.is_float) \
            else rt.dtype
        return ScalarType(dt)
    if lsc or rsc:
        shaped = rt if lsc else lt
        return _fresh(shaped, shaped.shape, shaped.dtype)
    if type(lt) is not type(rt) and not (isinstance(lt, TensorType) and isinstance(rt, TensorType)):
        c.type_error(f"{c.op} cannot combine a {lt.kind} with a {rt.kind}", at="rhs",
                     hint="load tensors into tiles with pl.load first")
    if lt.dtype is not rt.dtype:
        c.type_error(f"{c.op} operands have different dtypes ({lt.dtype.name} vs {rt.dtype.name})",
                     code="TC204", at="rhs", hint="there is no implicit promotion; use pl.cast")
    if len(lt.shape) != len(rt.shape) or any(
            is_static(a) and is_static(b) and a != b for a, b in zip(lt.shape, rt.shape)):
        c.value_error(f"{c.op} operand shapes differ: {describe(lt)} vs {describe(rt)}",
                      code="TC208", at="rhs")
    out = _fresh(lt, lt.shape, lt.dtype)
    if isinstance(lt, TileType) and (lt.valid_shape or rt.valid_shape):
        out = TileType(lt.shape, lt.dtype, lt.valid_shape or rt.valid_shape, lt.memory)
    return out


def _fresh(t, shape, dtype):
    if isinstance(t, TileType):
        return TileType(tuple(shape), dtype, t.valid_shape, t.memory)
    return TensorType(tuple(shape), dtype)


# the elementwise rule's codes, and the runtime's for operands that do not broadcast
ELEMENTWISE_RAISES = ("TC102", "TC204", "TC208", "TC251", "TC503")


def _declare_binary(name, impl, doc, raises=ELEMENTWISE_RAISES):
    def stub(lhs, rhs):
        pass
    short = name.rsplit(".", 1)[1]
    stub.__name__ = short
    stub.__doc__ = doc
    s = op(name, where=KERNEL, kernel=impl,
           aliases=(f"pl.tile.{short}", f"pl.tensor.{short}"), raises=raises,
           touches=(reads("lhs"), reads("rhs")))(stub)
    s.rule(_elementwise)
    return s


add = _declare_binary("pl.add", RankContext.add, "Elementwise ``lhs + rhs`` on tiles/tensors; a scalar "
                      "operand is broadcast.")
sub = _declare_binary("pl.sub", RankContext.sub, "Elementwise ``lhs - rhs``; a scalar operand is broadcast.")
mul = _declare_binary("pl.mul", RankContext.mul, "Elementwise ``lhs * rhs``; a scalar operand is broadcast.")
div = _declare_binary("pl.div", RankContext.div, "Elementwise ``lhs / rhs``; a scalar operand is broadcast.",
                      raises=ELEMENTWISE_RAISES + ("TC520",))      # integer division by zero
maximum = _declare_binary("pl.maximum", RankContext.maximum, "Elementwise maximum of two operands.")
minimum = _declare_binary("pl.minimum", RankContext.minimum, "Elementwise minimum of two operands.")


@op("pl.cast", where=KERNEL, kernel=RankContext.cast, static=("target_type", "mode"),
    aliases=("pl.tile.cast", "pl.tensor.cast"), touches=(reads("input"),),
    raises=("TC102", "TC214", "TC216", "TC251"))
def cast(input, target_type, mode="round"):
    """Convert a tile, tensor or scalar to ``target_type``.  ``mode`` is the
    device's rounding of a lossy conversion: "round" (nearest, ties away from
    zero; the default), "rint" / "none" (nearest, ties to even), "floor",
    "ceil", "trunc", "odd" (round to odd), or their codes 0-6.  Float to
    integer saturates; integer to integer wraps."""


@cast.rule
def _cast(c):
    t = c.type("input")
    dt = _dtype_arg(c, "target_type")
    vector_tile(c, "input", t)
    mode = c.const("mode")
    if not (isinstance(mode, str) and mode in CAST_MODES or type(mode) is int and
            0 <= mode < len(CAST_MODES)):
        c.value_error(f"pl.cast mode must be one of {', '.join(map(repr, CAST_MODES))} or a code "
                      f"0-{len(CAST_MODES) - 1}; got {mode!r}", code="TC214", at="mode")
    if isinstance(t, ScalarType):
        return ScalarType(dt)
    if isinstance(t, (TileType, TensorType)):
        return _fresh(t, t.shape, dt)
    c.type_error(f"pl.cast expects a tile, tensor or scalar; got {describe(t)}", at="input")


# ------------------------------------------------------------------ tile makers
@op("pl.tile.full", where=KERNEL, kernel=RankContext.full, static=("shape", "dtype"),
    raises=("TC102", "TC201", "TC210", "TC216"))
def full(shape, dtype, value):
    """A new tile of ``shape`` filled with ``value``."""


@full.rule
def _full(c):
    shp = _static_list(c, "shape", None, "shape")
    dt = _dtype_arg(c, "dtype")
    c.scalar("value")
    return TileType(shp, dt)


@op("pl.tile.create", where=KERNEL, kernel=RankContext.create_tile,
    static=("shape", "dtype", "target_memory"),
    raises=("TC102", "TC201", "TC210", "TC214", "TC216", "TC251"))
def create(shape, dtype, target_memory=None, transpose=None, *, flat_layout=None):
    """A new scratch tile of ``shape`` in ``target_memory`` (``Vec`` by default),
    zero-filled on the CPU.  ``transpose`` / ``flat_layout`` choose the
    physical layout of the uninitialised buffer, which no value shows."""


@create.rule
def _create(c):
    shp, dt = _static_list(c, "shape", None, "shape"), _dtype_arg(c, "dtype")
    mem = memory_arg(c, "target_memory", (MemorySpace.Vec, MemorySpace.Mat, MemorySpace.Left,
                                          MemorySpace.Right, MemorySpace.Acc),
                     "a tile lives in an on-chip buffer")
    return TileType(shp, dt, None, mem)


# ------------------------------------------------------------------ scalars
@op("pl.const", where=ANYWHERE, kernel=RankContext.const, host=HostRuntime.const,
    static=("dtype",),
    raises=("TC102", "TC216"))
def const(value, dtype):
    """A typed scalar constant: ``pl.const(0, pl.INT32)``."""


@const.rule
def _const(c):
    v = c.const("value")
    dt = _dtype_arg(c, "dtype")
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        c.type_error(f"pl.const value must be a number literal; got {describe(c.type('value'))}",
                     at="value")
    return ScalarType(dt)


def _scalar_pair(c):
    a, b = c.scalar("lhs"), c.scalar("rhs")
    ta, tb = a.type.dtype, b.type.dtype
    return ScalarType(ta if ta is not None else tb)


@op("pl.min", where=ANYWHERE, kernel=RankContext.smin, host=HostRuntime.smin,
    raises=("TC102",))
def min(lhs, rhs):
    """The smaller of two scalars."""


@op("pl.max", where=ANYWHERE, kernel=RankContext.smax, host=HostRuntime.smax,
    raises=("TC102",))
def max(lhs, rhs):
    """The larger of two scalars."""


min.rule(_scalar_pair)
max.rule(_scalar_pair)


@op("pl.create_tensor", where=ANYWHERE, kernel=RankContext.create_tensor,
    host=HostRuntime.create_tensor, effects=("alloc",), static=("shape", "dtype"),
    aliases=("pl.tensor.create",),
    raises=("TC102", "TC201", "TC210", "TC216"))
def create_tensor(shape, dtype, layout=None, manual_dep=False, init_value=None):
    """A new zero-initialised intermediate tensor (on the host: in shared memory
    so every rank's dispatch can use it)."""


@create_tensor.rule
def _create_tensor(c):
    shp = _static_list(c, "shape", None, "shape")
    dt = _dtype_arg(c, "dtype")
    if c.given("init_value"):
        c.scalar("init_value")
    return TensorType(shp, dt)


# ------------------------------------------------------------------ tasks
@op("pl.get_block_idx", where=KERNEL, kernel=RankContext.get_block_idx,
    aliases=("pl.tile.get_block_idx",))
def get_block_idx():
    """The block index of the running ``pl.spmd`` task (0 outside one)."""


@get_block_idx.rule
def _get_block_idx(c):
    return ScalarType(INDEX)


@op("pl.tile.get_subblock_idx", where=KERNEL, kernel=RankContext.get_subblock_idx)
def get_subblock_idx():
    """The AIV lane running a ``pl.split_aiv`` body (the region's loop variable;
    0 outside one)."""


@get_subblock_idx.rule
def _get_subblock_idx(c):
    return ScalarType(INDEX)


@op("pl.array.create", where=(ORCH, INCORE), kernel=RankContext.create_array,
    static=("extent", "dtype"),
    raises=("TC102", "TC105", "TC210", "TC216", "TC250"))
def array_create(extent, dtype):
    """A small on-core array of ``extent`` scalars, zero-filled: ``v = arr[i]``
    reads an element, ``arr[i] = v`` rebinds ``arr`` to an updated array (a
    value, usable as a loop-carried value).  ``pl.TASK_ID`` arrays collect
    TaskIds for ``deps=[tids]``; entries not yet assigned name no task."""


@array_create.rule
def _array_create(c):
    n = c.const("extent")
    if not isinstance(n, int) or isinstance(n, bool):
        c.type_error(f"pl.array.create extent must be a static int; got "
                     f"{describe(c.type('extent'))}", code="TC105", at="extent")
    if n <= 0:
        c.value_error(f"pl.array.create extent must be positive; got {n}", code="TC210",
                      at="extent")
    dt = _dtype_arg(c, "dtype")
    if not (dt.is_int or dt.is_float) or dt.bits > 64:
        c.type_error(f"pl.array.create dtype must be an integer, float or pl.TASK_ID scalar "
                     f"type; got {dt.name}", code="TC250", at="dtype")
    return ArrayType(n, dt)


__all__ = ["load", "store", "read", "write", "add", "sub", "mul", "div", "maximum", "minimum",
           "cast", "full", "create", "const", "min", "max", "create_tensor", "FP32",
           "INT32", "const_value", "get_block_idx", "array_create", "get_subblock_idx"]
