"""dfx/trace.py on hand-made events: conditions, which notify released a
wait, the merged trace's flow arrows, and the file checks."""
import json

import pytest

from tilecomm.errors import UserError
from tilecomm.dfx import trace as T


def notify(pid, ts, cell, op, value, result, tid=0, dur=1.0):
    return {"name": "pld.system.notify", "cat": "notify", "ph": "X", "pid": pid, "tid": tid,
            "ts": ts, "dur": dur,
            "args": {"cell": f"c{cell}", "cell_key": list(cell), "op": op, "value": value,
                     "result": result}}


def wait(pid, ts, dur, cell, cmp, expected, cat="wait", tid=0):
    return {"name": "pld.system.wait", "cat": cat, "ph": "X", "pid": pid, "tid": tid,
            "ts": ts, "dur": dur,
            "args": {"cell": f"c{cell}", "cell_key": list(cell), "cmp": cmp,
                     "expected": expected, "observed": None}}


C = (1, 0, 0)


@pytest.mark.parametrize("cmp,v,e,ok", [
    ("Eq", 3, 3, True), ("Eq", 4, 3, False), ("Ge", 4, 3, True), ("Ge", -1, 0, False),
    ("GeU", -1, 5, True),            # 0xFFFFFFFF >= 5 unsigned
    ("GeU", 4, 5, False), ("Ge", 2**31 - 1, 2**31 - 1, True)])
def test_satisfies(cmp, v, e, ok):
    assert T.satisfies(cmp, v, e) is ok


def test_unknown_comparison_is_an_error():
    with pytest.raises(ValueError):
        T.satisfies("Gt", 1, 1)


def test_an_add_makes_a_condition_true_only_when_it_crosses_it():
    assert T.makes_true(notify(0, 0, C, "AtomicAdd", 1, 2), "Ge", 2)
    assert not T.makes_true(notify(0, 0, C, "AtomicAdd", 1, 3), "Ge", 2)   # was 2 already
    assert not T.makes_true(notify(0, 0, C, "AtomicAdd", 1, 1), "Ge", 2)
    assert T.makes_true(notify(0, 0, C, "AtomicAdd", -1, 0), "Eq", 0)
    assert T.makes_true(notify(0, 0, C, "Set", 7, 7), "Ge", 5)              # previous unknown


def test_counter_rounds_each_wait_is_released_by_the_crossing_add():
    evs = [notify(1, 10, C, "AtomicAdd", 1, 1), notify(2, 20, C, "AtomicAdd", 1, 2),
           notify(1, 30, C, "AtomicAdd", 1, 3),
           wait(0, 5, 20, C, "Ge", 1),          # returns at 25: crossed by the first add
           wait(0, 26, 10, C, "Ge", 2),         # value already 2 when it started
           wait(0, 40, 5, C, "Ge", 3)]
    got = [(n["pid"], n["ts"]) for n, _ in T.match_releases(evs)]
    assert got == [(1, 10), (2, 20), (1, 30)]


def test_the_last_crossing_before_the_release_wins_and_later_notifies_do_not_count():
    evs = [notify(1, 10, C, "Set", 1, 1), notify(0, 12, C, "Set", 0, 0),
           notify(2, 14, C, "Set", 1, 1), wait(0, 0, 16, C, "Ge", 1),
           notify(3, 50, C, "Set", 1, 1)]
    ((n, w),) = T.match_releases(evs)
    assert n["pid"] == 2


def test_other_cells_and_unreleasing_values_are_ignored():
    evs = [notify(1, 1, (1, 1, 0), "Set", 9, 9), notify(1, 2, C, "Set", 0, 0),
           wait(0, 0, 10, C, "Ge", 1, cat="deferred")]
    ((n, w),) = T.match_releases(evs)
    assert n is None and w["cat"] == "deferred"


