"""Front end: decorated Python functions -> typed IR.

The parser is an allow-list: ``STMT`` and ``EXPR`` map AST node types to small
handlers; any other node is "unsupported syntax" at its span.  Names are
resolved by value (``resolve.lookup_name``), so aliased imports work and ops
are compared by object, never by spelling.  Each statement is checked on its
own: a failing statement records its diagnostic and the parser moves on, so
one compile reports every independent mistake.  Calls live in ``calls.py``.
"""
from __future__ import annotations

import ast
import enum

import numpy as np

from ..dtypes import BOOL, DataType, FP32, INDEX
from ..errors import ProgramSyntaxError, ProgramTypeError, ProgramValueError, UserError
from ..ir import nodes as N
from ..ir.types import (ANY, ArrayType, Dim, DTypeType, EnumType, NONE, ScalarType, TensorType, TileType, TupleType, Type, is_static,
                        numel)
from ..ir import forms as control
from ..ir.kinds import HOST
from ..ops import pl_ops
from ..ops.registry import lookup
from ..ops.check import const_value, describe
from .resolve import SelfNamespace, lookup_name, resolve_attr, _MISSING
from .arrays import ArrayParsing
from .loops import LoopParsing
from .calls import CallParsing, sub_worker_results
from .scopes import ScopeParsing, SubmitParsing, kernel_tasks
from .escapes import assigned_names, param_index, scoped_hint
from .dumptags import DumpTagParsing
from .common import _PY, _err
from .fold import fold

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
           ast.Mod: "%", ast.Pow: "**", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^",
           ast.LShift: "<<", ast.RShift: ">>"}
_SHAPED_BINOP = {"+": pl_ops.add, "-": pl_ops.sub, "*": pl_ops.mul, "/": pl_ops.div}
_CMPOPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


