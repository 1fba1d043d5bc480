"""``pl`` records of the cube path: ``pl.move`` between on-chip buffers and
``pl.matmul``.

The chip multiplies a tile in ``Left`` (L0A) by one in ``Right`` (L0B) into
the accumulator ``Acc`` (L0C); operands reach those buffers through the
matrix buffer ``Mat`` (L1): ``pl.load(..., target_memory=Mat)`` then
``pl.move(t, Left)``.  The CPU keeps every tile in one numpy array, so these
spaces change no value -- but the tile type carries its space and the rules
below check it as the chip would, so a program that skips a move fails here
and not on the chip.  Tensor operands (tensor-level ``pl.matmul`` inside a
kernel or ``pl.at`` body) have no memory space: the compiler stages them.
"""
from __future__ import annotations

from ..dtypes import BF16, FP16, FP32, FP8E4M3FN, FP8E5M2, INT8, INT32
from ..ir.enums import MemorySpace, TileLayout
from ..ir.kinds import INCORE
from ..ir.types import TensorType, TileType, is_static
from ..runtime.rank.context import RankContext
from ..ir.effects import reads
from .check import describe
from .pl_ops import memory_arg
from .registry import op

KERNEL = (INCORE,)
# accumulator dtype per operand dtype: floats accumulate in FP32, INT8 in INT32
_ACC = {FP32: FP32, FP16: FP32, BF16: FP32, FP8E4M3FN: FP32, FP8E5M2: FP32, INT8: INT32}
# what the fixpipe can round the FP32 accumulator to on its way out
_OUT_FROM_FP32 = (FP32, FP16, BF16)


@op("pl.move", where=KERNEL, kernel=RankContext.move, static=("target_memory", "blayout", "slayout"),
    aliases=("pl.tile.move",), touches=(reads("tile"),),
    raises=("TC102", "TC214", "TC216", "TC251"))
def move(tile, target_memory, blayout=None, slayout=None):
    """The tile in another on-chip buffer (``Mat`` -> ``Left`` / ``Right`` feeds
    ``pl.matmul``; ``Acc`` -> ``Vec`` hands a product to the vector unit).  No
    value changes; ``blayout`` / ``slayout`` choose the destination's physical
    layout, which the CPU's row-major arrays do not need (values unchanged,
    as on the chip)."""


@move.rule
def _move(c):
    t = c.tile("tile", "source tile")
    dst = memory_arg(c, "target_memory", (MemorySpace.Vec, MemorySpace.Mat, MemorySpace.Left,
                                          MemorySpace.Right),
                     "a move fills an on-chip buffer; the accumulator is written by pl.matmul")
    for name in ("blayout", "slayout"):
        if c.given(name):
            c.enum(name, TileLayout)
    if t.memory in (MemorySpace.Left, MemorySpace.Right):
        c.value_error(f"pl.move cannot read a tile in MemorySpace.{t.memory.name}: the cube's "
                      f"operand buffers are read only by pl.matmul", code="TC251", at="tile",
                      hint="keep the tile you moved from (in Mat) to move it elsewhere")
    return TileType(t.shape, t.dtype, t.valid_shape, dst)


@op("pl.matmul", where=KERNEL, kernel=RankContext.matmul,
    static=("out_dtype", "a_trans", "b_trans", "c_matrix_nz"),
    aliases=("pl.tile.matmul", "pl.tensor.matmul"), touches=(reads("lhs"), reads("rhs")),
    raises=("TC102", "TC105", "TC204", "TC216", "TC251", "TC252", "TC253"))
def matmul(lhs, rhs, out_dtype=None, a_trans=False, b_trans=False, c_matrix_nz=False):
    """``lhs @ rhs`` of 2-D tiles (``lhs`` in ``Left``, ``rhs`` in ``Right``; the
    result is in ``Acc``) or tensors.  FP32/FP16/BF16/FP8 operands accumulate
    in FP32, INT8 in INT32; ``out_dtype`` rounds the FP32 accumulator to
    FP16/BF16 (round to nearest even).  ``a_trans`` / ``b_trans`` use the
    transpose of an operand ([K, M] / [N, K] as given)."""


