"""Loops beyond ``pl.range``: ``while`` statements, ``pl.while_`` with
``pl.cond``, and ``pl.split_aiv`` lane regions."""
from __future__ import annotations

import ast

from ..dtypes import INDEX
from ..errors import ProgramSyntaxError, ProgramTypeError, ProgramValueError
from ..ir import forms as control
from ..ir import nodes as N
from ..ir.enums import SplitMode
from ..ir.kinds import INCORE, KIND_NAMES
from ..ir.types import ScalarType
from ..ops.check import const_value, describe
from .common import _err

AIV_LANES = 2          # the AIV sub-cores of one AI core


class LoopParsing:
    """Mixin of ``FunctionParser``."""

    def _condition(self, node):
        cond = self.expr(node)
        if not isinstance(cond.type, ScalarType):
            raise _err(ProgramTypeError, f"a loop condition must be a scalar; got "
                       f"{describe(cond.type)}", self.span(node), "TC102")
        return cond

    def s_while(self, s: ast.While):
        """``while cond:`` -- names rebound in the body carry to the next test."""
        if s.orelse:
            raise self.syntax(s, "unsupported syntax: While statement with an else block")
        cond = self._condition(s.test)
        node = N.While(self.span(s), "", None, None, None, [], [], [], [], "while", cond)
        node.body = self.block(s.body)
        return node

    def while_for(self, s: ast.For):
        """``for (a, b) in pl.while_(init_values=(a0, b0)):`` whose body starts
        with ``pl.cond(c)`` and ends with ``a1, b1 = pl.yield_(...)``."""
        it = s.iter
        kw = {k.arg: k.value for k in it.keywords}
        if it.args or set(kw) != {"init_values"}:
            raise self.syntax(it, "pl.while_ takes only init_values=(...): "
                              "for (a,) in pl.while_(init_values=(a0,)):", "TC309")
        iv = kw["init_values"]
        if not isinstance(iv, (ast.Tuple, ast.List)) or not iv.elts:
            raise self.syntax(iv, "init_values must be a non-empty tuple of values", "TC309")
        target = s.target
        if not (isinstance(target, (ast.Tuple, ast.List)) and
                all(isinstance(e, ast.Name) for e in target.elts)):
            raise self.syntax(target, "pl.while_ binds its carried values to a tuple of names: "
                              "for (a, b) in pl.while_(init_values=(a0, b0)):", "TC309")
        carried = [e.id for e in target.elts]
        init = [self.expr(e) for e in iv.elts]
        if len(carried) != len(init):
            raise self.syntax(target, f"{len(carried)} loop-carried name(s) but {len(init)} "
                              f"init value(s)", "TC309")
        body = s.body
        first = body[0] if body else None
        if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Call) and
                self._is_form(first.value.func, control.cond)):
            raise _err(ProgramSyntaxError, "the first statement of a pl.while_ loop must be "
                       "pl.cond(condition)", self.span(first or s), "TC257",
                       hint="for (x,) in pl.while_(init_values=(0,)):\n    pl.cond(x < n)")
        for n, v in zip(carried, init):
            self.env[n] = v.type
        call = first.value
        if len(call.args) != 1 or call.keywords:
            raise _err(ProgramSyntaxError, "pl.cond takes one condition", self.span(call), "TC257")
        cond = self._condition(call.args[0])
        node = N.While(self.span(s), "", None, None, None, [], carried, init, [], "while_", cond)
        self.yield_stack.append(node)
        ndiags = len(self.b.diags)
        try:
            node.body = self.block(body[1:])
        finally:
            self.yield_stack.pop()
        if not node.yield_targets and len(self.b.diags) == ndiags:
            raise self.syntax(s, "a pl.while_ loop must end its body with out = pl.yield_(...)",
                              "TC309")
        return node

    def cond_outside_while(self, node):
        raise _err(ProgramSyntaxError, "pl.cond(...) is only the first statement of a pl.while_ "
                   "loop", self.span(node), "TC257",
                   hint="for a plain condition use if / while")

    def split_aiv_for(self, s: ast.For):
        """``for aiv_id in pl.split_aiv(2, mode=pl.SplitMode.NONE):`` -- the body
        runs once per AIV lane, with ``aiv_id`` (= ``pl.tile.get_subblock_idx()``)
        the lane, exactly as both lanes of the chip run it: a notify outside
        an ``aiv_id`` guard fires twice."""
        it = s.iter
        if self.kind != INCORE:
            raise _err(ProgramSyntaxError, f"pl.split_aiv opens AIV lanes of a kernel; here it is "
                       f"used in {KIND_NAMES[self.kind]}", self.span(it), "TC301",
                       hint="use it in a @pl.jit.incore kernel or a pl.at(CORE_GROUP) body")
        if any(isinstance(f, N.For) and f.kind == "split_aiv" for f in self.lane_regions):
            raise _err(ProgramSyntaxError, "pl.split_aiv regions cannot be nested",
                       self.span(it), "TC256")
        if s.orelse or not isinstance(s.target, ast.Name):
            raise self.syntax(s.target, "write: for aiv_id in pl.split_aiv(2, mode=...):",
                              "TC256")
        kw = {k.arg: k.value for k in it.keywords}
        if len(it.args) != 1 or set(kw) != {"mode"}:
            raise _err(ProgramSyntaxError, "pl.split_aiv takes the lane count and a required "
                       "mode: pl.split_aiv(2, mode=pl.SplitMode.NONE)", self.span(it), "TC256")
        n = const_value(self.expr(it.args[0]))
        if type(n) is not int or n != AIV_LANES:
            raise _err(ProgramValueError, f"pl.split_aiv(n): n is the number of AIV lanes of a "
                       f"core, {AIV_LANES}; got {n!r}", self.span(it.args[0]), "TC256")
        mode = const_value(self.expr(kw["mode"]))
        if not isinstance(mode, SplitMode):
            raise _err(ProgramValueError, f"pl.split_aiv mode must be a pl.SplitMode member; got "
                       f"{mode!r}", self.span(kw["mode"]), "TC214")
        if mode is not SplitMode.NONE:
            raise _err(ProgramValueError, f"pl.split_aiv mode=SplitMode.{mode.name} halves every "
                       f"tile of the region between the lanes (a compiler transformation of "
                       f"the tile code) and has no CPU equivalent yet", self.span(kw["mode"]),
                       "TC253", hint="use mode=pl.SplitMode.NONE and give each lane its half "
                                     "by aiv_id (both lanes run the whole body)")
        span = self.span(s)
        var = s.target.id
        zero, lanes, one = (N.Const(ScalarType(INDEX), span, v) for v in (0, AIV_LANES, 1))
        node = N.For(span, var, zero, lanes, one, [], [], [], [], "split_aiv")
        self.env[var] = ScalarType(INDEX)
        self.lane_regions.append(node)
        try:
            node.body = self.block(s.body)
        finally:
            self.lane_regions.pop()
        return node


__all__ = ["LoopParsing"]
