"""The race-checking rank context: what a dispatch of a ``RunConfig(
detect_races=True)`` run runs with.

Like tracing, the choice is made once per run by class (``artefacts.py``
composes the recording classes a run asks for), so an unchecked run carries
no test of any flag.  Every op this class overrides does what the next class
does, and appends the facts the race check needs (``check/events.py``) to
the rank's ``RaceLog``: each window access (which copy, which bytes, read /
write / atomic, the user's line, the thread and task), each notify with its
place in the cell's modification order, each satisfied wait and deferred
condition with how much of that order it saw, each task's submission and
predecessors, each collective's footprint and barriers, each dispatch's end.
The controller replays the ranks' logs after the call (``check/races.py``).

The modification order comes from the control plane's sequencer: a notify
runs under its cell's stripe lock and takes the next number there; a wait,
once satisfied, reads the count under the same lock.  That lock is the only
thing a checked run adds to the synchronisation itself.

What counts as an access of a window: ``pl.load`` / ``pl.store`` /
``pl.read`` / ``pl.write`` and element assignment on an array of this rank's
copy (a window view or an array cut from one), both sides of remote loads /
stores and put / get, and the element ranges a collective reads and writes
(``collectives/footprints.py``).
"""
from __future__ import annotations

import inspect
import pickle
import threading

import numpy as np

from ...check.events import (ACCESS, AFTER, ATOMIC, BARRIER, BASE, CLOSE, COND, DEFER, DONE, END,
                             MAIN, NOTIFY, READ, SUBMIT, WAIT, WRITE, byte_runs, stripe_of)
from ...collectives import footprints
from ...collectives.names import NAMES
from .context import RankContext
from .tile.site_ops import plain_paths
from .deps import Tracker, explicit_ids, inferred_ids
from .tile.kernel_ops import arr, tile_valid
from .tile.regions import region_index
from .touched import assigned, clip, element, loaded, stored
from .tracing import SourceLines
from ..values import Tile, WindowView


# events a rank keeps in memory before it appends them to its log file
# (~300 bytes each in memory, ~35 on disk)
SPILL_EVENTS = 1 << 16


