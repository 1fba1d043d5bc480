"""The control plane: how the controller sees what every rank is doing
(running, blocked in which wait, finished), how ranks see each other's
dispatch progress, and how the controller aborts a call.

``ControlPlane`` is the interface (the monitor and the ranks use nothing
else); ``ShmControlPlane`` implements it on a small shared segment.  Each
rank owns one record of int64 slots (the int32 cells used with
futexes sit in the low half of their slot).  A rank writes its wait record
*before* it publishes state BLOCKED, and re-checks its condition after, so a
controller that sees every live rank BLOCKED with unchanged generations, and
every condition still false, has observed a real deadlock -- nothing is left
that could write any awaited cell.
"""
from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from .. import _native_core as native
from ..check.events import SEQ_STRIPES
from ..errors import RuntimeFault
from ..transport.base import WaitHooks
from ..transport.segments import Segment
from ..transport.shm import SPIN_WINDOW_NS, sleep_wait

# rank states
IDLE, RUNNING, BLOCKED, FINISHED, FAILED = 0, 1, 2, 3, 4
STATE_NAMES = {IDLE: "idle", RUNNING: "running", BLOCKED: "blocked", FINISHED: "finished",
               FAILED: "failed"}

DEP_WAIT = -1          # WaitRecord.buffer of a wait on another rank's dispatch progress


@dataclass(frozen=True)
class WaitRecord:
    """What a blocked rank waits for, as published for the monitor."""

    buffer: int            # window buffer id, or DEP_WAIT
    index: int             # flat cell index in the window view (dispatch seq for DEP_WAIT)
    cmp: int
    expected: int
    loc: int               # span index of the wait in the program, -1 if none
    peer: int              # DEP_WAIT: the rank whose progress is awaited
    func: int              # index of the running function in the image
    cols: int              # innermost extent of the window view (to unflatten index)
    ndim: int
    coll: int = -1         # id of the collective the wait is part of (collectives.names)
    gen: int = 0           # its barrier generation within the call
    # the iteration of the loops the wait is in, innermost last (packed by
    # rank/iterations.py; 0: none): a wait that blocks reads them off its stack
    loop0: int = 0
    loop1: int = 0
    loop2: int = 0
    loop3: int = 0

    @property
    def loops(self) -> tuple:
        return (self.loop0, self.loop1, self.loop2, self.loop3)


@dataclass(frozen=True)
class RankStatus:
    state: int
    gen: int               # bumped every time the rank blocks
    wait: WaitRecord | None


def check_wait(rc, start: float, record: WaitRecord, value: int, aborted) -> None:
    """What every blocked wait of a rank checks after each sleep slice: raise
    ``aborted()`` once the controller aborted the call, a TC504 fault once the
    wait outlived ``RunConfig.wait_timeout_s``."""
    if rc.control.aborted():
        raise aborted()
    limit = rc.knobs.wait_timeout_s
    if limit and time.monotonic() - start > limit:
        raise RuntimeFault(
            f"wait timed out after {limit:g} s: cell value {value}, expected "
            f"{'==' if record.cmp == 0 else '>='} {record.expected}", code="TC504",
            hint="RunConfig.wait_timeout_s bounds a single wait")


