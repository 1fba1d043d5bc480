"""Calls inside a program body: primitives (checked by their registry record's
rule), program functions (specialised per argument types), and HOST dispatches
with their ``device=`` forms."""
from __future__ import annotations

import ast
import inspect

from ..dtypes import DataType
from ..errors import ProgramSyntaxError, ProgramTypeError, ProgramValueError, UserError
from ..ir import nodes as N
from ..ir import walk
from ..ir.types import (ANY, CommCtxType, NONE, PtrType,
                        ScalarType, TensorType, TupleType, numel)
from ..ir import forms as control
from ..ir.functions import KernelFunction
from ..ir.kinds import HOST, INCORE, KIND_NAMES, ORCH, SUBWORKER
from ..ops.check import CallCheck, SkipCheck, const_value, describe
from ..ops import pld_ops
from ..ops.registry import OpStub
from ..ops import pl_ops
from . import source as source_mod
from .common import _err
from .dispatch import DispatchChecks


class CallParsing(DispatchChecks):
    """Mixin of ``FunctionParser``: the call expressions."""

    def e_call(self, node):
        callee = self._value(node.func)
        span = self.span(node)
        if callee is None:
            raise self.syntax(node, "only tilecomm operations and program functions can be "
                              "called")
        if isinstance(callee, OpStub):
            return self._op(callee.record, node)
        if callee in control.SUBMIT_FORMS:
            raise _err(ProgramSyntaxError, f"{callee.name}(...) is a statement of its own: "
                       f"outs..., tid = {callee.name}(self.kernel, ...)", span, "TC330")
        if callee in control.TASK_FORMS:
            raise _err(ProgramSyntaxError, f"{callee.name}(...) opens a scope: use it in a with "
                       f"statement" + (" or as a for-loop iterator" if callee is control.spmd
                                       else ""), span, "TC330")
        if callee is control.cond:
            self.cond_outside_while(node)
        if callee is control.dump_tag:
            raise _err(ProgramSyntaxError, "pl.dump_tag(t) is a statement of its own; it has no "
                       "value", span, "TC446")
        if isinstance(callee, control.SpecialForm):
            raise self.syntax(node, f"{callee.name}() can only be used as a for-loop iterator"
                              if callee is not control.yield_ else
                              "pl.yield_(...) must be assigned: out = pl.yield_(...)")
        if isinstance(callee, KernelFunction):
            return self._func_call(callee, node)
        if inspect.ismethod(callee) and isinstance(callee.__self__, DataType):
            return self._dtype_method(callee, node)
        if callee is range:
            raise self.syntax(node, "range() can only be used as a for-loop iterator")
        raise _err(ProgramSyntaxError, f"cannot call {getattr(callee, '__name__', callee)!r} "
                   f"inside a program", span, "TC302",
                   hint="programs call pl/pld operations and other program functions")

    def _dtype_method(self, method, node):
        """``pl.FP32.get_byte()``: a dtype's method on constants, folded here."""
        span = self.span(node)
        args = [const_value(self.expr(a)) for a in node.args]
        kwargs = {k.arg: const_value(self.expr(k.value)) for k in node.keywords}
        name = f"{method.__self__!r}.{method.__name__}"
        try:
            inspect.signature(method).bind(*args, **kwargs)
        except TypeError as e:
            raise _err(ProgramTypeError, f"{name}(): {e}", span, "TC103",
                       hint=f"signature: {name}{inspect.signature(method)}") from None
        return self._const(method(*args, **kwargs), span)

    def _op(self, record, node):
        span = self.span(node)
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise self.syntax(a, "*args in calls are not supported")
        args = [self.expr(a) for a in node.args]
        kwargs = {}
        for k in node.keywords:
            if k.arg is None:
                raise self.syntax(k, "**kwargs in calls are not supported")
            kwargs[k.arg] = self.expr(k.value)
        try:
            bound = record.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise _err(ProgramTypeError, f"{record.name}(): {e}", span, "TC103",
                       hint=f"signature: {record.name}{record.signature}") from None
        explicit = set(bound.arguments)
        bound.apply_defaults()
        full = {}
        for k, v in bound.arguments.items():
            full[k] = v if isinstance(v, N.Expr) else self._const(v, span)
        return self._op_call(record, full, node, explicit)

    def _op_call(self, record, args, node, explicit=None):
        span = self.span(node)
        if self.kind == ORCH and INCORE in record.contexts and ORCH not in record.contexts and \
                any(sp.startswith("pl.tensor.") for sp in record.spellings) and \
                any(isinstance(getattr(a, "type", None), TensorType) for a in args.values()):
            # the reference's wording: a tensor op of an orchestration body runs as
            # (part of) a task, so it belongs in an InCore block
            raise _err(ProgramSyntaxError, f"Misplaced tensor op {record.name}: in a chip "
                       f"orchestration function tensor operations should be inside InCore "
                       f"block", span, "TC254",
                       hint="wrap it in 'with pl.at(level=pl.Level.CORE_GROUP):' -- the block "
                            "runs as a task of the rank's scheduler")
        if self.kind not in record.contexts:
            allowed = " or ".join(KIND_NAMES[k] for k in (HOST, ORCH, INCORE)
                                  if k in record.contexts)
            raise _err(ProgramSyntaxError, f"{record.name}() can only be called in {allowed}; "
                       f"here it is used in {KIND_NAMES[self.kind]}", span, "TC301",
                       hint=record.hint_outside(self.kind))
        # where the call sits, for rules that depend on it (HOST collectives)
        extra = {"in_loop": bool(self.yield_stack),
                 "statement_call": node is self._statement_call}
        if record.defers:
            self.deferred_call_check(record, node)
        if record is pl_ops.get_block_idx.record:
            self.block_idx_read()
        if record.declares_buffer:
            lhs, self._alloc_target = self._alloc_target, None
            if lhs is None:
                raise _err(ProgramSyntaxError, f"{record.name} must appear as the RHS of a simple "
                           "assignment (its result must be bound to a named variable)", span,
                           "TC303", hint=f"write: buf = {record.spellings[-1]}(...)")
            extra["lhs"] = lhs
        try:
            c = CallCheck(record, args, span, self.kind, self.b.platform, self.b.world, extra,
                          explicit)
            t = record.rule(c)
            c.static_params()
        except SkipCheck:
            t = ANY
        if extra.get("deferred"):
            self.deferred_collective(record, node)
        if record.expands is not None and "expand" in extra:
            return self._expanded(extra.pop("expand"), node, span)
        if record.value is not None:
            extra["const"] = record.value(self.b.world)
        if record.declares_buffer and t is not ANY:
            t = self._declare_buffer(extra, span)
        synth = extra.pop("synthesize", None)
        if synth is not None and t is not ANY:
            args = dict(args)
            args[synth[0]] = self._synthesized_window(record, *synth, span)
        return N.Call(t, span, record, args, extra)

    def _expanded(self, expand, node, span):
        """A form of another op (``OpRecord.expands``) as the call of that op its
        rule named: its arguments (defaults filled in), plus the signal window
        the form allocates for the caller.  (A form whose rule could not check
        the call -- an operand already in error -- stays as it is: the program
        does not compile.)"""
        target, given, synth = expand
        hoisted, buffers = len(self.hoisted), len(self.b.buffers)
        if synth is not None:
            given = dict(given)
            given[synth[0]] = self._synthesized_window(target, *synth, span)
        args = {}
        for name, p in target.signature.parameters.items():
            if name in given:
                args[name] = given[name]
            elif p.default is not p.empty:
                args[name] = self._const(p.default, span)
        try:
            return self._op_call(target, args, node, set(given))
        except UserError:
            # the call is reported; its signal must not be reported as unused
            del self.hoisted[hoisted:]
            for buf in self.b.buffers[buffers:]:
                del self.b.buffer_names[buf.name]
            del self.b.buffers[buffers:]
            raise

    def _synthesized_window(self, record, param, shape, dtype, span):
        """A window operand the rule asked for (the HOST allreduce's omitted
        signal, an ergonomic collective's signal): a buffer of its own per call
        site, allocated once at the top of the function, so a call in a loop
        reuses it on every iteration -- as the collectives' self-clearing
        credit barrier allows: every call returns its cells to zero."""
        base = f"{record.name.rsplit('.', 1)[-1]}_{param}_line{span.line}"
        name, k = base, 1
        while name in self.b.buffer_names:
            k += 1
            name = f"{base}_{k}"
        nbytes = numel(shape) * dtype.get_byte()
        buf = N.BufferRecord(name=name, id=len(self.b.buffers), span=span, nbytes=nbytes)
        self.b.buffers.append(buf)
        self.b.buffer_names[name] = buf
        alloc = pld_ops.alloc_window_buffer.record
        var = f"_tc_{name}"                 # the handle's variable in the lowered code
        self.hoisted.append(N.Assign(span, [var], N.Call(
            PtrType(buffer=buf), span, alloc,
            {"size": self._const(nbytes, span), "dtype": self._const(None, span),
             "name": self._const("", span)},
            {"buffer": buf, "lhs": name, "nbytes": nbytes})))
        handle = N.Var(PtrType(buffer=buf), span, name=var)
        dims = [self._const(d, span) for d in shape]
        return N.Call(TensorType(tuple(shape), dtype, dist=True, origin=buf), span,
                      pld_ops.window.record,
                      {"buf": handle, "shape": N.ListExpr(ANY, span, dims),
                       "dtype": self._const(dtype, span)}, {})

    def _declare_buffer(self, extra, span):
        name = extra["lhs"]
        if name in self.b.buffer_names:
            prev = self.b.buffer_names[name]
            raise _err(ProgramSyntaxError, f"window buffer name '{name}' is already declared in "
                       f"this program (at {prev.span})", span, "TC305",
                       hint="give every alloc_window_buffer its own variable name")
        buf = N.BufferRecord(name=name, id=len(self.b.buffers), span=span,
                             nbytes=extra.get("nbytes"))
        self.b.buffers.append(buf)
        self.b.buffer_names[name] = buf
        extra["buffer"] = buf
        return PtrType(buffer=buf)

    def _func_call(self, callee, node):
        span = self.span(node)
        kw = {k.arg: k.value for k in node.keywords}
        device_node = kw.pop("device", None)
        if device_node is not None and not (self.kind == HOST and callee.kind in (ORCH, HOST)):
            # the keyword itself is the mistake here, so point at "device=", not its value
            device_kw = next(k for k in node.keywords if k.arg == "device")
            raise _err(ProgramTypeError, f"device= is only accepted when a HOST orchestrator "
                       f"dispatches a chip orchestration function (@pl.jit); "
                       f"{callee.fn.__name__} is {KIND_NAMES[callee.kind]}"
                       + ("" if self.kind == HOST else f" and the caller is {KIND_NAMES[self.kind]}"),
                       self.span(device_kw), "TC308", hint="allowed keywords here: none")
        if self.kind == HOST and callee.kind == INCORE:
            raise _err(ProgramSyntaxError, f"a HOST orchestrator cannot call the InCore kernel "
                       f"{callee.fn.__name__} directly", span, "TC301",
                       hint="dispatch a @pl.jit chip function with device=r that calls the kernel")
        if self.kind == ORCH and callee.kind != INCORE or self.kind == INCORE or \
                self.kind == HOST and callee.kind == HOST:
            raise _err(ProgramSyntaxError, f"{KIND_NAMES[self.kind]} cannot call "
                       f"{KIND_NAMES[callee.kind]} ({callee.fn.__name__})", span, "TC301",
                       hint="HOST dispatches @pl.jit chip functions; those call @pl.jit.incore "
                            "kernels")
        args = [self.expr(a) for a in node.args]
        if kw:
            src = source_mod.load(callee.fn)
            pnames = [a.arg for a in src.tree.args.args][(1 if callee.is_method else 0):]
            for k, v in kw.items():
                if k not in pnames:
                    raise _err(ProgramTypeError, f"{callee.fn.__name__}() got an unexpected "
                               f"keyword argument '{k}'", self.span(v), "TC103")
                if k in pnames[:len(args)]:
                    raise _err(ProgramTypeError, f"{callee.fn.__name__}() got multiple values "
                               f"for argument '{k}' (positionally and by keyword)",
                               self.span(v), "TC103")
            for name in pnames[len(args):]:
                if name not in kw:
                    raise _err(ProgramTypeError, f"{callee.fn.__name__}() missing argument "
                               f"'{name}'", span, "TC103")
                args.append(self.expr(kw[name]))
        fn_ir = self.b.specialise(callee, [a.type for a in args], span)
        self._check_args(fn_ir, args, span)
        if self.kind == HOST and callee.kind == ORCH:
            if device_node is None:
                self.check_no_device(callee, fn_ir, node, args)
            self.check_written_inputs(fn_ir, args)
        devices, device = None, None
        if callee.kind == SUBWORKER:         # runs in the controller: no device, no domain
            # its result, if it has one, is the argument it writes (see sub_worker_results)
            rt = NONE if fn_ir.returns_param is None else self._call_result(fn_ir, args)
            return N.FuncCall(rt, span, fn_ir, args, None, frozenset())
        if self.kind == HOST:
            devices = self._device_set(device_node) if device_node is not None \
                else frozenset(range(self.b.world))
            device = self.expr(device_node) if device_node is not None else None
        rt = self._call_result(fn_ir, args)
        return N.FuncCall(rt, span, fn_ir, args, device, devices)

    def _check_args(self, fn_ir, args, span):
        for p, a in zip(fn_ir.params, args):
            pt, at = p.type, a.type
            if at is ANY:
                continue
            fname = fn_ir.py_name
            if isinstance(pt, TensorType):
                if not isinstance(at, TensorType) or at.dist != pt.dist:
                    want = "a DistributedTensor (window view)" if pt.dist else "a plain Tensor"
                    raise _err(ProgramTypeError, f"parameter '{p.name}' of {fname} expects {want}; "
                               f"got {describe(at)}", a.span, "TC104")
                if pt.dtype is not None and at.dtype is not pt.dtype:
                    raise _err(ProgramTypeError, f"parameter '{p.name}' of {fname} expects dtype "
                               f"{pt.dtype.name}; got {at.dtype.name}", a.span, "TC204")
                n1, n2 = numel(pt.shape), numel(at.shape)
                if n1 is not None and n2 is not None and n1 != n2:
                    raise _err(ProgramValueError, f"parameter '{p.name}' of {fname} expects shape "
                               f"{list(pt.shape)}; got {describe(at)}", a.span, "TC208")
            elif isinstance(pt, ScalarType):
                if not isinstance(at, ScalarType):
                    raise _err(ProgramTypeError, f"parameter '{p.name}' of {fname} expects a "
                               f"scalar; got {describe(at)}", a.span, "TC104")
            elif isinstance(pt, CommCtxType) and not isinstance(at, CommCtxType):
                raise _err(ProgramTypeError, f"parameter '{p.name}' of {fname} expects a "
                           f"CommCtx; got {describe(at)}", a.span, "TC104")

    def _call_result(self, fn_ir, args):
        rp = fn_ir.returns_param
        if isinstance(rp, tuple):
            return TupleType(tuple(args[i].type if i is not None else ANY for i in rp))
        if isinstance(rp, int):
            return args[rp].type
        return fn_ir.ret_type or NONE

    def _device_set(self, node):
        """Devices a ``device=`` expression covers (forms of the reference, §1.2)."""
        world = self.b.world
        span = self.span(node)
        e = self.expr(node)
        v = const_value(e)
        if isinstance(v, int) and not isinstance(v, bool):
            if not 0 <= v < world:
                raise _err(ProgramValueError, f"device={v} is out of range: the run has {world} "
                           f"rank(s) (device_ids has {world} entries)", span, "TC212",
                           hint="device= is a logical rank index in [0, len(device_ids))")
            return frozenset([v])
        if isinstance(e, N.Var) and e.name in self.loops:
            start, stop, step, stop_value = self.loops[e.name]
            if const_value(step) != 1:
                raise _err(ProgramValueError, "device=r loop must have step 1", span, "TC211")
            a, b = const_value(start), stop_value
            if not (isinstance(a, int) and isinstance(b, int)):
                raise _err(ProgramValueError, "device=r loop bound must be a constant or "
                           "pld.world_size()", span, "TC211")
            if not 0 <= a <= b <= world:
                raise _err(ProgramValueError, f"device=r loop covers ranks {a}..{b - 1}, outside "
                           f"the run's {world} rank(s)", span, "TC212")
            return frozenset(range(a, b))
        raise _err(ProgramValueError, "device= expression must be an integer constant or the "
                   f"induction variable of an enclosing pl.range loop; got '{ast.unparse(node)}'",
                   span, "TC211",
                   hint="write: for r in pl.range(pld.world_size()): chip(..., device=r)")


