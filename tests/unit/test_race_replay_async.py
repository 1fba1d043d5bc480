"""The race check's replay of asynchronous puts on hand-made logs (the style
of test_race_replay.py): a transfer is a thread of its own from its issue
(SUBMIT of an ``ASYNC_TASK`` task) to the wait of its event (CLOSE), so

* a notify made before the event's wait does not publish the data: the
  reader races with the transfer; the same log with the wait first is clean;
* a transfer issued before the issuer learnt that the peer finished reading
  the destination races with that read (it may land at once); issued after
  it, it does not."""
from tilecomm import _native_core as native
from tilecomm.check.events import (ACCESS, ASYNC_TASK, CLOSE, END, MAIN, NOTIFY, READ, SUBMIT,
                                   WAIT, WRITE)
from tilecomm.check.races import find_races
from tilecomm.waits import CMP_EQ

SET = native.OP_SET
DATA = (7, 0)                       # buffer 7, rank 0's copy
CELL = (8, 0, 0)                    # buffer 8, rank 0's copy, byte 0
BACK = (8, 1, 0)                    # buffer 8, rank 1's copy, byte 0
NAMES = {7: "data", 8: "sig"}
ROW0 = ((0, 32),)                   # row 0 of a [4, 8] float32 view
T = (ASYNC_TASK, 1)                 # the transfer's task id
DMA = (T, 0)                        # ... and its thread


def acc(thr, runs, kind, line, op):
    return (ACCESS, thr, DATA, runs, kind, op, f"f.py:{line}", "k", (4, 8), 4)


def notify(thr, value, seq, line, cell=CELL, prev=0):
    return (NOTIFY, thr, cell, SET, value, value, seq, f"f.py:{line}", "k", prev)


def wait(thr, expected, seen, line, cell=CELL):
    return (WAIT, thr, cell, CMP_EQ, expected, seen, f"f.py:{line}", "k", "sig[0] on rank 0")


def issue(line):
    """Rank 1 issues a put of a row into rank 0's copy: the transfer's task."""
    return [(SUBMIT, MAIN, T, f"the asynchronous transfer of pld.tensor.put_async at f.py:{line}",
             1, (), f"f.py:{line}"),
            acc(DMA, ROW0, WRITE, line, "pld.tensor.put_async"), (END, DMA)]


def event_wait(line):
    return (CLOSE, MAIN, (T,), f"rank 1's wait at f.py:{line} of the event of its asynchronous "
                               f"put at f.py:10")


def publish(wait_first: bool, k: int = 1) -> dict:
    """Rank 1: put_async (line 10), then the notify (12) and the event's wait
    (11) in either order; rank 0 waits for the notify and reads the row.
    ``k``: the call's number in a chain (it Sets the flag to k)."""
    tail = [event_wait(11), notify(MAIN, k, k, 12, prev=k - 1)] if wait_first else \
        [notify(MAIN, k, k, 12, prev=k - 1), event_wait(11)]
    return {1: issue(10) + tail,
            0: [wait(MAIN, k, k, 30), acc(MAIN, ROW0, READ, 31, "pl.load")]}


def test_a_notify_before_the_event_wait_does_not_publish_the_transfer():
    races, omitted = find_races(publish(wait_first=False), NAMES)
    assert omitted == 0 and len(races) == 1
    race = races[0]
    assert (race.buffer, race.owner, race.region) == ("data", 0, "[0:1, 0:8]")
    assert (race.first.rank, race.first.line, race.first.kind, race.first.op) == \
        (1, "f.py:10", "write", "pld.tensor.put_async")
    assert (race.second.rank, race.second.line, race.second.kind) == (0, "f.py:31", "read")
    assert "may land at any time until the wait of its event" in race.why
    assert "rank 1's notify at f.py:12, made before the event was waited" in race.why


def test_the_event_wait_before_the_notify_orders_the_transfer():
    assert find_races(publish(wait_first=True), NAMES) == ((), 0)


def reuse(issue_after_ack: bool) -> dict:
    """Rank 0 reads the row (line 31), then tells rank 1 it is done (Set 1
    into rank 1's cell, line 32); rank 1 puts a new row into it and waits
    the event.  Issued before rank 1 waited for the "done", the transfer may
    land while rank 0 still reads."""
    ack = wait(MAIN, 1, 1, 20, BACK)
    put = issue(10) + [event_wait(11)]
    return {1: [ack] + put if issue_after_ack else put + [ack],
            0: [acc(MAIN, ROW0, READ, 31, "pl.load"), notify(MAIN, 1, 1, 32, BACK)]}


def test_a_transfer_issued_before_the_reader_is_done_races_with_the_read():
    races, _ = find_races(reuse(issue_after_ack=False), NAMES)
    assert len(races) == 1
    race = races[0]
    # either side may come first in the replay; the words fit the order
    assert {(a.rank, a.line, a.kind) for a in (race.first, race.second)} == \
        {(0, "f.py:31", "read"), (1, "f.py:10", "write")}
    assert "may land at any time" in race.why
    assert "from its issue on" in race.why if race.second.rank == 1 else \
        "until the wait of its event" in race.why


def test_a_transfer_issued_after_the_reader_is_done_is_clean():
    assert find_races(reuse(issue_after_ack=True), NAMES) == ((), 0)


def handed_back(k: int, early: bool, seqs: dict) -> dict:
    """Call ``k`` of a chain: rank 1 waits until rank 0 handed the row back
    (from the second call on), puts a new row and publishes it (before or
    after the event's wait); rank 0 reads it and hands it back."""
    a, b = seqs[("a", k)], seqs[("b", k)]
    tail = [notify(MAIN, k, a, 12, prev=k - 1), event_wait(11)] if early else \
        [event_wait(11), notify(MAIN, k, a, 12, prev=k - 1)]
    back = [wait(MAIN, k - 1, seqs[("b", k - 1)], 5, BACK)] if k > 1 else []
    return {1: back + issue(10) + tail,
            0: [wait(MAIN, k, a, 30), acc(MAIN, ROW0, READ, 31, "pl.load"),
                notify(MAIN, k, b, 32, BACK, prev=k - 1)]}


def test_calls_chained_in_flight_keep_their_transfers_apart():
    """Two calls of a prepared worker in flight are one history: the second
    call's transfer (renamed with its place in the chain) is still a
    transfer, ordered only by its own event's wait."""
    from tilecomm.check.events import stripe_of
    from tilecomm.runtime.controller.race_history import ChainedLog
    # notifies are numbered per sequencer stripe, in the order they land
    order = [("a", 1), ("b", 1), ("a", 2), ("b", 2)]
    count, seqs = {}, {}
    for name, k in order:
        st = stripe_of(CELL if name == "a" else BACK)
        count[st] = seqs[(name, k)] = count.get(st, 0) + 1

    def chain(early):
        calls = [handed_back(1, False, seqs), handed_back(2, early, seqs)]
        return {r: ChainedLog([c[r] for c in calls]) for r in (0, 1)}

    assert find_races(chain(False), NAMES) == ((), 0)
    races, _ = find_races(chain(True), NAMES)
    assert len(races) == 1, races
    assert "may land at any time until the wait of its event" in races[0].why
