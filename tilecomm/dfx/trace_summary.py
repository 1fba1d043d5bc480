"""What a merged trace says about a run: where each rank's time went, the
longest waits and who released them, and the run's critical path.

Pure analysis over the trace's event dictionaries (``dfx/trace.py`` writes
them; ``tilecomm trace`` prints and draws what this computes).

Time per lane.  A rank's tracks (its dispatch thread, each scheduler core,
each deferred-condition watcher) are *lanes*.  A lane's slices nest (a
dispatch holds its notifies and waits, a task holds the ops of its body), so
each instant of a lane belongs to its innermost open slice: a lane becomes a
row of non-overlapping *pieces*, each the self time of one slice (or idle,
between slices).  A piece's kind comes from its slice's category: compute
(a dispatch's or a task's own code), comm (notify, remote load / store,
put / get), wait (a blocking wait, a deferred condition's release, a wait
the run ended in), collective, other (the orchestrator's submissions and
its wait for the tasks).  Summing pieces by kind can neither double count
nor miss time: the pieces of a lane tile its busy time exactly.

The critical path.  Walking back from the end of the last slice to end:
within a lane, program order (the piece before); a wait that a notify
released, when that notify ended after the wait began (the wait had to
wait for it), jumps to the notify: the wait's time before the notify is
not on the path, only its tail after it is.  A collective jumps, at the
entry of the member that entered it last (the k-th call of the same
collective on each rank), to what that member did before.  A task's start
jumps to the
latest end among the tasks it waited for (``after``, the scheduler's own
edges, drawn as dependency arrows; a deferred waiter counts as done at the
release of its condition) or, if none, to the dispatch thread that
submitted it; the end of a dispatch jumps to the last of its rank's tasks
to end within its final stretch (a task scope waits for its tasks).  The
path is contiguous in time: its length is the time from its first segment's
start to the end of the run, and each of its segments says what was being
waited on.
"""
from __future__ import annotations

import bisect
import re
from typing import NamedTuple

from .trace import NOTIFY_CAT, RELEASE_CATS, match_releases

# a slice's category -> the kind of its self time
KIND_OF_CAT = {"dispatch": "compute", "task": "compute", "notify": "comm", "rma": "comm",
               "wait": "wait", "deferred": "wait", "blocked": "wait",
               "collective": "collective", "orchestrator": "other"}
KINDS = ("compute", "comm", "wait", "collective", "other")
WAIT_CATS = RELEASE_CATS + ("blocked",)
IDLE = -1                   # the slice index of an idle piece
# how the path reached the segment after a segment
PROGRAM_ORDER, SIGNAL, DEPENDENCY, SUBMITTED, TASKS_DONE, COLLECTIVE = (
    "program order", "signal", "dependency", "submitted", "tasks done", "collective")
_RANK_NAME = re.compile(r"rank (\d+)$")
# the trace's timestamps are rounded to ns (3 decimals of a microsecond)
EPS = 0.0015


class Slice(NamedTuple):
    """One ``ph: "X"`` event."""
    index: int
    rank: int
    lane: tuple                 # (pid, tid)
    name: str
    cat: str
    kind: str
    ts: float
    end: float
    args: dict

    @property
    def dur(self) -> float:
        return self.end - self.ts

    @property
    def line(self):
        return self.args.get("line")


class Lane(NamedTuple):
    key: tuple                  # (pid, tid)
    rank: int
    name: str                   # "dispatch", "core 0", "watcher 1", ...


class LaneTime(NamedTuple):
    lane: Lane
    by_kind: dict               # kind -> µs of self time
    idle: float                 # µs of the run this lane spent in no slice

    @property
    def busy(self) -> float:
        return sum(self.by_kind.values())


class Wait(NamedTuple):
    """A wait or deferred condition and the notify that released it."""
    slice: Slice
    notify: Slice | None        # None: not released, or the cell held the value already


class Segment(NamedTuple):
    lane: Lane
    start: float
    end: float
    kind: str                   # a KINDS entry or "idle"
    what: str
    line: str | None
    slice: int                  # index into Summary.slices, IDLE for an idle stretch
    then: str                   # how the path went on to the next segment (None: the last)

    @property
    def dur(self) -> float:
        return self.end - self.start


