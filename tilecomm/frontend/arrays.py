"""``pl.Array`` element access: ``v = arr[i]`` and the functional update
``arr[i] = v``.

An array is a value, not memory (reference §4.3: the update rebinds the
name), so ``arr[i] = v`` is checked here and lowered as ``arr =
<updated copy>``: a copy taken before the update (``a0 = arr``, an
``init_values`` entry, a task's capture) keeps its old contents, exactly as
on the chip where the array lives in registers."""
from __future__ import annotations

import ast
import enum

from ..dtypes import TASK_ID
from ..errors import ProgramTypeError, ProgramValueError
from ..ir import nodes as N
from ..ir.types import ArrayType, ScalarType, TaskIdType
from ..ops.check import const_value, describe
from .common import _err


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


__all__ = ["ArrayParsing"]
