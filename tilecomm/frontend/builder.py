"""Builds the typed IR of one specialisation of a program: the entry function,
every function it reaches (specialised per argument types) and the window
buffers it declares, plus the diagnostics of the statements it rejected.
Facts about the whole program and the verifier's rules run afterwards, in the
compiler, over this IR."""
from __future__ import annotations

import ast

from ..errors import ProgramSyntaxError, ProgramTypeError, ProgramValueError
from ..ir import nodes as N
from ..ir.types import (ANY, INOUT, NONE, OUT, Dim, DynVar, TensorType, TupleType, bind_shape)
from ..ir.annotations import annotation_type
from ..ir.kinds import HOST, ORCH, SUBWORKER
from ..ops.check import describe
from . import source as source_mod
from .common import _err
from .parser import FunctionParser


class ProgramBuilder:
    """Builds the IR of one specialisation of a program (entry + callees)."""

    def __init__(self, entry, *, world: int, platform, arg_types=None, self_ns=None):
        self.entry = entry
        self.world = world
        self.platform = platform
        self.arg_types = arg_types
        self.self_ns = self_ns
        self.bindings: dict = {}
        self.functions: dict = {}
        self._by_key: dict = {}
        self.buffers: list = []
        self.buffer_names: dict = {}
        self.spans: list = []
        self.diags: list = []
        self.incomplete: set = set()     # names used by statements that failed

    # ---------------------------------------------------------------- driver
    def build(self):
        """The program's IR and the diagnostics of the statements that failed
        (those statements are left out of the IR; checking goes on past them)."""
        fn_ir = self.specialise(self.entry, self.arg_types, call_span=None)
        if self.entry.kind == ORCH:
            fn_ir = self._host_of(fn_ir)
        prog = N.ProgramIR(entry=fn_ir, functions=self.functions, buffers=self.buffers,
                           world=self.world, spans=self.spans, platform=self.platform)
        return prog, list(self.diags), frozenset(self.incomplete)

    def _host_of(self, chip):
        """The HOST entry of a single-chip program: one dispatch of its chip
        orchestration function ``chip`` on the program's one device, passing
        its parameters through (what upstream's L2 runner does on a card)."""
        for p in chip.params:
            if isinstance(p.type, TensorType) and p.type.dist:
                raise _err(ProgramTypeError, f"parameter '{p.name}' is a DistributedTensor, but "
                           f"{chip.py_name} is the entry of a single-chip program (no HOST "
                           f"orchestrator allocates its window)", p.span, "TC104",
                           hint="add a @pl.function(level=pl.Level.HOST, "
                                "role=pl.Role.Orchestrator) that allocates the window")
        params = [N.Param(p.name, p.type, p.span) for p in chip.params]
        rp = chip.returns_param
        rt = TupleType(tuple(params[i].type if i is not None else ANY for i in rp)) \
            if isinstance(rp, tuple) else params[rp].type if isinstance(rp, int) \
            else chip.ret_type or NONE
        call = N.FuncCall(rt, chip.span, chip, [N.Var(p.type, p.span, p.name) for p in params],
                          None, frozenset(range(self.world)))
        name = f"{chip.name}__host"
        host = N.FunctionIR(name=name, kind=HOST, params=params, body=[N.Return(chip.span, call)],
                            span=chip.span, ret_type=rt, py_name=chip.py_name, returns_param=rp)
        self.functions[name] = host
        return host

    def span_id(self, span) -> int:
        self.spans.append(span)
        return len(self.spans) - 1

    def specialise(self, kfn, arg_types, call_span):
        """Parse ``kfn`` for the given argument types (None: its annotations)."""
        src = source_mod.load(kfn.fn)
        params = self._param_types(kfn, src, arg_types, call_span)
        key = (kfn.fn, tuple(p.type for p in params))
        if key in self._by_key:
            return self._by_key[key]
        name = kfn.fn.__name__
        if name in self.functions:
            name = f"{name}_{len(self.functions)}"
        fn_ir = N.FunctionIR(name=name, kind=kfn.kind, params=params, body=[],
                             span=src.span(src.tree), py_name=kfn.fn.__qualname__)
        self._by_key[key] = fn_ir
        self.functions[name] = fn_ir
        if kfn.kind == SUBWORKER:
            # plain Python run by the controller: not parsed; the runtime calls
            # the function itself (or the callback bound to its name)
            fn_ir.py_fn = kfn.fn
            fn_ir.ret_type = NONE
            fn_ir.returns_param = sub_worker_returns(kfn.fn, params, src)
            return fn_ir
        FunctionParser(self, kfn, src, fn_ir).parse()
        return fn_ir

    @staticmethod
    def _check_annotation_dims(t, name, span):
        """Annotation dims are positive integers or pl.dynamic expressions; a
        float would be truncated and a negative one is no shape at all."""
        if not isinstance(t, TensorType) or t.shape is None:
            return
        for i, d in enumerate(t.shape):
            if isinstance(d, Dim):
                continue
            if not isinstance(d, int) or isinstance(d, bool):
                raise _err(ProgramTypeError, f"parameter '{name}': tensor annotation dimension "
                           f"[{i}] is {d!r}; dimensions are integers or pl.dynamic(...)",
                           span, "TC106")
            if d <= 0:
                raise _err(ProgramValueError, f"parameter '{name}': tensor annotation dimension "
                           f"[{i}] is {d}; all dimensions must be positive", span, "TC210")

    def _param_types(self, kfn, src, arg_types, call_span):
        tree = src.tree
        args = tree.args
        pos = list(args.posonlyargs) + list(args.args)
        if kfn.is_method:
            if not pos or pos[0].arg != "self":
                raise _err(ProgramSyntaxError, f"method {tree.name} of a @pl.program class must "
                           f"take self as its first parameter", src.span(tree), "TC302")
            pos = pos[1:]
        if args.vararg or args.kwarg or args.kwonlyargs:
            raise _err(ProgramSyntaxError, "program functions take plain positional parameters "
                       "only (no *args, **kwargs or keyword-only parameters)",
                       src.span(tree), "TC302")
        params = []
        for i, a in enumerate(pos):
            span = src.span(a)
            if a.annotation is None:
                raise _err(ProgramSyntaxError, f"parameter '{a.arg}' needs a type annotation "
                           f"such as pl.Tensor[[rows, cols], pl.FP32]", span, "TC302")
            try:
                # evaluated at def time unless annotations are postponed (strings)
                ann = kfn.fn.__annotations__.get(a.arg, None)
                if ann is None or isinstance(ann, str):
                    ann = eval(compile(ast.Expression(a.annotation), src.file, "eval"),
                               src.globals, dict(src.closure))
            except Exception as e:  # an annotation is user code: report, don't crash
                hint = None
                if isinstance(e, NameError) and isinstance(
                        kfn.fn.__annotations__.get(a.arg), str):
                    hint = ("with 'from __future__ import annotations', a name used only in an "
                            "annotation of a nested function is not visible to it; define it at "
                            "module level or remove that import")
                raise _err(ProgramTypeError, f"parameter '{a.arg}': invalid annotation ({e})",
                           span, "TC106", hint) from None
            t = annotation_type(ann)
            if t is None:
                raise _err(ProgramTypeError, f"parameter '{a.arg}': {ann!r} is not a tilecomm "
                           f"type annotation", span, "TC106",
                           hint="use pl.Tensor[...], pl.Out[...], pl.Scalar[...] or "
                                "pld.DistributedTensor[...]")
            self._check_annotation_dims(t, a.arg, span)
            actual = arg_types[i] if arg_types is not None and i < len(arg_types) else None
            t = self._specialise_param(t, actual, a.arg, span, kfn, call_span)
            params.append(N.Param(a.arg, t, span))
        if arg_types is not None and len(arg_types) != len(params):
            raise _err(ProgramTypeError, f"{tree.name}() takes {len(params)} argument(s) "
                       f"({', '.join(p.name for p in params)}); got {len(arg_types)}",
                       call_span or src.span(tree), "TC103")
        for i, p in enumerate(params):
            if isinstance(p.type, TensorType):
                params[i].type = p.type.with_(origin=("param", i))
        return params

    def _specialise_param(self, t, actual, name, span, kfn, call_span=None):
        if isinstance(t, TensorType):
            if t.shape is None:                       # bare pl.Tensor: from the argument
                if not isinstance(actual, TensorType):
                    # the annotation is valid; the argument at the call is what is wrong
                    raise _err(ProgramTypeError, f"parameter '{name}' is a bare tensor annotation; "
                               f"its shape must come from a tensor argument; got "
                               f"{describe(actual)}", call_span or span, "TC107")
                return t.with_(shape=actual.shape, dtype=t.dtype or actual.dtype)
            if isinstance(actual, TensorType) and actual.shape is not None:
                self._unify(t.shape, actual.shape, name, span)
            return t.with_(shape=bind_shape(t.shape, self.bindings))
        return t

    def _unify(self, declared, actual, name, span):
        """Bind pl.dynamic dims of ``declared`` from the concrete ``actual`` shape."""
        if len(declared) != len(actual):
            return                                    # reported by the call checks
        for d, a in zip(declared, actual):
            if isinstance(d, DynVar) and d not in self.bindings and isinstance(a, int):
                self.bindings[d] = a
        for d, a in zip(declared, actual):
            if not isinstance(d, Dim):
                continue         # static dims: checked by the argument rules (TC410 / TC208)
            v = d.evaluate(self.bindings)
            if isinstance(v, int) and isinstance(a, int) and v != a:
                raise _err(ProgramValueError, f"parameter '{name}': dimension {d!r} is bound to "
                           f"{v} but the argument has {a}", span, "TC208",
                           hint="one pl.dynamic variable must have one value across parameters")


