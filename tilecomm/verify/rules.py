"""Whole-program verifier rules.

Each rule is a named, independent function over the IR that returns
diagnostics; ``verify`` runs them all so every problem is reported together
before any rank starts.  Per-call rules (operand kinds, shapes, bounds, atomic
dtypes, chunk arguments) live with their op records and run in the front end.
"""
from __future__ import annotations

from ..errors import ProgramValueError


def rule_window_buffer_has_view(prog):
    """An alloc_window_buffer nobody makes a pld.window view of is dead code."""
    for buf in prog.buffers:
        if buf.views == 0:
            yield ProgramValueError(
                f"window buffer '{buf.name}' is allocated but never viewed with pld.window",
                code="TC213", span=buf.span,
                hint=f"make a view: pld.window({buf.name}, [shape], dtype=...) and pass it to a "
                     f"dispatch, or delete the allocation")


def rule_window_view_reaches_dispatch(prog):
    """A window whose views never reach a chip dispatch has no comm domain."""
    for buf in prog.buffers:
        if buf.views and not buf.passed:
            yield ProgramValueError(
                f"views of window buffer '{buf.name}' are never passed to a chip dispatch, so "
                f"it belongs to no comm domain", code="TC213", span=buf.span,
                hint="pass the pld.window(...) view to a @pl.jit function dispatched with device=")


RULES = [rule_window_buffer_has_view, rule_window_view_reaches_dispatch]


def verify(prog) -> list:
    out = []
    for rule in RULES:
        out.extend(rule(prog))
    return out
