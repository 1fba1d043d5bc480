"""Data races of one call, found from the events its ranks recorded
(``events.py``).

The ranks' threads are replayed with vector clocks, in any order the
synchronisation allows, and every window access is compared with the
earlier accesses to the same window copy that it is not ordered after.
Happens-before is exactly the model's synchronisation:

* program order within a thread (a rank's dispatch thread, a task block);
* a wait, or a deferred condition that completes a task, is ordered after
  the notifies its condition *needs*: of the cell's modification order (the
  notifies in the order they took effect) up to what the waiter saw, the run
  of notifies after which the condition held continuously is found; its
  first notify is needed, and if that is an AtomicAdd, every notify back to
  the last Set before it (the shortest prefix whose sum satisfies the
  condition) -- never notifies that merely happened to land before the
  check;
* a barrier generation of a collective: everything before any member's
  arrival happens before everything after any member's departure
  (``collectives/footprints.py`` says where each collective synchronises);
* a task block starts after its submission and after the completion of
  every task it depends on (explicit ``deps=`` and inferred); a task
  completes after all its blocks and deferred conditions; a thread that
  waits for tasks (the end of a task scope) is ordered after them;
* a dispatch that waits for another rank's dispatch is ordered after it;
  the call's start and end order everything (one call is checked at a
  time).
"""
from __future__ import annotations

from bisect import bisect_right, insort
from collections import deque
from typing import NamedTuple

from .. import _native_core as native
from ..errors import InternalError
from ..waits import CMP_NAMES, holds
from .needed import Placed, needed
from .events import (ACCESS, AFTER, ASYNC_TASK, ATOMIC, BARRIER, BASE, CLOSE, COND, CONFLICTS,
                     DEFER, DONE, END, KIND_NAMES, MAIN, NOTIFY, PLAIN, SUBMIT, SYNC_READ, WAIT,
                     dominates, iteration_of, merge_runs, parts_of, stripe_of)

NOTIFY_ADD = native.OP_ADD       # a notify's op code (as transport.base names it)
MAX_REPORTED = 10       # races listed in a report; the rest are counted
MAX_ROUNDS = 4          # replays with the needed notifies of the replay before
READ_BATCH = 4096       # events of one rank read at a time
# accesses of other iterations a merged access record keeps apart, to name the
# iteration of the elements a race is on (beyond: "<the last kept> or later")
PARTS_MAX = 1024


class Access(NamedTuple):
    """One side of a race.  (Records are named tuples: cheap to define on the
    import path, immutable, and they travel to other MPI processes.)"""

    rank: int           # the rank that made the access
    task: str           # its task, or the dispatched function outside tasks
    op: str             # e.g. "pl.load", "pld.tile.remote_store", "pld.tensor.allreduce"
    line: str           # the user's "file:line" ("?" when unknown)
    kind: str           # "read", "write" or "atomic"
    iteration: str = ""  # of the loops the access is in: "step=2" ("" outside loops)

    def __str__(self):
        return f"rank {self.rank}'s {self.op} at {self.line}{_in(self.iteration)}"


def _in(iteration: str) -> str:
    return f" (iteration {iteration})" if iteration else ""


class Race(NamedTuple):
    """Two accesses to overlapping elements of one window copy that nothing
    orders."""

    buffer: str         # the window buffer's name (a plain tensor's parameter name)
    owner: int          # the rank whose copy of it
    region: str         # the elements both touch, in the second access's view
    first: Access
    second: Access
    why: str            # the missing edge, in words
    memory: str = "window"      # or "tensor": a plain tensor of rank ``owner``

    def __str__(self):
        head = f"nothing orders {self.first} before {self.second}: "
        why = self.why[len(head):] if self.why.startswith(head) else self.why
        where = f"window '{self.buffer}', rank {self.owner}'s copy" if self.memory == "window" \
            else f"tensor '{self.buffer}' of rank {self.owner}"
        return "\n".join([f"{where}, elements {self.region}:",
                          *(f"    {a.kind:<6} {a} (in {a.task})" for a in (self.first,
                                                                         self.second)),
                          f"    nothing orders the {self.first.kind} before the "
                          f"{self.second.kind}: {why}"])


