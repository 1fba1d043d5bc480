"""Exceptions raised while the HOST orchestrator runs, pointed at the user's
lines.

The orchestrator runs as lowered Python in the caller's process, so its
exceptions carry frames of the lowered file.  A ``UserError`` of a host op
(a bad window, a bad device) gets the span of the user's line it came from
(:func:`attach_span`).  An exception of the user's own host code (a
ZeroDivisionError, an IndexError ...) reaches the caller with its own type --
``except ZeroDivisionError`` keeps working -- and, like a rank failure, gets
the program's frames in user terms: ``span`` (the innermost user line) and a
note in the printed traceback (:func:`locate`).
"""
from __future__ import annotations

import linecache
import traceback


def user_spans(exc: BaseException, lowered) -> list:
    """User spans of the frames of ``exc`` in ``lowered`` (``.filename`` and
    ``.linemap``: generated line -> span), outermost first."""
    spans = []
    for fr in traceback.extract_tb(exc.__traceback__):
        if fr.filename == lowered.filename:
            span = lowered.linemap.get(fr.lineno)
            if span is not None:
                spans.append(span)
    return spans


def attach_span(e, lowered) -> None:
    """Give a UserError without a span the innermost user line it passed through."""
    if e.span is not None:
        return
    spans = user_spans(e, lowered)
    if spans:
        e.span = spans[-1]
        e.args = (str(e),)


def locate(exc: BaseException, lowered) -> None:
    """Add ``span`` and a note with the program frames to ``exc`` if it passed
    through ``lowered``."""
    spans = user_spans(exc, lowered)
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
