"""Names bound inside an outlined scope, seen after it.

A ``with`` body opens no scope in Python (nor upstream): a name its body
binds is visible after the ``with``.  Here a ``pl.at`` / ``pl.spmd`` task body
and an inline chip scope are outlined into functions of their own, so what a
name bound inside holds has to be carried back out explicitly.

What can be carried is what upstream carries too: the tensors the body writes
in place.  A name bound to a captured tensor (``out = pl.assemble(buf, t,
[0, 0])``, ``out = pl.store(tile, [0, 0], buf)``, or ``out = buf``) is, after
the scope, the enclosing function's own ``buf`` -- bound by an assignment
placed right after the scope statement, so dependency inference and the
dispatch's results see the same tensor.  A name bound to anything else (a
tile, a scalar, a tensor created inside) lives in the task or on the chip
and has no value outside; using it after the scope is an unknown name whose
message says where it was bound and why it stays there."""
from __future__ import annotations

import ast

from ..ir import nodes as N
from ..ir.types import TensorType


def assigned_names(stmts, exclude=()) -> list:
    """Names the statements bind, in order of first binding."""
    out = []
    for st in stmts:
        for n in ast.walk(st):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and \
                    n.id not in exclude and n.id not in out:
                out.append(n.id)
    return out


def param_index(t):
    """The parameter a tensor type aliases as a whole (None for views and
    fresh tensors)."""
    if isinstance(t, TensorType) and isinstance(t.origin, tuple) and t.origin[0] == "param":
        return t.origin[1]
    return None


def carry_out(parser, body, inner_env, outer_env, captured, span, what, exclude=()) -> list:
    """Assignments that bind, after a scope, the names its ``body`` bound to
    captured tensors (``captured[k]`` is the enclosing function's name for the
    outlined function's parameter ``k``); ``parser.env`` gets their types.
    Other names bound inside are remembered for the unknown-name message."""
    after = []
    for name in assigned_names(body, exclude):
        k = param_index(inner_env.get(name))
        if k is not None and k < len(captured):
            src = captured[k]
            parser.scoped_names().pop(name, None)
            if src != name:
                after.append(N.Assign(span, [name], N.Var(outer_env[src], span, src)))
                parser.env[name] = outer_env[src]
        elif name not in outer_env:
            parser.scoped_names()[name] = (what, span.line)
    return after


def scoped_hint(parser, name):
    """The hint of an unknown name that a scope bound (None otherwise)."""
    bound = parser.scoped_names().get(name)
    if bound is None:
        return None
    what, line = bound
    return (f"'{name}' is bound inside the {what} at line {line}, where it stays: only a name "
            f"bound to a tensor the scope writes in place (a tensor it captures, e.g. out = "
            f"pl.assemble(buf, t, [0, 0])) is visible after the scope")


__all__ = ["assigned_names", "carry_out", "param_index", "scoped_hint"]
