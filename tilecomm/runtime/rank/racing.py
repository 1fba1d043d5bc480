"""The race check's sink on the rank's recorder (``recorder.py``): what a
dispatch of a ``RunConfig(detect_races=True)`` run records for the check.

``RaceLog`` appends the facts the race check needs (``check/events.py``) to
the rank's log: each window access (which copy, which bytes, read / write /
atomic, the user's line, the thread and task), each notify with its place in
the cell's modification order, each satisfied wait and deferred condition
with how much of that order it saw, each task's submission and predecessors,
each collective's footprint and barriers, each dispatch's end.  The
controller replays the ranks' logs after the call (``check/races.py``).

Each access, notify and wait carries the iteration of the loops it is in
(``iteration``, read off the lowered frames: ``iterations.py``), so a
report says which round of a ``pl.range`` loop raced.  Accesses gathered
into one event keep theirs per access (``Gathered``: the first
``ITERATIONS_READ``, then "or later"); a repeat within bytes already
gathered keeps the first one's, which races as the repeat does.

The modification order comes from the control plane's sequencer: a notify
runs under its cell's stripe lock and takes the next number there
(``sequenced_signal``: this sink is the one that runs a notify's signal); a
wait, once satisfied, reads the count under the same lock.  That lock is the
only thing a checked run adds to the synchronisation itself.

What counts as an access of a window: every access an op's record declares
(``touches``: loads, stores, element reads and writes, assembly, the
operands of elementwise and tensor-level ops, both sides of remote loads /
stores and put / get), element assignment and indexing, and the element
ranges a collective reads and writes (``collectives/footprints.py``) -- of
an array that lies in this rank's copy of a window, or of a peer's copy.
"""
from __future__ import annotations

import itertools
import pickle
import threading
from bisect import bisect_right, insort

import numpy as np

from ...check.events import (ACCESS, AFTER, ASYNC_TASK, ATOMIC, BARRIER, BASE, CLOSE, COND, DEFER,
                             DONE, END, ITERATIONS_READ, MAIN, NOTIFY, PLAIN, READ, SUBMIT, WAIT,
                             WRITE, byte_runs, covered, merge_runs, stripe_of)
from ...collectives import footprints
from .collective_calls import BUILTIN_PREFIX
from .deps import Tracker, explicit_ids, inferred_ids
from .argdumps import param_names
from . import iterations
from .recorder import Local, Sink
from .tracing import SourceLines
from ..values import WindowView
from ...transport.memops import address


# events a rank keeps in memory before it appends them to its log file
# (~300 bytes each in memory, ~35 on disk)
SPILL_EVENTS = 1 << 16
# an access event's iteration, to read when the event is kept (``gather``)
_ITERATION = object()
# byte runs one gathered event holds at most (a loop scattering over more
# goes on in a new event)
GATHERED_RUNS = 4096


