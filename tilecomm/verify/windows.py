"""Rules about window buffers as a whole program uses them."""
from __future__ import annotations

from ..errors import ProgramValueError
from .base import rule


@rule("window-buffer-has-view")
def window_buffer_has_view(ctx):
    """An alloc_window_buffer nobody makes a pld.window view of is dead code."""
    for buf in ctx.prog.buffers:
        if ctx.facts.buffer(buf).views == 0 and buf.name not in ctx.incomplete:
            yield ProgramValueError(
                f"window buffer '{buf.name}' is allocated but never viewed with pld.window",
                code="TC213", span=buf.span,
                hint=f"make a view: pld.window({buf.name}, [shape], dtype=...) and pass it to a "
                     f"dispatch, or delete the allocation")


@rule("window-view-reaches-dispatch")
def window_view_reaches_dispatch(ctx):
    """A window whose views never reach a chip dispatch has no comm domain."""
    for buf in ctx.prog.buffers:
        f = ctx.facts.buffer(buf)
        if f.views and not f.dispatches and buf.name not in ctx.incomplete:
            yield ProgramValueError(
                f"views of window buffer '{buf.name}' are never passed to a chip dispatch, so "
                f"it belongs to no comm domain", code="TC213", span=buf.span,
                hint="pass the pld.window(...) view to a @pl.jit function dispatched with device=")
