"""The line a frame of lowered code is at, for the recorder's sinks: the
user's line of an op (``tracing.SourceLines``) and the loops it is in
(``iterations.py``) are both looked up from it, for every event a checked
run keeps.

``frame.f_lineno`` decodes the code object's line table from its start on
every read, so its cost grows with the instruction's place in the function
(~3 us at the end of a 300-line lowered kernel).  The instruction offset
(``f_lasti``) is free to read, and one instruction is always on one line:
the line is kept per (code object, offset).
"""
from __future__ import annotations

# (code object, instruction offset) -> line; the code objects are the
# lowered images', which live as long as the process keeps them loaded
_LINES: dict = {}


def line_of(frame) -> int:
    """``frame.f_lineno``, remembered per instruction."""
    key = (frame.f_code, frame.f_lasti)
    line = _LINES.get(key)
    if line is None:
        line = _LINES[key] = frame.f_lineno
    return line


__all__ = ["line_of"]
