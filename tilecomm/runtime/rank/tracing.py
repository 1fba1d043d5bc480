"""The recording rank context: what a traced dispatch runs with.

A dispatch whose ``RunConfig`` asks for a swimlane, a task graph or scope
statistics runs with ``TracingRankContext`` -- the rank's own context with its
class switched for that run (``artefacts.RankArtefacts``), and the scheduler's
core and watcher contexts switched with it (``Scheduler.begin``).  Every op it
overrides records and then does exactly what ``RankContext`` does, so a traced
run computes what an untraced one does, and the untraced path carries no
check of any tracing flag: the choice is made once per run, by class.

What is recorded (``Recorder``): a slice per task block (on its core's
track), per ``pld.system.notify`` (the cell, op, value and the value the
cell took), per blocking ``pld.system.wait`` and per deferred condition's
release (cell, condition, the value seen after it returned), per remote
load / store, put / get and InCore collective, each with the user's source
line; at level 3 the tasks each task waited for, at level 4 the submission
of each task and the orchestrating thread's wait for them; the task graph of
each dispatch (inferred and explicit edges); and the task-window watermark
of each task scope.
"""
from __future__ import annotations

import inspect
import sys
import threading
import time

import numpy as np

from ...collectives.names import NAMES
from ...transport.base import NOTIFY_ADD
from ...waits import CMP_NAMES
from .deps import Tracker, explicit_ids, inferred_ids
from .context import RankContext
from .tile.site_ops import plain_paths

now = time.perf_counter_ns          # CLOCK_MONOTONIC: one clock for every rank process

# A rank is a process of the trace and its tracks are threads, numbered as a
# kernel numbers them: thread ids unique across processes, the main thread's
# equal to its process id, nothing 0 (Perfetto keys threads by tid and takes
# pid / tid 0 for the idle process).  Track ids below are local: the trace
# adds the rank's ``pid_of``.
PID_STRIDE = 4096
MAIN_TID = 0                        # the rank's dispatch thread (tid == pid)
CORE_TID = 1                        # + core index (at most 256 cores)
WATCHER_TID = 1024                  # + watcher index (at most 64 + one per core)
DEFERRED_TID = PID_STRIDE - 1       # conditions already true when the waiter's body ended


def pid_of(rank: int) -> int:
    return (rank + 1) * PID_STRIDE


BLOCKED_CAT = "blocked"             # a wait the run ended in (deadlock, failure elsewhere)


def op_name(op) -> str:
    return "AtomicAdd" if int(op) == NOTIFY_ADD else "Set"


class DispatchTrace:
    """What one dispatch recorded."""

    __slots__ = ("k", "fname", "events", "tasks", "edges", "scopes", "t0", "t1", "finished")

    def __init__(self, k, fname):
        self.k, self.fname = k, fname
        self.events: list = []          # (name, cat, tid, t0_ns, t1_ns or None, args)
        self.tasks: list = []           # task graph nodes (dicts)
        self.edges: dict = {}           # (pred, succ) -> set of kinds
        self.scopes: list = []          # scope statistics (dicts)
        self.t0 = self.t1 = 0
        self.finished = False           # False: it raised or the call was aborted


class SourceLines:
    """The user's source line of the op being recorded: from the span index
    lowered code passes (``_loc``), else from the lowered line that called
    the op (found by walking up the stack; cached per line)."""

    __slots__ = ("image", "_spans")

    def __init__(self):
        self.image = None
        self._spans: dict = {}          # span index (>= 0) / -1 - lowered line -> Span or None

    def follow(self, image) -> None:
        """The dispatch being recorded runs ``image``."""
        if image is not self.image:
            self._spans = {}
        self.image = image

    def span(self, loc: int = -1):
        image = self.image
        if image is None:
            return None
        spans = self._spans
        if loc >= 0:
            if loc not in spans:
                spans[loc] = image.span(loc)
            return spans[loc]
        f = sys._getframe(2)
        while f is not None and f.f_code.co_filename != image.filename:
            f = f.f_back
        if f is None:
            return None
        key = -1 - f.f_lineno
        if key not in spans:
            spans[key] = image.linemap.get(f.f_lineno)
        return spans[key]