class RaceLog(Sink):
    """A rank's events of one race-checking run, appended from every thread
    of the rank (under ``lock``) and written to ``path`` in chunks of
    ``SPILL_EVENTS``, so a long call holds a bounded part of them in memory.
    A thread's accesses of one copy, kind and line since its last
    synchronisation are gathered into one event (``gather``).

    As a sink it comes last on the stream (``ORDER``): it runs a notify's
    signal itself, under its cell's sequencer lock, after every other sink
    has taken its turn or noted the time."""

    ORDER = 4
    SHARED_OPS_ONLY = True          # window and tensor memory only

    def __init__(self, rank: int, control, aborted_exc, path: str):
        self.rank = rank
        self.control, self.aborted_exc = control, aborted_exc
        self.path = path
        self.lock = threading.Lock()
        # thread -> (window copy, kind, line) -> its accesses of them since
        # its last synchronisation, one ``Gathered`` per op (``gather``)
        self.gathered: dict = {}
        self.events: list = []
        self.lines = SourceLines()
        self.fname = "?"
        self.names: dict = {}           # buffer id -> name
        self.mapped: set = set()        # (buffer id, address of this rank's copy)
        # (first address, end, buffer id, owner, shape, itemsize) of each copy
        # of a window mapped here, by address; ``starts`` their first addresses
        self.windows: list = []
        self.starts: list = []
        self.plains: list = []          # the same of the dispatch's plain tensors
        self.scopes = 0                 # task scopes of the dispatch now open
        self.calls: dict = {}           # signal buffer id -> collective calls on it
        self.conds: dict = {}           # deferred condition's cell handle -> (cell, line, label)
        self.texts: dict = {}           # loop iteration pairs -> their text (``iteration``)
        self.sites: dict = {}           # id of a span -> its line, who, the span (``site``)
        # the numbers of asynchronous puts' transfers (their task ids); next()
        # is one step, so threads issuing at once take distinct numbers
        self.transfers = itertools.count(1)
        self.in_flight: dict = {}       # id of an issued event -> (its task id, its line)
        # where the sequencer's counts stand as this rank begins (the replay
        # tells this call's notifies from earlier ones with it)
        self.add((BASE, None, control.sequence_counts()))

    # ------------------------------------------------------------ dispatches
    def begin_dispatch(self, ctx, d) -> None:
        self.fname = d.fname
        if d.image is not self.lines.image:
            self.texts = {}             # iteration texts of this image, by their pairs
        self.lines.follow(d.image)
        self.sites = {}                 # a new dispatch name, perhaps a new image's spans
        self.plains = []
        self.scopes = 0
        names = None
        for i, v in enumerate(d.vals):
            if isinstance(v, WindowView):
                self.window(v)
            elif isinstance(v, np.ndarray) and v.size:
                # a plain tensor (a host tensor's part, a pl.Out): its tasks
                # race with each other over it as over a window copy
                if names is None:
                    names = param_names(d.image.function(d.fname), len(d.vals)) \
                        if not d.fname.startswith(BUILTIN_PREFIX) else \
                        [f"arg{k}" for k in range(len(d.vals))]
                lo = address(v)
                bid = (PLAIN, self.rank, lo)
                self.names[bid] = names[i]
                self.plains.append((lo, lo + v.nbytes, bid, self.rank, v.shape, v.itemsize))

    def end_dispatch(self, ctx, d, finished: bool) -> None:
        if not finished:
            return
        if d.fname.startswith(BUILTIN_PREFIX):        # a HOST collective's share
            self.collective(ctx, d.fname[len(BUILTIN_PREFIX):], d.vals, d.loc, True)
        self.add((DONE, MAIN, d.seq))

    def task_scope(self, ctx, scope):
        self.scopes += 1
        return RacingScope(scope, self, ctx)

    # ------------------------------------------------------------ the stream
    def after_op(self, ctx, ev) -> None:
        loc, caller = ev.loc, ev.caller
        for a in ev.accesses():
            if type(a) is Local:
                self.local(ctx, a.array, a.kind, ev.op, loc, frame=caller)
            else:
                self.remote(ctx, a.view, a.peer, a.index, a.kind, ev.op, loc, frame=caller)

    def sequenced_signal(self, ctx, ev, signal):
        target, peer, offsets = ev.args[:3]
        key = ev.notes["race_key"] = cell_key(target, peer, offsets)
        read, cell = ctx._rec.read_cell, ev.cell

        def numbered():
            # under the cell's sequencer lock every recorded notify into the
            # cell waits: the value read is the one this notify changes (the
            # replay needs it to know what a wait could see before it)
            before = read(cell)
            return before, signal()

        (ev.notes["race_prev"], new), ev.notes["race_seq"] = self.sequenced(key, numbered)
        return new

    def after_notify(self, ctx, ev) -> None:
        target, peer, offsets, value, op = ev.args
        thr, who, line = self.site(ctx)
        self.window(target)
        self.add((NOTIFY, thr, ev.notes["race_key"], int(op), int(value), int(ev.result),
                  ev.notes["race_seq"], line, who, int(ev.notes["race_prev"]),
                  self.iteration()))

    def after_wait(self, ctx, ev) -> None:
        signal, offsets, expected, cmp, loc = ev.args
        key = cell_key(signal, signal.rank, offsets)
        _, seen = self.sequenced(key)
        thr, who, line = self.site(ctx, loc)
        self.window(signal)
        self.add((WAIT, thr, key, int(cmp), int(expected), seen, line, who,
                  cell_label(signal, signal.rank, offsets), self.iteration()))

    def after_defer(self, ctx, ev) -> None:
        signal, offsets, expected, cmp, loc = ev.args
        self.window(signal)
        cell = signal.cells[(signal.rank, offsets)]
        self.conds[cell] = (cell_key(signal, signal.rank, offsets), self.site(ctx, loc)[2],
                            cell_label(signal, signal.rank, offsets))
        self.add((DEFER, self.thread(ctx)))

    def after_release(self, ctx, ev) -> None:
        cell, cmp, expected, record = ev.args
        task = ctx.agent.task if ctx.agent is not None else None
        if task is not None:
            self.condition(task, cell, expected, record)

    def after_await_dispatch(self, ctx, ev) -> None:
        rank, seq = ev.args
        self.add((AFTER, MAIN, rank, seq))

    def after_collective(self, ctx, ev) -> None:
        operands = [a for p, a in zip(ev.params, ev.args) if p not in ("_loc", "defer")]
        # A defer=True call returns before its barrier completes, yet its
        # footprint, barrier included, is recorded here in the task's thread
        # as a blocking call's is: the body does nothing after the call (the
        # compiler's rule) and the TaskId completes only once the barrier has
        # (with the epilogue), so being ordered after the task -- deps=[tid],
        # the scope's end -- is being ordered after the barrier, and a task
        # not ordered after it races with the rows the peers push.
        self.collective(ctx, ev.op.rsplit(".", 1)[1], operands, ev.loc, False)

    # ------------------------------------------------------------ asynchronous puts
    def after_issue(self, ctx, ev) -> None:
        """An asynchronous put was issued: its transfer's accesses, on a thread
        of their own that starts here and that the wait of its event joins."""
        issuer, who, line = self.site(ctx, ev.loc, ev.caller)
        tid = (ASYNC_TASK, next(self.transfers))
        self.in_flight[id(ev.result)] = (tid, line)
        self.add((SUBMIT, issuer, tid, f"the asynchronous transfer of {ev.op} at {line}", 1, (),
                  line))
        thread, mover = (tid, 0), f"the asynchronous transfer issued in {who}"
        for a in ev.accesses():
            if type(a) is Local:
                self.local(ctx, a.array, a.kind, ev.op, ev.loc, (thread, mover, line))
            else:
                self.remote(ctx, a.view, a.peer, a.index, a.kind, ev.op, ev.loc,
                            (thread, mover, line))
        self.add((END, thread))

    def after_complete(self, ctx, ev) -> None:
        """The wait of an event: what follows is ordered after its transfer (a
        second wait of one event orders nothing more)."""
        got = self.in_flight.pop(id(ev.arg("event")), None)
        if got is None:
            return
        tid, issued = got
        waiter, _, line = self.site(ctx, ev.loc, ev.caller)
        self.add((CLOSE, waiter, (tid,), f"rank {self.rank}'s wait at {line} of the event of "
                                         f"its asynchronous put at {issued}"))

    def window(self, view: WindowView) -> None:
        """Know ``view``'s buffer, and where this rank's copy of it lies (each
        mapping of it, should a copy be mapped at two addresses)."""
        b = view.buffer
        lo = address(view.local)
        if (b.id, lo) in self.mapped:
            return
        self.mapped.add((b.id, lo))
        self.names[b.id] = b.name
        insort(self.windows, (lo, lo + b.nbytes, b.id, b.devices[view.rank], view.shape,
                              view.local.itemsize))
        self.starts = [w[0] for w in self.windows]

    # ------------------------------------------------------------ facts
    def thread(self, ctx):
        """The thread key of the code running on ``ctx``."""
        t = ctx.task
        return MAIN if t is None else (t.tid, ctx.block_idx)

    def site(self, ctx, loc=-1, frame=None) -> tuple:
        """(thread key, who, "file:line") of the op being recorded: who is the
        task, or the kernel outside tasks (and the function it was
        dispatched as, when that is another).  ``frame``: the op's caller,
        if known (``Event.caller``)."""
        sp = self.lines.span(loc, frame)
        got = self.sites.get(id(sp))    # the entry keeps the span: its id stays its own
        if got is None:
            line = f"{sp.file}:{sp.line}" if sp is not None else "?"
            func = getattr(sp, "func", None) or self.fname
            got = self.sites[id(sp)] = (line, func if func == self.fname else
                                        f"{func}, dispatched as {self.fname}", sp)
        t = ctx.task
        if t is not None:
            return (t.tid, ctx.block_idx), t.name, got[0]
        return MAIN, got[1], got[0]

    def iteration(self) -> str:
        """The iteration of the loops the op being recorded is in (``step=2``;
        "" outside loops): read off the lowered frames of the stack
        (``iterations.py``), as ``site`` reads the line."""
        image = self.lines.image
        if image is None or not getattr(image, "line_loops", None):
            return ""
        pairs = iterations.current(image)
        if not pairs:
            return ""
        got = self.texts.get(pairs)
        if got is None:
            got = self.texts[pairs] = iterations.text(image, pairs)
        return got

    def remote(self, ctx, view, peer, idx, kind, op, loc=-1, site=None, frame=None) -> None:
        """An access of ``view[idx]`` in member ``peer``'s copy (``site``: the
        (thread, who, line) making it, if not the code running on ``ctx``)."""
        self.window(view)
        local = view.local
        base = address(local)
        region = local[idx] if idx else local
        runs = byte_runs(region, base, address(region))
        thr, who, line = site or self.site(ctx, loc, frame)
        self.add((ACCESS, thr, (view.buffer.id, view.buffer.devices[int(peer)]), runs, kind, op,
                  line, who, view.shape, local.itemsize, _ITERATION))

    def local(self, ctx, region, kind, op, loc=-1, site=None, frame=None) -> None:
        """An access of ndarray ``region`` if it lies in this rank's copy of a
        window, or in a plain tensor of the dispatch while its tasks may run
        beside the access (nothing otherwise).  ``site``: as for ``remote``."""
        if not isinstance(region, np.ndarray) or region.size == 0:
            return
        addr = address(region)
        found = self.memory(ctx, addr)
        if found is None:
            return
        lo, hi, bid, owner, shape, item = found
        thr, who, line = site or self.site(ctx, loc, frame)
        self.add((ACCESS, thr, (bid, owner), byte_runs(region, lo, addr), kind, op, line, who,
                  shape, item, _ITERATION))

    def memory(self, ctx, addr):
        """(first address, end, buffer id, owner, shape, itemsize) of the
        window copy or plain tensor holding ``addr``, if the check follows
        it now (None otherwise)."""
        i = bisect_right(self.starts, addr) - 1     # the copies never overlap
        if i >= 0 and addr < self.windows[i][1]:
            return self.windows[i]
        # a plain tensor is shared only by this rank's threads: outside a
        # task scope the dispatch's own thread is the only one, and what it
        # does there is ordered with every task by the scope's submissions
        # and its end
        if not (self.scopes or ctx.task is not None):
            return None
        for p in self.plains:
            if p[0] <= addr < p[1]:
                return p
        return None

    def tracks(self, ctx, addr) -> bool:
        return self.memory(ctx, addr) is not None

    def sequenced(self, cell, op=None) -> tuple:
        """(``op()``, its number in ``cell``'s modification order); with no op,
        how many notifies into the cell have taken effect."""
        return self.control.sequenced(stripe_of(cell), op, self.aborted_exc)

    def conditions_held(self, task, conds, read) -> None:
        """The deferred conditions of ``task`` all held when its body ended."""
        for cell, expected, record in conds:
            self.condition(task, cell, expected, record)

    def condition(self, task, handle, expected, record) -> None:
        key, line, label = self.conds.get(handle, (None, "?", "?"))
        if key is None:
            return
        _, seen = self.sequenced(key)
        self.add((COND, ("cond", task.tid), key, record.cmp, int(expected), seen, line,
                  task.name, label))

    def collective(self, ctx, name: str, operands, loc, host: bool) -> None:
        """A collective call returned: its footprint, in order."""
        signal = next(v for v in reversed(operands) if isinstance(v, WindowView))
        steps = getattr(footprints, name)(*operands, host)
        bid = signal.buffer.id
        count = self.calls[bid] = self.calls.get(bid, 0) + 1
        thr, who, line = self.site(ctx, loc)
        iteration = self.iteration()
        op = f"pld.tensor.{name}"
        for step in steps:
            if step[0] == "barrier":
                # where each source's arrival lands in this rank's signal copy
                credits = tuple(sum(int(o) * st for o, st in zip(offsets, signal.strides))
                                for offsets in step[3])
                self.add((BARRIER, thr, (bid, count, step[1], step[2]), signal.nranks, line,
                          op, signal.rank, credits))
                continue
            what, view, member, lo, hi = step
            self.window(view)
            item = view.local.itemsize
            self.add((ACCESS, thr, (view.buffer.id, view.buffer.devices[member]),
                      ((lo * item, hi * item),), READ if what == "read" else WRITE, op, line, who,
                      view.shape, item, iteration))

    def add(self, event: tuple) -> None:
        with self.lock:
            thread = event[1]
            if event[0] == ACCESS:
                self.gather(thread, event)
                return
            self.flush(thread)          # the thread synchronises: what it gathered first
            self.append(event)

    def gather(self, thread, event: tuple) -> None:
        """Join access ``event`` to the thread's accesses of its copy, kind,
        op and line since its last synchronisation (one event, ``Gathered``).
        The replay would make them one record anyway: no other thread can
        tell them apart (only a notify, a task's end or a barrier of this
        thread publishes its clock), and this thread acquired nothing
        between them.  An access within bytes already gathered adds
        nothing (a poll of one element, a loop re-reading one tile, a
        call-site load's view read again by the op it feeds)."""
        mine = self.gathered.get(thread)
        if mine is None:
            mine = self.gathered[thread] = {}
        # by copy, kind and line: a repeat by another op of the line (the
        # op a call-site load feeds) is a repeat too
        key = (event[2], event[4], event[6])
        same = mine.get(key)
        if same is None:
            same = mine[key] = []
        runs, op = event[3], event[5]
        g = None
        for h in same:
            if covered(h.runs, runs):
                return
            if h.first[5] == op:
                g = h
        if g is None:
            same.append(Gathered(event, self.iteration() if event[10] is _ITERATION
                                 else event[10]))
            return
        if len(g.parts) < ITERATIONS_READ:
            g.add(runs, self.iteration() if event[10] is _ITERATION else event[10])
        else:
            g.add_later(runs)
        if len(g.runs) >= GATHERED_RUNS:        # bounded: on as a new event
            same.remove(g)
            self.append(g.event())

    def flush(self, thread) -> None:
        """Log what ``thread`` gathered (under ``lock``)."""
        for same in self.gathered.pop(thread, {}).values():
            for g in same:
                self.append(g.event())

    def append(self, event: tuple) -> None:
        self.events.append(event)
        if len(self.events) >= SPILL_EVENTS:
            self._spill()

    def _spill(self) -> None:
        with open(self.path, "ab") as f:
            pickle.dump(self.events, f, protocol=pickle.HIGHEST_PROTOCOL)
        self.events = []

    def finish(self, failed: bool = False) -> None:
        """The run ended on this rank: the rest of the events, then the names
        of the windows they name."""
        with self.lock:
            for thread in list(self.gathered):
                self.flush(thread)
            self._spill()
            with open(self.path, "ab") as f:
                pickle.dump(self.names, f, protocol=pickle.HIGHEST_PROTOCOL)