class RaceLog:
    """A rank's events of one race-checking run, appended from every thread
    of the rank (under ``lock``) and written to ``path`` in chunks of
    ``SPILL_EVENTS``, so a long call holds a bounded part of them in memory.
    An access that repeats its thread's previous event exactly (a loop
    reading one tile with no synchronisation between) is kept once."""

    def __init__(self, rank: int, control, aborted_exc, path: str):
        self.rank = rank
        self.control, self.aborted_exc = control, aborted_exc
        self.path = path
        self.lock = threading.Lock()
        self.last: dict = {}            # thread -> its last event
        self.events: list = []
        self.lines = SourceLines()
        self.fname = "?"
        self.names: dict = {}           # buffer id -> name
        self.mapped: set = set()        # (buffer id, address of this rank's copy)
        self.windows: list = []         # (first address, end, buffer id, owner, shape, itemsize)
        self.calls: dict = {}           # signal buffer id -> collective calls on it
        self.conds: dict = {}           # deferred condition's cell handle -> (cell, line, label)
        # where the sequencer's counts stand as this rank begins (the replay
        # tells this call's notifies from earlier ones with it)
        self.add((BASE, None, control.sequence_counts()))

    # ------------------------------------------------------------ dispatches
    def begin_dispatch(self, fname: str, image, vals) -> None:
        self.fname = fname
        self.lines.follow(image)
        for v in vals:
            if isinstance(v, WindowView):
                self.window(v)

    def end_dispatch(self, seq: int) -> None:
        self.add((DONE, MAIN, seq))

    def window(self, view: WindowView) -> None:
        """Know ``view``'s buffer, and where this rank's copy of it lies (each
        mapping of it, should a copy be mapped at two addresses)."""
        b = view.buffer
        lo = view.local.__array_interface__["data"][0]
        if (b.id, lo) in self.mapped:
            return
        self.mapped.add((b.id, lo))
        self.names[b.id] = b.name
        self.windows.append((lo, lo + b.nbytes, b.id, b.devices[view.rank], view.shape,
                             view.local.itemsize))

    # ------------------------------------------------------------ facts
    def thread(self, ctx):
        """The thread key of the code running on ``ctx``."""
        t = ctx.task
        return MAIN if t is None else (t.tid, ctx.block_idx)

    def site(self, ctx, loc=-1) -> tuple:
        """(thread key, who, "file:line") of the op being recorded: who is the
        task, or the kernel outside tasks (and the function it was
        dispatched as, when that is another)."""
        sp = self.lines.span(loc)
        line = f"{sp.file}:{sp.line}" if sp is not None else "?"
        t = ctx.task
        if t is not None:
            return (t.tid, ctx.block_idx), t.name, line
        func = getattr(sp, "func", None) or self.fname
        return MAIN, func if func == self.fname else f"{func}, dispatched as {self.fname}", line

    def remote(self, ctx, view, peer, idx, kind, op, loc=-1) -> None:
        """An access of ``view[idx]`` in member ``peer``'s copy."""
        self.window(view)
        local = view.local
        base = local.__array_interface__["data"][0]
        runs = byte_runs(local[idx] if idx else local, base)
        thr, who, line = self.site(ctx, loc)
        self.add((ACCESS, thr, (view.buffer.id, view.buffer.devices[int(peer)]), runs, kind, op,
                  line, who, view.shape, local.itemsize))

    def local(self, ctx, region, kind, op, loc=-1) -> None:
        """An access of ndarray ``region`` if it lies in this rank's copy of a
        window (nothing otherwise)."""
        if not isinstance(region, np.ndarray) or region.size == 0:
            return
        addr = region.__array_interface__["data"][0]
        for lo, hi, bid, owner, shape, item in self.windows:
            if lo <= addr < hi:
                thr, who, line = self.site(ctx, loc)
                self.add((ACCESS, thr, (bid, owner), byte_runs(region, lo), kind, op, line, who,
                          shape, item))
                return

    def sequenced(self, cell, op=None) -> tuple:
        """(``op()``, its number in ``cell``'s modification order); with no op,
        how many notifies into the cell have taken effect."""
        return self.control.sequenced(stripe_of(cell), op, self.aborted_exc)

    def conditions_held(self, task, conds, read) -> None:
        """The deferred conditions of ``task`` all held when its body ended."""
        for cell, expected, record in conds:
            self.condition(task, cell, expected, record)

    def condition(self, task, handle, expected, record) -> None:
        key, line, label = self.conds.get(handle, (None, "?", "?"))
        if key is None:
            return
        _, seen = self.sequenced(key)
        self.add((COND, ("cond", task.tid), key, record.cmp, int(expected), seen, line,
                  task.name, label))

    def collective(self, ctx, name: str, operands, loc, host: bool) -> None:
        """A collective call returned: its footprint, in order."""
        signal = next(v for v in reversed(operands) if isinstance(v, WindowView))
        steps = getattr(footprints, name)(*operands, host)
        bid = signal.buffer.id
        count = self.calls[bid] = self.calls.get(bid, 0) + 1
        thr, who, line = self.site(ctx, loc)
        op = f"pld.tensor.{name}"
        for step in steps:
            if step[0] == "barrier":
                self.add((BARRIER, thr, (bid, count, step[1], step[2]), signal.nranks, line,
                          op))
                continue
            what, view, member, lo, hi = step
            self.window(view)
            item = view.local.itemsize
            self.add((ACCESS, thr, (view.buffer.id, view.buffer.devices[member]),
                      ((lo * item, hi * item),), READ if what == "read" else WRITE, op, line, who,
                      view.shape, item))

    def add(self, event: tuple) -> None:
        with self.lock:
            if event[0] == ACCESS and self.last.get(event[1]) == event:
                return
            self.last[event[1]] = event
            self.events.append(event)
            if len(self.events) >= SPILL_EVENTS:
                self._spill()

    def _spill(self) -> None:
        with open(self.path, "ab") as f:
            pickle.dump(self.events, f, protocol=pickle.HIGHEST_PROTOCOL)
        self.events = []

    def finish(self) -> None:
        """The run ended on this rank: the rest of the events, then the names
        of the windows they name."""
        with self.lock:
            self._spill()
            with open(self.path, "ab") as f:
                pickle.dump(self.names, f, protocol=pickle.HIGHEST_PROTOCOL)


