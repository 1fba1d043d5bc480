"""Deadlock analysis for ranks that run tasks.

Such a rank publishes a snapshot of its scheduler when all of it is blocked
(``runtime.taskplane``); the monitor turns each core's blocked wait and each
deferred TaskId's pending condition into a ``TaskWait`` (a ``BlockedWait``
that knows its task) and checks every cell itself.  ``rank_lines`` explains a
rank's part of the report: what each core runs and waits for, which deferred
TaskIds wait for which conditions, which tasks are queued and on what -- and
names the saturation pattern, where blocking waits hold every core while the
task that would release them waits for a core.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..waits import CMP_GE_U, holds
from .deadlock import BlockedWait, in_iteration, shown_cmp

__all__ = ["RankTasks", "TaskWait", "rank_lines"]



@dataclass(frozen=True)
class RankTasks:
    """The published scheduler snapshot of one rank, spans resolved."""

    rank: int
    cores: int
    snapshot: dict = field(default_factory=dict, compare=False)
    spans: dict = field(default_factory=dict, compare=False)   # span id -> Span

    def lines(self, waits: list, finished) -> list:
        return rank_lines(self, waits, finished)


@dataclass(frozen=True)
class TaskWait(BlockedWait):
    """A blocked wait of a task: a core's ``pld.system.wait`` or a deferred
    TaskId's pending ``pld.system.defer_wait`` condition."""

    task: str = ""
    task_span: object = None
    tid: int = 0
    core: int = -1                   # -1: a deferred condition, no core held
    buffer_id: int = -1
    tasks: RankTasks | None = field(default=None, compare=False)

    @property
    def report_group(self):
        return self.tasks

    @property
    def satisfied(self) -> bool:
        return holds(self.cmp, self.value, self.expected)

    def as_dict(self) -> dict:
        d = super().as_dict()
        d.update(task=self.task, task_span=self.task_span, tid=self.tid,
                 deferred=self.core < 0, core=self.core)
        # tasks of this rank ready to run with no core free: at quiescence a
        # free core would have taken them, so every core is held
        snap, spans = (self.tasks.snapshot, self.tasks.spans) if self.tasks else ({}, {})
        d["ready_without_core"] = [(e["task"], spans.get(e["loc"]))
                                   for e in snap.get("ready", [])]
        if self.cmp == CMP_GE_U:
            d["cmp"] = "Ge"
            d["value"] = self.value & 0xFFFFFFFF
        return d


def _where(span) -> str:
    return f" at {span}" if span else ""


def _task(entry, spans) -> str:
    return f"task '{entry['task']}'{_where(spans.get(entry['loc']))}"


def _cell_line(b: TaskWait) -> str:
    cmp = shown_cmp(b.cmp)
    op = "==" if cmp == "Eq" else ">="
    value = b.value & 0xFFFFFFFF if b.cmp == CMP_GE_U else b.value
    cell = ", ".join(map(str, b.cell))
    return f"cell {b.buffer}[{cell}] = {value} on rank {b.rank}, waiting for {op} {b.expected}"


def _notifiers(b: TaskWait, finished) -> str:
    if not b.notifiers:
        return f"no dispatch of this program notifies window '{b.buffer}'"
    who = ", ".join(f"rank {d} ({', '.join(fs)}, {'finished' if d in finished else 'blocked'})"
                    for d, fs in b.notifiers.by_device.items())
    return f"notifies into {b.buffer!r} come from: {who}"


def rank_lines(tasks: RankTasks, waits: list, finished) -> list:
    """Report lines of one rank running tasks."""
    snap, spans, r = tasks.snapshot, tasks.spans, tasks.rank
    held = [w for w in waits if w.core >= 0]
    deferred = [w for w in waits if w.core < 0]
    ready = snap.get("ready", []) + snap.get("held", [])
    lines = [f"  rank {r}: {len(held)} of {tasks.cores} core(s) held by blocking waits, "
             f"{snap.get('counts', {}).get('deferred', len(deferred))} deferred TaskId(s), "
             f"{len(ready)} ready task(s) without a core, "
             f"{snap.get('counts', {}).get('queued', 0)} queued on dependencies"]
    for w in sorted(held, key=lambda w: w.core):
        lines.append(f"    core {w.core}: task '{w.task}'{_where(w.task_span)} blocked in "
                     f"pld.system.wait{_where(w.span)}{in_iteration(w.iteration)}")
        lines.append(f"        {_cell_line(w)}")
        lines.append(f"        {_notifiers(w, finished)}")
    for w in deferred:
        lines.append(f"    deferred TaskId {w.tid}: task '{w.task}'{_where(w.task_span)}, "
                     f"no core held; unmet condition of pld.system.defer_wait{_where(w.span)}")
        lines.append(f"        {_cell_line(w)} (uint32)")
        lines.append(f"        {_notifiers(w, finished)}")
        for d in snap.get("deferred", []):
            if d["tid"] == w.tid and d["n"] > d["at"] + 1:
                lines.append(f"        and {d['n'] - d['at'] - 1} later condition(s) of this "
                             f"TaskId not yet checked")
    for e in ready:
        why = "no deferred slot free" if e in snap.get("held", []) else "no core free"
        lines.append(f"    ready, {why}: {_task(e, spans)} (TaskId {e['tid']})")
    for q in snap.get("queued", []):
        deps = ", ".join(f"{_task(d, spans)} (TaskId {d['tid']}, {d['state']})"
                         for d in q["deps"]) or "nothing"
        lines.append(f"    queued: {_task(q, spans)} (TaskId {q['tid']}) waits for {deps}")
    if held and len(held) >= tasks.cores and ready:
        # the likely releaser: a ready task unlike the ones holding the cores
        names = {w.task for w in held}
        first = next((e for e in ready if e["task"] not in names), ready[0])
        lines.append(f"    every core of rank {r} is held by a blocking pld.system.wait while "
                     f"{_task(first, spans)} is queued behind them: if that task would "
                     f"release the waits, they can never end")
        lines.append("    hint: write each waiter as its own pl.at(level=pl.Level.CORE_GROUP) "
                     "task with pld.system.defer_wait(..., cmp=pld.WaitCmp.Ge): it frees its "
                     "core when its body ends, and consumers use deps=[wait_tid]")
    return lines
