"""Task scopes of orchestration functions: ``with pl.at(...) as tid:``,
``with pl.spmd(n)`` / ``for i in pl.spmd(n)``, ``with pl.manual_scope():``.

A task body is parsed as InCore code and outlined into a function of its own
whose parameters are the names it captures (values at submission); the
``TaskScope`` statement left in the orchestration function calls it.  Once a
function opens a task scope, its plain kernel calls are tasks too (see
``kernel_tasks``).  Which captured tensors a task reads or writes is derived
here, from the body, for the scheduler's dependency inference
(``analysis.tasks``)."""
from __future__ import annotations

import ast

from ..dtypes import INDEX, TASK_ID
from ..errors import ProgramSyntaxError, ProgramTypeError, ProgramValueError
from ..ir import forms as control
from ..ir.functions import KernelFunction
from ..ir import nodes as N
from ..ir import walk
from ..ir.enums import Level, Role, ScopeMode
from ..ir.kinds import HOST, INCORE, KIND_NAMES, ORCH
from ..ir.types import ANY, NONE, ArrayType, ScalarType, TaskIdType, TensorType
from ..ops import pl_ops
from ..analysis.tasks import (deferred_collective_violations, is_deferred_collective,
                              waiter_violations)
from ..ops.check import const_value, describe
from .common import _err
from .escapes import carry_out

_AT_KW = {"level", "role", "optimizations", "deps", "no_dep_args", "dumps",
          "allow_early_resolve", "name_hint", "windowize"}
_SPMD_KW = {"core_num", "sync_start", "name_hint", "optimizations", "deps",
            "allow_early_resolve", "predicate"}
MAX_CONDITIONS = 64


class TaskCtx:
    """The task scope being parsed."""

    def __init__(self, kind, span, allow_early_resolve):
        self.kind = kind                 # "at" or "spmd"
        self.span = span
        self.allow_early_resolve = allow_early_resolve
        self.block_read = False
        self.dump_tags: set = set()      # names given to pl.dump_tag in the body
        self.args: list = []             # the names the body captures (its arguments)


