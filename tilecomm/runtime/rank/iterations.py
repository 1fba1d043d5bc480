"""Which iteration of its loops a rank is in, for the reports that say so: a
race's two accesses (``racing.py``) and a blocked wait of a deadlock
(``context.py`` publishes it with the wait, ``dfx/deadlock.py`` prints it).

The lowering keeps nothing extra at run time: the lowered code is plain
Python whose ``for`` loops bind their index to the user's name in the
function's frame, and the image says which loops each lowered line is in
(``KernelImage.loops`` / ``line_loops``, from ``lower/codegen.py``).  So
the iteration is read off the stack, only when a report may need it: by
the race sink for every event it logs (a recording run pays a frame walk
per event, as the sink already walks the stack for the event's line), and
by a wait only once it is about to block (after its spin, on the path that
already publishes a record for the monitor).  A run with no checker and no
blocked wait never looks.  The other ways -- the lowering storing the
indices on the rank context at every iteration, or passing them with each
op -- cost every run, checked or not, on every loop iteration.

The frames read are the lowered frames of the image on the current thread,
innermost outward: a kernel called from a chip orchestration's loop names
both loops.  A task body runs on a core's thread, so the orchestration loop
that submitted it is not on the stack: a task's accesses name only the
kernel's own loops.  ``while`` loops have no index and are not named.
"""
from __future__ import annotations

import sys

import numpy as np

from .frames import line_of

# how many (loop, index) pairs a blocked wait publishes (the innermost ones)
PUBLISHED = 4
_LOW = 0xFFFFFFFF


def current(image, depth: int = 1) -> tuple:
    """((loop id, index), ...) of the loops the code that called this
    function's caller (``depth`` frames up) is in, outermost first; ()
    outside loops, or for an image without a loop table."""
    line_loops = getattr(image, "line_loops", None)
    if not line_loops:
        return ()
    loops, fname = image.loops, image.filename
    f = sys._getframe(depth + 1)
    out: list = []
    seen = False
    while f is not None:
        if f.f_code.co_filename == fname:
            seen = True
            ids = line_loops.get(line_of(f))
            if ids:
                local = f.f_locals
                part = []
                for i in ids:
                    v = local.get(loops[i].var)
                    if type(v) is int or isinstance(v, np.integer):
                        part.append((i, int(v)))
                out = part + out                # a caller's loops come first
        elif seen:
            # lowered functions call each other directly: the first other
            # frame below them is the rank's own code (its dispatch loop, a
            # task's thread), with no lowered frame under it
            break
        f = f.f_back
    return tuple(out)


def text(image, pairs) -> str:
    """How a report names an iteration: ``step=2``, or ``r=1, step=2`` for
    nested loops; loops of several functions say which is whose
    (``r=1 in chip, step=2 in kernel``).  "" for none."""
    if not pairs:
        return ""
    loops = image.loops
    groups: list = []
    for i, v in pairs:
        if not 0 <= i < len(loops):
            continue
        loop = loops[i]
        if groups and groups[-1][0] == loop.function:
            groups[-1][1].append(f"{loop.var}={v}")
        else:
            groups.append((loop.function, [f"{loop.var}={v}"]))
    if len(groups) == 1:
        return ", ".join(groups[0][1])
    return ", ".join(f"{', '.join(names)} in {fn}" for fn, names in groups)


def pack(pairs) -> tuple:
    """The innermost ``PUBLISHED`` pairs as int64 slots of a wait record
    (0: none): the loop id + 1 in the high half, the index in the low half.
    An index that does not fit 32 bits is left out (the report names the
    loops it can)."""
    out = [((i + 1) << 32) | (v & _LOW) for i, v in pairs if -2**31 <= v < 2**31]
    out = out[-PUBLISHED:]
    return tuple(out) + (0,) * (PUBLISHED - len(out))


def unpack(slots) -> tuple:
    """``pack``'s pairs back."""
    out = []
    for s in slots:
        s = int(s)
        if s:
            low = s & _LOW
            out.append(((s >> 32) - 1, low - (1 << 32) if low >= 1 << 31 else low))
    return tuple(out)


__all__ = ["PUBLISHED", "current", "pack", "text", "unpack"]
