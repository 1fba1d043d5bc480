"""An explored run: the ranks take turns, and a schedule says whose turn it is.

A run that ``tilecomm.testing.explore`` drives lets one rank move at a
time.  Before each *visible operation* -- a notify, each check of a wait or
of another rank's dispatch progress, each access of window memory, the end
of a dispatch -- a rank stops and asks for its turn; the rank that moves
next is the schedule's choice (``DfxSettings.explore``: the ranks chosen at
the first steps, then the default: the rank that moved last if it still
can, else the lowest that can).  Between two visible operations a rank
touches nothing another rank can see, so a schedule replays exactly.

The turn block (in the control block, ``ControlPlane.turns_base``) holds,
under a ticket lock: each rank's status -- moving, pending (waits for a
turn), parked (its wait's last check failed: it can move again only once
something writes the cell it waits on), done -- the number of steps, the
rank that moved last, and a generation word every decision bumps, on which
the ranks sleep.  Whoever stops moving last (asks for a turn, parks, or
finishes the run) decides, so a decision is only taken when every rank has
stopped and the state it sees is the schedule's alone.

When no rank can move and some are parked, the run is stuck: each parked
rank then blocks in its wait as an ordinary run does, published for the
monitor, which reports the deadlock.  A schedule whose choice cannot move
(the program did something different between steps than when the schedule
was recorded) or that runs past the step limit stops the run with an error.

Each rank appends the steps it made to its log (a file named like the
call's segments): one ``check.schedules.Step`` per step, plus the text of
the report line.  What is not a visible operation: the data a collective
moves through mapped peer memory (its barriers' signals are), and reads of
the control block.
"""
from __future__ import annotations

import os
import pickle
import re
import zlib

import numpy as np

from ... import _native_core as native
from ...check.events import ATOMIC as ATOMIC_ACCESS, READ as READ_ACCESS, byte_runs
from ...check.schedules import ADD, PICK, READ, WRITE, Step
from ...errors import RuntimeFault
from ...transport.base import CMP_EQ, CMP_GE, NOTIFY_ADD
from ...waits import holds
from ...transport.segments import PREFIX
from ..control import SLOT, TURN_RANK_SLOTS, TURN_SLOTS
from ..values import WindowView
from ...transport.memops import address
from .recorder import Sink
from .tracing import SourceLines

# header slots of the turn block
GEN, SLEEPERS, LOCK_NEXT, LOCK_SERVING, ENABLED, STEPS, LAST, MODE = range(TURN_SLOTS)
# per rank: its status, the key of the cell it is parked on, and the
# condition it waits for there (comparison -1: any write of the cell)
STATUS, PARKED_ON, PARKED_CMP, PARKED_EXPECTED = range(TURN_RANK_SLOTS)
ANY_WRITE = -1
MOVING, PENDING, PARKED, DONE = range(4)
# MODE: the run goes on, or what stopped it
ON, STUCK, DIVERGED, LIMIT = range(4)
SLICE_NS = 50_000_000           # a rank waiting for its turn looks for an abort this often

_CMP = {0: "==", 1: ">=", 2: ">= (unsigned)"}
_CALL_SEGMENT = re.compile(rf"{PREFIX}-\d+-\d+-(\d+)")       # segments.segment_name


