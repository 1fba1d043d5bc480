"""Chrome / Perfetto traces of a run: per-rank swimlanes, the notify that
released each wait, and one merged trace of the whole call.

The format is the Chrome trace-event JSON that ui.perfetto.dev and
chrome://tracing open: ``{"traceEvents": [...]}`` with ``ph: "X"`` slices
(``ts`` / ``dur`` in microseconds; no ``displayTimeUnit``, which some readers
take for the unit of ``ts``), ``ph: "i"`` instants, ``ph: "M"`` process
and thread names, and ``ph: "s"`` / ``ph: "f"`` flow events drawn as arrows.
One process (``pid``) per rank, named ``rank <r>``, one thread (``tid``)
per track of that rank: its dispatch thread, each scheduler core, each
deferred-condition watcher.

This module works on plain event dictionaries only; the runtime records them
(``runtime/rank/tracing.py``) and writes one file per rank and dispatch.

Which notify released a wait.  A rank records, per ``pld.system.notify``, the
cell, the operation, the value and the value the cell took (the atomic
add's result); per released wait, the cell, the condition and when it
returned.  A notify *makes a condition true* when the value it produced
satisfies the condition and -- for an add, whose previous value is its result
minus its value -- the value before it did not (a Set's previous value is not
known: it counts whenever its value satisfies).  The wait was released by the
last notify that made its condition true before the wait returned: a later
one cannot have released it, and an earlier one was undone by some write in
between or the latest one would not have been needed.  Timestamps come from
CLOCK_MONOTONIC (``time.perf_counter_ns``), one clock for every process of a
machine, and a notify's start is taken before its atomic operation while a
wait's end is taken after it saw the value, so "before" is exact.
"""
from __future__ import annotations

import bisect
import json
import os

from ..errors import UserError
from ..waits import CMP_CODES, holds, i32

SCHEMA = "tilecomm-swimlane-1"
NOTIFY_CAT = "notify"
RELEASE_CATS = ("wait", "deferred")      # a blocking wait / a deferred condition
FLOW_CAT = "signal"
REQUIRED = {"X": ("name", "cat", "ph", "pid", "tid", "ts", "dur", "args"),
            "i": ("name", "cat", "ph", "pid", "tid", "ts", "s", "args"),
            "M": ("name", "ph", "pid", "tid", "args"),
            "s": ("name", "cat", "ph", "pid", "tid", "ts", "id"),
            "f": ("name", "cat", "ph", "pid", "tid", "ts", "id", "bp")}


def satisfies(cmp: str, value: int, expected: int) -> bool:
    """Whether a cell holding ``value`` meets the condition named ``cmp``
    (``GeU``: the unsigned comparison of deferred conditions)."""
    if cmp not in CMP_CODES:
        raise ValueError(f"unknown wait comparison {cmp!r}")
    return holds(CMP_CODES[cmp], value, expected)


def makes_true(notify: dict, cmp: str, expected: int) -> bool:
    """Whether this notify's write turned the condition from false to true."""
    a = notify["args"]
    if not satisfies(cmp, a["result"], expected):
        return False
    if a["op"] == "AtomicAdd":
        return not satisfies(cmp, i32(a["result"] - a["value"]), expected)
    return True


def _end(ev) -> float:
    return ev["ts"] + ev.get("dur", 0.0)


def match_releases(events: list) -> list:
    """(notify event or None, release event) for every released wait and
    deferred condition among ``events`` (which may span every rank)."""
    by_cell: dict = {}
    for ev in events:
        if ev.get("cat") == NOTIFY_CAT and ev.get("ph") == "X":
            by_cell.setdefault(tuple(ev["args"]["cell_key"]), []).append(ev)
    starts = {}
    for key, lst in by_cell.items():
        lst.sort(key=lambda e: e["ts"])
        starts[key] = [e["ts"] for e in lst]
    out = []
    for ev in events:
        if ev.get("cat") not in RELEASE_CATS or ev.get("ph") != "X":
            continue
        a = ev["args"]
        key = tuple(a["cell_key"])
        lst = by_cell.get(key, ())
        # the notifies that started before the release, latest first: the
        # first one that made the condition true is the releaser (a counter
        # a few steps ahead of the condition is a few steps back)
        i = bisect.bisect_right(starts[key], _end(ev)) if lst else 0
        best = None
        while i > 0:
            i -= 1
            if makes_true(lst[i], a["cmp"], a["expected"]):
                best = lst[i]
                break
        out.append((best, ev))
    return out