class ScopeParsing:
    """Mixin of ``FunctionParser``: ``with`` statements and ``pl.spmd`` loops."""

    task = None          # TaskCtx while parsing a task body
    manual = 0           # depth of manual scopes around the statement
    _standalone = None   # the call of the expression statement being parsed

    def scoped_names(self) -> dict:
        """Names bound inside an outlined scope that stay there (``escapes.py``)."""
        names = self.__dict__.get("_scoped")
        if names is None:
            names = self._scoped = {}
        return names

    def _scope_err(self, node, msg, code="TC330", hint=None, cls=ProgramSyntaxError):
        return _err(cls, msg, self.span(node), code, hint)

    def s_with(self, s: ast.With):
        if len(s.items) != 1:
            raise self._scope_err(s, "a with statement takes exactly one scope", "TC302")
        item = s.items[0]
        call = item.context_expr
        form = self._value(call.func) if isinstance(call, ast.Call) else None
        if form not in control.TASK_FORMS:
            raise self.syntax(call, "with statements open pl.at(...), pl.spmd(...) or "
                              "pl.manual_scope() scopes")
        target = item.optional_vars
        if target is not None and not isinstance(target, ast.Name):
            raise self._scope_err(target, "'as' binds a TaskId to a plain name")
        if form is control.manual_scope or form is control.scope:
            if target is not None:
                raise self._scope_err(target, f"{form.name}() does not produce a TaskId")
            return self._manual(s, call, form)
        if form is control.spmd:
            return self._spmd(s, call, target.id if target is not None else None, None)
        return self._at(s, call, target.id if target is not None else None)

    # ------------------------------------------------------------ placement
    def _check_task_place(self, node, what):
        if self.task is not None:
            raise self._scope_err(node, f"{what} cannot be nested inside another task scope "
                                  f"(opened at line {self.task.span.line})",
                                  hint="open task scopes side by side in the orchestration "
                                       "function")
        if self.kind != ORCH:
            raise self._scope_err(node, f"{what} opens a task of a chip orchestration function "
                                  f"(@pl.jit); here it is used in {KIND_NAMES[self.kind]}",
                                  code="TC301")

    def _kwargs(self, call, allowed, form):
        kw = {}
        for k in call.keywords:
            if k.arg is None:
                raise self.syntax(k, "**kwargs in calls are not supported")
            if k.arg not in allowed:
                raise _err(ProgramTypeError, f"{form}() got an unexpected keyword argument "
                           f"'{k.arg}'", self.span(k.value), "TC103",
                           hint=f"accepted: {', '.join(sorted(allowed))}")
            kw[k.arg] = k.value
        return kw

    def _static_bool(self, kw, name, form):
        node = kw.get(name)
        if node is None:
            return False
        v = const_value(self.expr(node))
        if not isinstance(v, bool):
            raise _err(ProgramTypeError, f"{form}({name}=...) must be a bool literal",
                       self.span(node), "TC105")
        return v

    def _name_hint(self, kw, form):
        node = kw.get("name_hint")
        if node is None:
            return ""
        v = const_value(self.expr(node))
        if not isinstance(v, str):
            raise _err(ProgramTypeError, f"{form}(name_hint=...) must be a string literal",
                       self.span(node), "TC105")
        return v

    def _deps(self, node):
        if node is None:
            return []
        if not isinstance(node, (ast.List, ast.Tuple)):
            raise self._scope_err(node, "deps= takes a list of TaskIds or TaskId arrays: "
                                  "deps=[tid, tids]")
        out = []
        for e in node.elts:
            x = self.expr(e)
            t = x.type
            ok = t is ANY or isinstance(t, TaskIdType) or \
                isinstance(t, ScalarType) and t.dtype is TASK_ID or \
                isinstance(t, (TensorType, ArrayType)) and t.dtype is TASK_ID
            if not ok:
                raise _err(ProgramTypeError, f"deps= entries are TaskIds (as tid of a task "
                           f"scope) or pl.TASK_ID arrays; got {describe(t)}", self.span(e),
                           "TC330")
            out.append(x)
        return out

    # ------------------------------------------------------------ pl.at
    def _at(self, s, call, target):
        span = self.span(s)
        kw = self._kwargs(call, _AT_KW, "pl.at")
        if call.args:
            if len(call.args) > 2:
                raise _err(ProgramTypeError, "pl.at() takes level and role positionally, then "
                           "keywords", self.span(call), "TC103")
            kw.setdefault("level", call.args[0])
            if len(call.args) == 2:
                kw.setdefault("role", call.args[1])
        if "level" not in kw:
            raise _err(ProgramTypeError, "pl.at() needs level=, e.g. "
                       "pl.at(level=pl.Level.CORE_GROUP)", self.span(call), "TC103")
        level = const_value(self.expr(kw["level"]))
        if not isinstance(level, Level):
            raise _err(ProgramValueError, f"pl.at level must be a pl.Level member; got "
                       f"{level!r}", self.span(kw["level"]), "TC214")
        if self.kind == HOST:
            role = const_value(self.expr(kw["role"])) if "role" in kw else None
            if level is not Level.CHIP or role is not Role.Orchestrator:
                raise self._scope_err(call, "in a HOST orchestrator pl.at opens an inline chip "
                                      "scope: pl.at(level=pl.Level.CHIP, "
                                      "role=pl.Role.Orchestrator)")
            if target is not None:
                raise self._scope_err(s.items[0].optional_vars, "an inline chip scope is a "
                                      "dispatch, not a task: it has no TaskId")
            return self._inline_chip(s, call, self._dump_names(kw.get("dumps"), "pl.at"))
        self._check_task_place(call, "pl.at(...)")
        if level is not Level.CORE_GROUP:
            raise _err(ProgramValueError, f"in a chip orchestration function pl.at opens a "
                       f"task at level=pl.Level.CORE_GROUP; got pl.Level.{level.name}",
                       self.span(kw["level"]), "TC330")
        early = self._static_bool(kw, "allow_early_resolve", "pl.at")
        ctx = TaskCtx("at", span, early)
        excluded = self._no_dep_args(kw.get("no_dep_args"))
        deps = self._deps(kw.get("deps"))
        stmts = self._task(s, ctx, self._name_hint(kw, "pl.at"), target, deps, None, None,
                           excluded, self._dump_names(kw.get("dumps"), "pl.at"))
        if stmts[0].waiter and early:
            split = any(is_deferred_collective(e) for e in _calls(stmts[0].call.func.body))
            what = "a defer=True collective" if split else "pld.system.defer_wait"
            raise _err(ProgramValueError, f"a pl.at task containing {what} cannot "
                       "use allow_early_resolve=True: its consumers must start only after "
                       "its TaskId completes", self.span(kw["allow_early_resolve"]),
                       "TC332" if split else "TC331")
        return stmts

    def _no_dep_args(self, node):
        if node is None:
            return set()
        if not isinstance(node, (ast.List, ast.Tuple)) or \
                not all(isinstance(e, ast.Name) for e in node.elts):
            raise self._scope_err(node, "no_dep_args= takes a list of captured tensor names")
        for e in node.elts:
            if not isinstance(self.env.get(e.id), TensorType):
                raise _err(ProgramTypeError, f"no_dep_args names tensors; '{e.id}' is "
                           f"{describe(self.env.get(e.id))}", self.span(e), "TC330")
        return {e.id for e in node.elts}

    def _inline_chip(self, s, call, dumps=()):
        """The body becomes a chip orchestration function dispatched without
        device= (comm-less: the host runtime places it round-robin).
        ``dumps=`` tags captured tensors of the chip function: the dispatch
        (and every task inside that takes them) dumps them."""
        span = self.span(s)
        for n in ast.walk(s):
            if isinstance(n, ast.Return):
                raise self._scope_err(n, "an inline chip scope cannot return; its results are "
                                      "the host tensors it writes")
        used = {n.id for st in s.body for n in ast.walk(st)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        captured = [name for name in self.env if name in used]
        tagged = {captured[i] for i in self._dump_indices(dumps, captured, "chip scope")}
        outer_env, outer_loops = dict(self.env), dict(self.loops)
        params = []
        for k, name in enumerate(captured):
            t = outer_env[name]
            if isinstance(t, TensorType) and t.dist:
                raise _err(ProgramTypeError, f"an inline chip scope is comm-less: it cannot "
                           f"use the window '{name}'", span, "TC330",
                           hint="pass windows to a @pl.jit function dispatched with device=r")
            if isinstance(t, TensorType):
                t = t.with_(origin=("param", k))
            params.append(N.Param(name, t, span))
            self.env[name] = t
        fname = f"{self.fn.name}__chip_{len(self.b.functions)}"
        fn_ir = N.FunctionIR(name=fname, kind=ORCH, params=params, body=[], span=span,
                             py_name=f"{self.fn.py_name}.chip", ret_type=NONE,
                             dump_tags=tagged)
        self.b.functions[fname] = fn_ir
        saved = self.kind, self.fn, self.returns
        self.kind, self.fn, self.returns = ORCH, fn_ir, []
        try:
            body = self.block(s.body)
            if fn_ir.tasks:
                body = kernel_tasks(body, self)
        finally:
            self.kind, self.fn, self.returns = saved
            inner_env, self.env, self.loops = self.env, outer_env, outer_loops
        fn_ir.body = body
        fc = N.FuncCall(NONE, span, fn_ir, [N.Var(outer_env[n], span, n) for n in captured],
                        None, frozenset(range(self.b.world)))
        return [N.ExprStmt(span, fc)] + carry_out(self, s.body, inner_env, outer_env, captured,
                                                   span, "inline chip scope")

    # ------------------------------------------------------------ pl.spmd
    def _spmd(self, s, call, target, block_var):
        span = self.span(s)
        kw = self._kwargs(call, _SPMD_KW, "pl.spmd")
        if call.args:
            if len(call.args) > 1:
                raise _err(ProgramTypeError, "pl.spmd() takes core_num positionally, then "
                           "keywords", self.span(call), "TC103")
            kw.setdefault("core_num", call.args[0])
        if "core_num" not in kw:
            raise _err(ProgramTypeError, "pl.spmd() needs the block count: pl.spmd(n)",
                       self.span(call), "TC103")
        self._check_task_place(call, "pl.spmd(...)")
        if "deps" in kw and (target is None or block_var is not None):
            raise self._scope_err(kw["deps"], "pl.spmd() does not accept 'deps=' here; only "
                                  "'with pl.spmd(n, deps=[...]) as tid:' does")
        if "predicate" in kw:
            raise self._scope_err(kw["predicate"], "pl.spmd(predicate=...) is not supported")
        n = self.expr(kw["core_num"])
        v = const_value(n)
        if not (isinstance(n.type, ScalarType) and n.type.dtype is not None and
                n.type.dtype.is_int) or isinstance(v, bool):
            raise _err(ProgramTypeError, f"pl.spmd core_num must be an integer; got "
                       f"{describe(n.type)}", self.span(kw["core_num"]), "TC102")
        if isinstance(v, int) and v <= 0:
            raise _err(ProgramValueError, f"pl.spmd core_num must be positive; got {v}",
                       self.span(kw["core_num"]), "TC210")
        early = self._static_bool(kw, "allow_early_resolve", "pl.spmd")
        self._static_bool(kw, "sync_start", "pl.spmd")
        ctx = TaskCtx("spmd", span, early)
        deps = self._deps(kw.get("deps"))
        return self._task(s, ctx, self._name_hint(kw, "pl.spmd"), target, deps, n, block_var,
                          set())

    def spmd_for(self, s: ast.For):
        if s.orelse:
            raise self.syntax(s, "for ... else is not supported")
        if not isinstance(s.target, ast.Name):
            raise self._scope_err(s.target, "for i in pl.spmd(n): the block index is a plain "
                                  "name")
        return self._spmd(s, s.iter, None, s.target.id)

    # ------------------------------------------------------------ manual scopes
    def _manual(self, s, call, form):
        if self.kind != ORCH or self.task is not None:
            raise self._scope_err(call, f"{form.name}() is a scope of a chip orchestration "
                                  f"function (@pl.jit), outside task bodies")
        mode = ScopeMode.MANUAL
        if form is control.scope:
            kw = self._kwargs(call, {"mode"}, "pl.scope")
            if call.args or "mode" not in kw:
                raise _err(ProgramTypeError, "pl.scope() takes mode=pl.ScopeMode.MANUAL or "
                           "AUTO", self.span(call), "TC103")
            mode = const_value(self.expr(kw["mode"]))
            if not isinstance(mode, ScopeMode):
                raise _err(ProgramValueError, f"pl.scope mode must be a pl.ScopeMode member; "
                           f"got {mode!r}", self.span(kw["mode"]), "TC214")
        elif call.args or call.keywords:
            raise _err(ProgramTypeError, "pl.manual_scope() takes no arguments",
                       self.span(call), "TC103")
        if self.manual:
            what = "a manual scope" if mode is ScopeMode.MANUAL else "an AUTO scope"
            raise self._scope_err(call, f"{what} cannot be nested inside a manual scope",
                                  hint="close the manual scope first")
        self.manual += mode is ScopeMode.MANUAL
        try:
            body = self.block(s.body)
        finally:
            self.manual -= mode is ScopeMode.MANUAL
        if mode is ScopeMode.MANUAL:
            for st, _ in walk.stmts_in_loops(body):
                st.manual = True         # read when its kernel calls become tasks
        return body

    # ------------------------------------------------------------ the task
    def _task(self, s, ctx, name_hint, target, deps, blocks, block_var, excluded, dumps=()):
        span = self.span(s)
        for n in ast.walk(s):
            if isinstance(n, ast.Return):
                raise self._scope_err(n, "a task body cannot return; its results are the "
                                      "tensors it writes")
        used = {n.id for st in s.body for n in ast.walk(st)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        captured = [name for name in self.env if name in used and name != block_var]
        dumped = self._dump_indices(dumps, captured, "task")
        ctx.args = captured
        outer_env, outer_loops = dict(self.env), dict(self.loops)
        params = []
        for k, name in enumerate(captured):
            t = outer_env[name]
            if isinstance(t, TensorType):
                t = t.with_(origin=("param", k))
            params.append(N.Param(name, t, span))
            self.env[name] = t
        base = self.fn.name
        fname = f"{base}__{_ident(name_hint) or 'task'}_{len(self.b.functions)}"
        fn_ir = N.FunctionIR(name=fname, kind=INCORE, params=params, body=[], span=span,
                             py_name=f"{self.fn.py_name}.{name_hint or 'task'}",
                             ret_type=None)
        self.b.functions[fname] = fn_ir
        kind, self.kind, self.task = self.kind, INCORE, ctx
        ndiags = len(self.b.diags)
        try:
            body = []
            if block_var is not None:
                self.env[block_var] = ScalarType(INDEX)
                body.append(N.Assign(span, [block_var], self._block_idx_call(s)))
                ctx.block_read = True
            body += self.block(s.body)
        finally:
            self.kind, self.task = kind, None
            inner_env, self.env, self.loops = self.env, outer_env, outer_loops
        fn_ir.body = body
        fn_ir.ret_type = NONE
        if len(self.b.diags) != ndiags:
            fn_ir.body = []
        waiter = any(isinstance(e, N.Call) and e.record.defers for e in _calls(body))
        # a defer=True collective leaves deferred conditions on the task, as
        # defer_wait does: the scheduler admits and watches it as a waiter
        split = any(is_deferred_collective(e) for e in _calls(body))
        waiter = waiter or split
        if ctx.kind == "spmd" and not ctx.block_read and \
                not any(isinstance(e, N.FuncCall) for e in _calls(body)):
            raise self._scope_err(s, "a pl.spmd body must read pl.get_block_idx() or dispatch "
                                  "a kernel: otherwise every block does the same work",
                                  hint="use for i in pl.spmd(n): ... or call a kernel")
        if split and len(self.b.diags) == ndiags:
            bad = deferred_collective_violations(body)
            if bad is not None:
                raise _err(ProgramSyntaxError, bad[1], bad[0].span, "TC332",
                           "end the task with the collective and read its result in a task "
                           "with deps=[tid]")
        elif waiter and len(self.b.diags) == ndiags:
            self._check_waiter(body)
        call = N.FuncCall(NONE, span, fn_ir,
                          [N.Var(outer_env[n], span, n) for n in captured], None, None)
        self.fn.tasks = True
        if target is not None:
            self.env[target] = ScalarType(TASK_ID)
        dumped |= {captured.index(name) for name in ctx.dump_tags}
        node = N.TaskScope(span, call, name_hint or fn_ir.py_name.rsplit(".", 1)[-1],
                           target, deps, blocks, [], bool(self.manual), waiter, ctx.kind,
                           frozenset(excluded), tuple(sorted(dumped)))
        what = "pl.spmd task" if ctx.kind == "spmd" else "pl.at task"
        return [node] + carry_out(self, s.body, inner_env, outer_env, captured, span, what,
                                  exclude=(block_var, target))

    def _block_idx_call(self, s):
        rec = pl_ops.get_block_idx.record
        return N.Call(ScalarType(INDEX), self.span(s), rec, {}, {})

    def _check_waiter(self, body):
        bad = waiter_violations(body)
        if bad is not None:
            node, msg = bad
            raise _err(ProgramSyntaxError, msg, node.span, "TC331",
                       "put the continuation in its own task with deps=[wait_tid]")
        n = _count_conditions(body)
        if n is None or n[0] is None:
            at = n[1] if n else None
            raise _err(ProgramValueError, "a loop that registers pld.system.defer_wait "
                       "conditions must have a statically known positive trip count",
                       at.span if at is not None else None, "TC331")
        if n[0] > MAX_CONDITIONS:
            raise _err(ProgramValueError, f"a deferred waiter supports at most "
                       f"{MAX_CONDITIONS} conditions, but this one may register {n[0]}",
                       n[1].span, "TC241", hint="split the conditions over several waiters")

    def deferred_call_check(self, record, node):
        """Where a ``defers`` op may be called (from ``_op_call``)."""
        if self.task is None or self.task.kind != "at":
            where = "under pl.spmd" if self.task is not None else "here"
            raise _err(ProgramSyntaxError, f"pld.system.defer_wait must be the body of a "
                       f"dedicated top-level pl.at(level=pl.Level.CORE_GROUP) waiter task; "
                       f"it is used {where}", self.span(node), "TC331",
                       hint="with pl.at(level=pl.Level.CORE_GROUP) as wait_tid: "
                            "pld.system.defer_wait(...)")
        if node is not self._standalone:
            raise _err(ProgramSyntaxError, "pld.system.defer_wait is side-effect-only and must "
                       "be used as a standalone statement", self.span(node), "TC331")

    def deferred_collective(self, record, node):
        """Where a ``defer=True`` collective may be called (from ``_op_call``):
        as a statement of its own in a pl.at(CORE_GROUP) task body -- the task
        whose TaskId carries the call's completion."""
        where = None
        if self.task is None:
            where = ("in an InCore kernel, which has no TaskId of its own to defer"
                     if self.kind == INCORE else f"in {KIND_NAMES[self.kind]}")
        elif self.task.kind != "at":
            where = "under pl.spmd, whose blocks share one TaskId"
        if where is not None:
            raise _err(ProgramSyntaxError, f"{record.name}(defer=True) must be called in the "
                       f"body of a pl.at(level=pl.Level.CORE_GROUP) task; it is called {where}",
                       self.span(node), "TC332",
                       hint="with pl.at(level=pl.Level.CORE_GROUP) as tid: target = "
                            f"{record.name}(..., defer=True)")
        if node is not self._statement_call:
            raise _err(ProgramSyntaxError, f"{record.name}(defer=True) must be a statement of "
                       f"its own (`x = ...(defer=True)` or a bare call): its result is complete "
                       f"only when the task's TaskId is", self.span(node), "TC332")

    def block_idx_read(self):
        if self.task is not None:
            self.task.block_read = True


_SUBMIT_KW = {"deps", "dumps", "allow_early_resolve", "predicate", "name_hint"}


class SubmitParsing:
    """Mixin of ``FunctionParser``: ``pl.submit`` / ``pl.spmd_submit`` (class form)."""

    def submit_stmt(self, target, call: ast.Call, s):
        form = self._value(call.func)
        span = self.span(s)
        spmd = form is control.spmd_submit
        allowed = _SUBMIT_KW | ({"core_num", "sync_start"} if spmd else set())
        kw = self._kwargs(call, allowed, form.name)
        self._check_task_place(call, f"{form.name}(...)")
        if not call.args:
            raise _err(ProgramTypeError, f"{form.name}() takes the kernel first: "
                       f"{form.name}(self.kernel, *args)", self.span(call), "TC103")
        callee = self._value(call.args[0])
        if not isinstance(callee, KernelFunction) or callee.kind != INCORE:
            raise self._scope_err(call.args[0], f"{form.name}() submits an InCore kernel "
                                  f"(self.<kernel>); got {ast.unparse(call.args[0])}")
        if "predicate" in kw:
            raise self._scope_err(kw["predicate"], f"{form.name}(predicate=...) is not "
                                  f"supported")
        blocks = None
        if spmd:
            if "core_num" not in kw:
                raise _err(ProgramTypeError, "pl.spmd_submit() needs core_num=",
                           self.span(call), "TC103")
            blocks = self.expr(kw["core_num"])
            v = const_value(blocks)
            if isinstance(v, int) and not isinstance(v, bool) and v <= 0:
                raise _err(ProgramValueError, f"pl.spmd_submit core_num must be positive; got "
                           f"{v}", self.span(kw["core_num"]), "TC210")
            self._static_bool(kw, "sync_start", form.name)
        self._static_bool(kw, "allow_early_resolve", form.name)
        deps = self._deps(kw.get("deps"))
        dumped = self._submit_dumps(kw.get("dumps"), call.args[1:], form.name)
        inner = ast.Call(func=call.args[0], args=call.args[1:], keywords=[])
        ast.copy_location(inner, call)
        fc = self._func_call(callee, inner)
        rp = fc.func.returns_param
        results = list(rp) if isinstance(rp, tuple) else ([] if rp is None else [rp])
        names = [] if target is None else \
            [target.id] if isinstance(target, ast.Name) else \
            [e.id for e in target.elts] if isinstance(target, (ast.Tuple, ast.List)) and \
            all(isinstance(e, ast.Name) for e in target.elts) else None
        if names is None or names and len(names) != len(results) + 1 or \
                any(i is None for i in results):
            raise self._scope_err(s, f"{form.name}() gives the kernel's results (the tensors "
                                  f"it returns: {len(results)}) and then the TaskId; assign "
                                  f"{len(results) + 1} name(s)")
        self.fn.tasks = True
        hint = self._name_hint(kw, form.name) or fc.func.py_name.rsplit(".", 1)[-1]
        out = [N.TaskScope(span, fc, hint, names[-1] if names else None, deps, blocks,
                           manual=bool(self.manual), kind="call",
                           dumps=tuple(sorted(dumped)))]
        for name, i in zip(names[:-1], results):
            out.append(N.Assign(span, [name], fc.args[i]))
            self.env[name] = fc.args[i].type
        if names:
            self.env[names[-1]] = ScalarType(TASK_ID)
        return out


def kernel_tasks(body, parser) -> list:
    """In a function that submits tasks, each plain kernel call becomes a task
    of its own (the kernel is the task's function; its arguments are read or
    written as its body does)."""
    return walk.rewrite_statements(body, _kernel_task)


def _kernel_task(s) -> list:
    call = s.expr if isinstance(s, N.ExprStmt) else \
        s.value if isinstance(s, N.Assign) else None
    if not (isinstance(call, N.FuncCall) and call.func.kind == INCORE):
        return [s]
    task = N.TaskScope(s.span, call, call.func.py_name.rsplit(".", 1)[-1],
                       manual=bool(getattr(s, "manual", False)), kind="call")
    if not isinstance(s, N.Assign):
        return [task]
    rp = call.func.returns_param
    idx = rp if isinstance(rp, tuple) else (rp,)
    if any(i is None for i in idx) or len(idx) != len(s.targets) and \
            not (len(s.targets) == 1 and not isinstance(rp, tuple)):
        raise _err(ProgramSyntaxError, f"in a function that submits tasks, a "
                   f"kernel's result is only available as the tensor it writes; "
                   f"{call.func.py_name} returns a value that is not one of its "
                   f"arguments", s.span, "TC330")
    return [task, N.Assign(s.span, s.targets, walk.written_result(call, s.span))]


def _calls(body):
    return walk.exprs(body)


def _count_conditions(body, mult=1):
    """(registrations a body may make, the first offending node) -- count None
    when a loop with a runtime trip count registers."""
    total = 0
    first = None
    for s in body:
        if isinstance(s, N.For):
            inner = _count_conditions(s.body)
            if inner is None or inner[0] is None:
                return inner if inner else (None, s)
            if inner[0]:
                a, b, c = (const_value(x) for x in (s.start, s.stop, s.step))
                if not all(isinstance(x, int) for x in (a, b, c)) or c == 0 or \
                        len(range(a, b, c)) <= 0:
                    return None, s
                total += inner[0] * len(range(a, b, c))
                first = first or inner[1]
        elif isinstance(s, N.If):
            a, b = _count_conditions(s.body), _count_conditions(s.orelse)
            for x in (a, b):
                if x is None or x[0] is None:
                    return x
            total += max(a[0], b[0])
            first = first or a[1] or b[1]
        elif isinstance(s, N.ExprStmt) and isinstance(s.expr, N.Call) and s.expr.record.defers:
            total += 1
            first = first or s.expr
    return total * mult, first


def _ident(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text)[:40]

