"""Rules about where a statement may stand in its function."""
from __future__ import annotations

from ..errors import ProgramSyntaxError
from ..ir import nodes as N
from ..ir import walk
from .base import rule


@rule("alloc-outside-loops")
def alloc_outside_loops(ctx):
    """A window buffer is allocated once, above the rank loop, and shared by
    every dispatch; an allocation inside a loop would give each iteration (each
    rank of the dispatch loop) a buffer of its own, so no rank would see what
    another wrote."""
    for fn in ctx.prog.functions.values():
        for stmt, loops in walk.stmts_in_loops(fn.body):
            for e in walk.exprs(stmt, shallow=True):
                if isinstance(e, N.Call) and e.record.declares_buffer and loops:
                    loop = loops[-1]
                    yield ProgramSyntaxError(
                        f"{e.record.name} inside a loop (the 'for {loop.var} in ...' at line "
                        f"{loop.span.line}): every iteration would allocate a separate buffer",
                        code="TC310", span=e.span,
                        hint="allocate window buffers before the dispatch loop; every rank's "
                             "view of one allocation is the same symmetric window")