class Turns:
    """This rank's side of the turn block."""

    def __init__(self, control, rank: int, world: int, schedule: tuple, limit: int,
                 aborted_exc):
        self.control, self.rank, self.world = control, rank, world
        self.schedule, self.limit = schedule, limit
        self.aborted_exc = aborted_exc
        self.base = control.turns_base()

    def _slot(self, i: int) -> int:
        return self.base + i * SLOT

    def _rank_slot(self, r: int, i: int) -> int:
        return self.base + (TURN_SLOTS + TURN_RANK_SLOTS * r + i) * SLOT

    # -------------------------------------------------------------- the lock
    def _lock(self) -> None:
        ticket = native.notify_i32(self._slot(LOCK_NEXT), NOTIFY_ADD, 1, 0) - 1
        serving = self._slot(LOCK_SERVING)
        # held only for a few loads and stores, never across a turn
        while not native.wait_i32(serving, CMP_EQ, ticket, 0, 0, 1000)[0]:
            if self.control.aborted():          # a holder that died
                raise self.aborted_exc()
            os.sched_yield()

    def _unlock(self) -> None:
        native.notify_i32(self._slot(LOCK_SERVING), NOTIFY_ADD, 1, 0)

    # -------------------------------------------------------------- turns
    def request(self, status: int = PENDING, key: int = 0, cmp: int = ANY_WRITE,
                expected: int = 0) -> tuple | None:
        """Stop moving (``PENDING``, or ``PARKED`` on cell ``key`` until a
        write leaves it satisfying ``cmp`` / ``expected``) and wait for a
        turn: (step index, ranks that could move) once it is this rank's;
        None if the run is stuck (only a parked rank sees that)."""
        load, store = native.load_i64, native.store_i64
        self._lock()
        try:
            store(self._rank_slot(self.rank, PARKED_ON), key)
            store(self._rank_slot(self.rank, PARKED_CMP), cmp)
            store(self._rank_slot(self.rank, PARKED_EXPECTED), expected)
            store(self._rank_slot(self.rank, STATUS), status)
            self._decide()
        finally:
            self._unlock()
        gen, mine, mode = self._slot(GEN), self._rank_slot(self.rank, STATUS), self._slot(MODE)
        while True:
            seen = native.load_i32(gen)
            if load(mine) == MOVING:
                mask = load(self._slot(ENABLED))
                return load(self._slot(STEPS)) - 1, tuple(r for r in range(self.world)
                                                         if mask >> r & 1)
            m = load(mode)
            if m == STUCK:
                return None
            if m == DIVERGED:
                raise RuntimeFault(
                    "an explored schedule did not replay: at a step the schedule names a rank "
                    "that could not move there, so the program did something different between "
                    "its visible operations than when the schedule was recorded", code="TC602",
                    hint="the program must compute the same thing every run: no clocks, random "
                         "numbers or process ids in kernels")
            if m == LIMIT:
                raise RuntimeFault(
                    f"an explored schedule ran {self.limit} steps without ending: a loop that "
                    f"polls window memory (pl.read / pl.load) instead of waiting on a signal "
                    f"keeps the rank that moves busy forever", code="TC603",
                    hint="wait with pld.system.wait, or raise explore(max_steps=)")
            native.wait_i32(gen, CMP_GE, seen + 1, self._slot(SLEEPERS), SLICE_NS, 0)
            if self.control.aborted():
                raise self.aborted_exc()

    def finish(self) -> None:
        """This rank's part of the run is over."""
        self._lock()
        try:
            native.store_i64(self._rank_slot(self.rank, STATUS), DONE)
            self._decide()
        finally:
            self._unlock()

    def wrote(self, key: int, value: int | None = None) -> None:
        """The step just made wrote cell ``key`` (leaving ``value``, if it is
        a signal cell): ranks parked on it whose condition that satisfies
        can move.  One whose condition still fails stays parked -- checking
        it again would be a step that changes nothing, and the search would
        try it in every order."""
        load, store = native.load_i64, native.store_i64
        self._lock()
        try:
            for r in range(self.world):
                if load(self._rank_slot(r, STATUS)) != PARKED or \
                        load(self._rank_slot(r, PARKED_ON)) != key:
                    continue
                cmp = load(self._rank_slot(r, PARKED_CMP))
                if value is None or cmp == ANY_WRITE or \
                        holds(cmp, value, load(self._rank_slot(r, PARKED_EXPECTED))):
                    store(self._rank_slot(r, STATUS), PENDING)
        finally:
            self._unlock()

    def _decide(self) -> None:
        """Under the lock: if no rank moves, choose the next (or end the run)."""
        load, store = native.load_i64, native.store_i64
        status = [load(self._rank_slot(r, STATUS)) for r in range(self.world)]
        if MOVING in status:
            return
        enabled = [r for r, s in enumerate(status) if s == PENDING]
        step = load(self._slot(STEPS))
        if not enabled:
            if any(s == PARKED for s in status):
                self._end(STUCK)
            return                                  # all done: nobody is waiting
        if step >= self.limit:
            self._end(LIMIT)
            return
        if step < len(self.schedule):
            nxt = self.schedule[step]
            if nxt not in enabled:
                self._end(DIVERGED)
                return
        else:
            last = load(self._slot(LAST))
            nxt = last if last in enabled else enabled[0]
        store(self._slot(ENABLED), sum(1 << r for r in enabled))
        store(self._slot(STEPS), step + 1)
        store(self._slot(LAST), nxt)
        store(self._rank_slot(nxt, STATUS), MOVING)
        self._bump()

    def _end(self, mode: int) -> None:
        native.store_i64(self._slot(MODE), mode)
        self._bump()

    def _bump(self) -> None:
        # after the stores it publishes: a rank that read the old word sleeps
        # only while the word still holds it (the futex compares), so it
        # cannot miss the decision
        native.notify_i32(self._slot(GEN), NOTIFY_ADD, 1, self._slot(SLEEPERS))