class Summary(NamedTuple):
    title: str
    start: float                # µs, the trace's own clock
    end: float
    lanes: list                 # Lane, by rank then track
    times: list                 # LaneTime per lane
    waits: list                 # Wait, longest first
    path: list                  # Segment, in time order
    slices: list                # Slice
    pieces: dict                # lane key -> [(start, end, slice index or IDLE)]
    arrows: int                 # notify -> wait arrows of the trace

    @property
    def duration(self) -> float:
        return self.end - self.start


def _identity(items, label, total):
    return items


def summarize(trace: dict, *, progress=_identity) -> Summary:
    """The summary of a trace (``dfx.trace.load``).  ``progress(items,
    label, total)`` wraps the long loops (a progress bar on a terminal)."""
    events = trace["traceEvents"]
    procs, threads = {}, {}
    for ev in events:
        if ev["ph"] == "M" and ev["name"] == "process_name":
            procs[ev["pid"]] = ev["args"].get("name", "")
        elif ev["ph"] == "M" and ev["name"] == "thread_name":
            threads[(ev["pid"], ev["tid"])] = ev["args"].get("name", "")
    slices, by_lane = [], {}
    for ev in events:
        if ev["ph"] != "X":
            continue
        cat = ev.get("cat", "")
        key = (ev["pid"], ev["tid"])
        s = Slice(len(slices), _rank_of(ev["pid"], procs), key, ev["name"], cat,
                  KIND_OF_CAT.get(cat, "other"), float(ev["ts"]),
                  float(ev["ts"]) + float(ev["dur"]), ev.get("args") or {})
        slices.append(s)
        by_lane.setdefault(key, []).append(s)
    if not slices:
        return Summary(trace.get("otherData", {}).get("title", ""), 0.0, 0.0, [], [], [], [],
                       [], {}, 0)
    start = min(s.ts for s in slices)
    end = max(s.end for s in slices)
    lanes = sorted((Lane(k, by_lane[k][0].rank, threads.get(k, f"thread {k[1] - k[0]}"))
                    for k in by_lane), key=lambda ln: (ln.rank, ln.key))
    pieces, times = {}, []
    for lane in progress(lanes, "time per lane", len(lanes)):
        pieces[lane.key] = lane_pieces(by_lane[lane.key])
        spent = dict.fromkeys(KINDS, 0.0)
        for a, b, i in pieces[lane.key]:
            if i != IDLE:
                spent[slices[i].kind] += b - a
        times.append(LaneTime(lane, spent, (end - start) - sum(spent.values())))
    waits = releases(events, slices)
    defers = [((ev["pid"], ev["tid"]), float(ev["ts"]),
               _condition(_rank_of(ev["pid"], procs), ev.get("args") or {}))
              for ev in events if ev["ph"] == "i" and ev.get("cat") == "defer"]
    path = critical_path(slices, lanes, pieces, waits, defers)
    arrows = sum(1 for ev in events if ev["ph"] == "s" and ev.get("cat") == "signal")
    waits.sort(key=lambda w: -w.slice.dur)
    return Summary(trace.get("otherData", {}).get("title", ""), start, end, lanes, times,
                   waits, path, slices, pieces, arrows)


def _rank_of(pid: int, procs: dict) -> int:
    m = _RANK_NAME.match(procs.get(pid, ""))
    return int(m.group(1)) if m else pid