class FunctionParser(CallParsing, ScopeParsing, SubmitParsing, DumpTagParsing, ArrayParsing,
                     LoopParsing):
    def __init__(self, builder, kfn, src, fn_ir: N.FunctionIR):
        self.b = builder
        self.kfn = kfn
        self.src = src
        self.fn = fn_ir
        self.kind = fn_ir.kind
        self.env: dict[str, Type] = {p.name: p.type for p in fn_ir.params}
        self.loops: dict[str, tuple] = {}        # loop var -> (start, stop, step, stop value)
        self.const_vars: dict = {}               # names bound to a constant-valued op call
        self.yield_stack: list = []
        self.lane_regions: list = []             # enclosing pl.split_aiv loops
        self._alloc_target = None
        self._statement_call = None              # the call a statement consists of, if any
        self.hoisted: list = []                  # allocations of synthesized signals
        self.returns: list = []

    # ---------------------------------------------------------------- errors
    def span(self, node):
        return self.src.span(node)

    def syntax(self, node, msg, code="TC302", hint=None):
        return _err(ProgramSyntaxError, msg, self.span(node), code, hint)

    # ---------------------------------------------------------------- driver
    def parse(self):
        body = self.src.tree.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            body = body[1:]                          # docstring
        self.fn.body = self.block(body)
        self.fn.body[:0] = self.hoisted          # before every statement that uses them
        try:
            if self.fn.tasks:
                self.fn.body = kernel_tasks(self.fn.body, self)
            if self.kind == HOST:
                self.fn.body = sub_worker_results(self.fn.body, self)
        except UserError as e:
            self.b.diags.append(e)
        self._finish_returns()

    def block(self, stmts) -> list:
        out = []
        for s in stmts:
            try:
                value = getattr(s, "value", None)
                self._statement_call = value if isinstance(value, ast.Call) and isinstance(
                    s, (ast.Expr, ast.Assign, ast.AnnAssign, ast.Return)) else None
                handler = STMT.get(type(s))
                if handler is None:
                    raise self.syntax(s, f"unsupported syntax: {type(s).__name__} statement",
                                      hint="programs use assignments, calls, for/if, return")
                r = handler(self, s)
                if r is not None:
                    out.extend(r if isinstance(r, list) else [r])
            except UserError as e:
                self.b.diags.append(e)
                for name in assigned_names([s]):
                    self.env[name] = ANY
                names = {n.id for n in ast.walk(s) if isinstance(n, ast.Name)}
                # a view bound earlier stands for its buffer: the failed statement
                # may have been the buffer's only use
                names |= {t.origin.name for n in names
                          if isinstance(t := self.env.get(n), TensorType)
                          and isinstance(t.origin, N.BufferRecord)}
                self.b.incomplete.update(names)
        return out

    # ------------------------------------------------------------ statements
    def s_expr(self, s: ast.Expr):
        if isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
            return None                               # stray string: a comment
        if isinstance(s.value, ast.Call) and self._is_form(s.value.func, control.yield_):
            raise self.syntax(s, "pl.yield_(...) must be assigned: out = pl.yield_(...)",
                              "TC309")
        self._standalone = s.value
        if isinstance(s.value, ast.Call) and self._is_form(s.value.func, control.cond):
            self.cond_outside_while(s.value)
        if isinstance(s.value, ast.Call) and self._is_form(s.value.func, control.submit) or \
                isinstance(s.value, ast.Call) and self._is_form(s.value.func, control.spmd_submit):
            return self.submit_stmt(None, s.value, s)
        if isinstance(s.value, ast.Call) and self._is_form(s.value.func, control.dump_tag):
            return self.dump_tag_stmt(s.value)
        return N.ExprStmt(self.span(s), self.expr(s.value))

    def s_assign(self, s: ast.Assign):
        if len(s.targets) != 1:
            raise self.syntax(s, "chained assignment (a = b = ...) is not supported")
        return self._assign(s.targets[0], s.value, s)

    def s_annassign(self, s: ast.AnnAssign):
        if s.value is None:
            raise self.syntax(s, "a declaration without a value is not supported")
        return self._assign(s.target, s.value, s)

    def s_augassign(self, s: ast.AugAssign):
        if not isinstance(s.target, ast.Name):
            raise self.syntax(s, "augmented assignment needs a plain name on the left")
        binop = ast.BinOp(left=ast.Name(id=s.target.id, ctx=ast.Load()), op=s.op, right=s.value)
        ast.copy_location(binop, s)
        ast.copy_location(binop.left, s.target)
        return self._assign(s.target, binop, s)

    def _assign(self, target, value_node, s):
        span = self.span(s)
        if isinstance(value_node, ast.Call) and self._is_form(value_node.func, control.yield_):
            return self._yield(target, value_node, s)
        if isinstance(value_node, ast.Call) and any(self._is_form(value_node.func, f)
                                                     for f in control.SUBMIT_FORMS):
            return self.submit_stmt(target, value_node, s)
        rec = self._record_of(value_node.func) if isinstance(value_node, ast.Call) else None
        if rec is not None and rec.declares_buffer:
            if not isinstance(target, ast.Name):
                raise self.syntax(s, f"{rec.name} must be assigned to a single variable name",
                                  "TC303")
            self._alloc_target = target.id
        if isinstance(target, ast.Subscript):
            return self._store_index(target, value_node, s)
        value = self.expr(value_node)
        if isinstance(target, ast.Name):
            self._bind(target.id, value)
            return N.Assign(span, [target.id], value)
        if isinstance(target, (ast.Tuple, ast.List)) and all(isinstance(e, ast.Name)
                                                             for e in target.elts):
            names = [e.id for e in target.elts]
            t = value.type
            items = t.items if isinstance(t, TupleType) else None
            if items is None and isinstance(value, N.TupleExpr):
                items = [i.type for i in value.items]
            if items is None or len(items) != len(names):
                raise self.syntax(s, f"cannot unpack {describe(t)} into {len(names)} names")
            for n, it in zip(names, items):
                self.env[n] = it
            return N.Assign(span, names, value)
        raise self.syntax(s, f"unsupported assignment target {type(target).__name__}")

    def _bind(self, name, value):
        self.env[name] = value.type
        # pld.world_size() is fixed per compiled program: remember the value of a
        # name bound to it, so `n = pld.world_size(); pl.range(n)` still covers ranks
        if isinstance(value, N.Call) and "const" in value.extra:
            self.const_vars[name] = value.extra["const"]
        else:
            self.const_vars.pop(name, None)

    def _store_index(self, target, value_node, s):
        if isinstance(target.value, ast.Name) and \
                isinstance(self.env.get(target.value.id), ArrayType):
            return self.array_update(target, value_node, s)
        view = self.expr(target)
        value = self.expr(value_node)
        vt, tt = value.type, view.type
        if isinstance(tt, ScalarType):                 # x[i, j] = v : one element
            if not isinstance(vt, ScalarType):
                raise _err(ProgramTypeError, f"element assignment needs a scalar value; got "
                           f"{describe(vt)}", self.span(value_node), "TC102")
        elif isinstance(vt, (TileType, TensorType)):
            call = self.region_assemble(view, value, s)
            if call is not None:
                return N.ExprStmt(self.span(s), call)
            if vt.dtype is not tt.dtype:
                raise _err(ProgramTypeError, f"assigned value dtype {vt.dtype.name} differs from "
                           f"destination dtype {tt.dtype.name}", self.span(value_node), "TC204")
            ns, nd = numel(vt.valid_shape or vt.shape) if isinstance(vt, TileType) \
                else numel(vt.shape), numel(tt.shape)
            if ns is not None and nd is not None and ns != nd:
                raise _err(ProgramValueError, f"cannot assign {describe(vt)} to a region of shape "
                           f"{list(tt.shape)}", self.span(value_node), "TC208")
        elif not isinstance(vt, ScalarType):
            raise _err(ProgramTypeError, f"cannot assign {describe(vt)} into a tensor region",
                       self.span(value_node), "TC102")
        return N.StoreIndex(self.span(s), view, value)

    def _yield(self, target, call, s):
        if not self.yield_stack:
            raise self.syntax(s, "pl.yield_ is only valid inside a pl.range loop with "
                              "init_values", "TC309")
        loop = self.yield_stack[-1]
        values = [self.expr(a) for a in call.args]
        if len(values) != len(loop.carried):
            raise self.syntax(s, f"pl.yield_ gives {len(values)} value(s) but the loop carries "
                              f"{len(loop.carried)}", "TC309")
        if isinstance(target, ast.Name):
            names = [target.id]
        elif isinstance(target, (ast.Tuple, ast.List)) and all(isinstance(e, ast.Name)
                                                               for e in target.elts):
            names = [e.id for e in target.elts]
        else:
            raise self.syntax(s, "pl.yield_ must be assigned to names", "TC309")
        if len(names) != len(values):
            raise self.syntax(s, f"pl.yield_ of {len(values)} value(s) assigned to "
                              f"{len(names)} name(s)", "TC309")
        loop.yield_targets = names
        for n, v in zip(names, values):
            self.env[n] = v.type
        for n, v in zip(loop.carried, values):
            self.env[n] = v.type
        return N.Yield(self.span(s), values, names, list(loop.carried))

    def s_for(self, s: ast.For):
        it = s.iter
        if s.orelse:
            raise self.syntax(s, "for ... else is not supported")
        if not isinstance(it, ast.Call):
            raise self.syntax(it, "loops iterate over pl.range(...), pl.unroll(...) or "
                              "pl.parallel(...)")
        form = self._value(it.func)
        if form is range:
            form = control.range
        if form is control.spmd:
            return self.spmd_for(s)
        if form is control.split_aiv:
            return self.split_aiv_for(s)
        if form is control.while_:
            return self.while_for(s)
        if form not in (control.range, control.unroll, control.parallel):
            raise self.syntax(it, "loops iterate over pl.range(...), pl.unroll(...) or "
                              "pl.parallel(...)")
        kw = {k.arg: k.value for k in it.keywords}
        unknown = set(kw) - {"init_values"}
        if unknown:
            raise self.syntax(it, f"{form.name}() got unexpected keyword(s) {sorted(unknown)}")
        if not 1 <= len(it.args) <= 3:
            raise self.syntax(it, f"{form.name}() takes 1 to 3 bounds (stop | start, stop[, step])")
        bounds = [self.expr(a) for a in it.args]
        for b_, a in zip(bounds, it.args):
            if not _is_integer(b_):
                raise _err(ProgramTypeError, f"{form.name}() bounds must be integer scalars; got "
                           f"{_shown(b_)}", self.span(a), "TC102")
        span = self.span(s)
        if len(bounds) == 1:
            start, stop, step = N.Const(ScalarType(INDEX), span, 0), bounds[0], \
                N.Const(ScalarType(INDEX), span, 1)
        else:
            start, stop = bounds[0], bounds[1]
            step = bounds[2] if len(bounds) == 3 else N.Const(ScalarType(INDEX), span, 1)
        if form is control.unroll and not all(isinstance(b_, N.Const) for b_ in (start, stop, step)):
            raise self.syntax(it, "pl.unroll bounds must be compile-time constants")
        if isinstance(step, N.Const) and step.value == 0:
            raise _err(ProgramValueError, "loop step must not be 0", self.span(it), "TC200")
        carried, init = [], []
        target = s.target
        if "init_values" in kw:
            if form is control.unroll:
                raise self.syntax(it, "pl.unroll does not take init_values")
            iv = kw["init_values"]
            if not isinstance(iv, (ast.Tuple, ast.List)):
                raise self.syntax(iv, "init_values must be a tuple of values")
            init = [self.expr(e) for e in iv.elts]
            if not (isinstance(target, ast.Tuple) and len(target.elts) == 2
                    and isinstance(target.elts[0], ast.Name)
                    and isinstance(target.elts[1], (ast.Tuple, ast.List))
                    and all(isinstance(e, ast.Name) for e in target.elts[1].elts)):
                raise self.syntax(target, "with init_values write: for i, (a, b) in "
                                  "pl.range(n, init_values=(a0, b0)):", "TC309")
            carried = [e.id for e in target.elts[1].elts]
            if len(carried) != len(init):
                raise self.syntax(target, f"{len(carried)} loop-carried name(s) but "
                                  f"{len(init)} init value(s)", "TC309")
            var = target.elts[0].id
        elif isinstance(target, ast.Name):
            var = target.id
        else:
            raise self.syntax(target, "the loop variable must be a plain name")
        stop_value = self.const_vars.get(stop.name) if isinstance(stop, N.Var) \
            else const_value(stop)
        self.loops[var] = (start, stop, step, stop_value)
        self.env[var] = ScalarType(INDEX)
        for n, v in zip(carried, init):
            self.env[n] = v.type
        node = N.For(span, var, start, stop, step, [], carried, init, [], form.name.split(".")[1])
        self.yield_stack.append(node)
        ndiags = len(self.b.diags)
        try:
            node.body = self.block(s.body)
        finally:
            self.yield_stack.pop()
            self.loops.pop(var, None)
        # a misused pl.yield_ in the body was already reported; don't report it twice
        if carried and not node.yield_targets and len(self.b.diags) == ndiags:
            raise self.syntax(s, "a loop with init_values must end its body with "
                              "out = pl.yield_(...)", "TC309")
        return node

    def s_if(self, s: ast.If):
        cond = self.expr(s.test)
        if not isinstance(cond.type, ScalarType):
            raise _err(ProgramTypeError, f"if-conditions must be scalars; got "
                       f"{describe(cond.type)}", self.span(s.test), "TC102")
        return N.If(self.span(s), cond, self.block(s.body), self.block(s.orelse))

    def s_return(self, s: ast.Return):
        value = self.expr(s.value) if s.value is not None else None
        self.returns.append(value)
        return N.Return(self.span(s), value)

    def s_pass(self, s):
        return None

    def _finish_returns(self):
        """Record which parameter(s) a function returns, so a dispatch's result
        can be bound to the caller's argument."""
        vals = [v for v in self.returns if v is not None]
        if not vals:
            self.fn.ret_type = NONE
            return
        v = vals[-1]
        self.fn.ret_type = v.type
        if isinstance(v, N.TupleExpr):
            self.fn.returns_param = tuple(param_index(i.type) for i in v.items)
        elif isinstance(v.type, TupleType):     # return kernel(...) of a tuple-returning callee
            self.fn.returns_param = tuple(param_index(t) for t in v.type.items)
        else:
            self.fn.returns_param = param_index(v.type)

    # ----------------------------------------------------------- expressions
    def expr(self, node) -> N.Expr:
        handler = EXPR.get(type(node))
        if handler is None:
            raise self.syntax(node, f"unsupported syntax: {type(node).__name__} expression")
        return handler(self, node)

    def e_constant(self, node):
        return self._const(node.value, self.span(node), node)

    def _const(self, v, span, node=None):
        if isinstance(v, np.generic) and isinstance(v, (np.integer, np.floating, np.bool_)):
            v = v.item()                              # numpy scalars are plain numbers here
        if isinstance(v, bool):
            return N.Const(ScalarType(BOOL), span, v)
        if isinstance(v, enum.Enum):                  # before int: IntEnum members are ints
            return N.Const(EnumType(type(v)), span, v)
        if isinstance(v, int):
            return N.Const(ScalarType(INDEX), span, v)
        if isinstance(v, float):
            return N.Const(ScalarType(FP32), span, v)
        if v is None:
            return N.Const(NONE, span, None)
        if isinstance(v, str):
            return N.Const(_PY, span, v)
        if isinstance(v, DataType):
            return N.Const(DTypeType(), span, v)
        if isinstance(v, Dim):
            bound = v.evaluate(self.b.bindings)
            if isinstance(bound, int):
                return N.Const(ScalarType(INDEX), span, bound)
            return N.Const(ScalarType(INDEX), span, bound)   # symbolic until specialised
        if isinstance(v, (list, tuple)) and all(isinstance(x, (int, float, bool, Dim, np.integer,
                                                               np.floating)) for x in v):
            items = [self._const(x, span) for x in v]
            return (N.ListExpr if isinstance(v, list) else N.TupleExpr)(_PY, span, items)
        return N.Const(_PY, span, v)

    def e_name(self, node):
        if node.id in self.env:
            return N.Var(self.env[node.id], self.span(node), node.id)
        v = self._lookup(node)
        return self._const(v, self.span(node), node)

    def _lookup(self, node):
        if node.id == "self" and self.kfn.is_method:
            return self.b.self_ns
        v = lookup_name(self.src, node.id)
        if v is _MISSING:
            raise _err(ProgramSyntaxError, f"unknown name '{node.id}'", self.span(node), "TC307",
                       scoped_hint(self, node.id))
        return v

    def _value(self, node):
        """The Python object a Name/Attribute chain denotes (never a local variable)."""
        if isinstance(node, ast.Name):
            if node.id in self.env:
                return None
            return self._lookup(node)
        if isinstance(node, ast.Attribute):
            base = self._value(node.value)
            if base is None:
                return None
            if isinstance(base, SelfNamespace):
                f = base.functions.get(node.attr)
                if f is None:
                    raise _err(ProgramSyntaxError, f"program has no function '{node.attr}'",
                               self.span(node), "TC307")
                return f
            return resolve_attr(base, node.attr, node, self.span(node))
        return None

    def _is_form(self, func_node, form) -> bool:
        try:
            return self._value(func_node) is form
        except UserError:
            return False

    def _record_of(self, func_node):
        """The op record a call's callee resolves to, or None."""
        try:
            return lookup(self._value(func_node))
        except UserError:
            return None

    def e_attribute(self, node):
        base = None
        if not (isinstance(node.value, ast.Name) and node.value.id in self.env):
            base = self._value(node)
            return self._const(base, self.span(node), node)
        raise self.syntax(node, f"attribute access on program value '{node.value.id}' is not "
                          f"supported")

    def e_list(self, node):
        items = [self.expr(e) for e in node.elts]
        return N.ListExpr(_PY, self.span(node), items)

    def e_tuple(self, node):
        items = [self.expr(e) for e in node.elts]
        return N.TupleExpr(TupleType(tuple(i.type for i in items)), self.span(node), items)

    def e_unaryop(self, node):
        v = self.expr(node.operand)
        op = {ast.USub: "-", ast.UAdd: "+", ast.Not: "not ", ast.Invert: "~"}[type(node.op)]
        if isinstance(v, N.Const) and isinstance(v.value, (int, float)) and op in "-+":
            return self._const(-v.value if op == "-" else v.value, self.span(node))
        if isinstance(v.type, (TileType, TensorType)) and op == "-":
            return self._op_call(pl_ops.mul.record, {"lhs": v, "rhs": self._const(-1, v.span)},
                                 node)
        if not isinstance(v.type, ScalarType):
            raise _err(ProgramTypeError, f"unary '{op.strip()}' needs a scalar; got "
                       f"{describe(v.type)}", self.span(node), "TC102")
        return N.UnaryOp(v.type if op != "not " else ScalarType(BOOL), self.span(node), op, v)

    def e_binop(self, node):
        op = _BINOPS.get(type(node.op))
        l, r = self.expr(node.left), self.expr(node.right)
        span = self.span(node)
        if isinstance(l.type, (TileType, TensorType)) or isinstance(r.type, (TileType, TensorType)):
            stub = _SHAPED_BINOP.get(op)
            if stub is None:
                raise _err(ProgramTypeError, f"operator '{op}' is not defined on tiles/tensors",
                           span, "TC102")
            return self._op_call(stub.record, {"lhs": l, "rhs": r}, node)
        for side, v in (("left", l), ("right", r)):
            if not isinstance(v.type, ScalarType):
                raise _err(ProgramTypeError, f"operator '{op}' needs scalar operands; {side} is "
                           f"{describe(v.type)}", v.span, "TC102")
        if isinstance(l, N.Const) and isinstance(r, N.Const) and \
                isinstance(l.value, (int, float)) and isinstance(r.value, (int, float)):
            return self._const(fold(op, l.value, r.value, span, device=self.kind != HOST), span)
        return N.BinOp(_scalar_result(l, r, op), span, op, l, r)

    def e_compare(self, node):
        if len(node.ops) != 1:
            raise self.syntax(node, "chained comparisons are not supported; use 'and'")
        l, r = self.expr(node.left), self.expr(node.comparators[0])
        for v in (l, r):
            if not isinstance(v.type, ScalarType):
                raise _err(ProgramTypeError, f"comparisons need scalars; got {describe(v.type)}",
                           v.span, "TC102")
        op = _CMPOPS.get(type(node.ops[0]))
        if op is None:
            raise self.syntax(node, "unsupported comparison operator")
        return N.Compare(ScalarType(BOOL), self.span(node), op, l, r)

    def e_boolop(self, node):
        vals = [self.expr(v) for v in node.values]
        return N.BoolOp(ScalarType(BOOL), self.span(node),
                        "and" if isinstance(node.op, ast.And) else "or", vals)

    def e_subscript(self, node):
        base = self.expr(node.value)
        t = base.type
        if isinstance(t, ArrayType):
            return self.array_index(base, node)
        if not isinstance(t, (TensorType, TileType)):
            raise _err(ProgramTypeError, f"only tensors and tiles can be indexed; got "
                       f"{describe(t)}", self.span(node), "TC102")
        idx = node.slice
        parts = list(idx.elts) if isinstance(idx, ast.Tuple) else [idx]
        if len(parts) > len(t.shape):
            raise _err(ProgramValueError, f"{len(parts)} indices for a rank-{len(t.shape)} "
                       f"{t.kind}", self.span(node), "TC201")
        items, shape = [], []
        for i, (p, dim) in enumerate(zip(parts + [None] * (len(t.shape) - len(parts)), t.shape)):
            if p is None:
                items.append(N.SliceExpr(_PY, self.span(node), None, None))
                shape.append(dim)
                continue
            if isinstance(p, ast.Slice):
                if p.step is not None:
                    raise self.syntax(p, "slices with a step are not supported")
                lo = self.expr(p.lower) if p.lower is not None else None
                hi = self.expr(p.upper) if p.upper is not None else None
                lo_v = 0 if lo is None else const_value(lo)
                hi_v = dim if hi is None else const_value(hi)
                if not (isinstance(lo_v, int) and isinstance(hi_v, int)):
                    raise _err(ProgramValueError, "slice bounds must be compile-time integers "
                               "(use pl.slice with a static shape for runtime offsets)",
                               self.span(p), "TC216")
                if lo_v < 0 or (is_static(dim) and hi_v > dim) or hi_v <= lo_v:
                    raise _err(ProgramValueError, f"slice {lo_v}:{hi_v} is out of bounds for "
                               f"dimension {i} of size {dim}", self.span(p), "TC202")
                items.append(N.SliceExpr(_PY, self.span(p), lo, hi))
                shape.append(hi_v - lo_v)
            else:
                e = self.expr(p)
                if not _is_integer(e):
                    raise _err(ProgramTypeError, f"indices must be integer scalars; got "
                               f"{_shown(e)}", self.span(p), "TC102")
                v = const_value(e)
                if isinstance(v, int) and is_static(dim) and not 0 <= v < dim:
                    raise _err(ProgramValueError, f"index {v} is out of bounds for dimension {i} "
                               f"of size {dim}", self.span(p), "TC202")
                items.append(e)
        if not shape:                                  # every dim indexed: one element
            rt = ScalarType(t.dtype)
        elif isinstance(t, TileType):
            rt = TileType(tuple(shape), t.dtype)
        else:
            rt = TensorType(tuple(shape), t.dtype, dist=False, direction=t.direction)
        return N.Index(rt, self.span(node), base, items)


