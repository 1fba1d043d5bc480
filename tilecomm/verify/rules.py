"""Whole-program verifier rules.

Each rule is a named, independent function over the IR that returns
diagnostics; ``verify`` runs them all so every problem is reported together
before any rank starts.  Per-call rules (operand kinds, shapes, bounds, atomic
dtypes, chunk arguments) live with their op records and run in the front end.
"""
from __future__ import annotations

from ..errors import ProgramValueError
from ..ir.types import ScalarType, TensorType
from ..ir.kinds import ORCH


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


def rule_tensors_before_scalars(prog):
    """On a chip profile the runtime packs a dispatch's task arguments tensors
    first; a tensor after a scalar compiles upstream but fails when launched."""
    platform = prog.platform
    if platform is None or platform.name == "cpu":
        return
    for fn in prog.functions.values():
        if fn.kind != ORCH:
            continue
        scalar = next((p for p in fn.params if isinstance(p.type, ScalarType)), None)
        late = scalar and next((p for p in fn.params[fn.params.index(scalar):]
                                if isinstance(p.type, TensorType)), None)
        if late:
            yield ProgramValueError(
                f"parameter '{late.name}' of {fn.py_name} is a tensor after the scalar parameter "
                f"'{scalar.name}'; on the {platform.name} platform a dispatch lists its tensors "
                f"first", code="TC215", span=late.span,
                hint="move scalar parameters after every tensor parameter")


RULES = [rule_window_buffer_has_view, rule_window_view_reaches_dispatch,
         rule_tensors_before_scalars]


def verify(prog) -> list:
    out = []
    for rule in RULES:
        out.extend(rule(prog))
    return out