class ControlPlane(ABC):
    """Rank-side and controller-side operations on the shared rank states."""

    world: int

    @abstractmethod
    def attach(self) -> "ControlPlane":
        """In a rank process: this control plane as that rank uses it."""

    # -- rank side
    @abstractmethod
    def set_state(self, rank: int, state: int) -> None: ...

    @abstractmethod
    def publish_wait(self, rank: int, record: WaitRecord) -> None:
        """Record the wait, then mark the rank BLOCKED (in that order)."""

    @abstractmethod
    def enter_collective(self, rank: int, buffer_id: int) -> int:
        """Rank ``rank`` enters one more collective call on that signal buffer;
        returns its count of such calls in this run."""

    @abstractmethod
    def collective_count(self, rank: int, buffer_id: int) -> int:
        """Rank ``rank``'s count of collective calls on that buffer (a count no
        table holds reads as unbounded: no check may fail on it)."""

    @abstractmethod
    def publish_done(self, rank: int, seq: int) -> None:
        """Rank ``rank`` completed its dispatch number ``seq``."""

    @abstractmethod
    def wait_done(self, rank: int, seq: int, spin: int, hooks: WaitHooks | None) -> bool:
        """Wait until ``rank`` completed dispatch ``seq``: with ``hooks`` None
        only spin (return False if not yet), else block like a transport wait."""

    @abstractmethod
    def aborted(self) -> bool: ...

    @abstractmethod
    def finish_run(self, rank: int) -> None:
        """Rank ``rank`` finished its part of one more run (its ``EndRun``):
        count it where ``runs_finished`` reads it and, if every rank has now
        finished that many runs, wake the controller blocked in ``wait_runs``.
        This is how a run's completion reaches the controller: one wake-up
        per run, from whichever rank finishes it last, instead of a message
        from every rank.  Two ranks finishing at once may both wake it."""

    @abstractmethod
    def wake_controller(self) -> None:
        """Wake the controller blocked in ``wait_runs`` now: a rank sends it
        this after its ``Failed`` message, so the failure is read at once
        rather than when the wait's time slice runs out."""

    # -- controller side
    @abstractmethod
    def reset(self) -> None:
        """Between runs: every rank idle, no progress."""

    @abstractmethod
    def abort(self) -> None:
        """Tell every rank to give up its waits (they raise RankAborted)."""

    @abstractmethod
    def done_seq(self, rank: int) -> int: ...

    @abstractmethod
    def runs_finished(self, rank: int) -> int:
        """How many runs rank ``rank`` finished (``finish_run``) since ``reset``."""

    @abstractmethod
    def wait_runs(self, count: int, timeout: float) -> bool:
        """Block until every rank finished ``count`` runs (True), or until a
        rank called ``wake_controller`` or ``timeout`` seconds passed without
        that (False: the caller looks at the ranks' channels -- a failure, a
        death -- and for quiescence, then waits again)."""

    @abstractmethod
    def snapshot(self, ranks) -> list:
        """``RankStatus`` of each of ``ranks`` (wait record only if BLOCKED)."""

    def close(self) -> None: ...

    # -- the task-snapshot area (taskplane.py): ``area_bytes`` per rank, the
    # data's length then the data; a rank writes it before it publishes its
    # TASKS wait, so the (state, gen) check of a monitor's snapshot covers it
    area_bytes = 65536     # pages of a memory block are only touched when a rank publishes

    # -- the sequencer of a race-checking run: notifies into one signal cell
    # are numbered in the order they take effect (the cell's modification
    # order), and a wait learns how much of it it has seen.  Only a control
    # block every rank maps has one (``sequences``): a run checks before any
    # rank starts.
    sequences = False

    def sequenced(self, stripe: int, op, aborted) -> tuple:
        """Run ``op()`` (None: nothing) as the next event of ``stripe``'s
        order: (its result, the number of ops run in the stripe so far)."""
        raise RuntimeFault("this control plane has no sequencer (ControlPlane.sequences)",
                           code="TC402")

    def sequence_counts(self) -> tuple:
        """The number of ops run so far in each stripe."""
        raise RuntimeFault("this control plane has no sequencer (ControlPlane.sequences)",
                           code="TC402")

    def turns_base(self) -> int:
        """The address of the turn block an explored run's ranks share
        (``TURN_SLOTS`` header slots, then ``TURN_RANK_SLOTS`` per rank: see
        ``runtime/rank/exploring.py``); zeroed by ``reset``."""
        raise RuntimeFault("this control plane has no turn block (ControlPlane.sequences)",
                           code="TC402")

    @abstractmethod
    def write_area(self, rank: int, data: bytes) -> None:
        """Rank ``rank`` stores ``data`` (at most ``area_bytes - 8`` bytes) in
        its area, complete when the call returns."""

    @abstractmethod
    def read_area(self, rank: int) -> bytes | None:
        """What rank ``rank`` last stored in its area (None if nothing, or a
        length no write produced: a read that raced a write)."""


# ---------------------------------------------------------------- shm block
(STATE, GEN, W_BUF, W_INDEX, W_CMP, W_EXPECTED, W_LOC, W_PEER, DONE_SEQ, _SPARE, W_FUNC,
 W_COLS, W_NDIM, W_COLL, W_GEN, RUNS, W_LOOP0, W_LOOP1, W_LOOP2, W_LOOP3) = range(20)
RECORD_SLOTS = 20
HEADER_SLOTS = 16
# per rank, how many collective calls it entered on each signal buffer (by
# buffer id, for the first COUNTER_SLOTS buffers of a program): a collective
# tells a peer's early credit from a leftover one with it
COUNTER_SLOTS = 64
ABORT = 0              # header slot: nonzero once the controller aborted the call
# header slots: the int32 futex word a controller in ``wait_runs`` sleeps on
# (bumped by every wake-up), and how many controllers sleep there (a rank
# makes the wake-up syscall only then)
COMPLETION, COMPLETION_SLEEPERS = 1, 2
# header slot: how many ranks sleep in ``wait_done`` (a rank publishing its
# progress makes the wake-up syscall only then: it publishes after every dispatch)
DONE_SLEEPERS = 3
SLOT = 8
_RECORD = ((W_BUF, "buffer"), (W_INDEX, "index"), (W_CMP, "cmp"), (W_EXPECTED, "expected"),
           (W_LOC, "loc"), (W_PEER, "peer"), (W_FUNC, "func"), (W_COLS, "cols"),
           (W_NDIM, "ndim"), (W_COLL, "coll"), (W_GEN, "gen"), (W_LOOP0, "loop0"),
           (W_LOOP1, "loop1"), (W_LOOP2, "loop2"), (W_LOOP3, "loop3"))


