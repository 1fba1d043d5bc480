"""Facts about tasks: which captured tensors a task reads or writes, and
where (for the scheduler's dependency inference), and the deferred-waiter
contract over a task body.

A tensor argument of an op is *written* when the record names it in
``writes`` (or, for an op with a local write effect that names none, always),
*untracked* when the record reaches it only as a signal cell or a peer's copy
(``untracked``: notify, wait, remote stores and loads, put's destination,
get's source), and *read* otherwise.  A region is kept when its offsets are
constants or names the task captured and never rebinds; otherwise the whole
tensor counts.
"""
from __future__ import annotations

from ..ir import nodes as N
from ..ir import walk
from ..ir.effects import Effect
from ..ir.types import TensorType, TileType, is_static
from ..ops import pl_ops

READ, WRITE = "r", "w"
_LOCAL_WRITE = {Effect.WRITE}


def _portable(exprs, stable: set, subst=None):
    """``exprs`` if each is a constant or a stable captured name (mapped through
    ``subst``), else None."""
    out = []
    for e in exprs:
        if isinstance(e, N.Const) and isinstance(e.value, int):
            out.append(e)
        elif isinstance(e, N.Var) and e.name in stable and subst is None:
            out.append(e)
        elif isinstance(e, N.Var) and subst is not None and e.name in subst:
            out.append(subst[e.name])
        else:
            return None
    return out


def _items(e):
    return list(e.items) if isinstance(e, (N.ListExpr, N.TupleExpr)) else None


def _region(call, pname, stable, subst):
    """(offsets, extents) of a load / store, or None (all of the tensor)."""
    rec, a = call.record, call.args
    if rec is pl_ops.load.record and pname == "tensor":
        offs, ext = _items(a.get("offsets")), _items(a.get("shapes"))
    elif rec is pl_ops.store.record and pname == "output_tensor":
        offs = _items(a.get("offsets"))
        t = a["tile"].type
        shp = t.valid_shape or t.shape if isinstance(t, TileType) else None
        ext = None if shp is None or not all(is_static(d) for d in shp) else \
            [N.Const(None, call.span, int(d)) for d in shp]
    else:
        return None
    if offs is None or ext is None:
        return None
    offs, ext = _portable(offs, stable, subst), _portable(ext, stable, subst)
    if offs is None or ext is None:
        return None
    return offs, ext


def body_accesses(fn: N.FunctionIR, subst=None) -> dict:
    """param index -> list of (mode, offsets | None, extents | None)."""
    stable = {p.name for p in fn.params} - walk.assigned(fn.body)
    out: dict = {}
    # names bound to a view of a parameter (v = t[1:2, :]) alias it
    alias: dict = {}
    for s, _ in walk.stmts_in_loops(fn.body):
        if isinstance(s, N.Assign) and len(s.targets) == 1:
            v = s.value.value if isinstance(s.value, N.Index) else s.value
            i = walk.param_index(v) if not isinstance(v, N.Var) or v.name not in alias \
                else alias[v.name]
            if i is not None and isinstance(s.value, (N.Index, N.Var)):
                alias[s.targets[0]] = i

    def note(expr, mode, region=None):
        base = expr.value if isinstance(expr, N.Index) else expr
        i = walk.param_index(base)
        if i is None and isinstance(base, N.Var) and base.name in alias:
            i = alias[base.name]
            region = None
        if i is None or not isinstance(fn.params[i].type, TensorType):
            return
        if isinstance(expr, N.Index):
            region = None            # a view's region: kept whole (simple and safe)
        out.setdefault(i, []).append((mode,) + (region or (None, None)))

    for s, _ in walk.stmts_in_loops(fn.body):
        if isinstance(s, N.StoreIndex):
            note(s.target, WRITE)
    for e in walk.exprs(fn.body):
        if isinstance(e, N.Call):
            rec = e.record
            write_all = not rec.writes and rec.effects & _LOCAL_WRITE
            for pname, a in e.args.items():
                if pname in rec.untracked or not isinstance(getattr(a, "type", None), TensorType):
                    continue
                mode = WRITE if pname in rec.writes or write_all else READ
                note(a, mode, _region(e, pname, stable, subst))
        elif isinstance(e, N.FuncCall):
            inner = body_accesses(e.func)
            for j, uses in inner.items():
                if j < len(e.args):
                    for mode, _, _ in uses:
                        note(e.args[j], mode)
        elif isinstance(e, N.Index):
            note(e, READ)
    return out


def _merge(uses):
    """One access per tensor: a write if any use writes; one region only when
    every use names the same constant region."""
    mode = WRITE if any(u[0] == WRITE for u in uses) else READ
    regions = {(tuple(map(_key, u[1])), tuple(map(_key, u[2]))) if u[1] is not None else None
               for u in uses}
    if len(regions) == 1 and None not in regions:
        return mode, uses[0][1], uses[0][2]
    return mode, None, None


def _key(e):
    return ("c", e.value) if isinstance(e, N.Const) else ("v", getattr(e, "name", id(e)))


