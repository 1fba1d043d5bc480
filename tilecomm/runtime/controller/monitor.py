"""Watching a run: wait for every rank to finish it, collect Failed messages,
notice dead ranks, and detect a deadlock exactly at quiescence.

The monitor reads rank states and wait records through the control plane
and cell values through the transport; it never touches rank memory itself.
"""
from __future__ import annotations

import time

from ...collectives.names import collective_name
from ...errors import DeadlockError, RankFailure
from ...dfx.deadlock import BlockedWait, NotifierSet, deadlock_report
from ...dfx.taskreport import RankTasks, TaskWait
from .. import control as C
from . import shmspace
from .. import taskplane
from .launcher import describe_exit
from ..messages import Failed
from ..rank import iterations

POLL_S = 0.02


def monitor(run) -> None:
    """Return once every rank finished the run; raise on the first failure.

    Completion arrives through the control plane (``wait_runs``: the last
    rank to finish wakes the controller once), failures and deaths through
    the ranks' channels: a failing rank wakes the controller after its
    ``Failed`` message, a dead one is seen as a closed channel when the wait
    times out.  A deadlock is quiet: it is looked for only after a wait that
    timed out with nothing received."""
    ranks = run.ranks
    control = ranks.control
    quiet_since = None
    while True:
        if control.wait_runs(run.index, POLL_S):
            run.done.update(range(run.world))
            return
        live = [r for r in range(run.world) if r not in run.done]
        received = _held(ranks, live) + ranks.launcher.receive(live, 0)
        # The counts are read after the channels: a rank that finished this
        # run before it sent a message or closed its channel shows it now.
        # Its message then belongs to a later run (a pipelined one failed) and
        # is kept for that run's monitor; its closed channel is its exit
        # after its last run.  Ranks that finished are not live any more.
        run.done.update(r for r in range(run.world) if control.runs_finished(r) >= run.index)
        for rank, msg in received:
            if rank in run.done:
                if msg is not None:
                    ranks.held.append((rank, msg))
                continue
            if msg is None:
                raise rank_died(ranks.launcher, rank)
            if isinstance(msg, Failed):
                raise rank_error(msg)
        if received:
            continue
        blocked = quiescent(run)
        if blocked is None:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= run.config.deadlock_timeout_s:
            raise DeadlockError(deadlock_report(blocked, run.world, run.done),
                                [b.as_dict() for b in blocked])


def _held(ranks, live) -> list:
    """Messages an earlier run's monitor read for a later run, of ``live`` ranks."""
    if not ranks.held:
        return []
    mine = [(r, m) for r, m in ranks.held if r in live]
    ranks.held = [(r, m) for r, m in ranks.held if r not in live]
    return mine


def rank_died(launcher, rank) -> RankFailure:
    code = launcher.exit_code(rank)
    hint = shmspace.death_hint(-code) if code is not None and code < 0 else ""
    return RankFailure(f"rank {rank} {describe_exit(code)} before finishing its dispatches{hint}",
                       rank=rank)


def rank_error(msg: Failed) -> RankFailure:
    e = RankFailure(f"rank {msg.rank} failed in {msg.fname}: {msg.summary}\n{msg.text}",
                    rank=msg.rank, traceback_text=msg.text)
    e.error_type, e.error_code, e.span = msg.error_type, msg.error_code, msg.span
    return e


def quiescent(run):
    """Blocked waits if every live rank is blocked on a false condition, else None."""
    control = run.ranks.control
    live = [r for r in range(run.world) if r not in run.done]
    if not live:
        return None
    before = control.snapshot(live)
    if any(s.state != C.BLOCKED for s in before):
        return None
    blocked = []
    for rank, status in zip(live, before):
        if status.wait is not None and status.wait.buffer == taskplane.TASKS:
            waits = task_waits(run, rank, status.wait)
            if waits is None or any(b.satisfied for b in waits):
                return None
            blocked.extend(waits)
            continue
        b = blocked_wait(run, rank, status.wait)
        if b is None or b.satisfied:
            return None
        blocked.append(b)
    after = control.snapshot(live)
    if [(s.state, s.gen) for s in after] != [(s.state, s.gen) for s in before]:
        return None                        # someone moved while we looked
    return blocked