def test_merge_draws_one_arrow_per_matched_release_and_names_the_notify():
    r0 = {"traceEvents": [{"name": "process_name", "ph": "M", "pid": 0, "tid": 0,
                           "args": {"name": "rank 0"}}, wait(0, 5, 20, C, "Ge", 1)]}
    r1 = {"traceEvents": [{"name": "process_name", "ph": "M", "pid": 1, "tid": 0,
                           "args": {"name": "rank 1"}}, notify(1, 10, C, "AtomicAdd", 1, 1),
                          wait(1, 30, 1, (1, 1, 0), "Eq", 4)]}
    m = T.merge([r0, r1, r0])
    assert not T.problems(m)
    assert set(m) == {"traceEvents", "otherData"}     # ts in µs: no displayTimeUnit
    flows = [e for e in m["traceEvents"] if e["ph"] in "sf"]
    # r0 given twice: its metadata is deduplicated, its wait counted twice
    assert len([e for e in m["traceEvents"] if e["ph"] == "M"]) == 2
    assert len(flows) == 4 and m["otherData"]["flows"] == 2
    assert m["otherData"]["unmatched_releases"] == 1
    s, f = flows[0], flows[1]
    assert (s["ph"], s["pid"], f["ph"], f["pid"], f["bp"]) == ("s", 1, "f", 0, "e")
    assert s["id"] == f["id"] and 10 <= s["ts"] <= 11 and 5 <= f["ts"] <= 25
    assert "+1 -> 1" in s["name"] and "Ge 1" in s["name"]
    w = [e for e in m["traceEvents"] if e.get("cat") == "wait" and e["pid"] == 0][0]
    assert w["args"]["released_by"]["rank"] == 1
    # the inputs are not modified
    assert "released_by" not in r0["traceEvents"][1]["args"]


def test_problems_names_missing_keys_and_bad_phases():
    assert T.problems([]) == ["no traceEvents list"]
    bad = {"traceEvents": [{"ph": "X", "name": "a"}, {"ph": "Q"}]}
    out = T.problems(bad)
    assert len(out) == 2 and "missing" in out[0] and "unknown phase" in out[1]


def test_write_then_load_round_trips_and_load_rejects_other_files(tmp_path):
    tr = T.merge([{"traceEvents": [notify(0, 1, C, "Set", 1, 1)]}])
    p = T.write(str(tmp_path / "t.json"), tr)
    assert T.load(p) == json.loads(json.dumps(tr))
    (tmp_path / "x.json").write_text("{not json")
    (tmp_path / "y.json").write_text(json.dumps({"traceEvents": [{"ph": "X"}]}))
    for name in ("x.json", "y.json", "missing.json"):
        with pytest.raises(UserError) as ei:
            T.load(str(tmp_path / name))
        assert ei.value.code == "TC444"


def test_merge_renumbers_each_files_own_arrows_apart_from_the_notify_arrows():
    def dep_file(pid):
        return {"traceEvents": [
            {"name": "a", "cat": "dependency", "ph": "s", "id": 1, "pid": pid, "tid": 1,
             "ts": 1.0},
            {"name": "a", "cat": "dependency", "ph": "f", "bp": "e", "id": 1, "pid": pid,
             "tid": 2, "ts": 2.0},
            notify(pid, 3, (pid, 0, 0), "Set", 1, 1), wait(pid, 2, 5, (pid, 0, 0), "Ge", 1)]}
    m = T.merge([dep_file(0), dep_file(1)])
    flows = [e for e in m["traceEvents"] if e["ph"] in "sf"]
    ids = {}
    for e in flows:
        ids.setdefault(e["id"], []).append((e["cat"], e["ph"], e["pid"]))
    assert len(ids) == 4                      # two dependency arrows, two notify arrows
    assert all(len(v) == 2 and {p for _, p, _ in v} == {"s", "f"} and len({c for c, _, _ in v}) == 1
               and len({pid for _, _, pid in v}) == 1 for v in ids.values())
    assert m["otherData"]["other_flows"] == 2 and m["otherData"]["flows"] == 2