class Gathered:
    """A thread's accesses of one copy, kind, op and line since its last
    synchronisation, to be logged as one ACCESS event (``check/events.py``):
    the union of their bytes, and each one's iteration for the first
    ``ITERATIONS_READ`` (then "<the last read> or later": reading it is a
    frame walk per access, most of what a checked loop would cost)."""

    __slots__ = ("first", "runs", "parts", "later")

    def __init__(self, event: tuple, iteration):
        self.first = event[:10] + (iteration,)
        self.runs = list(event[3])
        self.parts = [(iteration, event[3])]       # one per access whose iteration was read
        self.later = None               # the bytes of the accesses past the reads

    def add(self, runs, iteration) -> None:
        merge_runs(self.runs, runs)
        self.parts.append((iteration, runs))

    def add_later(self, runs) -> None:
        merge_runs(self.runs, runs)
        if self.later is None:
            self.later = []
        merge_runs(self.later, runs)

    def event(self) -> tuple:
        first, parts = self.first, self.parts
        if self.later is not None:
            parts.append((f"{parts[-1][0]} or later", tuple(self.later)))
        several = any(p[0] != first[10] for p in parts)
        return first[:3] + (tuple(self.runs),) + first[4:] + \
            ((tuple(parts) if several else None),)


class LogFile:
    """A rank's log file as the race check reads it: each iteration reads it
    anew from the start (the replay may go over it more than once), and the
    window names at its end go into ``names``."""

    def __init__(self, path: str, names: dict):
        self.path, self.names = path, names

    def __iter__(self):
        return read_log(self.path, self.names)