# after the counters: the race sequencer's stripes, each a ticket lock (next
# ticket, ticket served: int32 futex words in their slots) and the count of
# ops run under it; a cell uses the stripe its key hashes to
SEQ_SLOTS = 3
# after the stripes: the turn block of an explored run (who may move next),
# a header and a few slots per rank
TURN_SLOTS, TURN_RANK_SLOTS = 8, 4


def _turn_slots(world: int) -> int:
    return TURN_SLOTS + TURN_RANK_SLOTS * world


def control_size(world: int) -> int:
    return (HEADER_SLOTS + (RECORD_SLOTS + COUNTER_SLOTS) * world + SEQ_STRIPES * SEQ_SLOTS
            + _turn_slots(world)) * SLOT


class ShmControlPlane(ControlPlane):
    sequences = True

    def __init__(self, segment, world: int):
        self.segment = segment
        self.base = segment.addr
        self.world = world
        self._gen = 0                  # rank side: this process's block count
        self._counters = self.base + (HEADER_SLOTS + RECORD_SLOTS * world) * SLOT
        # every rank's count of finished runs, read on every call's completion
        self._runs = [self.slot_addr(r, RUNS) for r in range(world)]
        # every rank's state word, written at least twice per dispatch
        self._states = [self.slot_addr(r, STATE) for r in range(world)]

    def attach(self):
        return ShmControlPlane(Segment.attach(self.segment.name), self.world)

    def slot_addr(self, rank: int, slot: int) -> int:
        return self.base + (HEADER_SLOTS + RECORD_SLOTS * rank + slot) * SLOT

    def get(self, rank: int, slot: int) -> int:
        return native.load_i64(self.slot_addr(rank, slot))

    def set(self, rank: int, slot: int, value: int) -> None:
        native.store_i64(self.slot_addr(rank, slot), value)

    # -- rank side
    def set_state(self, rank, state):
        native.store_i64(self._states[rank], state)

    def publish_wait(self, rank, record):
        for slot, field in _RECORD:
            self.set(rank, slot, getattr(record, field))
        self._gen += 1
        self.set(rank, GEN, self._gen)
        self.set(rank, STATE, BLOCKED)   # seq_cst, after the record: see the module doc

    def enter_collective(self, rank, buffer_id):
        if not 0 <= buffer_id < COUNTER_SLOTS:
            return 0
        addr = self._counters + (COUNTER_SLOTS * rank + buffer_id) * SLOT
        n = native.load_i64(addr) + 1      # only this rank writes its own counters
        native.store_i64(addr, n)
        return n

    def collective_count(self, rank, buffer_id):
        if not 0 <= buffer_id < COUNTER_SLOTS:
            return 1 << 62
        return native.load_i64(self._counters + (COUNTER_SLOTS * rank + buffer_id) * SLOT)

    def publish_done(self, rank, seq):
        # a seq_cst store, then a futex wake-up only if some rank sleeps in
        # wait_done (waiters of dispatch progress are rare; the native core
        # argues why a sleeper counted there cannot miss it)
        native.notify_i32(self.slot_addr(rank, DONE_SEQ), native.OP_SET, seq,
                          self.base + DONE_SLEEPERS * SLOT)

    def wait_done(self, rank, seq, spin, hooks):
        addr = self.slot_addr(rank, DONE_SEQ)
        sleepers = self.base + DONE_SLEEPERS * SLOT
        if hooks is None:
            return native.wait_i32(addr, native.CMP_GE, seq, sleepers, SPIN_WINDOW_NS, spin)[0]
        sleep_wait(addr, native.CMP_GE, seq, sleepers, hooks)
        return True

    def aborted(self):
        return native.load_i64(self.base + ABORT * SLOT) != 0

    def finish_run(self, rank):
        mine = self._runs[rank]
        n = native.load_i64(mine) + 1      # only this rank writes its own count
        native.store_i64(mine, n)
        # Who wakes the controller: each rank stores its count, then loads
        # every other one (all seq_cst).  Of two ranks finishing run n at
        # once, the one whose store comes second in the total order sees
        # the other's, so at least one of them finds every count >= n.
        # The loads start after this rank's own count: ranks tend to finish
        # in rank order, and the first count < n ends the scan, so a rank
        # usually stops at the next one instead of reading every count of
        # the ranks before it (n^2 / 2 loads per run in all).  Which count
        # is loaded first does not matter to the argument.
        if self._all_finished(n, rank + 1):
            self.wake_controller()

    def _all_finished(self, count, first: int = 0) -> bool:
        load = native.load_i64
        runs = self._runs
        for addr in runs[first:]:
            if load(addr) < count:
                return False
        for addr in runs[:first]:
            if load(addr) < count:
                return False
        return True

    def wake_controller(self):
        # the bump comes before the wake-up check: a controller that loaded
        # the old word sleeps only if the word still holds it (the futex
        # compares under its lock), so the wake-up cannot be lost
        native.notify_i32(self.base + COMPLETION * SLOT, native.OP_ADD, 1,
                          self.base + COMPLETION_SLEEPERS * SLOT)

    # -- controller side
    def reset(self):
        native.store_i64(self.base + ABORT * SLOT, 0)
        for r in range(self.world):
            self.set(r, STATE, IDLE)
            self.set(r, DONE_SEQ, 0)
            self.set(r, RUNS, 0)
        # windows are fresh per run, so are the counts of calls on them (and
        # the race sequencer's stripes and the turn block, after them)
        start = (HEADER_SLOTS + RECORD_SLOTS * self.world) * SLOT
        self.segment.ndarray(np.int64, (COUNTER_SLOTS * self.world + SEQ_STRIPES * SEQ_SLOTS
                                        + _turn_slots(self.world),), start)[:] = 0

    def abort(self):
        native.store_i64(self.base + ABORT * SLOT, 1)

    def done_seq(self, rank):
        return native.load_i32(self.slot_addr(rank, DONE_SEQ))

    def runs_finished(self, rank):
        return self.get(rank, RUNS)

    def wait_runs(self, count, timeout):
        word = self.base + COMPLETION * SLOT
        # the word is loaded before the counts: a rank that completes the
        # run after they were read bumps it after this load, so the wait
        # below returns at once (see ``finish_run``)
        seen = native.load_i32(word)
        if self._all_finished(count):
            return True
        # "changed": >= seen + 1 as int32 (at the wrap, a spurious return)
        target = ((seen + 1 + 2**31) % 2**32) - 2**31
        native.wait_i32(word, native.CMP_GE, target, self.base + COMPLETION_SLEEPERS * SLOT,
                        int(timeout * 1e9), 0)
        return self._all_finished(count)

    def snapshot(self, ranks):
        out = []
        for r in ranks:
            state, gen = self.get(r, STATE), self.get(r, GEN)
            wait = None
            if state == BLOCKED:
                wait = WaitRecord(**{f: self.get(r, s) for s, f in _RECORD})
            out.append(RankStatus(state, gen, wait))
        return out

    def close(self):
        self.segment.close()

    def _stripe(self, stripe: int) -> int:
        return self._counters + (COUNTER_SLOTS * self.world + SEQ_SLOTS * stripe) * SLOT

    def turns_base(self):
        return self._stripe(SEQ_STRIPES)

    def sequence_counts(self):
        return tuple(native.load_i64(self._stripe(st) + 2 * SLOT) for st in range(SEQ_STRIPES))

    def sequenced(self, stripe, op, aborted):
        base = self._stripe(stripe)
        serving, count = base + SLOT, base + 2 * SLOT
        ticket = native.notify_i32(base, native.OP_ADD, 1, 0) - 1
        # held for one native op: spin, then yield (a holder that died is
        # noticed by the abort the controller sends)
        while not native.wait_i32(serving, native.CMP_EQ, ticket, 0, SPIN_WINDOW_NS, 100)[0]:
            if self.aborted():
                raise aborted()
            time.sleep(0)
        try:
            out = None
            n = native.load_i64(count)
            if op is not None:
                out = op()
                n += 1
                native.store_i64(count, n)
        finally:
            native.notify_i32(serving, native.OP_ADD, 1, 0)
        return out, n

    # -- the task-snapshot area, after the records and counters
    def _area(self, rank):
        return control_size(self.world) + self.area_bytes * rank

    def write_area(self, rank, data):
        if len(data) > self.area_bytes - 8:
            raise ValueError(f"{len(data)} bytes do not fit a task-snapshot area")
        start = self._area(rank)
        self.segment.ndarray(np.uint8, (len(data),), start + 8)[:] = np.frombuffer(data, np.uint8)
        native.store_i64(self.base + start, len(data))    # seq_cst, after the data

    def read_area(self, rank):
        start = self._area(rank)
        n = native.load_i64(self.base + start)
        if not 0 < n <= self.area_bytes - 8:
            return None
        return self.segment.ndarray(np.uint8, (n,), start + 8).tobytes()