def read_log(path: str, names: dict):
    """The events of a rank's log file (``RaceLog``), chunk by chunk as they
    are asked for; the window names at its end go into ``names``."""
    with open(path, "rb") as f:
        while True:
            part = pickle.load(f)
            if isinstance(part, dict):
                names.update(part)
                return
            yield from part


def cell_key(view: WindowView, member, offsets) -> tuple:
    """(buffer id, global rank of the copy, byte offset): one signal cell,
    whichever rank names it."""
    off = 0
    for o, s in zip(offsets, view.strides):
        off += int(o) * s
    return view.buffer.id, view.buffer.devices[int(member)], off


def cell_label(view: WindowView, member, offsets) -> str:
    """A cell as the program names it: ``sig[1, 0] on rank 2``."""
    return (f"{view.buffer.name}[{', '.join(str(int(o)) for o in offsets)}] on rank "
            f"{view.buffer.devices[int(member)]}")


class RacingScope:
    """The scheduler as a checked dispatch's orchestration sees it: every
    submission is recorded with its predecessors -- explicit ``deps=`` and
    those inferred from the memory tasks touch, including tasks that have
    already completed (the scheduler forgets those; a dependency on them
    still orders)."""

    __slots__ = ("inner", "log", "ctx", "thread", "tracker", "tids")

    def __init__(self, inner, log: RaceLog, ctx):
        self.inner, self.log, self.ctx = inner, log, ctx
        self.thread = log.thread(ctx)           # the orchestrating thread
        self.tracker = Tracker()
        self.tids: list = []

    def submit(self, fn, args, name, loc, deps=(), acc=(), blocks=1, waiter=False,
               manual=False):
        log = self.log

        def body(ctx, *a):
            try:
                fn(ctx, *a)
            finally:                    # a block's end: the replay need not read on
                log.add((END, (ctx.task.tid, ctx.block_idx)))

        body.__name__ = fn.__name__
        tid = self.inner.submit(body, args, name, loc, deps, acc, blocks, waiter, manual)
        preds = set(explicit_ids(deps)) | inferred_ids(self.tracker, tid, acc, manual)
        preds.discard(tid)
        self.tids.append(tid)
        self.log.add((SUBMIT, self.thread, tid, name, max(int(blocks), 0),
                      tuple(sorted(preds)), self.log.site(self.ctx, loc)[2]))
        return tid

    def close(self):
        try:
            return self.inner.close()
        finally:
            self.tracker.release_arrays()
            self.log.add((CLOSE, self.thread, tuple(self.tids)))

    def abandon(self, exc):
        return self.inner.abandon(exc)