class Recorder:
    """Per rank and run: the events of each dispatch, appended from the
    rank's thread, its cores and its watchers (``list.append`` is atomic;
    counters take ``lock``).  An event holds only strings, numbers and
    tuples of them, never a list: the garbage collector then stops tracking
    it, and a long trace does not make every collection of the program
    slower."""

    def __init__(self, rank: int, swimlane: int, graph: bool, stats: bool):
        self.rank = rank
        self.tasks = swimlane >= 1
        self.comm = swimlane >= 2
        self.deps = swimlane >= 3       # which completed tasks each task started after
        self.orchestrator = swimlane >= 4   # the orchestrating thread's submit / drain
        self.graph = graph
        self.stats = stats
        self.lock = threading.Lock()
        self.dispatches: list = []
        self.current: DispatchTrace | None = None
        self.threads: dict = {MAIN_TID: "dispatch"}
        self.cell_keys: dict = {}      # transport cell handle -> (key, label)
        self._cells: dict = {}         # (buffer, member, shape, offsets) -> (key, label)
        self.lines = SourceLines()
        self._tracker = None            # the task graph's dependency tracker, per dispatch

    # ------------------------------------------------------------ dispatches
    def begin_dispatch(self, k: int, fname: str, image) -> DispatchTrace:
        d = self.current = DispatchTrace(k, fname)
        self.lines.follow(image)
        self._tracker = Tracker() if self.graph else None
        self._in_flight = self._peak = self._submitted = 0
        d.t0 = now()
        return d

    def end_dispatch(self, finished: bool = True) -> DispatchTrace:
        d = self.current
        d.t1 = now()
        d.finished = finished
        self._tracker = None            # holds views of this call's memory
        self.dispatches.append(d)
        self.current = None
        return d

    # ------------------------------------------------------------ events
    def tid(self, ctx) -> int:
        a = ctx.agent
        if a is None:
            return MAIN_TID
        if a.kind == "core":
            tid = CORE_TID + a.index
            name = f"core {a.index}"
        else:
            tid = WATCHER_TID + a.index
            name = f"watcher {a.index}"
        if tid not in self.threads:
            self.threads[tid] = name
        return tid

    def line(self, loc: int = -1) -> str | None:
        sp = self.lines.span(loc)
        return str(sp) if sp is not None else None

    def slice(self, ctx, name, cat, t0, args):
        d = self.current
        if d is not None:
            d.events.append((name, cat, self.tid(ctx), t0, now(), args))

    def instant(self, ctx, name, cat, args):
        d = self.current
        if d is not None:
            d.events.append((name, cat, self.tid(ctx), now(), None, args))

    # ------------------------------------------------------------ cells
    def cell_key(self, view, member: int, offsets) -> tuple:
        """(buffer id, global rank of the copy, flat index) -- the same cell
        whichever rank names it -- and its label; cached per cell."""
        k = (view.buffer.id, member, view.shape, offsets)
        got = self._cells.get(k)
        if got is None:
            flat = 0
            for o, n in zip(offsets, view.shape):
                flat = flat * int(n) + int(o)
            g = view.buffer.devices[member]
            label = f"{view.buffer.name}@rank{g}{list(int(o) for o in offsets)}"
            got = self._cells[k] = ((view.buffer.id, g, flat), label)
        return got

    def conditions_held(self, task, conds, read) -> None:
        """Deferred conditions already true when the waiter's body ended (the
        scheduler completes the TaskId at once, no watcher involved); each
        slice spans reading the cell again for its observed value."""
        d = self.current
        if d is None:
            return
        for cell, expected, record in conds:
            key, label = self.cell_keys.get(cell, ((record.buffer, -1, record.index), "?"))
            t0 = now()
            observed = int(read(cell))
            d.events.append(("pld.system.defer_wait release", "deferred", DEFERRED_TID, t0,
                             max(now(), t0 + 1),
                             {"cell": label, "cell_key": key, "cmp": "GeU",
                              "expected": int(expected), "observed": observed,
                              "line": self.line(record.loc)}))
        self.threads.setdefault(DEFERRED_TID, "deferred conditions")

    # ------------------------------------------------------------ tasks
    def submitted(self, tid, name, loc, deps, acc, blocks, waiter, manual):
        d = self.current
        if d is None:
            return
        with self.lock:
            self._submitted += 1
            self._in_flight += max(int(blocks), 0)
            self._peak = max(self._peak, self._in_flight)
        d.tasks.append({"id": tid, "name": name, "line": self.line(loc), "blocks": int(blocks),
                        "waiter": bool(waiter), "manual": bool(manual)})
        if not self.graph:
            return
        for i in explicit_ids(deps):
            d.edges.setdefault((i, tid), set()).add("explicit")
        for p in inferred_ids(self._tracker, tid, acc, manual):
            d.edges.setdefault((p, tid), set()).add("inferred")

    def block_done(self):
        with self.lock:
            self._in_flight -= 1

    def scope_closed(self, fname):
        d = self.current
        if d is not None and self.stats:
            with self.lock:
                d.scopes.append({"function": fname, "tasks_submitted": self._submitted,
                                 "task_window_watermark": self._peak,
                                 "dep_edges": len(d.edges) if self.graph else None})
                self._submitted = self._peak = 0


