"""Subscript assignments with a meaning of their own: ``pl.Array`` element
access (``v = arr[i]`` and the functional update ``arr[i] = v``), and region
assignment ``dst[a:b, c:d] = src``, which is ``pl.assemble``.

An array is a value, not memory (reference §4.3: the update rebinds the
name), so ``arr[i] = v`` is checked here and lowered as ``arr =
<updated copy>``: a copy taken before the update (``a0 = arr``, an
``init_values`` entry, a task's capture) keeps its old contents, exactly as
on the chip where the array lives in registers."""
from __future__ import annotations

import ast
import enum

from ..dtypes import INDEX, TASK_ID
from ..errors import ProgramSyntaxError, ProgramTypeError, ProgramValueError
from ..ir import nodes as N
from ..ir.enums import AtomicType
from ..ir.kinds import INCORE, ORCH
from ..ir.types import ArrayType, EnumType, ScalarType, TaskIdType, TileType, is_static
from ..ops import pl_shape
from ..ops.check import const_value, describe
from .common import _PY, _err


class ArrayParsing:
    """Mixin of ``FunctionParser``."""

    def array_index(self, base, node) -> N.Index:
        """``arr[i]``: one integer index, bounds-checked when it is a constant."""
        t: ArrayType = base.type
        idx = node.slice
        if isinstance(idx, (ast.Tuple, ast.Slice)):
            raise _err(ProgramTypeError, f"a pl.Array takes one integer index: arr[i]; got "
                       f"'{ast.unparse(idx)}'", self.span(idx), "TC250",
                       hint="arrays are one-dimensional and cannot be sliced")
        e = self.expr(idx)
        et = e.type
        v = const_value(e)
        if not (isinstance(et, ScalarType) and et.dtype is not None and et.dtype.is_int) or \
                isinstance(v, (bool, enum.Enum)):
            raise _err(ProgramTypeError, f"a pl.Array index must be an integer scalar; got "
                       f"{repr(v) if isinstance(e, N.Const) else describe(et)}",
                       self.span(idx), "TC250")
        if isinstance(v, int) and not 0 <= v < t.extent:
            raise _err(ProgramValueError, f"index {v} is out of bounds for {describe(t)}",
                       self.span(idx), "TC202", hint=f"valid indices are 0..{t.extent - 1}")
        return N.Index(ScalarType(t.dtype), self.span(node), base, [e])

    def array_update(self, target, value_node, s) -> N.StoreIndex:
        """``arr[i] = v``: the updated array rebinds ``arr``."""
        if not isinstance(target.value, ast.Name):
            raise _err(ProgramTypeError, "a pl.Array update rebinds a name: write "
                       "arr[i] = v with arr a variable", self.span(target.value), "TC250")
        view = self.expr(target)
        value = self.expr(value_node)
        at: ArrayType = view.value.type
        vt = value.type
        if at.dtype is TASK_ID:
            ok = isinstance(vt, TaskIdType) or isinstance(vt, ScalarType) and vt.dtype is TASK_ID
            want = "a TaskId"
        else:
            ok = isinstance(vt, ScalarType) and vt.dtype is not None and \
                (vt.dtype.is_int or not at.dtype.is_int) and \
                not isinstance(const_value(value), enum.Enum)
            want = "an integer scalar" if at.dtype.is_int else "a scalar"
        if not ok:
            shown = repr(value.value) if isinstance(value, N.Const) else describe(vt)
            raise _err(ProgramTypeError, f"an element of {describe(at)} must be {want}; got "
                       f"{shown}", self.span(value_node), "TC250",
                       hint="convert explicitly with pl.cast" if isinstance(vt, ScalarType)
                       else None)
        self.env[target.value.id] = at
        return N.StoreIndex(self.span(s), view, value)


    def region_assemble(self, view, value, s):
        """``dst[a:b, c:d] = src`` in a kernel as ``pl.assemble(dst, src, [a, c])``
        when the region has the source's shape (a source of lower rank lands on the
        inner dims, as for assemble); None otherwise (a same-size region of
        another shape is a reshaping copy)."""
        base = view.value
        bt, vt = base.type, value.type
        if self.kind == ORCH:
            raise _err(ProgramSyntaxError, "Misplaced tensor op pl.assemble (a region "
                       "assignment): in a chip orchestration function tensor operations should "
                       "be inside InCore block", self.span(s), "TC254",
                       hint="wrap it in 'with pl.at(level=pl.Level.CORE_GROUP):' -- the block "
                            "runs as a task of the rank's scheduler")
        if self.kind != INCORE:
            return None              # HOST: a plain copy into the caller's view
        if not hasattr(bt, "shape") or bt.shape is None or vt.shape is None:
            return None
        offsets, extents = [], []
        for it, dim in zip(view.items, bt.shape):
            if isinstance(it, N.SliceExpr):
                lo = 0 if it.start is None else const_value(it.start)
                hi = dim if it.stop is None else const_value(it.stop)
                offsets.append(it.start if it.start is not None else
                               N.Const(ScalarType(INDEX), it.span, 0))
                extents.append(hi - lo if is_static(lo) and is_static(hi) else None)
            else:
                offsets.append(it)
                extents.append(1)
        src = list(vt.valid_shape or vt.shape) if isinstance(vt, TileType) else list(vt.shape)
        if len(src) > len(extents):
            return None
        src = [1] * (len(extents) - len(src)) + src
        if src != extents:
            return None
        span = self.span(s)
        args = {"target": base, "source": value,
                "offset": N.ListExpr(_PY, span, offsets),
                "atomic": N.Const(EnumType(AtomicType), span, AtomicType.None_)}
        return self._op_call(pl_shape.assemble.record, args, s, {"target", "source", "offset"})


__all__ = ["ArrayParsing"]