def sub_worker_returns(fn, params, src):
    """Which argument(s) a SubWorker's result is, read from its declaration
    (its body is Python, not parsed): a return annotation of one tensor with
    exactly one ``pl.Out`` / ``pl.InOut`` parameter is that parameter, a
    tuple of k tensors (``pl.Tuple[...]`` or ``tuple[...]``) with exactly k of
    them is those, in order -- the convention of every program function (a
    result is the tensor written).  None otherwise: the call has no value."""
    ann = fn.__annotations__.get("return")
    if isinstance(ann, str) and src.tree.returns is not None:   # postponed annotations
        try:
            ann = eval(compile(ast.Expression(src.tree.returns), src.file, "eval"),
                       src.globals, dict(src.closure))
        except Exception:      # user code: a bad annotation just gives the call no value
            return None
    if getattr(ann, "__origin__", None) is tuple:
        ann = TupleType(tuple(annotation_type(a) for a in ann.__args__))
    ret = annotation_type(ann)
    outs = [i for i, p in enumerate(params)
            if isinstance(p.type, TensorType) and p.type.direction in (OUT, INOUT)]
    if isinstance(ret, TensorType) and len(outs) == 1:
        return outs[0]
    if isinstance(ret, TupleType) and len(ret.items) == len(outs) and outs and \
            all(isinstance(t, TensorType) for t in ret.items):
        return tuple(outs)
    return None