def cell_key(target: tuple) -> int:
    """A cell's ``target`` as the int64 a parked rank publishes."""
    return zlib.crc32(repr(target).encode()) + 1


# a recorded access's kind as a step's effect
_EFFECT = {READ_ACCESS: READ, ATOMIC_ACCESS: ADD}
# where an asynchronous put's transfer may land (a PICK's options; the first
# is the default)
LANDINGS = ("at the wait of its event", "at once")


class Explorer(Sink):
    """A rank's part of one explored run: its turns, what it knows of the
    windows (to name what a step touches), and its log.

    As a sink it comes first on the stream (``ORDER``): a rank takes its turn
    before anything else records an operation -- before tracing starts its
    slice and before the race check takes a notify's sequencer lock.  Its
    steps are taken at two places, each visible operation at exactly one:

    * here, on the recorder's events: each access of window memory in this
      rank's own copy (``OP`` events without a remote access), each notify
      the program makes, each check of another rank's dispatch progress and
      the end of a dispatch;
    * at the transport (``ExploringEndpoint``): each check of a wait, each
      put / get (the remote loads and stores, put and get of the program,
      both sides), and the signals and transfers inside collectives.

    An asynchronous put (``after_issue``) is a choice of the schedule: its
    transfer lands at once, or at the wait of its event (the default, as in
    a plain run) -- a PICK step whose options the search all runs, so a
    read of the destination in between is explored seeing the old data and
    the new.  The landing itself is a put at the transport, stepped there.

    ``PLAIN_SITES``: loads copy (a view would read the memory at its use, a
    later step than the load's), so the call-site forms take the plain ops."""

    ORDER = 1
    SHARED_OPS_ONLY = True          # window and tensor memory only
    PLAIN_SITES = True

    def __init__(self, rank: int, world: int, control, aborted_exc, path: str, schedule: tuple,
                 limit: int, picks: tuple = ()):
        self.rank = rank
        self.turns = Turns(control, rank, world, tuple(schedule), limit, aborted_exc)
        self.picks = dict(picks)        # PICK step index -> the ready task to take
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        self.lines = SourceLines()
        self.where = None               # the transport's address -> (segment, offset)
        # segment name -> {offset of a copy: (buffer name, owner, shape, itemsize, bytes)}
        self.windows: dict = {}
        self.real: dict = {}            # a segment as steps name it -> its name in this run
        self.fallback = "?"             # the line of the dispatch being run
        self.last = -1                  # the index of this rank's last step

    # ------------------------------------------------------------ dispatches
    def begin_dispatch(self, ctx, d) -> None:
        self.lines.follow(d.image)
        sp = d.image.span(d.loc)
        self.fallback = f"{sp.file}:{sp.line}" if sp is not None else "?"
        for v in d.vals:
            if isinstance(v, WindowView):
                self.window(v)

    # ------------------------------------------------------------ the stream
    def before_defer(self, ctx, ev) -> None:
        raise RuntimeFault("an explored run runs each rank's tasks one at a time on one core, "
                           "and pld.system.defer_wait hands its conditions to a watcher thread "
                           "that would move beside them", code="TC604",
                           hint="explore the protocol with pld.system.wait in the task")

    def before_collective(self, ctx, ev) -> None:
        if "defer" in ev.params and ev.arg("defer"):
            raise RuntimeFault(f"an explored run runs each rank's tasks one at a time on one "
                               f"core, and {ev.op}(defer=True) hands its barrier to a watcher "
                               f"thread that would move beside them", code="TC604",
                               hint="explore the protocol with the blocking form (defer=False)")

    def before_notify(self, ctx, ev) -> None:
        # the notify's turn, logged as taken with its own effect: two adds to
        # one cell commute, a set does not
        target = self.cell_target(ev.cell)
        add = ev.arg("op") == NOTIFY_ADD
        ev.notes["explored"] = (self.step(ADD if add else WRITE, target,
                                          detail=(int(ev.arg("value")),) if add else ()),
                                target)

    def after_notify(self, ctx, ev) -> None:
        s, target = ev.notes["explored"]
        self.turns.wrote(cell_key(target), int(ev.result))
        value = ev.arg("value")
        how = f"+= {value}" if ev.arg("op") == NOTIFY_ADD else f"= {value}"
        self.log(s, f"notify {self.label(target)} {how} (now {ev.result})")

    def before_op(self, ctx, ev) -> None:
        if ev.remote():                 # stepped at the transport, both sides
            return
        try:
            accesses = ev.accesses()
        except Exception:               # the op itself raises, with its own message
            return
        for a in accesses:
            self.access(a.array, _EFFECT.get(a.kind, WRITE), ev.op)

    def after_issue(self, ctx, ev) -> None:
        # the chip's engine may land the transfer at any time up to the wait:
        # at once and at the wait are the two ends, and with the other ranks'
        # steps around them every read in between sees either
        s = self.step(PICK, ("transfer", self.rank), options=LANDINGS)
        event = ev.result
        self.log(s, f"{ev.op} into rank {event.peer} lands {LANDINGS[s.picked]}")
        if s.picked:
            ctx.land(event)

    def before_await_dispatch(self, ctx, ev) -> None:
        rank, seq = ev.args
        target = ("done", rank)
        parked = 0
        while True:
            s = self.step(READ, target, parked=parked)
            if s is None:               # stuck: the plain wait blocks, for the monitor
                return
            done = ctx.control.done_seq(rank)
            self.log(s, f"wait for rank {rank}'s dispatch {seq} (it has done {done})")
            if done >= seq:
                return
            parked = cell_key(target)

    def before_dispatch_done(self, ctx, ev) -> None:
        target = ("done", ctx.device)
        ev.notes["explored"] = (self.step(WRITE, target), target)

    def after_dispatch_done(self, ctx, ev) -> None:
        s, target = ev.notes["explored"]
        self.turns.wrote(cell_key(target))
        self.log(s, "its dispatch ends")

    def window(self, view: WindowView) -> None:
        key = view.key
        for m, handle in enumerate(key.segments):
            # a member's copy: a segment of its own, or (segment, offset) in a shared one
            seg, base = handle if isinstance(handle, tuple) else (handle, 0)
            self.windows.setdefault(seg, {}).setdefault(
                base, (view.buffer.name, key.devices[m], view.shape, view.local.itemsize,
                       view.local.nbytes))

    def _copy(self, seg, off) -> tuple:
        """(buffer name, owner, shape, itemsize, offset in that copy) of byte
        ``off`` of segment ``seg``."""
        for base, (name, owner, shape, item, nbytes) in self.windows.get(seg, {}).items():
            if base <= off < base + nbytes:
                return name, owner, shape, item, off - base
        return "window", "?", None, 1, off

    # ------------------------------------------------------------ naming
    def line(self) -> str:
        sp = self.lines.span()
        return f"{sp.file}:{sp.line}" if sp is not None else self.fallback

    def _stable(self, seg: str) -> str:
        """The segment as a step names it: the same in every run of the
        program -- the search compares steps of different runs, and a
        segment's name carries its call's number, its place among the call's
        segments does not."""
        m = _CALL_SEGMENT.fullmatch(seg)
        stable = f"segment {m.group(1)}" if m else seg
        self.real[stable] = seg
        return stable

    def cell_target(self, cell) -> tuple:
        seg, off = self.where(cell[0])
        return ("cell", self._stable(seg), off)

    def label(self, target: tuple) -> str:
        """A cell as the program names it: ``sig[1, 0] on rank 2``."""
        _, seg, off = target
        name, owner, shape, item, off = self._copy(self.real.get(seg, seg), off)
        if shape is None:
            return f"{name}+{off} on rank {owner}"
        idx = np.unravel_index(off // item, shape)
        return f"{name}[{', '.join(str(int(i)) for i in idx)}] on rank {owner}"

    def tracks(self, ctx, addr) -> bool:
        return self.where(addr) is not None

    def region(self, array) -> tuple | None:
        """(target, byte runs, label) of an ndarray lying in window memory."""
        if not isinstance(array, np.ndarray) or array.size == 0:
            return None
        addr = address(array)
        found = self.where(addr)
        if found is None:
            return None
        seg, off = found
        runs = byte_runs(array, addr - off, addr)
        return ("data", self._stable(seg)), runs, self._elements(seg, off, array, runs)

    def _elements(self, seg, off, array, runs) -> str:
        """``win[0:1, 0:8] on rank 1``: the region as the program indexes the
        window (its bytes when the view does not map onto that shape)."""
        name, owner, shape, item, off = self._copy(seg, off)
        where = f"(bytes {runs[0][0]}..{runs[-1][1]})"
        if shape is not None and array.ndim == len(shape) and off % item == 0 and \
                off // item < int(np.prod(shape)):
            start = np.unravel_index(off // item, shape)
            if all(s + e <= d for s, e, d in zip(start, array.shape, shape)):
                where = "[" + ", ".join(f"{int(s)}:{int(s) + e}"
                                        for s, e in zip(start, array.shape)) + "]"
        return f"{name}{where} on rank {owner}"

    # ------------------------------------------------------------ steps
    def step(self, effect: str, target: tuple, runs: tuple = (), parked: int = 0,
             options: tuple = (), until: tuple = (ANY_WRITE, 0), detail: tuple = ()):
        """Wait for this rank's turn to make a step on ``target``: the
        ``Step`` (already in the log; ``log`` adds what it did), or None
        (parked, and the run is stuck).  ``parked``: the cell this rank waits
        on, until a write leaves it satisfying ``until`` ((comparison,
        expected)).  ``options``: a PICK's ready tasks (the step's
        ``picked`` is the schedule's choice among them)."""
        got = self.turns.request(PARKED if parked else PENDING, parked, *until)
        if got is None:
            return None
        index, enabled = got
        self.last = index
        picked = self.picks.get(index, 0) if options else 0
        if picked >= max(len(options), 1):
            raise RuntimeFault(
                f"an explored schedule did not replay: at step {index + 1} it takes ready task "
                f"{picked + 1} of rank {self.rank}, which has {len(options)} ready",
                code="TC602", hint="the program must submit the same tasks every run")
        # written at once: an op that raises still leaves its step in the log
        s = Step(index, self.rank, enabled, effect, target, runs,
                 f"rank {self.rank}: {effect} at {self.line()}", tuple(options), picked, detail)
        os.write(self.fd, pickle.dumps(s, pickle.HIGHEST_PROTOCOL))
        return s

    # ------------------------------------------------------------ tasks
    def task_scope(self, ctx, scope):
        """An explored rank's cores start tasks only while its orchestration
        sleeps (one thread of the rank moves at a time), and which ready task
        the core takes is the schedule's choice (``pick``)."""
        sched = ctx.__dict__["_scheduler"]
        sched.gated, sched.chooser = True, self.pick
        return scope

    def pick(self, ready: list) -> int:
        """The index in ``ready`` ((task, block) entries, in submission order)
        of the one the core runs next: with several, a PICK step whose choice
        the schedule makes (the first by default)."""
        if len(ready) == 1:
            return 0
        options = tuple((t.tid, b) for t, b in ready)
        s = self.step(PICK, ("tasks", self.rank), options=options)
        t, b = ready[s.picked]
        names = ", ".join(f"'{t.name}'" + (f" block {b}" if t.blocks > 1 else "")
                          for t, b in ready)
        self.log(s, f"runs task '{t.name}'{f' block {b}' if t.blocks > 1 else ''} of the "
                    f"ready {names}")
        return s.picked

    def log(self, step: Step, what: str, detail: tuple = ()) -> None:
        """What ``step`` did, once done (its line in a report; ``detail``: what
        the search reads of it, when only known now -- a check's outcome)."""
        text = f"rank {self.rank}: {what}  at {self.line()}"
        os.write(self.fd, pickle.dumps((step.index, text, detail), pickle.HIGHEST_PROTOCOL))

    def access(self, array, effect: str, op: str) -> None:
        """A local op's step, if ``array`` lies in window memory."""
        found = self.region(array)
        if found is None:
            return
        target, runs, label = found
        s = self.step(effect, target, runs)
        self.log(s, f"{op} {label}")

    def finish(self, failed: bool = False) -> None:
        # a failed run's other ranks are being stopped: no more turns
        if not failed:
            self.turns.finish()
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class ExploringEndpoint:
    """The rank's transport during an explored run: every signal, check and
    put / get is a step; everything else is the transport's own."""

    def __init__(self, real, explorer: Explorer):
        self.real = real
        self.ex = explorer
        explorer.where = real.where
        self.failed = None              # (cell, step) of the last check that failed

    def __getattr__(self, name):
        return getattr(self.real, name)

    # ------------------------------------------------------------ signals
    # The program's own notifies reach the transport below this endpoint
    # (``Recording.signal``): their turn is taken by the sink.  What comes
    # here is a collective's signals.
    def signal(self, cell, op, value):
        ex = self.ex
        target = ex.cell_target(cell)
        s = ex.step(ADD if op == NOTIFY_ADD else WRITE, target,
                    detail=(int(value),) if op == NOTIFY_ADD else ())
        new = self.real.signal(cell, op, value)
        ex.turns.wrote(cell_key(target), int(new))
        how = f"+= {value}" if op == NOTIFY_ADD else f"= {value}"
        ex.log(s, f"notify {ex.label(target)} {how} (now {new})")
        return new

    def read_cell(self, cell):
        # a collective's look at its own cells (are they clean when it
        # starts, is a value within what the protocol can make): not a step.
        # It is made while this rank moves, so it reads what the schedule
        # left there -- the same in every replay
        return self.real.read_cell(cell)

    def _check(self, cell, cmp, expected, parked: int) -> bool | None:
        ex = self.ex
        target = ex.cell_target(cell)
        # A check that would fail is not made: the rank parks on the cell
        # until a write satisfies it, and the check it then makes holds.  It
        # can tell without a step: no other rank moves while this one does
        # (or, before the first turn, has written anything), so what it reads
        # now is what the schedule left.
        if not parked and not holds(cmp, self.real.read_cell(cell), expected):
            parked = cell_key(target)
        s = ex.step(READ, target, parked=parked, until=(cmp, expected))
        if s is None:
            return None
        v = self.real.read_cell(cell)
        ok = self.real.try_wait(cell, cmp, expected, 0)
        ex.log(s, f"wait {ex.label(target)} {_CMP.get(cmp, cmp)} {expected}: sees {v}"
                  f"{'' if ok else ', not yet'}", (int(cmp), int(expected), bool(ok)))
        return ok

    def try_wait(self, cell, cmp, expected, spin):
        ok = self._check(cell, cmp, expected, 0)
        self.failed = None if ok else (cell, self.ex.last)
        return ok

    def wait(self, cell, cmp, expected, hooks):
        key = cell_key(self.ex.cell_target(cell))
        # its check failed at its last step: parked at once; else (another
        # rank may have moved since) it checks first
        failed, self.failed = self.failed, None
        parked = key if failed is not None and failed[0] is cell and failed[1] == self.ex.last \
            else 0
        while True:
            ok = self._check(cell, cmp, expected, parked)
            if ok is None:                       # stuck: block as a run does, for the monitor
                self.real.wait(cell, cmp, expected, hooks)
                return
            if ok:
                return
            parked = key

    def signal_group(self, outs, ins):
        return tuple(outs), tuple(ins)

    def arrive_wait(self, group, value, expected, spin):
        outs, ins = group
        for c in outs:
            self.signal(c, NOTIFY_ADD, value)
        for i, c in enumerate(ins):
            if not self.try_wait(c, CMP_GE, expected, 0):
                return i
        return -1

    # ------------------------------------------------------------ data
    def put(self, window, index, src, atomic):
        ex = self.ex
        ex.access(src, READ, "read")
        dst = window[index] if index else window
        found = ex.region(dst)
        if found is not None:
            target, runs, label = found
            s = ex.step(ADD if atomic else WRITE, target, runs)
            ex.log(s, f"{'atomic add into' if atomic else 'write'} {label}")
        self.real.put(window, index, src, atomic)

    def get(self, window, index, dst):
        ex = self.ex
        src = window[index] if index else window
        found = ex.region(src)
        if found is not None:
            target, runs, label = found
            s = ex.step(READ, target, runs)
            ex.log(s, f"read {label}")
        ex.access(dst, WRITE, "write")
        self.real.get(window, index, dst)


__all__ = ["Explorer", "ExploringEndpoint", "Turns", "read_steps"]


def read_steps(path: str) -> list:
    """The steps a rank's log holds, each with the text of what it did (a log
    cut short by a killed rank: up to its last whole record)."""
    steps: dict = {}
    try:
        with open(path, "rb") as f:
            while True:
                try:
                    rec = pickle.load(f)
                except (EOFError, pickle.UnpicklingError):
                    break
                if isinstance(rec, Step):
                    steps[rec.index] = rec
                else:
                    index, text, detail = rec
                    steps[index] = steps[index]._replace(text=text, **(
                        {"detail": detail} if detail else {}))
    except FileNotFoundError:
        pass
    return list(steps.values())