def read_log(path: str, names: dict):
    """The events of a rank's log file (``RaceLog``), chunk by chunk as they
    are asked for; the window names at its end go into ``names``."""
    with open(path, "rb") as f:
        while True:
            part = pickle.load(f)
            if isinstance(part, dict):
                names.update(part)
                return
            yield from part


def cell_key(view: WindowView, member, offsets) -> tuple:
    """(buffer id, global rank of the copy, byte offset): one signal cell,
    whichever rank names it."""
    off = 0
    for o, s in zip(offsets, view.strides):
        off += int(o) * s
    return view.buffer.id, view.buffer.devices[int(member)], off


def cell_label(view: WindowView, member, offsets) -> str:
    """A cell as the program names it: ``sig[1, 0] on rank 2``."""
    return (f"{view.buffer.name}[{', '.join(str(int(o)) for o in offsets)}] on rank "
            f"{view.buffer.devices[int(member)]}")


class RacingScope:
    """The scheduler as a checked dispatch's orchestration sees it: every
    submission is recorded with its predecessors -- explicit ``deps=`` and
    those inferred from the memory tasks touch, including tasks that have
    already completed (the scheduler forgets those; a dependency on them
    still orders)."""

    __slots__ = ("inner", "log", "ctx", "thread", "tracker", "tids")

    def __init__(self, inner, log: RaceLog, ctx):
        self.inner, self.log, self.ctx = inner, log, ctx
        self.thread = log.thread(ctx)           # the orchestrating thread
        self.tracker = Tracker()
        self.tids: list = []

    def submit(self, fn, args, name, loc, deps=(), acc=(), blocks=1, waiter=False,
               manual=False):
        log = self.log

        def body(ctx, *a):
            try:
                fn(ctx, *a)
            finally:                    # a block's end: the replay need not read on
                log.add((END, (ctx.task.tid, ctx.block_idx)))

        body.__name__ = fn.__name__
        tid = self.inner.submit(body, args, name, loc, deps, acc, blocks, waiter, manual)
        preds = set(explicit_ids(deps)) | inferred_ids(self.tracker, tid, acc, manual)
        preds.discard(tid)
        self.tids.append(tid)
        self.log.add((SUBMIT, self.thread, tid, name, max(int(blocks), 0),
                      tuple(sorted(preds)), self.log.site(self.ctx, loc)[2]))
        return tid

    def close(self):
        try:
            return self.inner.close()
        finally:
            self.tracker.release_arrays()
            self.log.add((CLOSE, self.thread, tuple(self.tids)))
            self.log.scopes -= 1

    def abandon(self, exc):
        return self.inner.abandon(exc)


__all__ = ["LogFile", "RaceLog", "RacingScope", "cell_key", "cell_label", "read_log"]