class _Notify(NamedTuple):
    """One notify in its cell's modification order."""

    seq: int            # its number in the cell's sequencer stripe
    op: int
    value: int
    result: int         # the value it left in the cell
    rank: int
    thread: object      # the notifying thread's key on that rank
    line: str
    prev: int | None    # the value it changed (None: not recorded)


# ------------------------------------------------------------------ clocks
def _join(into: dict, other: dict) -> None:
    for k, v in other.items():
        if into.get(k, 0) < v:
            into[k] = v


def _dominates(vc: dict, other: dict) -> bool:
    """``vc`` already holds ``other`` (a thread's later notify holds its
    earlier ones: a counter's prefix then shares their clocks)."""
    return all(vc.get(k, 0) >= v for k, v in other.items())


class _Thread:
    __slots__ = ("key", "events", "pos", "vc", "started", "ended", "last", "last_from",
                 "spare_from")

    def __init__(self, key):
        self.key = key
        self.events: deque = deque()      # read, not yet replayed
        self.pos = 0                      # events replayed
        self.vc: dict = {key: 1}          # its own epoch: 1 until its first release
        self.started = key[1] == MAIN     # a task block starts once it may
        self.ended = False                # a task block: its END replayed
        # its synchronisations, for the words of a report: the last one, and
        # the last one satisfied by each thread's notify
        self.last = None                  # (description, (history entry, index) or None)
        self.last_from: dict = {}         # notifying thread -> the same
        # thread -> why this thread's last synchronisation with it need not
        # wait for it (a format string of the other access's ``op``)
        self.spare_from: dict = {}

    def tick(self) -> int:
        """A release: what it published holds this thread's accesses so far;
        the ones after it take the next epoch."""
        c = self.vc.get(self.key, 0) + 1
        self.vc[self.key] = c
        return c

    def synced(self, what: str, made=None) -> None:
        self.last = (what, made)
        if made is not None:
            src = made[0]
            self.last_from[(src.rank, src.thread)] = self.last
            self.spare_from.pop((src.rank, src.thread), None)


class _Shadow:
    """One earlier access of a window copy (or several of one thread at one
    epoch: ``runs`` their union).  Merged accesses of several loop
    iterations keep each access's runs with its iteration in ``parts`` (the
    first ``PARTS_MAX``), so a race names the iteration of the elements it
    is on, not the first access's."""

    __slots__ = ("thread", "epoch", "kind", "runs", "ev", "parts", "more")

    def __init__(self, thread, epoch, kind, runs, ev):
        self.thread, self.epoch, self.kind, self.runs, self.ev = thread, epoch, kind, runs, ev
        # [(iteration, runs)] once two iterations merged (an event of a rank
        # that gathered several brings its own)
        parts = parts_of(ev)
        self.parts = list(parts) if parts else None
        self.more = ""                  # the last kept iteration, once parts are full

    def iteration(self, common) -> str:
        """The iteration of the access of this record over bytes ``common``."""
        return _iteration_at(iteration_of(self.ev, 10), self.parts, self.more, common)

    def merge(self, runs, ev=None) -> None:
        first = iteration_of(self.ev, 10)
        parts = self.parts
        theirs = parts_of(ev) if ev is not None else None
        if theirs is None:
            it = iteration_of(ev, 10) if ev is not None else ""
            theirs = ((it, runs),) if parts is not None or it != first else ()
        if theirs and parts is None:
            parts = self.parts = [(first, tuple(self.runs))]
        for part in theirs:
            if self.more:
                break
            if len(parts) < PARTS_MAX:
                parts.append(part)
            else:
                self.more = parts[-1][0]
        mine = self.runs
        if type(mine) is tuple:
            mine = self.runs = list(mine)
        if len(runs) > 8:
            self.runs = list(_union(tuple(mine), runs))
        else:
            merge_runs(mine, runs)

    def overlap(self, runs) -> list:
        """The bytes of ``runs`` this record also covers (a record of many
        runs -- a loop's element reads -- is searched, not scanned)."""
        return _overlap_many(self.runs, runs)


def _overlap_many(mine, runs) -> list:
    if len(mine) <= 8:
        return _overlap(mine, runs)
    out = []
    for lo, hi in runs:
        i = max(bisect_right(mine, (lo, _END)) - 1, 0)
        while i < len(mine) and mine[i][0] < hi:
            a, b = max(mine[i][0], lo), min(mine[i][1], hi)
            if a < b:
                out.append((a, b))
            i += 1
    return out