def _flag(c, name):
    v = c.const(name, False)
    if not isinstance(v, bool):
        c.type_error(f"pl.matmul {name} must be True or False; got {v!r}", code="TC105", at=name)
    return v


@matmul.rule
def _matmul(c):
    lt, rt = c.shaped("lhs", "lhs"), c.shaped("rhs", "rhs")
    if type(lt) is not type(rt):
        c.type_error(f"pl.matmul cannot mix a {lt.kind} and a {rt.kind}", at="rhs",
                     hint="load tensors into tiles (and move them to Left / Right) first")
    tiles = isinstance(lt, TileType)
    if tiles:
        for name, t, want in (("lhs", lt, MemorySpace.Left), ("rhs", rt, MemorySpace.Right)):
            if t.memory is not want:
                c.value_error(f"pl.matmul needs its {name} tile in MemorySpace.{want.name}; got a "
                              f"tile in MemorySpace.{t.memory.name}", code="TC251", at=name,
                              hint=f"load with target_memory=pl.MemorySpace.Mat, then "
                                   f"pl.move(t, target_memory=pl.MemorySpace.{want.name})")
    a_trans, b_trans = _flag(c, "a_trans"), _flag(c, "b_trans")
    if _flag(c, "c_matrix_nz"):
        c.value_error("pl.matmul c_matrix_nz=True asks for the result in the cube's NZ fractal "
                      "layout, a physical arrangement a CPU array cannot express (its values "
                      "would be reordered)", code="TC253", at="c_matrix_nz",
                      hint="leave c_matrix_nz=False: the result is row-major [M, N]")
    for name, t in (("lhs", lt), ("rhs", rt)):
        if t.rank != 2:
            c.value_error(f"pl.matmul needs a 2-D {name}; got {describe(t)}", code="TC252",
                          at=name)
    if lt.dtype is not rt.dtype:
        c.type_error(f"pl.matmul operands have different dtypes ({lt.dtype.name} vs "
                     f"{rt.dtype.name})", code="TC204", at="rhs",
                     hint="convert one with pl.cast; the cube multiplies equal dtypes")
    acc = _ACC.get(lt.dtype)
    if acc is None:
        c.type_error(f"pl.matmul supports FP32, FP16, BF16, FP8E4M3FN, FP8E5M2 and INT8 operands; "
                     f"got {lt.dtype.name}", code="TC204", at="lhs")
    m, k1 = (lt.shape[1], lt.shape[0]) if a_trans else (lt.shape[0], lt.shape[1])
    k2, n = (rt.shape[1], rt.shape[0]) if b_trans else (rt.shape[0], rt.shape[1])
    if is_static(k1) and is_static(k2) and k1 != k2:
        c.value_error(f"pl.matmul inner dimensions differ: lhs{' (a_trans)' if a_trans else ''} "
                      f"is [{m}, {k1}], rhs{' (b_trans)' if b_trans else ''} is [{k2}, {n}]",
                      code="TC252", at="rhs", hint="[M, K] @ [K, N] -> [M, N]")
    out = acc
    if c.given("out_dtype"):
        out = c.const("out_dtype")
        allowed = _OUT_FROM_FP32 if acc is FP32 else (INT32,)
        if out not in allowed:
            c.type_error(f"pl.matmul out_dtype must be {' or '.join(d.name for d in allowed)} for "
                         f"{lt.dtype.name} operands (accumulated in {acc.name}); got "
                         f"{getattr(out, 'name', out)!r}", code="TC204", at="out_dtype")
    if tiles:
        valid = None
        if lt.valid_shape or rt.valid_shape:
            lv, rv = lt.valid_shape or lt.shape, rt.valid_shape or rt.shape
            valid = (lv[1] if a_trans else lv[0], rv[0] if b_trans else rv[1])
        return TileType((m, n), out, valid, MemorySpace.Acc)
    return TensorType((m, n), out)


__all__ = ["matmul", "move"]