def _flow_label(notify: dict, release: dict) -> str:
    n, w = notify["args"], release["args"]
    op = f"+{n['value']}" if n["op"] == "AtomicAdd" else f"={n['value']}"
    return f"{n['cell']} {op} -> {n['result']}  releases  {w['cmp']} {w['expected']}"


def merge(rank_traces: list, *, title: str = "") -> dict:
    """One trace of the whole call from the per-rank, per-dispatch traces:
    every event kept, metadata deduplicated, and a flow arrow (``s`` at the
    notify, ``f`` at the end of the wait it released) for every released
    wait whose releasing notify was recorded.  The release's args name the
    notify (``released_by``)."""
    events, seen_meta, ids = [], set(), {}
    for j, tr in enumerate(rank_traces):
        for ev in tr["traceEvents"]:
            ph = ev["ph"]
            if ph == "M":
                key = (ev["name"], ev["pid"], ev["tid"])
                if key in seen_meta:
                    continue
                seen_meta.add(key)
            if ph in ("s", "f"):             # a file's own arrows: ids unique per file
                events.append(dict(ev, id=ids.setdefault((j, ev["id"]), len(ids) + 1)))
            elif ev.get("cat") in RELEASE_CATS:  # gets released_by: a copy, inputs stay
                events.append(dict(ev, args=dict(ev["args"])))
            else:
                events.append(ev)
    flows = []
    unmatched = 0
    for i, (n, w) in enumerate(match_releases(events), start=len(ids)):
        if n is None:
            w["args"]["released_by"] = "no recorded notify (the cell already held the value)"
            unmatched += 1
            continue
        label = _flow_label(n, w)
        w["args"]["released_by"] = {"rank": n["args"].get("rank", n["pid"]), "ts": n["ts"],
                                    "op": n["args"]["op"],
                                    "value": n["args"]["value"],
                                    "result": n["args"]["result"], "line": n["args"].get("line")}
        # each end binds to the slice enclosing its timestamp on its track
        flows.append({"name": label, "cat": FLOW_CAT, "ph": "s", "id": i + 1,
                      "pid": n["pid"], "tid": n["tid"], "ts": n["ts"] + n["dur"] / 2})
        flows.append({"name": label, "cat": FLOW_CAT, "ph": "f", "bp": "e", "id": i + 1,
                      "pid": w["pid"], "tid": w["tid"],
                      "ts": max(w["ts"], _end(w) - 0.001)})
    events.extend(flows)
    return {"traceEvents": events,
            "otherData": {"schema": SCHEMA, "title": title, "flows": len(flows) // 2,
                          "other_flows": len(ids), "unmatched_releases": unmatched}}


def problems(trace: dict) -> list:
    """What makes ``trace`` not a well-formed swimlane trace (empty if none)."""
    out = []
    evs = trace.get("traceEvents") if isinstance(trace, dict) else None
    if not isinstance(evs, list):
        return ["no traceEvents list"]
    for k, ev in enumerate(evs):
        ph = ev.get("ph") if isinstance(ev, dict) else None
        if ph not in REQUIRED:
            out.append(f"event {k}: unknown phase {ph!r}")
            continue
        missing = [f for f in REQUIRED[ph] if f not in ev]
        if missing:
            out.append(f"event {k} ({ev.get('name')!r}): missing {missing}")
    return out


def write(path: str, trace: dict) -> str:
    tmp = f"{path}.tmp{os.getpid()}"
    # json.dumps, not json.dump: only the one-shot encoder is the C one
    text = json.dumps(trace, separators=(",", ":"))
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)                # readers never see half a file
    return path


def load(path: str) -> dict:
    """A trace file written by :func:`write` (TC444 if it is not one)."""
    try:
        with open(path, encoding="utf-8") as f:
            trace = json.load(f)
    except (OSError, ValueError) as e:
        raise UserError(f"cannot read trace {path}: {e}", code="TC444") from None
    bad = problems(trace)
    if bad:
        raise UserError(f"{path} is not a swimlane trace: {bad[0]}"
                        + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""),
                        code="TC444")
    return trace


__all__ = ["SCHEMA", "load", "makes_true", "match_releases", "merge", "problems",
           "satisfies", "write"]
