"""Run artefacts (reference 5.1): what a dispatch writes when its ``RunConfig``
asks, under ``<compiled.output_dir>/dfx_outputs/``.

Layout: ``rank{r}/d{k}/`` per dispatch, ``r`` the rank it ran on and ``k``
that rank's dispatch count within the run (HOST collectives are dispatches
too), reset every run; stale ``rank*/d*`` directories (and the merged trace)
are removed before a run that writes any.

=========================  ===================================================
``enable_dep_gen``         ``deps.json``: the dispatch's tasks and their edges,
                           ``inferred`` (from the memory they touch, in
                           submission order) and ``explicit`` (``deps=``).
                           Also written with a swimlane, as upstream does.
``enable_scope_stats``     ``scope_stats/scope_stats.jsonl``: one line per task
                           scope (a dispatch without tasks gets one line of
                           zeros): tasks submitted, the task-window watermark
                           (most task blocks submitted and not yet finished),
                           dependency edges; ``heap_bytes`` is null (task
                           arguments are views of the caller's arrays: there
                           is no ring heap to fill on the CPU).
``enable_chip_swimlane``   ``chip_swimlane_records.json``: a Chrome / Perfetto
                           trace of the dispatch (``dfx/trace.py``).  Level
                           1: dispatches and tasks; 2: + communication ops;
                           3: + scheduler phases (an arrow from each task to
                           those that waited for it); 4: + orchestrator
                           phases (task submissions, the wait for the
                           tasks).  After the call,
                           ``dfx_outputs/merged_swimlane.json`` merges every
                           rank and dispatch and draws notify -> wait arrows,
                           and each dispatch gets its part of that trace as
                           ``merged_swimlane_<YYYYmmdd_HHMMSS>.json`` (where
                           upstream's converter writes its per-dispatch one).
``enable_dump_args=2``     ``args_dump/before/`` and ``args_dump/after/``: each
                           array argument (a window: this rank's copy) as
                           ``<index>_<name>.npy`` when the dispatch starts and
                           when it ends; ``args_dump/args.json`` lists them
                           with scalars' values.
``enable_dump_args=1``     the same files with only the tensors tagged by
                           ``pl.dump_tag`` / ``dumps=``, for the dispatch and
                           for each task (``args_dump/task<id>_<name>/``)
                           that takes them (``argdumps.py``).
=========================  ===================================================

The controller side (``RunArtefacts``) prepares the directory, tells each
rank (``messages.BeginRun``) and merges the traces once every rank has
written its files (before it reports the run done).  The rank side
(``RankArtefacts``) builds the run's sinks, switches the rank's context to
the recording class for the run (``recorder.py``) and writes the files.

A rank whose process cannot write the controller's directory (an MPI process
on another node: ``ship`` given) writes its files to a private temporary
directory instead and, when it finishes or salvages the run, sends them to
the controller (``messages.Files``, sent so that the controller has written
them before it can see the rank finished or gone: ``backends/mpi/launcher.py``), then
removes the directory.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass

from ...dfx import trace as T
from .argdumps import ARGS_DIR, TaskDumps, param_names, unwritable, write_args
from ..messages import Files
from .context import RankContext
from .exploring import Explorer, ExploringEndpoint
from .racing import RaceLog
from .recorder import Dispatch, Recording
from .tracing import MAIN_TID, Recorder, pid_of
from .unwritten import UnwrittenReads

DFX_DIR = "dfx_outputs"
MERGED_TRACE = "merged_swimlane.json"
RANK_TRACE = "chip_swimlane_records.json"


@dataclass(frozen=True)
class DfxSettings:
    root: str                  # <output_dir>/dfx_outputs
    swimlane: int
    dump_args: int
    dep_gen: bool
    scope_stats: bool
    origin_ns: int             # time zero of the run's traces
    title: str
    races: str | None = None   # a race-checking run: the path prefix of each rank's log
    # an explored run: (the path prefix of each rank's step log, the ranks
    # chosen at the first steps, the most steps a run may take, the ready
    # task taken at PICK steps: (step index, option) pairs)
    explore: tuple | None = None
    # RunConfig.poison_windows: (the path prefix of each rank's record of
    # reads of unwritten elements, the ids of the windows the run may poison)
    poison: tuple | None = None

    @property
    def files(self) -> bool:
        """Whether the run writes files under ``root`` (not only a race log)."""
        return bool(self.swimlane or self.dump_args or self.dep_gen or self.scope_stats)


def race_log_path(settings: DfxSettings, rank: int) -> str:
    return f"{settings.races}-{rank}"


def poison_log_path(settings: DfxSettings, rank: int) -> str:
    return f"{settings.poison[0]}-{rank}"


def step_log_path(settings: DfxSettings, rank: int) -> str:
    return f"{settings.explore[0]}-{rank}"


def dfx_root(output_dir: str) -> str:
    return os.path.join(output_dir, DFX_DIR)


def merged_trace_path(output_dir: str) -> str:
    return os.path.join(dfx_root(output_dir), MERGED_TRACE)


def dispatch_dir(root: str, rank: int, k: int) -> str:
    return os.path.join(root, f"rank{rank}", f"d{k}")


def dispatch_trace_name(when: float) -> str:
    """The name of a dispatch's part of the merged trace, stamped with the
    local time ``when`` (seconds since the epoch), as upstream names its
    converted per-dispatch swimlanes."""
    return f"merged_swimlane_{time.strftime('%Y%m%d_%H%M%S', time.localtime(when))}.json"


# ---------------------------------------------------------------- rank
class RankArtefacts:
    """A rank's part of one run that writes artefacts."""

    def __init__(self, rank: int, settings: DfxSettings, rc, ship=None):
        self.rank = rank
        self.s = settings
        self.rc = rc
        # ship(message): the files go to the controller as a message, written
        # here first under a private directory (see the module doc)
        self.ship = ship
        self.dest = settings.root
        if ship is not None:
            self.s = dataclasses.replace(settings, root=tempfile.mkdtemp(prefix="tilecomm-dfx-"))
        self.k = 0
        self.rec = None
        self.meta: list = []                # (k, fname, line) per dispatch
        if settings.swimlane or settings.dep_gen or settings.scope_stats:
            self.rec = Recorder(rank, settings.swimlane, settings.dep_gen, settings.scope_stats)
        self.task_dumps = None
        if settings.dump_args == 1:
            # level 1: tagged tasks dump too (their scope is wrapped, see argdumps.py)
            self.task_dumps = TaskDumps()
        self.races = None
        if settings.races:
            self.races = RaceLog(rank, rc.control, rc._aborted_exc, race_log_path(settings, rank))
        self.explore = None
        real = rc.transport
        if settings.explore:
            self.explore = Explorer(rank, rc.world, rc.control, rc._aborted_exc,
                                    step_log_path(settings, rank), *settings.explore[1:])
            # every check of a wait and every put / get of the run is a step
            # (the sink takes the rest: exploring.py)
            rc.transport = ExploringEndpoint(real, self.explore)
            rc._signal, rc._try_wait = rc.transport.signal, rc.transport.try_wait
        self.unwritten = None
        if settings.poison:
            self.unwritten = UnwrittenReads(rank, poison_log_path(settings, rank),
                                            settings.poison[1])
        self.failed = False
        sinks = [s for s in (self.rec, self.task_dumps, self.races, self.explore,
                             self.unwritten) if s is not None]
        # a run that records nothing keeps the plain context (no recording
        # code on its path at all); one that does records once, for every
        # sink, through the recording context (the scheduler's threads follow
        # at their next dispatch: Scheduler.begin)
        self.recording = None
        if sinks:
            # a notify's signal goes to the transport below any sink's
            # endpoint: the sinks take their turns in their hooks
            self.recording = rc._rec = Recording(sinks, real.signal, real.read_cell)
            rc.__class__ = self.recording.context_class()

    def dispatch(self, fname, fn, call_args, vals, loc, image, seq):
        """Run one dispatch (``fn(*call_args)``, the rank's dispatch number
        ``seq``), recording it."""
        k = self.k
        self.k += 1
        d = dispatch_dir(self.s.root, self.rank, k) if self.s.files else None
        if self.rec is not None or self.s.dump_args == 2:
            try:
                os.makedirs(d, exist_ok=True)
            except OSError as e:
                raise unwritable(d, e) from None
        sp = image.span(loc)
        self.meta.append((k, fname, str(sp) if sp is not None else None))
        dumped = None
        if self.s.dump_args:
            names = param_names(fn, len(vals))
            idx = range(len(vals)) if self.s.dump_args == 2 else \
                getattr(image, "dump_params", {}).get(fname, ())
            dumped = [(i, names[i], vals[i]) for i in idx] or None
            if dumped is not None:
                write_args(os.path.join(d, ARGS_DIR), "before", dumped)
        info = Dispatch(k, fname, image, tuple(vals), loc, seq, d)
        recording = self.recording
        if recording is not None:
            recording.begin(self.rc, info)
        finished = False
        try:
            fn(*call_args)
            finished = True
        finally:
            if recording is not None:
                recording.end(self.rc, info, finished)
        if dumped is not None:
            write_args(os.path.join(d, ARGS_DIR), "after", dumped)

    def salvage(self):
        """The run failed or was aborted on this rank: write what was recorded
        (the controller merges it into the call's trace).  Never raises: the
        rank is on its way out."""
        self.failed = True
        try:
            self.finish()
        except BaseException:
            pass

    def finish(self):
        """The run ended on this rank: write its files, then put the rank's
        context back to the untraced class."""
        rec = self.rec
        try:
            if rec is not None:
                lines = {k: line for k, _, line in self.meta}
                for dt in rec.dispatches:
                    self._write_dispatch(dt, lines.get(dt.k))
            if self.recording is not None:
                self.recording.finish(self.failed)
        except OSError as e:
            raise unwritable(self.s.races if self.races is not None else self.s.root, e) \
                from None
        finally:
            # back to the plain context (the scheduler's threads follow at
            # their next dispatch: Scheduler.begin)
            rc = self.rc
            rc.__class__ = RankContext
            rc.__dict__.pop("_rec", None)
            if self.explore is not None:       # the transport itself again
                rc.transport = rc.transport.real
                rc._signal, rc._try_wait = rc.transport.signal, rc.transport.try_wait
                self.explore = None
            self.races = self.recording = None
            if rec is not None:
                # the scheduler's threads drop the recorder at their next
                # dispatch; its events go now
                rec.dispatches = []
                rec.cell_keys = {}
            if self.ship is not None:
                try:
                    self.ship(Files(self.dest, _files_under(self.s.root)))
                finally:
                    self.close()

    def close(self) -> None:
        """Remove the private directory of a shipping rank (nothing otherwise)."""
        if self.ship is not None:
            shutil.rmtree(self.s.root, ignore_errors=True)

    def _write_dispatch(self, dt, line):
        s = self.s
        d = dispatch_dir(s.root, self.rank, dt.k)
        if s.dep_gen:
            edges = [{"from": a, "to": b, "kinds": sorted(kinds)}
                     for (a, b), kinds in sorted(dt.edges.items())]
            _write_json(os.path.join(d, "deps.json"),
                        {"rank": self.rank, "dispatch": dt.k, "function": dt.fname,
                         "line": line, "tasks": dt.tasks, "edges": edges})
        if s.scope_stats:
            os.makedirs(os.path.join(d, "scope_stats"), exist_ok=True)
            scopes = dt.scopes or [{"function": dt.fname, "tasks_submitted": 0,
                                    "task_window_watermark": 0, "dep_edges": 0}]
            with open(os.path.join(d, "scope_stats", "scope_stats.jsonl"), "w",
                      encoding="utf-8") as f:
                for sc in scopes:
                    f.write(json.dumps(dict(sc, rank=self.rank, dispatch=dt.k,
                                            heap_bytes=None)) + "\n")
        if s.swimlane:
            T.write(os.path.join(d, RANK_TRACE), self._chrome(dt, line))

    def _chrome(self, dt, line) -> dict:
        """The dispatch's events as a Chrome trace: this rank is one process,
        its tracks are threads (``tracing.pid_of``)."""
        org = self.s.origin_ns
        pid = pid_of(self.rank)

        def us(t):
            return round((t - org) / 1000.0, 3)

        builtin = dt.fname.startswith("builtin.tensor.")
        name = ("pld.tensor." + dt.fname.rsplit(".", 1)[1] + " (HOST)") if builtin else dt.fname
        evs = [{"name": "process_name", "ph": "M", "pid": pid, "tid": pid,
                "args": {"name": f"rank {self.rank}"}},
               {"name": "process_sort_index", "ph": "M", "pid": pid, "tid": pid,
                "args": {"sort_index": self.rank}},
               {"name": name, "cat": "collective" if builtin else "dispatch", "ph": "X",
                "pid": pid, "tid": pid + MAIN_TID, "ts": us(dt.t0),
                "dur": round(us(dt.t1) - us(dt.t0), 3),
                "args": {"dispatch": dt.k, "function": dt.fname, "line": line,
                         "finished": dt.finished}}]
        tids = {MAIN_TID}
        for (ename, cat, tid, t0, t1, args) in dt.events:
            tids.add(tid)
            if t1 is None:
                evs.append({"name": ename, "cat": cat, "ph": "i", "s": "t", "pid": pid,
                            "tid": pid + tid, "ts": us(t0), "args": args})
            else:
                evs.append({"name": ename, "cat": cat, "ph": "X", "pid": pid, "tid": pid + tid,
                            "ts": us(t0), "dur": max(round(us(t1) - us(t0), 3), 0.0),
                            "args": args})
        if self.rec.deps:
            evs.extend(_dependency_flows(evs))
        for tid in sorted(tids):
            evs.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": pid + tid,
                        "args": {"name": self.rec.threads.get(tid, f"thread {tid}")}})
        return {"traceEvents": evs,
                "otherData": {"schema": T.SCHEMA, "rank": self.rank, "dispatch": dt.k,
                              "function": dt.fname}}