class TracedScope:
    """The scheduler as a traced dispatch's orchestration function sees it:
    every task's body is wrapped to record its slice, every submission is
    added to the dispatch's task graph."""

    __slots__ = ("sched", "rec", "fname")

    def __init__(self, sched, rec, fname):
        self.sched, self.rec, self.fname = sched, rec, fname

    def submit(self, fn, args, name, loc, deps=(), acc=(), blocks=1, waiter=False,
               manual=False):
        rec = self.rec
        line = rec.line(loc)

        def traced(ctx, *a):
            t0 = now()
            try:
                fn(ctx, *a)
            finally:
                if rec.tasks:
                    t = ctx.task
                    info = {"task_id": t.tid if t else None, "block": ctx.block_idx,
                            "line": line}
                    if rec.deps and t is not None:
                        # the scheduler's own edges: the tasks this one waited for
                        info["after"] = tuple(p.tid for p in t.preds)
                    rec.slice(ctx, name, "task", t0, info)
                rec.block_done()

        t0 = now()
        tid = self.sched.submit(traced, args, name, loc, deps, acc, blocks, waiter, manual)
        if rec.orchestrator:
            rec.slice(self.sched.rc, f"submit {name}", "orchestrator", t0,
                      {"task_id": tid, "line": line})
        rec.submitted(tid, name, loc, deps, acc, blocks, waiter, manual)
        return tid

    def close(self):
        rec = self.rec
        t0 = now()
        try:
            return self.sched.close()
        finally:
            if rec.orchestrator:
                rec.slice(self.sched.rc, "wait for tasks", "orchestrator", t0,
                          {"function": self.fname})
            rec.scope_closed(self.fname)

    def abandon(self, exc):
        return self.sched.abandon(exc)


def _timed(name, op, cat, describe):
    """A recording variant of ``RankContext.<name>``: the op itself (as the
    next class of the context's recording class has it), then its slice
    named ``op`` with ``describe(*args)`` as arguments."""
    params = list(inspect.signature(getattr(RankContext, name)).parameters)
    loc_at = params.index("_loc") - 1 if "_loc" in params else None    # -1: self

    def recorded(self, *args, **kw):
        rec = self._trace
        base = getattr(super(TracingRankContext, self), name)
        if not rec.comm:
            return base(*args, **kw)
        t0 = now()
        out = base(*args, **kw)
        info = describe(*args, **kw)
        loc = -1
        if loc_at is not None:
            loc = args[loc_at] if len(args) > loc_at else kw.get("_loc", -1)
        info["line"] = rec.line(int(loc))
        rec.slice(self, op, cat, t0, info)
        return out

    recorded.__name__ = name
    return recorded


def _peer(*a, **k):
    return {"peer": int(a[1])}


