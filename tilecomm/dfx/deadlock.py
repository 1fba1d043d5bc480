"""Deadlock analysis on typed records.

The monitor turns every blocked rank's published wait into a ``BlockedWait``
(what it waits for, the cell's value, who could still write that cell); when
every live rank is blocked on a false condition, ``deadlock_report`` explains
why nothing can release any of them.  Whatever else learns to block (deferred
waits, collectives) adds a record kind here, not a case in the launcher.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..waits import CMP_EQ, CMP_GE_U, holds

__all__ = ["BlockedWait", "NotifierSet", "deadlock_report", "in_iteration", "satisfied"]



def satisfied(cmp: int, value: int, expected: int) -> bool:
    return holds(cmp, value, expected)


def in_iteration(iteration: str) -> str:
    """How a report says which iteration a wait blocked in: `` (iteration
    step=1)``, or nothing outside loops."""
    return f" (iteration {iteration})" if iteration else ""


def shown_cmp(cmp: int) -> str:
    """How a report names a comparison: an unsigned ``>=`` reads as ``Ge``."""
    return "Eq" if cmp == CMP_EQ else "Ge"


@dataclass(frozen=True)
class NotifierSet:
    """Which dispatches notify into a window: {device: sorted function names}."""

    by_device: dict = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.by_device)


@dataclass(frozen=True)
class BlockedWait:
    """One rank's blocked wait, with the awaited cell's value when observed.

    ``kind`` "signal": a ``pld.system.wait`` on cell ``cell`` of window
    ``buffer``; "dispatch": a wait for rank ``peer`` to finish dispatch
    number ``expected`` (a host tensor dependency)."""

    rank: int
    kind: str
    cmp: int
    expected: int
    value: int
    span: object = None              # where the wait is in user source
    function: str | None = None      # the function containing it
    dispatch: str | None = None      # the function the host dispatched
    cell: tuple = ()
    buffer: str | None = None
    index: int = 0
    peer: int = -1
    notifiers: NotifierSet = NotifierSet()
    # a wait inside a pld.tensor.* collective: which one (its call site is
    # ``span``), the barrier generation, whose arrival it waits for, and the
    # devices of the comm domain that must all make the call
    collective: str | None = None
    generation: int = 0
    waits_for: int = -1
    domain: tuple = ()
    # the iteration of the loops the wait is in (``step=1``; "" outside loops)
    iteration: str = ""

    @property
    def satisfied(self) -> bool:
        return satisfied(self.cmp, self.value, self.expected)

    def as_dict(self) -> dict:
        """The public form (``DeadlockError.blocked``)."""
        d = {"rank": self.rank, "cmp": shown_cmp(self.cmp), "expected": self.expected,
             "span": self.span, "cell": list(self.cell), "dispatch": self.dispatch,
             "function": self.function, "kind": self.kind, "value": self.value,
             "satisfied": self.satisfied, "iteration": self.iteration}
        if self.kind == "dispatch":
            d["peer"] = self.peer
        else:
            d.update(buffer=self.buffer, index=self.index,
                     notifiers=dict(self.notifiers.by_device))
        if self.collective:
            d.update(collective=self.collective, generation=self.generation,
                     waits_for=self.waits_for, domain=list(self.domain))
        return d

    def where(self) -> str:
        """One phrase for what this rank is stuck in."""
        at = f" at {self.span}" if self.span else ""
        at += in_iteration(self.iteration)
        if self.collective:
            return f"inside {self.collective}{at} (signal '{self.buffer}')"
        if self.kind == "dispatch":
            return f"waiting for rank {self.peer}'s dispatch #{self.expected}"
        return f"blocked in pld.system.wait{at}"


def deadlock_report(blocked: list, world: int, finished) -> str:
    """The text of a DeadlockError: every blocked wait and who could release it."""
    nblocked = len({b.rank for b in blocked})
    lines = [f"deadlock: every live rank is blocked and no rank can release any of them "
             f"({nblocked} blocked, {world - nblocked} finished)"]
    finished = sorted(finished)
    lines.extend(_collective_lines(blocked, finished))
    grouped = set()
    for b in blocked:
        if b.collective:
            continue
        # records of a rank that runs tasks explain themselves together
        group = getattr(b, "report_group", None)
        if group is not None:
            if id(group) not in grouped:
                grouped.add(id(group))
                lines.extend(group.lines([w for w in blocked
                                          if getattr(w, "report_group", None) is group],
                                         finished))
            continue
        where = f" at {b.span}" if b.span else ""
        if b.kind == "dispatch":
            lines.append(f"  rank {b.rank}: waits for rank {b.peer} to finish dispatch "
                         f"#{b.expected} (it has finished #{b.value}): a host tensor "
                         f"dependency")
            continue
        cmp = shown_cmp(b.cmp)
        op = "==" if cmp == "Eq" else ">="
        func = f" in {b.function}" if b.function else ""
        if b.dispatch and b.dispatch != b.function:
            func += f" (dispatched as {b.dispatch})"
        cell = ", ".join(map(str, b.cell))
        lines.append(f"  rank {b.rank}: pld.system.wait{where}{in_iteration(b.iteration)}{func}")
        lines.append(f"      cell {b.buffer}[{cell}] = {b.value} on rank {b.rank}, "
                     f"waiting for {op} {b.expected} (WaitCmp.{cmp})")
        if b.notifiers:
            who = ", ".join(f"rank {d} ({', '.join(fs)}, "
                            f"{'finished' if d in finished else 'blocked'})"
                            for d, fs in b.notifiers.by_device.items())
            lines.append(f"      notifies into {b.buffer!r} come from: {who}")
        else:
            lines.append(f"      no dispatch of this program notifies window '{b.buffer}': "
                         f"nothing can ever release this wait")
    if any(b.collective for b in blocked):
        lines.append("  hint: every rank of a comm domain must make the same collective calls on "
                     "a signal, in the same order (rank-uniform control flow)")
    if any(not b.collective for b in blocked):
        lines.append("  hint: every rank's notify must come before its wait, values must reach "
                     "the expected threshold, and hand-rolled signals are not self-clearing")
    return "\n".join(lines)


def _collective_lines(blocked: list, finished: list) -> list:
    """Per collective call site: who is inside it at which generation, and what
    every member of its domain that is not inside it is doing instead."""
    groups: dict = {}
    for b in blocked:
        if b.collective:
            groups.setdefault((b.collective, b.buffer, b.span), []).append(b)
    by_rank = {b.rank: b for b in blocked}
    lines = []
    for (name, buf, span), inside in groups.items():
        at = f" at {span}" if span else ""
        lines.append(f"  {name}{at} (signal '{buf}', comm domain: ranks "
                     f"{', '.join(map(str, inside[0].domain))})")
        for b in sorted(inside, key=lambda b: b.rank):
            cell = ", ".join(map(str, b.cell))
            # a defer=True call's barrier is a deferred condition of its task
            # (unsigned Ge), watched while the core runs other tasks
            split = " (defer=True: its task's TaskId is pending)" if b.cmp == CMP_GE_U else ""
            lines.append(f"      rank {b.rank}: inside{split}{in_iteration(b.iteration)}, "
                         f"at barrier "
                         f"generation {b.generation}, "
                         f"waiting for rank {b.waits_for} to arrive (cell {buf}[{cell}] = "
                         f"{b.value}, needs >= {b.expected})")
        members = {b.rank for b in inside}
        for d in inside[0].domain:
            if d in members:
                continue
            if d in by_rank:
                doing = by_rank[d].where()
            elif d in finished:
                doing = "finished its dispatches"
            else:
                doing = "not blocked"
            lines.append(f"      rank {d}: never entered this call -- {doing}")
    return lines
