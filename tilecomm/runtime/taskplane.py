"""What a rank running tasks publishes for the monitor when all of it is
blocked: a snapshot of its scheduler (each core's task and blocked wait, each
deferred TaskId with its conditions, the tasks still queued and what they
wait for), as JSON in the rank's area of the control plane
(``ControlPlane.write_area`` / ``read_area``: memory after the rank records,
reached however the plane reaches the rest).

The snapshot is written first; then the rank's own record is published as a
wait of kind ``TASKS`` (record, generation, state BLOCKED -- the same order
as any wait), so a monitor that reads BLOCKED with an unchanged
generation before and after reading the snapshot has read the snapshot of
that blocked state.  The monitor checks every cell in it itself: a snapshot
only says which cells, never whether they are satisfied.
"""
from __future__ import annotations

import json

from . import control as C

TASKS = -2             # WaitRecord.buffer of a rank whose waits are in its task area
AREA = C.ControlPlane.area_bytes     # bytes per rank
LIST_MAX = 48          # queued / ready entries in a snapshot (the rest are counted)
CONDS_MAX = 8          # conditions listed per deferred TaskId besides the pending one


def area_size(world: int) -> int:
    return AREA * world


def _wait(w):
    """A WaitRecord as a list (the monitor rebuilds it with ``record``)."""
    return None if w is None else [w.buffer, w.index, w.cmp, w.expected, w.loc, w.peer, w.cols,
                                   w.ndim, w.coll, w.gen, *w.loops]


def record(w: list, func: int) -> C.WaitRecord:
    b, i, cmp, e, loc, peer, cols, ndim, coll, gen, *loops = w
    return C.WaitRecord(b, i, cmp, e, loc, peer, func, cols, ndim, coll, gen, *loops)


def snapshot(sched) -> dict:
    """The scheduler's state (lock held) in plain JSON types.  One pass over
    the live tasks, building entries only for what is listed: a rank with
    thousands of submitted tasks publishes each time it quiesces."""
    running, deferred, watching = [], [], {}
    for a in sched.watchers:
        if a.task is not None:
            watching[a.task.tid] = a.cond
    for a in sched.core_agents:
        t = a.task
        if t is not None:
            running.append({"core": a.index, "task": t.name, "loc": t.loc, "tid": t.tid,
                            "block": a.block, "blocks": t.blocks, "wait": _wait(a.wait)})
    held_tids = {t.tid for t in sched.held}
    queued, nqueued = [], 0
    for t in list(sched.live.values()):
        state = t.state
        if state == 3:                                      # DEFERRED
            at = watching.get(t.tid, 0)
            deferred.append({"task": t.name, "loc": t.loc, "tid": t.tid, "at": at,
                             "n": len(t.conds), "cur": _wait(t.conds[at][2]),
                             "conds": [_wait(r) for _, _, r in t.conds[:CONDS_MAX]]})
        elif state == 0 and t.tid not in held_tids:         # QUEUED on dependencies
            nqueued += 1
            if nqueued <= LIST_MAX:
                deps = [{"task": p.name, "loc": p.loc, "tid": p.tid,
                         "state": ("queued", "ready", "running", "deferred", "done")[p.state]}
                        for p in t.preds if p.state != 4]
                queued.append({"task": t.name, "loc": t.loc, "tid": t.tid, "deps": deps[:8]})
    ready, seen = [], set()
    for t, _ in sched.ready:
        if t.tid not in seen:
            seen.add(t.tid)
            if len(ready) < LIST_MAX:
                ready.append({"task": t.name, "loc": t.loc, "tid": t.tid})
    held = [{"task": t.name, "loc": t.loc, "tid": t.tid}
            for t, _ in zip(sched.held, range(LIST_MAX))]
    # every blocked wait and every pending condition is listed (the monitor
    # checks each); only the explanatory lists are bounded
    return {"cores": sched.cores, "running": running, "deferred": deferred,
            "ready": ready, "held": held, "queued": queued,
            "counts": {"deferred": len(deferred), "ready": len(seen),
                       "held": len(sched.held), "queued": nqueued},
            "slots": sched.slots}


def publish(rc, sched) -> None:
    """Every agent of ``rc``'s scheduler is asleep: publish the snapshot, then
    the rank's BLOCKED state."""
    data = json.dumps(snapshot(sched), separators=(",", ":")).encode()
    while len(data) > AREA - 8:      # shed the explanatory entries first
        snap = json.loads(data)
        for key in ("queued", "ready", "held"):
            if snap[key]:
                snap[key] = snap[key][:len(snap[key]) // 2]
                break
        else:
            if not any(d["conds"] for d in snap["deferred"]):
                raise RuntimeError("scheduler snapshot does not fit its control area")
            for d in snap["deferred"]:
                d["conds"] = []
        data = json.dumps(snap, separators=(",", ":")).encode()
    rc.control.write_area(rc.device, data)
    rc.control.publish_wait(rc.device, C.WaitRecord(TASKS, 0, 0, 0, -1, -1, rc.func_id, 1, 1))


def read(control, rank: int) -> dict | None:
    """The monitor's side: the last snapshot rank ``rank`` published."""
    data = control.read_area(rank)
    if data is None:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None