def lane_pieces(lane_slices: list) -> list:
    """The lane as non-overlapping (start, end, slice index) pieces in time
    order, each instant given to the innermost slice open then (``IDLE``
    between slices).  A slice that outlasts its parent (timestamps are
    rounded) is cut at the parent's end; a zero-length slice keeps a
    zero-length piece (it is still somewhere on the lane)."""
    out, stack = [], []             # stack: (slice index, end)
    cursor = None

    def emit(a, b, i):
        if b > a:
            out.append((a, b, i))

    for s in sorted(lane_slices, key=lambda s: (s.ts, -s.end, s.index)):
        while stack and stack[-1][1] <= s.ts:
            i, e = stack.pop()
            emit(cursor, e, i)
            cursor = e
        if cursor is not None:
            emit(cursor, s.ts, stack[-1][0] if stack else IDLE)
        cursor = s.ts
        e = min(s.end, stack[-1][1]) if stack else s.end
        if e <= s.ts:
            out.append((s.ts, s.ts, s.index))
        else:
            stack.append((s.index, e))
    while stack:
        i, e = stack.pop()
        emit(cursor, e, i)
        cursor = e
    return out


def releases(events: list, slices: list) -> list:
    """A ``Wait`` for every wait, deferred condition and wait the run ended
    in.  The merged trace names each release's notify (``released_by``: its
    rank and start); a trace without those names (one rank's own file) is
    matched here by the same rule the merge uses."""
    notifies = {(s.args.get("rank", s.rank), s.ts): s for s in slices if s.cat == NOTIFY_CAT}
    waits = [s for s in slices if s.cat in WAIT_CATS]
    named = any("released_by" in s.args for s in waits)
    if not named:
        index_of = {id(ev): k for k, ev in enumerate(e for e in events if e["ph"] == "X")}
        found = {index_of[id(w)]: n for n, w in match_releases(events) if n is not None}
        return [Wait(s, slices[index_of[id(found[s.index])]] if s.index in found else None)
                for s in waits]
    out = []
    for s in waits:
        by = s.args.get("released_by")
        n = notifies.get((by.get("rank"), by.get("ts"))) if isinstance(by, dict) else None
        out.append(Wait(s, n))
    return out


def _what(s: Slice | None) -> str:
    if s is None:
        return "idle"
    return f"task {s.name}" if s.cat == "task" else s.name


class _Walk:
    """The backward walk of ``critical_path`` (its state and lookups)."""

    def __init__(self, slices, lanes, pieces, waits, defers=()):
        self.slices, self.pieces = slices, pieces
        self.lane = {ln.key: ln for ln in lanes}
        self.released = {w.slice.index: w.notify for w in waits if w.notify is not None}
        self.ends = {key: [p[1] for p in ps] for key, ps in pieces.items()}
        self.piece_of = {}              # slice index -> (lane key, index of its last piece)
        self.first_piece = {}           # slice index -> index of its first piece
        for key, ps in pieces.items():
            for k, (_, _, i) in enumerate(ps):
                if i != IDLE:
                    self.piece_of[i] = (key, k)
                    self.first_piece.setdefault(i, k)
        # a collective ends on no rank before every member entered it (it is
        # a barrier at least): the k-th call of one collective on each rank
        self.entered_last = {}          # collective slice index -> the member that entered last
        calls: dict = {}
        for s in sorted((s for s in slices if s.cat == "collective"), key=lambda s: s.ts):
            calls.setdefault((s.rank, s.name), []).append(s)
        groups: dict = {}
        for (rank, name), lst in calls.items():
            for k, s in enumerate(lst):
                groups.setdefault((name, k), []).append(s)
        for members in groups.values():
            last = max(members, key=lambda s: s.ts)
            for s in members:
                self.entered_last[s.index] = last
        self.dispatch_lane = {}         # rank -> its dispatch thread's lane key
        self.tasks = {}                 # rank -> [(end, slice index)] sorted
        self.task_done = {}             # (rank, task id) -> [its slices]
        # a deferred waiter's TaskId completes when its conditions hold: the
        # releases of each condition, and the conditions each lane registered
        self.released_when = {}         # (rank, cell, cmp, expected) -> [release slices]
        self.deferred = {}              # lane key -> [(ts, condition)] of defer_wait calls
        for key, ts, cond in defers:
            self.deferred.setdefault(key, []).append((ts, cond))
        for s in slices:
            if s.cat == "dispatch" or (s.cat == "collective" and "dispatch" in s.args):
                self.dispatch_lane.setdefault(s.rank, s.lane)
            elif s.cat == "task":
                self.tasks.setdefault(s.rank, []).append((s.end, s.index))
                self.task_done.setdefault((s.rank, s.args.get("task_id")), []).append(s)
            elif s.cat == "deferred":
                self.released_when.setdefault(_condition(s.rank, s.args), []).append(s)
        for lst in self.tasks.values():
            lst.sort()
        self.task_ends = {r: [e for e, _ in lst] for r, lst in self.tasks.items()}

    def at(self, key, t):
        """The index of the piece of lane ``key`` holding time ``t`` (None:
        before the lane's first piece)."""
        ps = self.pieces[key]
        k = bisect.bisect_left(self.ends[key], t)
        if k >= len(ps) or ps[k][0] > t:
            return None
        return k

    def last_task_done(self, rank, after, t, lane):
        """The task of ``rank`` (off ``lane``) that ended last in (after, t]."""
        ends = self.task_ends.get(rank)
        if not ends:
            return None
        k = bisect.bisect_right(ends, t + EPS)
        while k > 0:
            k -= 1
            end, i = self.tasks[rank][k]
            if end <= after:
                return None
            if self.slices[i].lane != lane:
                return self.slices[i]
        return None

    def predecessor(self, task: Slice):
        """What ``task`` started after: the latest-ending of the tasks it
        waited for that ended by its start."""
        best = None

        def consider(s):
            nonlocal best
            if s.end <= task.ts + EPS and (best is None or s.end > best.end):
                best = s

        for tid in task.args.get("after", ()) or ():
            for s in self.task_done.get((task.rank, tid), ()):
                consider(s)
                # a waiter that deferred conditions completed at their release:
                # the last release of one of them before this task started
                for ts, cond in self.deferred.get(s.lane, ()):
                    if s.ts <= ts <= s.end:
                        for rel in self.released_when.get(cond, ()):
                            consider(rel)
        return best