@plain_paths
class RacingRankContext(RankContext):
    """``RankContext`` that records for the race check (see the module doc).
    Never built: a run switches the rank's context to a class with this one
    among its bases and sets ``_races`` (a ``RaceLog``)."""

    _races: RaceLog

    def task_scope(self):
        log = self._races
        return RacingScope(super().task_scope(), log, self)

    # ------------------------------------------------------------ local
    def load(self, tensor, offsets, shapes, valid_shape=None, target_memory=None, clamp=False):
        out = super().load(tensor, offsets, shapes, valid_shape, target_memory, clamp)
        self._races.local(self, loaded(tensor, offsets, shapes, valid_shape), READ, "pl.load")
        return out

    def store(self, tile, offsets, output_tensor, shapes=None, atomic=0):
        out = super().store(tile, offsets, output_tensor, shapes, atomic)
        self._races.local(self, stored(tile, offsets, output_tensor, shapes),
                          ATOMIC if atomic else WRITE, "pl.store")
        return out

    # ------------------------------------------------------------ call sites
    # The call-site forms (tile/site_ops.py) where their fast path applies,
    # with the plain ops' records: a checked run keeps the views and the
    # reused tiles, so checking costs what recording costs.  Elsewhere, and
    # for a stored elementwise result, the plain op (plain_paths).
    binary_at = RankContext.binary_at             # local arithmetic: nothing to record

    def load_at(self, site, view, tensor, offsets, shapes, valid_shape=None,
                target_memory=None, clamp=False):
        if valid_shape is not None or clamp:
            return self.load(tensor, offsets, shapes, valid_shape, target_memory, clamp)
        out = super().load_at(site, view, tensor, offsets, shapes)
        a = arr(tensor)
        self._races.local(self, a[region_index(a, offsets, shapes, "pl.load region")], READ,
                          "pl.load")
        return out

    def store_at(self, site, tile, offsets, output_tensor, shapes=None, atomic=0):
        a = arr(output_tensor)
        if type(tile) is not Tile or tile.valid is not None or shapes is not None or atomic \
                or tile.ndim > a.ndim:
            return self.store(tile, offsets, output_tensor, shapes, atomic)
        out = super().store_at(site, tile, offsets, output_tensor)
        self._races.local(self, a[region_index(a, offsets, tile.shape, "pl.store region")],
                          WRITE, "pl.store")
        return out

    def remote_load_at(self, site, view, target, peer, offsets, shape, valid_shape=None):
        if valid_shape is not None:
            return self.remote_load(target, peer, offsets, shape, valid_shape)
        out = super().remote_load_at(site, view, target, peer, offsets, shape)
        idx = region_index(target.local, offsets, shape, "pld.tile.remote_load region")
        self._races.remote(self, target, peer, idx, READ, "pld.tile.remote_load")
        return out

    def read(self, src, offset):
        out = super().read(src, offset)
        self._races.local(self, element(src, offset, "pl.read"), READ, "pl.read")
        return out

    def write(self, dst, offset, value):
        super().write(dst, offset, value)
        self._races.local(self, element(dst, offset, "pl.write"), WRITE, "pl.write")

    def assign(self, base, items, value):
        super().assign(base, items, value)
        self._races.local(self, assigned(base, items), WRITE, "pl.assign")

    # ------------------------------------------------------------ signals
    def notify(self, target, peer, offsets, value, op):
        cell = target.cells.get((peer, offsets))
        if cell is None:
            cell = self._cell(target, peer, offsets, "pld.system.notify")
        log = self._races
        key = cell_key(target, peer, offsets)
        new, seq = log.sequenced(key, lambda: self._signal(cell, op, value))
        thr, who, line = log.site(self)
        log.window(target)
        log.add((NOTIFY, thr, key, int(op), int(value), int(new), seq, line, who))
        return new

    def wait(self, signal, offsets, expected, cmp, _loc=-1):
        super().wait(signal, offsets, expected, cmp, _loc)
        log = self._races
        key = cell_key(signal, signal.rank, offsets)
        _, seen = log.sequenced(key)
        thr, who, line = log.site(self, _loc)
        log.window(signal)
        log.add((WAIT, thr, key, int(cmp), int(expected), seen, line, who,
                 cell_label(signal, signal.rank, offsets)))

    def defer_wait(self, signal, offsets, expected, cmp, _loc=-1):
        super().defer_wait(signal, offsets, expected, cmp, _loc)
        log = self._races
        log.window(signal)
        cell = signal.cells[(signal.rank, offsets)]
        log.conds[cell] = (cell_key(signal, signal.rank, offsets), log.site(self, _loc)[2],
                           cell_label(signal, signal.rank, offsets))
        log.add((DEFER, log.thread(self)))

    def wait_cell(self, cell, cmp, expected, record):
        super().wait_cell(cell, cmp, expected, record)
        task = self.agent.task if self.agent is not None else None
        if task is not None:
            self._races.condition(task, cell, expected, record)

    def wait_dispatch(self, rank: int, seq: int):
        super().wait_dispatch(rank, seq)
        self._races.add((AFTER, MAIN, int(rank), int(seq)))

    # ------------------------------------------------------------ remote
    def remote_load(self, target, peer, offsets, shape, valid_shape=None):
        out = super().remote_load(target, peer, offsets, shape, valid_shape)
        ext = shape if valid_shape is None else [min(int(v), int(s))
                                                 for v, s in zip(valid_shape, shape)]
        idx = tuple(slice(int(o), int(o) + e) for o, e in
                    zip(offsets, clip(offsets, ext, target.local.shape)))
        self._races.remote(self, target, peer, idx, READ, "pld.tile.remote_load")
        return out

    def remote_store(self, src, target, peer, offsets, atomic=0):
        super().remote_store(src, target, peer, offsets, atomic)
        data = tile_valid(src) if hasattr(src, "valid") else np.asarray(arr(src))
        if data.ndim > 2:
            data = data.reshape(data.shape[-2:])
        log = self._races
        # the short form pld.remote_store is the tile form on a tile
        op = "pld.tile.remote_store" if hasattr(src, "valid") else "pld.tensor.remote_store"
        log.local(self, arr(src), READ, op)
        idx = region_index(target.local, offsets, data.shape, "remote_store region")
        log.remote(self, target, peer, idx, ATOMIC if atomic else WRITE, op)

    def put(self, dst, peer, src, dst_offsets=None, src_offsets=None, shape=None, atomic=0,
            chunk_rows=0, chunk_cols=0, pipeline=False):
        super().put(dst, peer, src, dst_offsets, src_offsets, shape, atomic, chunk_rows,
                    chunk_cols, pipeline)
        _, idx, s = self._transfer("pld.tensor.put", dst, peer, arr(src), dst_offsets,
                                   src_offsets, shape, True)
        log = self._races
        log.local(self, s, READ, "pld.tensor.put")
        log.remote(self, dst, peer, idx, ATOMIC if atomic else WRITE, "pld.tensor.put")

    def get(self, dst, peer, src, dst_offsets=None, src_offsets=None, shape=None, chunk_rows=0,
            chunk_cols=0, pipeline=False):
        super().get(dst, peer, src, dst_offsets, src_offsets, shape, chunk_rows, chunk_cols,
                    pipeline)
        _, idx, d = self._transfer("pld.tensor.get", src, peer, arr(dst), dst_offsets,
                                   src_offsets, shape, False)
        log = self._races
        log.remote(self, src, peer, idx, READ, "pld.tensor.get")
        log.local(self, d, WRITE, "pld.tensor.get")


def _collective(name):
    """The recording variant of collective ``name`` called in a kernel."""
    sig = inspect.signature(getattr(RankContext, name))
    params = [p for p in sig.parameters if p not in ("self", "_loc")]

    def recorded(self, *args, **kw):
        out = getattr(super(RacingRankContext, self), name)(*args, **kw)
        bound = sig.bind(self, *args, **kw)
        bound.apply_defaults()
        a = bound.arguments
        self._races.collective(self, name, [a[p] for p in params], a["_loc"], False)
        return out

    recorded.__name__ = name
    return recorded


for _name in NAMES:
    setattr(RacingRankContext, _name, _collective(_name))


__all__ = ["RaceLog", "RacingRankContext", "RacingScope", "cell_key", "read_log"]