def _dependency_flows(evs) -> list:
    """An arrow from the end of each task a task waited for (its last block)
    to the start of each of its blocks (ids local to the file: the merge
    renumbers them)."""
    last = {}
    for e in evs:
        if e.get("cat") == "task":
            tid = e["args"]["task_id"]
            if tid not in last or e["ts"] + e["dur"] > last[tid]["ts"] + last[tid]["dur"]:
                last[tid] = e
    flows = []
    for e in evs:
        if e.get("cat") != "task":
            continue
        for p in e["args"].get("after", ()):
            src = last.get(p)
            if src is None:
                continue
            i = len(flows) // 2 + 1
            name = f"task {p} -> task {e['args']['task_id']}"
            flows.append({"name": name, "cat": "dependency", "ph": "s", "id": i,
                          "pid": src["pid"], "tid": src["tid"],
                          "ts": max(src["ts"], src["ts"] + src["dur"] - 0.001)})
            flows.append({"name": name, "cat": "dependency", "ph": "f", "bp": "e", "id": i,
                          "pid": e["pid"], "tid": e["tid"],
                          "ts": e["ts"] + min(e["dur"], 0.001)})
    return flows


def _files_under(root: str) -> tuple:
    """((path relative to ``root``, bytes), ...) of every file under ``root``."""
    out = []
    for d, _, names in os.walk(root):
        for name in sorted(names):
            path = os.path.join(d, name)
            with open(path, "rb") as f:
                out.append((os.path.relpath(path, root), f.read()))
    return tuple(out)


def _write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1)


__all__ = ["DFX_DIR", "DfxSettings", "MERGED_TRACE", "RANK_TRACE", "RankArtefacts", "dfx_root",
           "dispatch_dir", "dispatch_trace_name", "merged_trace_path", "race_log_path",
           "step_log_path"]
