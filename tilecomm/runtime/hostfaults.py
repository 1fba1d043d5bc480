"""Exceptions raised by the user's own HOST-orchestrator code, pointed at the
user's lines.

The orchestrator runs as lowered Python in the caller's process, so such an
exception (a ZeroDivisionError, an IndexError ...) reaches the caller with
its own type -- ``except ZeroDivisionError`` keeps working -- but its frames
are lines of the lowered file.  Like a rank failure, it gets the program's
frames in user terms: ``span`` (the innermost user line) and a note in the
printed traceback.
"""
from __future__ import annotations

import linecache
import traceback


def locate(exc: BaseException, lowered) -> None:
    """Add ``span`` and a note with the program frames to ``exc`` if it passed
    through ``lowered`` (``.filename`` and ``.linemap``: generated line -> span)."""
    spans = []
    for fr in traceback.extract_tb(exc.__traceback__):
        if fr.filename == lowered.filename:
            span = lowered.linemap.get(fr.lineno)
            if span is not None:
                spans.append(span)
    if not spans or getattr(exc, "span", None) is not None:
        return
    lines = [f"raised in the HOST orchestrator at {spans[-1]}",
             "Traceback (program frames, most recent call last):"]
    for sp in spans:
        lines.append(f'  File "{sp.file}", line {sp.line}, in {sp.func}')
        src = linecache.getline(sp.file, sp.line).strip()
        if src:
            lines.append(f"    {src}")
    note = "\n".join(lines)
    try:
        exc.span = spans[-1]
        if hasattr(exc, "add_note"):
            exc.add_note(note)
        else:                           # Python 3.10: kept where 3.11's traceback looks
            exc.__notes__ = [*getattr(exc, "__notes__", []), note]
    except (AttributeError, TypeError):
        pass                            # an exception type that takes no attributes
