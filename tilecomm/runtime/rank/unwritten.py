"""Reads of window elements nobody wrote (``RunConfig(poison_windows=True)``):
a sink on the rank's recorder (``recorder.py``) that looks at what each read
of a poisoned window saw.

What is sound: the controller fills every data window with the sentinel
before any rank can reach it (``runtime/poison.py``), and a program does
not write those bits itself (a NaN with the sentinel's payload, or the
integer 0xA5A5...; one that did would be reported as well).  So an element
that holds the sentinel *after* a read still held it during the read -- an
element goes from the sentinel to written data, never back -- and the read
saw memory nobody had written.  The converse does not hold: a peer's store
that lands between the read and this look hides it, so a report names reads
that certainly saw unwritten elements and may miss some that raced with
their writer (``detect_races`` finds those).  A remote load is judged on the
tile it returned (exactly what it read).

Checked: every read an op's record declares of this rank's copy of a
poisoned window (loads, the operands of elementwise ops, a store's or a
remote store's source, element reads) and every remote load of a peer's
copy.  Not checked: the reads inside a collective and the source of a
``get`` (their NaN still reaches the outputs), and windows viewed as INT32
(signal windows, never poisoned).  The rows named are the first index of
the window's view.

Each rank keeps one record per (window copy, source line) with the rows read
unwritten there, the ops and the loop iterations that read them (the first
``ITERATIONS_MAX``), and writes them to ``path`` when the run ends; the
controller warns with them (``TC606``) after the call's results are back.
"""
from __future__ import annotations

import pickle
import threading
from bisect import bisect_right, insort

import numpy as np

from ...check.events import READ
from ..poison import poisoned
from ..values import WindowView
from ...transport.memops import address
from . import iterations
from .recorder import Local, Sink
from .tracing import SourceLines


# iterations a record lists (the rows it names are all of them)
ITERATIONS_MAX = 8


class UnwrittenReads(Sink):
    """A rank's reads of still-poisoned window elements in one run.
    ``candidates``: the ids of the window buffers the run may poison."""

    ORDER = 5
    SHARED_OPS_ONLY = True          # window and tensor memory only

    def __init__(self, rank: int, path: str, candidates):
        self.rank, self.path = rank, path
        self.candidates = frozenset(candidates)
        self.lock = threading.Lock()
        self.lines = SourceLines()
        # (first address, end, buffer id, owner, name, view shape, dtype) of
        # each poisoned window copy mapped here, by address
        self.windows: list = []
        self.starts: list = []
        self.mapped: set = set()
        # (buffer name, owner, op, line, iteration, who) -> [span, rows]
        self.found: dict = {}

    def begin_dispatch(self, ctx, d) -> None:
        self.lines.follow(d.image)
        for v in d.vals:
            if isinstance(v, WindowView):
                self.window(v)

    def window(self, view: WindowView) -> None:
        b = view.buffer
        if b.id not in self.candidates or view.local.dtype == np.int32:
            return
        lo = address(view.local)
        if (b.id, lo) in self.mapped:
            return
        self.mapped.add((b.id, lo))
        insort(self.windows, (lo, lo + b.nbytes, b.id, b.devices[view.rank], b.name,
                              view.shape, view.local.dtype))
        self.starts = [w[0] for w in self.windows]

    def tracks(self, ctx, addr) -> bool:
        return self._window_at(addr) is not None

    def _window_at(self, addr):
        """The window copy (``windows`` entry) holding ``addr``, if any."""
        i = bisect_right(self.starts, addr) - 1
        return self.windows[i] if i >= 0 and addr < self.windows[i][1] else None

    # ------------------------------------------------------------ the stream
    def after_op(self, ctx, ev) -> None:
        for a in ev.accesses():
            if a.kind != READ:
                continue
            if type(a) is Local:
                self.local(ctx, a.array, ev)
            elif isinstance(ev.result, np.ndarray) and ev.op.endswith("remote_load"):
                self.remote(ctx, a, ev)

    def local(self, ctx, region, ev) -> None:
        if not isinstance(region, np.ndarray) or region.size == 0 or not self.windows:
            return
        addr = address(region)
        found = self._window_at(addr)
        if found is None:
            return
        lo, hi, bid, owner, name, shape, dtype = found
        if region.dtype != dtype:
            return
        mask = poisoned(region)
        if not mask.any():
            return
        # the window elements of the masked ones, from their addresses
        offs = addr - lo + sum(ix * st for ix, st in zip(np.nonzero(mask), region.strides))
        flat = np.asarray(offs, np.int64) // dtype.itemsize
        self.note(ctx, ev, name, owner, np.unravel_index(flat, shape)[0])

    def remote(self, ctx, a, ev) -> None:
        view = a.view
        b = view.buffer
        if b.id not in self.candidates or view.local.dtype == np.int32:
            return
        local = view.local
        got = np.asarray(ev.result)
        grid = np.arange(local.size).reshape(local.shape)
        where = grid[a.index] if a.index else grid
        if got.shape != where.shape or got.dtype != local.dtype:
            return                          # a padded tile (valid_shape): not judged
        mask = poisoned(got)
        if mask.any():
            self.note(ctx, ev, b.name, b.devices[int(a.peer)],
                      np.unravel_index(where[mask], local.shape)[0])

    def note(self, ctx, ev, name, owner, rows) -> None:
        sp = self.lines.span(ev.loc)
        line = f"{sp.file}:{sp.line}" if sp is not None else "?"
        image = self.lines.image
        it = iterations.text(image, iterations.current(image)) if image is not None else ""
        t = ctx.task
        who = t.name if t is not None else (getattr(sp, "func", None) or "?")
        key = (name, int(owner), line, who)
        with self.lock:
            entry = self.found.get(key)
            if entry is None:
                entry = self.found[key] = [sp, set(), [], []]
            entry[1].update(int(r) for r in np.unique(rows))
            if ev.op not in entry[2]:
                entry[2].append(ev.op)
            if it and it not in entry[3] and len(entry[3]) <= ITERATIONS_MAX:
                entry[3].append(it)

    def finish(self, failed: bool) -> None:
        with self.lock:
            out = [(self.rank, name, owner, tuple(ops), line, tuple(its), who, span,
                    tuple(sorted(rows)))
                   for (name, owner, line, who), (span, rows, ops, its) in self.found.items()]
        with open(self.path, "wb") as f:
            pickle.dump(out, f, protocol=pickle.HIGHEST_PROTOCOL)


def read_found(path: str) -> list:
    """A rank's records (``UnwrittenReads.finish``); [] if it wrote none."""
    try:
        with open(path, "rb") as f:
            return pickle.load(f)
    except (OSError, EOFError, pickle.UnpicklingError):
        return []


def rows_text(rows) -> str:
    """Rows as ranges: ``2:5``, ``0, 3:5``."""
    out, start, prev = [], None, None
    for r in list(rows) + [None]:
        if start is not None and (r is None or r != prev + 1):
            out.append(str(start) if prev == start else f"{start}:{prev + 1}")
            start = None
        if r is not None and start is None:
            start = r
        prev = r
    return ", ".join(out)


__all__ = ["UnwrittenReads", "read_found", "rows_text"]