def blocked_wait(run, rank: int, w: C.WaitRecord):
    """The typed record of rank ``rank``'s published wait, its cell read now."""
    exe = run.executable
    names = exe.image.func_names
    fn = exe.prog.functions.get(names[w.func]) if 0 <= w.func < len(names) else None
    span = exe.span(w.loc)
    cols = max(w.cols, 1)
    cell = (w.index // cols, w.index % cols) if w.ndim == 2 else (w.index,)
    common = dict(rank=rank, cmp=w.cmp, expected=w.expected, span=span, cell=cell,
                  dispatch=fn.py_name if fn else None, function=span.func if span else None,
                  iteration=iterations.text(exe.image, iterations.unpack(w.loops)))
    if w.buffer == C.DEP_WAIT:
        return BlockedWait(kind="dispatch", peer=w.peer, value=run.ranks.control.done_seq(w.peer),
                           **common)
    buf = run.buffers.get(w.buffer)
    if buf is None or rank not in buf.devices:
        return None
    handle = buf.segments[buf.domain_rank(rank)]
    value = run.ranks.transport.read_cell(handle, 4 * w.index)
    rec = exe.prog.buffers[w.buffer]
    notifiers = NotifierSet({d: sorted(f) for d, f in sorted(ran_notifiers(run, rec).items())
                             if f})
    name = collective_name(w.coll)
    if name is not None:
        # w.peer: the domain rank whose arrival the barrier waits for
        common.update(collective=name, generation=w.gen, domain=tuple(buf.devices),
                      waits_for=buf.devices[w.peer] if 0 <= w.peer < len(buf.devices) else -1,
                      function=None)
    return BlockedWait(kind="signal", buffer=buf.name, index=w.index, value=value,
                       notifiers=notifiers, **common)


def ran_notifiers(run, rec) -> dict:
    """{device: names} of the dispatches that notify into buffer ``rec`` and
    were sent to that device in this run.  The program's facts say which
    devices a dispatch site may reach (a whole loop range even when a branch
    skips some); once every dispatch is sent, the report names only those
    that ran, so a rank that never ran the kernel is not named as a hope."""
    if not getattr(run, "sent_all", False):
        return dict(rec.notifiers)
    funcs = run.executable.prog.functions
    sent = {d: {funcs[f].py_name if f in funcs else f for f in names}
            for d, names in run.dispatched.items()}
    return {d: set(fs) & sent.get(d, set()) for d, fs in rec.notifiers.items()}


def task_waits(run, rank: int, rec: C.WaitRecord):
    """The blocked waits of a rank that runs tasks (each core's wait, each
    deferred TaskId's pending condition), from its published snapshot; None
    if the snapshot shows a task that is not blocked on a cell."""
    snap = taskplane.read(run.ranks.control, rank)
    if snap is None:
        return None
    exe = run.executable
    locs = [e["loc"] for k in ("running", "deferred", "ready", "held", "queued")
            for e in snap.get(k, [])]
    locs += [d["loc"] for q in snap.get("queued", []) for d in q["deps"]]
    tasks = RankTasks(rank, snap.get("cores", 0), snap, {i: exe.span(i) for i in set(locs)})
    out = []

    def add(w, entry, core):
        b = blocked_wait(run, rank, taskplane.record(w, rec.func))
        if b is None:
            return False
        fields = {f: getattr(b, f) for f in b.__dataclass_fields__}
        out.append(TaskWait(**fields, task=entry["task"], task_span=exe.span(entry["loc"]),
                            tid=entry["tid"], core=core, buffer_id=w[0], tasks=tasks))
        return True

    for e in snap.get("running", []):
        if e["wait"] is None or not add(e["wait"], e, e["core"]):
            return None
    for d in snap.get("deferred", []):
        if not add(d["cur"], d, -1):
            return None
    return out


def wake_blocked(run) -> None:
    """After an abort: wake every rank asleep on a window cell now, instead of
    at the end of its sleep slice."""
    control = run.ranks.control
    for rank, status in zip(range(run.world), control.snapshot(range(run.world))):
        w = status.wait
        if w is not None and w.buffer == taskplane.TASKS:
            for b in task_waits(run, rank, w) or ():
                buf = run.buffers.get(b.buffer_id)
                if buf is not None and rank in buf.devices:
                    run.ranks.transport.wake(buf.segments[buf.domain_rank(rank)], 4 * b.index)
            continue
        if w is None or w.buffer == C.DEP_WAIT:
            continue
        buf = run.buffers.get(w.buffer)
        if buf is not None and rank in buf.devices:
            run.ranks.transport.wake(buf.segments[buf.domain_rank(rank)], 4 * w.index)
