"""Generic traversal of IR statements and expressions."""
from __future__ import annotations

from . import nodes as N


def exprs(node, shallow=False):
    """Every expression inside ``node`` (a statement, expression or list), depth
    first; ``shallow``: not those of statements nested in a loop or branch body."""
    if isinstance(node, list):
        for n in node:
            yield from exprs(n, shallow)
        return
    if isinstance(node, N.Expr):
        yield node
    children = []
    if isinstance(node, N.Call):
        children = list(node.args.values())
    elif isinstance(node, N.FuncCall):
        children = list(node.args) + ([node.device] if node.device is not None else [])
    elif isinstance(node, N.BinOp) or isinstance(node, N.Compare):
        children = [node.left, node.right]
    elif isinstance(node, N.UnaryOp):
        children = [node.operand]
    elif isinstance(node, (N.BoolOp,)):
        children = node.values
    elif isinstance(node, (N.ListExpr, N.TupleExpr)):
        children = node.items
    elif isinstance(node, N.Index):
        children = [node.value] + node.items
    elif isinstance(node, N.SliceExpr):
        children = [c for c in (node.start, node.stop) if c is not None]
    elif isinstance(node, (N.Assign, N.ExprStmt)):
        children = [node.value if isinstance(node, N.Assign) else node.expr]
    elif isinstance(node, N.StoreIndex):
        children = [node.target, node.value]
    elif isinstance(node, N.While):          # a For whose trip count is its condition
        children = [node.cond] + node.init + ([] if shallow else node.body)
    elif isinstance(node, N.For):
        children = [node.start, node.stop, node.step] + node.init + ([] if shallow else node.body)
    elif isinstance(node, N.Yield):
        children = node.values
    elif isinstance(node, N.If):
        children = [node.cond] + ([] if shallow else node.body + node.orelse)
    elif isinstance(node, N.Return):
        children = [node.value] if node.value is not None else []
    elif isinstance(node, N.TaskScope):
        # the body belongs to the outlined function; the call carries the captures
        children = [node.call] + node.deps + ([node.blocks] if node.blocks is not None else [])
    for c in children:
        yield from exprs(c, shallow)


def rewrite_statements(body: list, rewrite) -> list:
    """``body`` with each statement replaced by the statements ``rewrite(s)``
    returns, the bodies of nested ``for`` loops and ``if`` branches rewritten
    first."""
    out = []
    for s in body:
        if isinstance(s, N.For):
            s.body = rewrite_statements(s.body, rewrite)
        elif isinstance(s, N.If):
            s.body = rewrite_statements(s.body, rewrite)
            s.orelse = rewrite_statements(s.orelse, rewrite)
        out.extend(rewrite(s))
    return out


def written_result(call, span):
    """The value of a call whose result is the argument(s) it writes
    (``call.func.returns_param``: one index, or a tuple of them)."""
    rp = call.func.returns_param
    if isinstance(rp, tuple):
        return N.TupleExpr(call.type, span, [call.args[i] for i in rp])
    return call.args[rp]


def stmts_in_loops(body, loops=()):
    """Every statement of ``body``, nested ones included, with the ``For``
    statements enclosing it (innermost last)."""
    for s in body:
        yield s, loops
        if isinstance(s, N.For):
            yield from stmts_in_loops(s.body, loops + (s,))
        elif isinstance(s, N.If):
            yield from stmts_in_loops(s.body, loops)
            yield from stmts_in_loops(s.orelse, loops)


def assigned(body) -> set:
    """Every name ``body`` binds, in nested loops and branches too: assignment
    targets, loop variables, loop-carried values and yield targets."""
    out = set()
    for s, _ in stmts_in_loops(body):
        if isinstance(s, N.Assign):
            out.update(s.targets)
        elif isinstance(s, N.For):
            out.add(s.var)
            out.update(s.carried)
            out.update(s.yield_targets)
        elif isinstance(s, N.Yield):
            out.update(s.targets)
            out.update(s.carried)
    return out


def param_index(expr):
    """The parameter index a tensor expression aliases, or None."""
    t = getattr(expr, "type", None)
    origin = getattr(t, "origin", None)
    if isinstance(origin, tuple) and origin and origin[0] == "param":
        return origin[1]
    return None