def _iteration_at(first: str, parts, more: str, common) -> str:
    """The iteration of the part of an access (or record) over ``common``."""
    if not parts:
        return first
    for it, runs in parts:
        if _overlap_many(runs, common):
            return it
    if not more:
        return first
    return more if more.endswith(" or later") else f"{more} or later"


# past every byte: (lo, _END) sorts after each run starting at lo
_END = float("inf")


def _overlap(a: tuple, b: tuple) -> list:
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo < hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def _union(a: tuple, b: tuple) -> tuple:
    """Sorted byte runs ``a`` and ``b`` together, touching runs joined."""
    out = []
    for lo, hi in sorted(a + b):
        if out and lo <= out[-1][1]:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return tuple(out)


def _covers(a: tuple, b: tuple) -> bool:
    """Every byte of runs ``b`` lies in runs ``a``."""
    i = 0
    for lo, hi in b:
        while i < len(a) and a[i][1] <= lo:
            i += 1
        if i == len(a) or a[i][0] > lo or a[i][1] < hi:
            return False
    return True


def region_text(runs: list, shape: tuple, itemsize: int) -> str:
    """The bounding box of the elements in byte ``runs`` of a view of
    ``shape``, as ``[lo:hi, ...]``."""
    lo = [None] * len(shape)
    hi = [None] * len(shape)
    for a, b in runs:
        f, g = _unravel(a // itemsize, shape), _unravel((b - 1) // itemsize, shape)
        for d in range(len(shape)):
            # a dim spans its whole extent once an outer index changes
            i, j = (f[d], g[d]) if f[:d] == g[:d] else (0, shape[d] - 1)
            lo[d] = i if lo[d] is None else min(lo[d], i)
            hi[d] = j if hi[d] is None else max(hi[d], j)
    return "[" + ", ".join(f"{a}:{b + 1}" for a, b in zip(lo, hi)) + "]"


def _unravel(flat: int, shape: tuple) -> list:
    out = []
    for d in reversed(shape):
        out.append(flat % d if d else 0)
        flat = flat // d if d else 0
    return out[::-1]


# ------------------------------------------------------------------ replay
class _Replay:
    """The replay of one call's logs.  Each rank's events are read lazily
    (``READ_BATCH`` at a time) as the replay needs them: a thread that has
    none left, or a wait whose cell's history may still miss a notify it saw,
    has more read; replayed events are dropped.  What stays is the per-cell
    notify history with its clocks and the accesses no later one covers."""

    def __init__(self, logs: dict, edges: dict | None = None, spares: dict | None = None):
        self.readers = {rank: iter(events) for rank, events in logs.items()}
        # wait -> the seqs of the notifies it needs (``needed.py``); None: the
        # first replay, where a wait needs what made its condition true in
        # the modification order this run saw
        self.edges = edges
        self.nclock: dict = {}             # (cell, seq) -> its notify's clock
        self.waits: dict = {}              # wait -> (cell, cmp, expected, thread, clock before)
        self.acquired: dict = {}           # wait -> the seqs whose clocks it joined
        # wait -> (rank, thread, notify) of the notifies it may do without
        # (for the words of a report)
        self.spares = spares or {}
        self.threads: dict = {}
        self.conds: dict = {}              # (rank, task id) -> [COND events]
        self.defers: dict = {}             # (rank, task id) -> conditions it registered
        self.blocks: dict = {}             # (rank, task id) -> number of blocks
        self.preds: dict = {}              # (rank, task id) -> predecessor ids
        self.submit_vc: dict = {}
        self.task_names: dict = {}
        self.done_vc: dict = {}            # (rank, task id) -> clock at its completion
        self.dispatch_vc: dict = {}        # (rank, seq) -> clock at the dispatch's end
        self.notify_vc: dict = {}          # (cell, seq) -> its notify's clock, until in prefix
        self.prefix: dict = {}             # cell -> [running join of its history's clocks]
        self.history: dict = {}            # cell -> [_Notify] in modification order
        self.seqs: dict = {}               # cell -> the seqs of its history
        self.stripes: dict = {}            # stripe -> sorted seqs read of it
        self.base: dict = {}               # stripe -> its count before the call
        self.barriers: dict = {}           # key -> [threads arrived]
        self.shadow: dict = {}             # (buffer id, owner) -> [_Shadow]
        self.found: dict = {}              # dedup key -> the race's fields
        for rank in list(self.readers):    # every rank's BASE comes first
            self.read(rank)

    def read(self, rank) -> bool:
        """Read the next events of ``rank``'s log into the threads' queues
        (False: none left)."""
        reader = self.readers.get(rank)
        if reader is None:
            return False
        n = 0
        for ev in reader:
            self.take(rank, ev)
            n += 1
            if n == READ_BATCH:
                return True
        del self.readers[rank]
        return n > 0

    def take(self, rank, ev) -> None:
        kind = ev[0]
        if kind == BASE:
            for st, count in enumerate(ev[2]):
                self.base[st] = min(self.base.get(st, count), count)
            return
        if kind == COND:                   # a task's conditions: read by its completion
            self.conds.setdefault((rank, ev[1][1]), []).append(ev)
            return
        if kind == NOTIFY:
            cell, seq = ev[2], ev[6]
            prev = ev[9] if len(ev) > 9 else (ev[5] - ev[4] if ev[3] == NOTIFY_ADD else None)
            entry = _Notify(seq, ev[3], ev[4], ev[5], rank, ev[1],
                            ev[7] + _in(iteration_of(ev, 10)), prev)
            h, seqs = self.history.setdefault(cell, []), self.seqs.setdefault(cell, [])
            k = bisect_right(seqs, seq)
            h.insert(k, entry)
            seqs.insert(k, seq)
            insort(self.stripes.setdefault(stripe_of(cell), []), seq)
        key = (rank, ev[1])
        t = self.threads.get(key)
        if t is None:
            t = self.threads[key] = _Thread(key)
        t.events.append(ev)

    def read_more(self) -> bool:
        """Read from every rank with events left (False: every log is read)."""
        got = False
        for rank in list(self.readers):
            got = self.read(rank) or got
        return got

    def complete(self, cell, seen) -> bool:
        """Whether the cell's history holds every notify a waiter that saw
        ``seen`` of its stripe may need: the stripe's numbers since the call
        began are consecutive (or every log is read).  Not yet: the waiter
        waits while the other threads replay what is read, and more is read
        only when nothing can move (so a long log never sits in memory)."""
        if not self.readers:
            return True
        st = stripe_of(cell)
        return bisect_right(self.stripes.get(st, ()), seen) >= seen - self.base.get(st, 0)

    # -------------------------------------------------------------- waits
    def needed(self, cell, cmp, expected, seen):
        """The index in the cell's history of the notify that made a satisfied
        condition true (the waiter saw the first ``seen`` notifies); None if
        it held before any notify of the call (the value the first one
        changed satisfies it)."""
        h = self.history.get(cell, [])
        i = bisect_right(self.seqs.get(cell, ()), seen) - 1
        while i >= 0 and not holds(cmp, h[i].result, expected):
            i -= 1                         # saw more than it needed: back to a true point
        if i < 0:
            return None
        j = i
        while j > 0 and holds(cmp, h[j - 1].result, expected):
            j -= 1
        if j == 0 and h[0].prev is not None and holds(cmp, h[0].prev, expected):
            return None                    # true before any notify of this call
        return j

    def prefix_clock(self, cell, j):
        """The join of the clocks of the notifies condition index ``j`` needs:
        notify ``j`` and, if it is an AtomicAdd, every notify back to the last
        Set before it (the shortest prefix whose sum gives the value).  None
        until all of them are replayed.  Kept per cell as a running join,
        restarted at each Set, so a counter waited on in a loop costs one
        join per wait, not one per notify it ever received."""
        h = self.history[cell]
        done = self.prefix.setdefault(cell, [])
        while len(done) <= j:
            k = len(done)
            vc = self.notify_vc.pop((cell, h[k].seq), None)    # folded in from here on
            if vc is None:
                return None
            if h[k].op == NOTIFY_ADD and k > 0 and not _dominates(vc, done[k - 1]):
                vc = dict(vc)              # the notify's own clock stays as it is
                _join(vc, done[k - 1])
            done.append(vc)
        return done[j]

    def prefix_seqs(self, cell, j) -> frozenset:
        """The notifies ``prefix_clock(cell, j)`` joins, as the seq of each
        thread's last one among them (its clock holds the thread's earlier
        ones): the form ``next_edges`` gives too."""
        h = self.history[cell]
        k = j
        while k > 0 and h[k].op == NOTIFY_ADD:
            k -= 1
        last = {}
        for e in h[k:j + 1]:
            last[(e.rank, e.thread)] = e.seq
        return frozenset(last.values())

    def satisfied(self, ev):
        """(the clock a satisfied wait / condition ``ev`` acquires, the
        history entry that made it true or None); (None, None) until the
        notifies it needs are replayed."""
        cell = ev[2]
        if not self.complete(cell, ev[5]):
            return None, None
        j = self.needed(cell, ev[3], ev[4], ev[5])
        if j is None:
            return {}, None
        vc = self.prefix_clock(cell, j)
        return (None, None) if vc is None else (vc, (self.history[cell][j], j))

    def acquire(self, t: _Thread, ev, what: str) -> bool:
        ident = (t.key, t.pos)
        cell = ev[2]
        if self.edges is not None and ident in self.edges:
            need = self.edges[ident]
            clocks = [self.nclock.get((cell, s)) for s in need]
            if None in clocks:
                return False               # a needed notify is not replayed yet
            src = None
            if need:                       # the latest needed notify names the edge
                k = bisect_right(self.seqs[cell], max(need)) - 1
                src = (self.history[cell][k], 0)
            before = dict(t.vc)
            for vc in clocks:
                _join(t.vc, vc)
            seqs = need
        else:
            vc, src = self.satisfied(ev)
            if vc is None:
                return False
            before = dict(t.vc)
            _join(t.vc, vc)
            seqs = () if src is None else self.prefix_seqs(cell, src[1])
        self.waits[ident] = (cell, ev[3], ev[4], t.key, before)
        self.acquired[ident] = seqs
        label = (f"{what} at {ev[6]}{_in(iteration_of(ev, 9))} on {ev[8]} "
                 f"({CMP_NAMES.get(ev[3], ev[3])} {ev[4]})")
        t.synced(label, src)
        for rank, thread, entry in self.spares.get(ident, ()):
            t.spare_from[(rank, thread)] = (
                f"{label} can be satisfied without rank {entry.rank}'s notify at {entry.line} "
                f"(in an order where other notifies land first), so it does not wait for rank "
                f"{rank}'s {{op}}")
        return True

    # -------------------------------------------------------------- needed notifies
    def next_edges(self) -> tuple:
        """(what each wait of this replay needs when every order of its cell's
        notifies counts (``needed.py``), from this replay's clocks; what it
        may do without)."""
        out, spares = {}, {}
        placed: dict = {}
        for ident, (cell, cmp, expected, thread, before) in self.waits.items():
            ps = placed.get(cell)
            if ps is None:
                ps = placed[cell] = [Placed(e, self.nclock[(cell, e.seq)], (e.rank, e.thread))
                                     for e in self.history.get(cell, ())]
            start = ps[0].entry.prev if ps else None
            need, spare = needed(ps, start, thread, before, cmp, expected)
            last = {}
            for p in need:                 # each thread's last: its clock holds the rest
                if p.epoch > last.get(p.thread, (0, None))[0]:
                    last[p.thread] = (p.epoch, p.entry.seq)
            out[ident] = frozenset(seq for _, seq in last.values())
            if spare:
                spares[ident] = [(p.entry.rank, p.entry.thread, p.entry) for p in spare]
        return out, spares

    # -------------------------------------------------------------- tasks
    def task_done(self, rank, tid):
        key = (rank, tid)
        vc = self.done_vc.get(key)
        if vc is not None:
            return vc
        if key not in self.blocks:
            return None                    # not submitted yet in the replay
        vc = dict(self.submit_vc[key])
        for b in range(self.blocks[key]):
            t = self.threads[(rank, (tid, b))]
            if not t.started or not (t.ended or not t.events and rank not in self.readers):
                return None
            _join(vc, t.vc)
        conds = self.conds.get(key, ())
        if len(conds) < self.defers.get(key, 0) and rank in self.readers:
            return None                    # a condition found true is not read yet
        for ev in conds:
            got, _ = self.satisfied(ev)
            if got is None:
                return None
            _join(vc, got)
        self.done_vc[key] = vc
        return vc

    def start(self, t: _Thread) -> bool:
        rank, (tid, _) = t.key
        key = (rank, tid)
        if key not in self.submit_vc:
            return False
        vcs = [self.task_done(rank, p) for p in self.preds[key]]
        if any(v is None for v in vcs):
            return False
        t.vc = dict(self.submit_vc[key])
        for v in vcs:
            _join(t.vc, v)
        t.vc[t.key] = 1
        t.started = True
        return True

    # -------------------------------------------------------------- the run
    def run(self) -> None:
        while True:
            progress = False
            for t in list(self.threads.values()):
                if not t.started:
                    if not self.start(t):
                        continue
                    progress = True
                events = t.events
                while events and self.step(t, events[0]):
                    events.popleft()
                    t.pos += 1
                    progress = True
            if not progress and not self.read_more():
                break
        stuck = [t.key for t in self.threads.values() if t.events]
        if stuck:
            raise InternalError(f"race check: the recorded events of {stuck[:4]} cannot be "
                                f"replayed (a wait's notifies were not recorded)")

    def step(self, t: _Thread, ev) -> bool:
        kind = ev[0]
        rank = t.key[0]
        if kind == ACCESS:
            self.access(t, ev[2], ev[3], ev[4], ev)
        elif kind == NOTIFY:
            self.access(t, (ev[2][0], ev[2][1]), ((ev[2][2], ev[2][2] + 4),), ATOMIC,
                        (ACCESS, ev[1], None, None, ATOMIC, "pld.system.notify", ev[7], ev[8],
                         None, 4, iteration_of(ev, 10)))
            key = (ev[2], ev[6])
            self.notify_vc[key] = self.nclock[key] = dict(t.vc)
            t.tick()
        elif kind == WAIT:
            if not self.acquire(t, ev, f"rank {rank}'s wait"):
                return False
            self.access(t, (ev[2][0], ev[2][1]), ((ev[2][2], ev[2][2] + 4),), SYNC_READ,
                        (ACCESS, ev[1], None, None, SYNC_READ, "pld.system.wait", ev[6], ev[7],
                         None, 4, iteration_of(ev, 9)))
        elif kind == SUBMIT:
            key = (rank, ev[2])
            self.submit_vc[key] = dict(t.vc)
            t.tick()
            self.blocks[key] = ev[4]
            self.preds[key] = ev[5]
            self.task_names[key] = ev[3]
            for b in range(ev[4]):
                if (rank, (ev[2], b)) not in self.threads:
                    self.threads[(rank, (ev[2], b))] = _Thread((rank, (ev[2], b)))
        elif kind == CLOSE:
            vcs = [self.task_done(rank, tid) for tid in ev[2]]
            if any(v is None for v in vcs):
                return False
            for v in vcs:
                _join(t.vc, v)
            t.synced(ev[3] if len(ev) > 3 else f"the end of rank {rank}'s task scope")
        elif kind == END:
            t.ended = True
        elif kind == DEFER:
            key = (rank, t.key[1][0])
            self.defers[key] = self.defers.get(key, 0) + 1
        elif kind == BARRIER:
            return self.barrier(t, ev)
        elif kind == DONE:
            self.dispatch_vc[(rank, ev[2])] = dict(t.vc)
            t.tick()
        elif kind == AFTER:
            vc = self.dispatch_vc.get((ev[2], ev[3]))
            if vc is None:
                return False
            _join(t.vc, vc)
        return True

    def barrier(self, t: _Thread, ev) -> bool:
        """A barrier generation: ready when every member arrived; then every
        member leaves with the join of their clocks.  Returns False for a
        member that has to wait (it is advanced by the last to arrive)."""
        key, members = ev[2], ev[3]
        arrived = self.barriers.setdefault(key, [])
        if t not in arrived:
            arrived.append(t)
        if len(arrived) < members:
            return False
        clocks = [dict(m.vc) for m in arrived]
        # each member leaves after every arrival, unless a notify of the
        # program into the cell where a source's arrival lands could stand in
        # for that arrival (a stray credit lets the member leave early)
        mine = {id(m): (m.events[0] if m is not t else ev) for m in arrived}
        me_of = {id(m): (mine[id(m)][6] if len(mine[id(m)]) > 6 else None) for m in arrived}
        for m, own in zip(arrived, clocks):
            mev = mine[id(m)]
            vc = dict(own)
            early = []
            for src, theirs in zip(arrived, clocks):
                if src is m:
                    continue
                stray = self.stray(key[0], m, mev, me_of[id(src)], own)
                if stray is None:
                    _join(vc, theirs)
                    m.spare_from.pop(src.key, None)
                else:
                    early.append((src, stray))
            m.vc = vc
            m.tick()
            what = f"rank {m.key[0]}'s {ev[5]} at {ev[4]} (a barrier of {members})"
            m.synced(what)
            for src, stray in early:
                m.spare_from[src.key] = (
                    f"{what} can let it go before rank {src.key[0]} arrives: rank "
                    f"{stray.rank}'s notify at {stray.line} lands in the signal cell that "
                    f"counts rank {src.key[0]}'s arrival, so it does not wait for rank "
                    f"{src.key[0]}'s {{op}}")
            if m is not t:                 # the others resume past it on their next turn
                m.events.popleft()
                m.pos += 1
        del self.barriers[key]
        return True

    def stray(self, bid, m: _Thread, mev, src_me, arrival: dict):
        """A notify of the program into the cell of ``m``'s copy of signal
        ``bid`` where domain rank ``src_me``'s arrival lands, that may land
        before ``m``'s wait there (None: none)."""
        if src_me is None or len(mev) < 8:
            return None
        cell = (bid, m.key[0], mev[7][src_me])
        for e in self.history.get(cell, ()):
            if e.value <= 0:
                continue                   # cannot raise the count
            vc = self.nclock.get((cell, e.seq))
            if vc is None or vc.get(m.key, 0) < arrival.get(m.key, 0):
                return e
        return None

    # -------------------------------------------------------------- accesses
    def access(self, t: _Thread, where, runs, kind, ev) -> None:
        """Compare an access with the earlier ones of the same copy it is not
        ordered after, then keep it.  Accesses of one thread between two of
        its releases share an epoch: no other thread can tell them apart, so
        those of one kind, op and line are kept as one record over the union
        of their bytes (a loop reading element after element costs one)."""
        if not runs:
            return
        epoch = t.vc[t.key]
        vc = t.vc
        recs = self.shadow.setdefault(where, [])
        keep = []
        same = None
        for r in recs:
            if r.thread is t:
                if r.epoch == epoch and r.kind == kind and r.ev[5] == ev[5] and \
                        r.ev[6] == ev[6]:
                    same = r
                elif dominates(kind, r.kind) and _covers(runs, r.runs):
                    continue               # anything racing with it races with this one
                keep.append(r)
                continue
            ordered = vc.get(r.thread.key, 0) >= r.epoch
            if not ordered and kind in CONFLICTS[r.kind]:
                common = r.overlap(runs)
                if common:
                    self.report(where, r, t, ev, common)
            if ordered and dominates(kind, r.kind) and _covers(runs, r.runs):
                continue
            keep.append(r)
        if same is None:
            keep.append(_Shadow(t, epoch, kind, runs, ev))
        else:
            same.merge(runs, ev)
        self.shadow[where] = keep

    def describe(self, t: _Thread, ev, iteration: str) -> Access:
        rank = t.key[0]
        return Access(rank, ev[7], ev[5], ev[6] or "?", KIND_NAMES[ev[4]], iteration)

    def report(self, where, r: _Shadow, t: _Thread, ev, common) -> None:
        first = self.describe(r.thread, r.ev, r.iteration(common))
        second = self.describe(t, ev, _iteration_at(iteration_of(ev, 10), parts_of(ev), "",
                                                    common))
        key = (where, frozenset(((first.rank, first.line, first.op),
                                 (second.rank, second.line, second.op))))
        if key in self.found:
            return
        shaped = ev if ev[8] is not None else r.ev      # a signal cell has no view shape
        region = region_text(common, shaped[8], shaped[9]) if shaped[8] is not None else \
            f"[cell at byte {common[0][0]}]"
        self.found[key] = (where, region, first, second,
                           f"nothing orders {first} before {second}: "
                           f"{self.why(r, t, first, second)}")

    def why(self, r: _Shadow, t: _Thread, first: Access, second: Access) -> str:
        """The missing edge, in words (what follows "nothing orders A before B")."""
        a, b = r.thread.key, t.key

        def name(k):
            return self.task_names.get((k[0], k[1][0]), "an asynchronous transfer")

        if _transfer(a):
            return (f"{name(a)} may land at any time until the wait of its event "
                    f"(pld.system.wait_async_event), and rank {second.rank}'s {second.op} is not "
                    f"ordered after that wait" + _after_wait_hint(t, a))
        if _transfer(b):
            return (f"{name(b)} may land at any time from its issue on, and rank "
                    f"{first.rank}'s {first.op} is not ordered before that issue")
        if a[0] == b[0]:
            if a[1] != MAIN and b[1] != MAIN and a[1][0] == b[1][0]:
                return (f"blocks {a[1][1]} and {b[1][1]} of task "
                        f"'{self.task_names.get((a[0], a[1][0]), '?')}' on rank {a[0]} run "
                        f"concurrently (the blocks of one task are independent)")
            names = [self.task_names.get((a[0], k[1][0]), "?") if k[1] != MAIN else
                     "the dispatch's own code" for k in (a, b)]
            return (f"on rank {a[0]}, '{names[0]}' and '{names[1]}' run concurrently (no deps=, "
                    f"inferred dependency or deferred wait orders them)")
        if t.last is None:
            return (f"rank {b[0]} waits for nothing (no wait, collective or task dependency) "
                    f"before its {second.op}")
        spare = t.spare_from.get(a)
        if spare is not None:
            return spare.format(op=first.op)
        # a synchronisation with the first access's thread that comes too early
        early = t.last_from.get(a)
        if early is not None:
            what, (src, _) = early
            return (f"{what} is satisfied by rank {src.rank}'s notify at {src.line}, which comes "
                    f"before the {first.op}")
        what, made = t.last
        if made is None:
            return (f"{what} is the last synchronisation before the {second.op}, and rank "
                    f"{a[0]}'s {first.op} is not before it")
        src, j = made                       # the notify that made the condition true
        by = f"rank {src.rank}'s notify at {src.line}"
        if src.op == NOTIFY_ADD and j > 0:
            by = f"the AtomicAdds up to {by}"
        return (f"{what} is satisfied by {by}, which does not wait for rank {a[0]}'s "
                f"{first.op}")


def _transfer(key) -> bool:
    """Whether a thread key is an asynchronous put's transfer."""
    if key[1] == MAIN:
        return False
    tid = key[1][0]
    while type(tid) is tuple:       # a later call of a chain: (its place, task id)
        if tid[0] == ASYNC_TASK:
            return True
        tid = tid[1]
    return False


def _after_wait_hint(t, transfer_key) -> str:
    """Where ``t`` (the thread of the access after the transfer) last
    synchronised with the transfer's rank: a notify made before the wait."""
    made = t.last
    if made is None or made[1] is None:
        return ""
    what, (src, _) = made
    if src.rank != transfer_key[0]:
        return ""
    return (f": {what} is satisfied by rank {src.rank}'s notify at {src.line}, made before "
            f"the event was waited")


def find_races(logs: dict, names: dict) -> tuple:
    """(races, how many more were found) of one call (``find_all_races``,
    the first ``MAX_REPORTED`` of them)."""
    races = find_all_races(logs, names)
    return tuple(races[:MAX_REPORTED]), max(0, len(races) - MAX_REPORTED)


def find_all_races(logs: dict, names: dict) -> list:
    """Every race of one call: ``logs`` maps each
    rank to an iterable of its events (read as the replay goes, and again
    by each further round: a list, or an object that iterates anew), ``names``
    each window buffer id to its name (read once the replay is done: a
    rank's log may end with them)."""
    if any(iter(events) is events for events in logs.values()):
        raise InternalError("find_races reads each log more than once: pass lists or objects "
                            "that iterate anew, not iterators")
    replay = _Replay(logs)
    replay.run()
    # again with what each wait needs in every order of its notifies, until
    # that no longer changes (needed.py); a round that cannot be replayed
    # keeps the round before it
    for _ in range(MAX_ROUNDS):
        edges, spares = replay.next_edges()
        if edges == replay.acquired and spares == replay.spares:
            break
        again = _Replay(logs, edges, spares)
        try:
            again.run()
        except InternalError:
            break
        replay = again
    races = [Race(names.get(bid, str(bid)), owner, region, first, second, why,
                  PLAIN if isinstance(bid, tuple) and bid[0] == PLAIN else "window")
             for (bid, owner), region, first, second, why in replay.found.values()]
    return races


__all__ = ["Access", "MAX_REPORTED", "Race", "find_all_races", "find_races", "region_text"]