def _condition(rank, args) -> tuple:
    return (rank, tuple(args.get("cell_key") or ()), args.get("expected"))


def critical_path(slices, lanes, pieces, waits, defers=()) -> list:
    """The run's critical path as ``Segment``s in time order (see the module
    docstring for the edges it follows).  ``defers``: (lane key, time,
    condition) of each ``pld.system.defer_wait`` call."""
    if not slices:
        return []
    w = _Walk(slices, lanes, pieces, waits, defers)
    last = max((ps[-1][1], key) for key, ps in pieces.items() if ps)
    key, k = last[1], len(pieces[last[1]]) - 1
    t = pieces[key][k][1]
    out, visited, then = [], set(), None

    def add(a, b, i, kind=None):
        nonlocal then
        s = slices[i] if i != IDLE else None
        out.append(Segment(w.lane[key], a, b, kind or (s.kind if s else "idle"), _what(s),
                           s.line if s else None, i, then))
        then = PROGRAM_ORDER

    # each step consumes a piece or jumps to one not visited: this bounds it
    for _ in range(2 * sum(len(p) for p in pieces.values()) + 4):
        a, b, i = pieces[key][k]
        visited.add((key, k))
        s = slices[i] if i != IDLE else None
        jump = None
        if s is not None and s.cat in RELEASE_CATS and i in w.released:
            n = w.released[i]
            target = w.piece_of.get(n.index)
            if n.end > s.ts and target is not None and target not in visited:
                t2 = max(min(n.end, t), a)
                add(t2, t, i)
                then, (key, k), t = SIGNAL, target, t2
                jump = True
        elif s is not None and (s.cat == "dispatch" and b >= s.end - EPS
                                or s.cat == "orchestrator" and s.name == "wait for tasks"):
            task = w.last_task_done(s.rank, a, t, key)
            if task is not None and w.piece_of.get(task.index) not in visited:
                t2 = max(min(task.end, t), a)
                add(t2, t, i)
                then, (key, k), t = TASKS_DONE, w.piece_of[task.index], t2
                jump = True
        elif s is not None and s.cat == "collective" and i in w.entered_last:
            last = w.entered_last[i]
            k2 = w.first_piece.get(last.index)
            if last.ts > max(s.ts, a) + EPS and k2 is not None and t > last.ts:
                # the time before the last member entered is not on the path
                add(last.ts, t, i)
                then, key = COLLECTIVE, last.lane
                if k2 == 0:
                    break
                k, t = k2 - 1, pieces[last.lane][k2 - 1][1]
                jump = True
        if jump:
            continue
        add(a, t, i)
        if s is not None and s.cat == "task" and a <= s.ts + EPS:
            pred = w.predecessor(s)
            if pred is not None and w.piece_of.get(pred.index) not in visited:
                t2 = min(pred.end, a)
                if t2 < a:      # queued: the core may have run other tasks meanwhile
                    add(t2, a, IDLE, "other")
                    out[-1] = out[-1]._replace(what=f"scheduler: {_what(s)} starts after "
                                                    f"{_what(pred)}")
                then, (key, k), t = DEPENDENCY, w.piece_of[pred.index], t2
                continue
            lane = w.dispatch_lane.get(s.rank)
            k2 = w.at(lane, a) if lane is not None else None
            if k2 is not None and (lane, k2) not in visited:
                then, key, k, t = SUBMITTED, lane, k2, a
                continue
        if k == 0:
            break
        k -= 1
        t = pieces[key][k][1]
    out.reverse()
    return merge_segments(out)