def _is_integer(e) -> bool:
    """An integer scalar: not a float (truncated at run time), bool or enum member."""
    t = e.type
    return isinstance(t, ScalarType) and t.dtype is not None and t.dtype.is_int and \
        not isinstance(const_value(e), (bool, enum.Enum))


def _shown(e) -> str:
    return repr(e.value) if isinstance(e, N.Const) else describe(e.type)


def _scalar_result(l, r, op):
    lt, rt = l.type.dtype, r.type.dtype
    if op == "/":
        return ScalarType(FP32)
    for t in (lt, rt):
        if t is not None and t.is_float:
            return ScalarType(t)
    if isinstance(l, N.Const) and rt is not None:
        return ScalarType(rt)
    return ScalarType(lt or rt)


STMT = {ast.Expr: FunctionParser.s_expr, ast.Assign: FunctionParser.s_assign,
        ast.AnnAssign: FunctionParser.s_annassign, ast.AugAssign: FunctionParser.s_augassign,
        ast.For: FunctionParser.s_for, ast.If: FunctionParser.s_if,
        ast.While: FunctionParser.s_while,
        ast.Return: FunctionParser.s_return, ast.Pass: FunctionParser.s_pass,
        ast.With: FunctionParser.s_with}

EXPR = {ast.Constant: FunctionParser.e_constant, ast.Name: FunctionParser.e_name,
        ast.Attribute: FunctionParser.e_attribute, ast.Call: FunctionParser.e_call,
        ast.BinOp: FunctionParser.e_binop, ast.UnaryOp: FunctionParser.e_unaryop,
        ast.Compare: FunctionParser.e_compare, ast.BoolOp: FunctionParser.e_boolop,
        ast.List: FunctionParser.e_list, ast.Tuple: FunctionParser.e_tuple,
        ast.Subscript: FunctionParser.e_subscript}