def sub_worker_results(body, parser) -> list:
    """A SubWorker runs in the controller and gives back nothing: where its
    call has a value (``out_f = self.reduce(a, b, f)``, ``return
    self.reduce(...)``), the call becomes a statement of its own followed by
    the same binding (or return) of the argument(s) it writes.  A call with a
    value anywhere else is refused."""
    return walk.rewrite_statements(body, _sub_worker_result)


def _sub_worker_result(s) -> list:
    value = s.value if isinstance(s, (N.Assign, N.Return)) else None
    if _valued_sub_worker(value):
        result = walk.written_result(value, s.span)
        return [N.ExprStmt(s.span, value),
                N.Assign(s.span, s.targets, result) if isinstance(s, N.Assign)
                else N.Return(s.span, result)]
    top = s.expr if isinstance(s, N.ExprStmt) else value
    for e in walk.exprs(s, shallow=True):
        if e is not top and _valued_sub_worker(e):
            raise _err(ProgramSyntaxError, f"the result of SubWorker {e.func.py_name} is "
                       f"used inside an expression; bind it to a name first "
                       f"(out = self.{e.func.py_name.rsplit('.', 1)[-1]}(...))", e.span,
                       "TC302")
    return [s]


def _valued_sub_worker(e) -> bool:
    return isinstance(e, N.FuncCall) and e.func.kind == SUBWORKER and \
        e.func.returns_param is not None