def merge_segments(path: list) -> list:
    """Adjacent segments of one slice's self time on one lane as one (a
    slice's self time is cut by its children's pieces only when they are
    not on the path); the ``then`` of a segment says how the path left it."""
    out = []
    for seg in path:
        prev = out[-1] if out else None
        if prev is not None and prev.then == PROGRAM_ORDER and prev.lane == seg.lane \
                and prev.slice == seg.slice and abs(prev.end - seg.start) <= EPS:
            out[-1] = prev._replace(end=seg.end, then=seg.then)
        else:
            out.append(seg)
    return out


def rank_times(summary: Summary) -> dict:
    """rank -> {kind: µs} summed over the rank's lanes."""
    out = {}
    for lt in summary.times:
        acc = out.setdefault(lt.lane.rank, dict.fromkeys(KINDS, 0.0))
        for kind, us in lt.by_kind.items():
            acc[kind] += us
    return out


def to_json(summary: Summary, top: int | None = None) -> dict:
    """The summary as plain JSON (times in µs from the trace's start)."""
    t0 = summary.start

    def lane(ln):
        return {"rank": ln.rank, "lane": ln.name}

    def sl(s):
        return None if s is None else dict(lane(summary_lane(summary, s)), name=s.name,
                                           start_us=s.ts - t0, dur_us=s.dur, line=s.line)

    waits = summary.waits if top is None else summary.waits[:top]
    return {
        "title": summary.title,
        "duration_us": summary.duration,
        "ranks": len({ln.rank for ln in summary.lanes}),
        "arrows": summary.arrows,
        "lanes": [dict(lane(lt.lane), **{f"{k}_us": v for k, v in lt.by_kind.items()},
                       idle_us=lt.idle) for lt in summary.times],
        "waits": [dict(sl(w.slice), cell=w.slice.args.get("cell"),
                       condition=f"{w.slice.args.get('cmp')} {w.slice.args.get('expected')}",
                       released=w.slice.cat != "blocked", released_by=sl(w.notify))
                  for w in waits],
        "critical_path": {
            "duration_us": (summary.path[-1].end - summary.path[0].start) if summary.path
            else 0.0,
            "segments": [dict(lane(seg.lane), start_us=seg.start - t0, dur_us=seg.dur,
                              kind=seg.kind, what=seg.what, line=seg.line, then=seg.then)
                         for seg in summary.path]},
    }


def summary_lane(summary: Summary, s: Slice) -> Lane:
    for ln in summary.lanes:
        if ln.key == s.lane:
            return ln
    raise KeyError(s.lane)


__all__ = ["IDLE", "KINDS", "Lane", "LaneTime", "Segment", "Slice", "Summary", "Wait",
           "critical_path", "lane_pieces", "rank_times", "releases", "summarize", "to_json"]