def annotate(prog: N.ProgramIR) -> None:
    """Fill in ``TaskScope.accesses`` of every task of the program."""
    for fn in prog.functions.values():
        if not fn.tasks:
            continue
        for e in _task_scopes(fn.body):
            e.accesses = task_scope_accesses(e)


def _task_scopes(body):
    for s, _ in walk.stmts_in_loops(body):
        if isinstance(s, N.TaskScope):
            yield s


def task_scope_accesses(ts: N.TaskScope) -> list:
    call = ts.call
    fn = call.func
    if ts.kind == "call":
        subst = {p.name: a for p, a in zip(fn.params, call.args)
                 if not isinstance(p.type, TensorType)}
        subst = {k: v for k, v in subst.items() if isinstance(v, (N.Var, N.Const))}
        uses = body_accesses(fn, subst)
    else:
        uses = body_accesses(fn)
    out = []
    for i, u in sorted(uses.items()):
        if fn.params[i].name in ts.no_dep:
            continue
        mode, offs, ext = _merge(u)
        out.append(N.TaskAccess(i, mode, offs, ext))
    return out


def waiter_violations(body):
    """(node, message) of the first statement of a waiter body that breaks the
    deferred-completion contract, or None.  Before the first registration a
    waiter may read scalars (``pl.read``); after it only scalar work and more
    registrations; never a tensor update, communication or a kernel call."""
    registered = False
    for s, _ in walk.stmts_in_loops(body):
        if isinstance(s, N.StoreIndex):
            return s, "a deferred waiter cannot create or update tensors"
        # a registration's own operands are evaluated before it registers
        defers = False
        for e in walk.exprs(s, shallow=True):
            if isinstance(e, N.FuncCall):
                return e, "a deferred waiter cannot dispatch a kernel"
            if not isinstance(e, N.Call):
                continue
            rec = e.record
            if rec.defers:
                defers = True
                continue
            if rec.effects - {Effect.READ}:
                return e, (f"a deferred waiter cannot run {rec.name}: it may only read "
                           f"scalars and register conditions")
            if registered and rec.effects:
                return e, (f"a deferred waiter cannot execute tensor reads, payload, cache, "
                           f"communication, or continuation work after pld.system.defer_wait "
                           f"registration begins ({rec.name})")
            if rec.effects and isinstance(e.type, (TensorType, TileType)):
                return e, f"a deferred waiter cannot load tensors ({rec.name})"
        registered = registered or defers
    return None


def is_deferred_collective(e) -> bool:
    """A ``pld.tensor.*`` collective called with ``defer=True``."""
    return isinstance(e, N.Call) and e.record.collective and bool(e.extra.get("deferred"))


def deferred_collective_violations(body):
    """(node, message) of the first statement of a pl.at task body that
    breaks the split-phase contract of a ``defer=True`` collective, or None.

    The call's data and arrivals leave while the task runs; its result is
    complete only when the TaskId is.  So on every path through the body the
    deferred call is the last work on tensors: after it only scalar work
    (nothing after it could see the result, and more communication or a
    second deferred call on the way would run ahead of the completion it
    needs).  It is not inside a loop of the body: each trip would add a
    second round of credits to a signal whose first round is still pending.
    Each arm of an ``if`` may issue its own."""

    def run(stmts, issued, loop):
        for s in stmts:
            if isinstance(s, N.If):
                a = run(s.body, issued, loop)
                if isinstance(a, tuple):
                    return a
                b = run(s.orelse, issued, loop)
                if isinstance(b, tuple):
                    return b
                issued = a or b
                continue
            if isinstance(s, N.For):
                got = run(s.body, issued, s)
                if isinstance(got, tuple):
                    return got
                continue
            deferred = None
            for e in walk.exprs(s, shallow=True):
                if is_deferred_collective(e):
                    deferred = e
                elif isinstance(e, N.Call) and e.record.defers:
                    # one completion contract per task: the collective's
                    # conditions and epilogue, or a waiter's registrations
                    return e, (f"a task with a defer=True collective cannot also register "
                               f"{e.record.name} conditions; give the waiter its own task")
            if deferred is not None:
                if loop is not None:
                    return deferred, (f"{deferred.record.name}(defer=True) cannot be called in a "
                                      f"loop of its task: every trip would start another round "
                                      f"on a signal whose first round is still pending")
                if issued:
                    return deferred, (f"a task issues at most one defer=True collective on a "
                                      f"path; {deferred.record.name} comes after another")
                issued = True
                continue
            if not issued:
                continue
            if isinstance(s, N.StoreIndex):
                return s, ("a task cannot update tensors after a defer=True collective: its "
                           "TaskId completes only when the collective does")
            for e in walk.exprs(s, shallow=True):
                if isinstance(e, N.FuncCall):
                    return e, ("a task cannot dispatch a kernel after a defer=True collective; "
                               "put it in a task with deps=[tid]")
                if isinstance(e, N.Call) and e.record.effects:
                    return e, (f"a task cannot run {e.record.name} after a defer=True "
                               f"collective: the collective's result is complete only when "
                               f"the task's TaskId is")
        return issued

    got = run(body, False, None)
    return got if isinstance(got, tuple) else None