def _store(src, target, peer, *a, **k):
    return {"peer": int(peer), "shape": tuple(np.shape(src))}


def _collective(*a, **k):
    return {}


@plain_paths
class TracingRankContext(RankContext):
    """``RankContext`` that records (see the module docstring).  Instances are
    never built: a run switches the rank's context to this class and sets
    ``_trace`` (a ``Recorder``)."""

    _trace: Recorder

    def task_scope(self):
        rec = self._trace
        return TracedScope(super().task_scope(), rec, rec.current.fname)

    def notify(self, target, peer, offsets, value, op):
        rec = self._trace
        if not rec.comm:
            return super().notify(target, peer, offsets, value, op)
        t0 = now()
        new = super().notify(target, peer, offsets, value, op)
        key, label = rec.cell_key(target, int(peer), offsets)
        rec.slice(self, "pld.system.notify", "notify", t0,
                  {"cell": label, "cell_key": key, "op": op_name(op), "value": int(value),
                   "result": int(new), "peer": int(peer), "rank": rec.rank,
                   "line": rec.line()})
        return new

    def wait(self, signal, offsets, expected, cmp, _loc=-1):
        rec = self._trace
        if not rec.comm:
            return super().wait(signal, offsets, expected, cmp, _loc)
        t0 = now()
        name, cat = "pld.system.wait", "wait"
        try:
            super().wait(signal, offsets, expected, cmp, _loc)
        except BaseException:           # aborted (or failed) while blocked: say so
            name, cat = "pld.system.wait (never released)", BLOCKED_CAT
            raise
        finally:
            cell = signal.cells.get((signal.rank, offsets))
            key, label = rec.cell_key(signal, signal.rank, offsets)
            rec.slice(self, name, cat, t0,
                      {"cell": label, "cell_key": key, "cmp": CMP_NAMES[int(cmp)],
                       "expected": int(expected),
                       "observed": None if cell is None else int(self.transport.read_cell(cell)),
                       "line": rec.line(_loc)})

    def defer_wait(self, signal, offsets, expected, cmp, _loc=-1):
        super().defer_wait(signal, offsets, expected, cmp, _loc)
        rec = self._trace
        if rec.comm:
            cell = signal.cells[(signal.rank, offsets)]
            key, label = rec.cell_key(signal, signal.rank, offsets)
            rec.cell_keys[cell] = (key, label)
            rec.instant(self, "pld.system.defer_wait", "defer",
                        {"cell": label, "cell_key": key, "cmp": "GeU",
                         "expected": int(expected), "line": rec.line(_loc)})

    def wait_cell(self, cell, cmp, expected, record):
        rec = self._trace
        if not rec.comm:
            return super().wait_cell(cell, cmp, expected, record)
        t0 = now()
        name, cat = "pld.system.defer_wait release", "deferred"
        try:
            super().wait_cell(cell, cmp, expected, record)
        except BaseException:           # aborted while the condition was pending
            name, cat = "pld.system.defer_wait (never released)", BLOCKED_CAT
            raise
        finally:
            key, label = rec.cell_keys.get(cell, ((record.buffer, -1, record.index), "?"))
            rec.slice(self, name, cat, t0,
                      {"cell": label, "cell_key": key,
                       "cmp": CMP_NAMES.get(int(cmp), "GeU"), "expected": int(expected),
                       "observed": int(self.transport.read_cell(cell)),
                       "task_id": self.task.tid if self.task is not None else None,
                       "line": rec.line(record.loc)})

    remote_load = _timed("remote_load", "pld.tile.remote_load", "rma", _peer)
    remote_store = _timed("remote_store", "pld.remote_store", "rma", _store)
    put = _timed("put", "pld.tensor.put", "rma", _peer)
    get = _timed("get", "pld.tensor.get", "rma", _peer)


# every collective, recorded as one span of its call (names.NAMES: the one list)
for _name in NAMES:
    setattr(TracingRankContext, _name,
            _timed(_name, f"pld.tensor.{_name}", "collective", _collective))


__all__ = ["Recorder", "TracedScope", "TracingRankContext"]
