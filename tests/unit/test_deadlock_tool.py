"""The deadlock analysis on typed records alone (no ranks): the report text is
pinned line by line, and the public dict form keeps its keys."""
from tilecomm.errors import Span
from tilecomm.dfx.deadlock import BlockedWait, NotifierSet, deadlock_report

SPAN = Span("prog.py", 12, 5, "step")


def signal_wait(rank, notifiers, value=0):
    return BlockedWait(rank=rank, kind="signal", cmp=1, expected=1, value=value, span=SPAN,
                       function="step", dispatch="chip", cell=(rank, 0), buffer="buf",
                       index=rank, notifiers=NotifierSet(notifiers))


def test_report_names_every_wait_and_who_could_release_it():
    blocked = [signal_wait(0, {1: ["chip"]}), signal_wait(1, {0: ["chip"], 2: ["other"]}),
               BlockedWait(rank=3, kind="dispatch", cmp=1, expected=2, value=1, peer=2)]
    text = deadlock_report(blocked, world=4, finished={2})
    assert text.splitlines() == [
        "deadlock: every live rank is blocked and no rank can release any of them "
        "(3 blocked, 1 finished)",
        f"  rank 0: pld.system.wait at {SPAN} in step (dispatched as chip)",
        "      cell buf[0, 0] = 0 on rank 0, waiting for >= 1 (WaitCmp.Ge)",
        "      notifies into 'buf' come from: rank 1 (chip, blocked)",
        f"  rank 1: pld.system.wait at {SPAN} in step (dispatched as chip)",
        "      cell buf[1, 0] = 0 on rank 1, waiting for >= 1 (WaitCmp.Ge)",
        "      notifies into 'buf' come from: rank 0 (chip, blocked), rank 2 (other, finished)",
        "  rank 3: waits for rank 2 to finish dispatch #2 (it has finished #1): a host tensor "
        "dependency",
        "  hint: every rank's notify must come before its wait, values must reach the expected "
        "threshold, and hand-rolled signals are not self-clearing",
    ]


def test_a_window_nobody_notifies_is_called_out():
    eq = BlockedWait(rank=0, kind="signal", cmp=0, expected=3, value=2, cell=(0,), buffer="w")
    lines = deadlock_report([eq], world=1, finished=set()).splitlines()
    assert lines[1] == "  rank 0: pld.system.wait"
    assert lines[2] == "      cell w[0] = 2 on rank 0, waiting for == 3 (WaitCmp.Eq)"
    assert lines[3] == ("      no dispatch of this program notifies window 'w': nothing can ever "
                        "release this wait")


def test_records_know_whether_they_are_satisfied_and_keep_the_public_keys():
    assert not signal_wait(0, {}).satisfied and signal_wait(0, {}, value=1).satisfied
    d = signal_wait(1, {0: ["chip"]}).as_dict()
    assert d["rank"] == 1 and d["cmp"] == "Ge" and d["cell"] == [1, 0]
    assert d["notifiers"] == {0: ["chip"]} and d["buffer"] == "buf" and d["value"] == 0
    dep = BlockedWait(rank=0, kind="dispatch", cmp=1, expected=2, value=2, peer=1)
    assert dep.satisfied and dep.as_dict()["peer"] == 1 and "buffer" not in dep.as_dict()


def coll_wait(rank, name, gen, waits_for, span=SPAN, value=0):
    return BlockedWait(rank=rank, kind="signal", cmp=1, expected=gen, value=value, span=span,
                       cell=(waits_for, 0), buffer="sig", index=waits_for, collective=name,
                       generation=gen, waits_for=waits_for, domain=(0, 1, 2, 3))


def test_a_rank_divergent_collective_names_the_call_and_who_never_entered():
    other = Span("prog.py", 20, 9, "step")
    blocked = [coll_wait(0, "pld.tensor.allreduce", 2, 3),
               coll_wait(1, "pld.tensor.allreduce", 1, 2),
               coll_wait(2, "pld.tensor.barrier", 1, 1, span=other)]
    lines = deadlock_report(blocked, world=4, finished={3}).splitlines()
    assert lines[1:] == [
        f"  pld.tensor.allreduce at {SPAN} (signal 'sig', comm domain: ranks 0, 1, 2, 3)",
        "      rank 0: inside, at barrier generation 2, waiting for rank 3 to arrive "
        "(cell sig[3, 0] = 0, needs >= 2)",
        "      rank 1: inside, at barrier generation 1, waiting for rank 2 to arrive "
        "(cell sig[2, 0] = 0, needs >= 1)",
        f"      rank 2: never entered this call -- inside pld.tensor.barrier at {other} "
        "(signal 'sig')",
        "      rank 3: never entered this call -- finished its dispatches",
        f"  pld.tensor.barrier at {other} (signal 'sig', comm domain: ranks 0, 1, 2, 3)",
        "      rank 2: inside, at barrier generation 1, waiting for rank 1 to arrive "
        "(cell sig[1, 0] = 0, needs >= 1)",
        f"      rank 0: never entered this call -- inside pld.tensor.allreduce at {SPAN} "
        "(signal 'sig')",
        f"      rank 1: never entered this call -- inside pld.tensor.allreduce at {SPAN} "
        "(signal 'sig')",
        "      rank 3: never entered this call -- finished its dispatches",
        "  hint: every rank of a comm domain must make the same collective calls on a signal, "
        "in the same order (rank-uniform control flow)",
    ]
    d = blocked[0].as_dict()
    assert d["collective"] == "pld.tensor.allreduce" and d["generation"] == 2
    assert d["waits_for"] == 3 and d["domain"] == [0, 1, 2, 3]
