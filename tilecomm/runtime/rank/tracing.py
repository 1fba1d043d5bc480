"""The tracing sink on the rank's recorder (``recorder.py``): what a traced
dispatch records.

A dispatch whose ``RunConfig`` asks for a swimlane, a task graph or scope
statistics records through the rank's recording context, with this sink on
its stream (``artefacts.RankArtefacts``).  The sink only looks: every op
does exactly what it does in an untraced run, and an untraced run carries no
check of any tracing flag -- it never reaches the recorder at all.

What is recorded (``Recorder``): a slice per task block (on its core's
track), per ``pld.system.notify`` (the cell, op, value and the value the
cell took), per blocking ``pld.system.wait`` and per deferred condition's
release (cell, condition, the value seen after it returned), per op that
touches a peer's copy (remote load / store, put / get) and per InCore
collective, each with the user's source line; at level 3 the tasks each
task waited for, at level 4 the submission of each task and the
orchestrating thread's wait for them; the task graph of each dispatch
(inferred and explicit edges); and the task-window watermark of each task
scope.
"""
from __future__ import annotations

import sys
import threading
import time

import numpy as np

from ...transport.base import NOTIFY_ADD
from ...waits import CMP_NAMES
from .deps import Tracker, explicit_ids, inferred_ids
from .frames import line_of
from .recorder import Sink

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

    def span(self, loc: int = -1, frame=None):
        """The span of the op being recorded: span index ``loc``, else the
        lowered line that called it, looked for from ``frame`` (the op's
        caller, when the recorder knows it) or from the sink's caller up."""
        image = self.image
        if image is None:
            return None
        spans = self._spans
        if loc >= 0:
            if loc not in spans:
                spans[loc] = image.span(loc)
            return spans[loc]
        f = frame if frame is not None else sys._getframe(2)
        while f is not None and f.f_code.co_filename != image.filename:
            f = f.f_back
        if f is None:
            return None
        line = line_of(f)
        key = -1 - line
        if key not in spans:
            spans[key] = image.linemap.get(line)
        return spans[key]


class Recorder(Sink):
    """Per rank and run: the events of each dispatch, appended from the
    rank's thread, its cores and its watchers (``list.append`` is atomic;
    counters take ``lock``).  An event holds only strings, numbers and
    tuples of them, never a list: the garbage collector then stops tracking
    it, and a long trace does not make every collection of the program
    slower.

    On the stream it comes after exploration and dumps (``ORDER``): a slice
    starts once an explored rank has its turn, and ends before the race
    check logs the op."""

    ORDER = 3

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
    def begin_dispatch(self, ctx, info) -> None:
        d = self.current = DispatchTrace(info.k, info.fname)
        self.lines.follow(info.image)
        self._tracker = Tracker() if self.graph else None
        self._in_flight = self._peak = self._submitted = 0
        d.t0 = now()

    def end_dispatch(self, ctx, info, finished: bool) -> None:
        d = self.current
        d.t1 = now()
        d.finished = finished
        self._tracker = None            # holds views of this call's memory
        self.dispatches.append(d)
        self.current = None

    def task_scope(self, ctx, scope):
        return TracedScope(scope, self, self.current.fname)

    # ------------------------------------------------------------ the stream
    # Each slice starts in the before hook (``notes["t0"]``) and ends in the
    # after hook; a wait or release that raised (aborted while blocked) ends
    # as a slice of the blocked category.  Below level 2 only tasks are traced.
    def _start(self, ctx, ev) -> None:
        if self.comm:
            ev.notes["t0"] = now()

    before_notify = before_wait = before_release = before_collective = _start

    def before_op(self, ctx, ev) -> None:
        if self.comm and ev.remote():
            ev.notes["t0"] = now()

    def after_op(self, ctx, ev) -> None:
        t0 = ev.notes.get("t0")
        if t0 is None:
            return
        info = {"peer": int(ev.arg("peer"))}
        if "src" in ev.params and "target" in ev.params:       # a remote store
            info["shape"] = tuple(np.shape(ev.arg("src")))
        info["line"] = self.line(ev.loc)
        self.slice(ctx, ev.op, "rma", t0, info)

    # an asynchronous put: its issue is an rma slice like a put's (the copy
    # itself is in the slice of the wait that lands it)
    before_issue, after_issue = before_op, after_op

    def before_complete(self, ctx, ev) -> None:
        if self.comm:
            ev.notes["t0"] = now()

    def after_complete(self, ctx, ev) -> None:
        if self.comm:
            event = ev.arg("event")
            self.slice(ctx, ev.op, "rma", ev.notes["t0"],
                       {"peer": int(event.peer), "line": self.line(ev.loc)})

    def after_collective(self, ctx, ev) -> None:
        if self.comm:
            self.slice(ctx, ev.op, "collective", ev.notes["t0"], {"line": self.line(ev.loc)})

    def after_notify(self, ctx, ev) -> None:
        if not self.comm:
            return
        target, peer, offsets, value, op = ev.args
        key, label = self.cell_key(target, int(peer), offsets)
        self.slice(ctx, "pld.system.notify", "notify", ev.notes["t0"],
                   {"cell": label, "cell_key": key, "op": op_name(op), "value": int(value),
                    "result": int(ev.result), "peer": int(peer), "rank": self.rank,
                    "line": self.line()})

    def after_wait(self, ctx, ev, name="pld.system.wait", cat="wait") -> None:
        if not self.comm:
            return
        signal, offsets, expected, cmp, loc = ev.args
        cell = signal.cells.get((signal.rank, offsets))
        key, label = self.cell_key(signal, signal.rank, offsets)
        self.slice(ctx, name, cat, ev.notes["t0"],
                   {"cell": label, "cell_key": key, "cmp": CMP_NAMES[int(cmp)],
                    "expected": int(expected),
                    "observed": None if cell is None else int(ctx.transport.read_cell(cell)),
                    "line": self.line(loc)})

    def failed_wait(self, ctx, ev) -> None:
        # aborted (or failed) while blocked: say so
        self.after_wait(ctx, ev, "pld.system.wait (never released)", BLOCKED_CAT)

    def after_defer(self, ctx, ev) -> None:
        if not self.comm:
            return
        signal, offsets, expected, cmp, loc = ev.args
        cell = signal.cells[(signal.rank, offsets)]
        key, label = self.cell_key(signal, signal.rank, offsets)
        self.cell_keys[cell] = (key, label)
        self.instant(ctx, "pld.system.defer_wait", "defer",
                     {"cell": label, "cell_key": key, "cmp": "GeU", "expected": int(expected),
                      "line": self.line(loc)})

    def after_release(self, ctx, ev, name="pld.system.defer_wait release",
                      cat="deferred") -> None:
        if not self.comm:
            return
        cell, cmp, expected, record = ev.args
        key, label = self.cell_keys.get(cell, ((record.buffer, -1, record.index), "?"))
        self.slice(ctx, name, cat, ev.notes["t0"],
                   {"cell": label, "cell_key": key, "cmp": CMP_NAMES.get(int(cmp), "GeU"),
                    "expected": int(expected), "observed": int(ctx.transport.read_cell(cell)),
                    "task_id": ctx.task.tid if ctx.task is not None else None,
                    "line": self.line(record.loc)})

    def failed_release(self, ctx, ev) -> None:
        # aborted while the condition was pending
        self.after_release(ctx, ev, "pld.system.defer_wait (never released)", BLOCKED_CAT)

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


__all__ = ["Recorder", "TracedScope"]
