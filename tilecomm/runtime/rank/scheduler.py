"""A rank's task scheduler: tasks run on the rank's cores, ordered by their
dependencies, never by statement order.

Cores are threads of the rank process (``RunConfig.cores``; a chip profile
fixes it to its AIV count).  A task is queued until every task it depends on
has completed, then ready; a free core takes ready tasks in submission order.
A blocking ``pld.system.wait`` holds its core while it waits (the native wait
sleeps without the GIL, so the other cores keep running).  A waiter task (one
that registers ``pld.system.defer_wait`` conditions) gives its core back when
its body ends; its TaskId completes once every condition holds, watched by a
watcher thread that sleeps on the cells.  At most ``DEFER_SLOTS`` waiters are
admitted at once (running or deferred): a further ready waiter is held back
until one completes, while other ready tasks keep running.  A task may also
carry completion steps (``Task.after``: a ``defer=True`` collective's work
after a barrier generation and its epilogue): its watcher runs them, outside
the lock, once the conditions before each hold, and the TaskId completes
after the last.

A release costs one thread hand-off, not two: the watcher that sees a
TaskId complete runs the first dependent it makes ready itself when a core is
idle, on that core's *slot* (the idle core thread stays asleep, so no more
than ``cores`` tasks ever run), keeps running ready tasks on it like a core,
and watches a waiter it ran itself instead of handing it to another watcher.
Slots are the ``core_agents``: whichever thread runs a task holds one, so a
snapshot shows the task and its wait under one core index either way.

Quiescence for the monitor: every thread of the scheduler (the rank's own
thread waiting for its tasks, the cores, the watchers) is an *agent*; the
scheduler counts the active ones under its lock.  Whoever makes work for a
sleeping agent counts it active before waking it, so the count reaches zero
only when every agent sleeps on a cell or waits for work that only a cell
change can bring.  The agent that takes the count to zero publishes a
snapshot (every blocked wait, every deferred condition, every queued task)
and then marks the rank BLOCKED (``taskplane``), exactly as a single blocked
wait does.
"""
from __future__ import annotations

import copy
import threading
import time
from collections import deque

from ...transport.base import WaitHooks
from ...waits import CMP_GE_U, holds
from .. import control as C
from .. import taskplane
from .deps import Tracker, base_array, explicit_ids

DEFER_SLOTS = 64           # deferred tasks tracked at once (upstream MAX_ASYNC_WAITS)

QUEUED, READY, RUNNING, DEFERRED, DONE = range(5)
# what a recording run keeps on the rank's context: every thread's copy gets
# the same (the run's Recording, and the transport an explored run steps
# through)
FOLLOWED = ("_rec", "transport", "_signal", "_try_wait")


class TaskAbort(BaseException):
    """Raised in the orchestrating thread when a task failed: stop submitting."""


class Task:
    __slots__ = ("tid", "fn", "args", "name", "loc", "blocks", "left", "pending", "preds",
                 "dependents", "state", "waiter", "conds", "accesses", "after")

    def __init__(self, tid, fn, args, name, loc, blocks, waiter):
        self.tid = tid
        self.fn = fn
        self.args = args
        self.name = name
        self.loc = loc
        self.blocks = blocks
        self.left = blocks
        self.pending = 0
        self.preds = ()
        self.dependents = []
        self.state = QUEUED
        self.waiter = waiter
        self.conds = []                 # (cell, expected, WaitRecord) of defer_wait
        # what completing the TaskId runs before its dependents are released
        # (a defer=True collective's epilogue)
        self.after = ()
        self.accesses = []


class Agent:
    """One thread of the scheduler, as the snapshot shows it."""

    __slots__ = ("index", "kind", "task", "block", "wait", "cond")

    def __init__(self, index, kind):
        self.index, self.kind = index, kind
        self.task = None
        self.block = 0
        self.wait = None                # the WaitRecord it is blocked on
        self.cond = 0                   # watcher: index of the condition it waits for


class _TaskBlocked(WaitHooks):
    """A wait of a core or watcher: publish it among the scheduler's agents."""

    __slots__ = ("sched", "agent", "record", "rc", "start")

    def __init__(self, sched, agent, record, rc):
        self.sched, self.agent, self.record, self.rc = sched, agent, record, rc

    def blocked(self):
        self.start = time.monotonic()
        s = self.sched
        with s.lock:
            self.agent.wait = self.record
            s._idle_agent()

    def check(self, value):
        C.check_wait(self.rc, self.start, self.record, value, self.sched.aborted_exc)

    def unblocked(self):
        s = self.sched
        with s.lock:
            self.agent.wait = None
            s._wake_agent()


class Scheduler:
    def __init__(self, rc, cores: int, aborted_exc, task_window: int | None = None):
        self.rc = rc
        self.cores = cores
        self.aborted_exc = aborted_exc
        self.lock = threading.Lock()
        self.core_cv = threading.Condition(self.lock)
        self.watch_cv = threading.Condition(self.lock)
        self.main_cv = threading.Condition(self.lock)
        self.ready: deque = deque()     # (task, block) entries
        self.held: deque = deque()      # ready waiters without a deferred slot
        self.watch: deque = deque()     # deferred tasks not yet watched
        self.live: dict = {}            # tid -> Task, until completed
        self.tracker = Tracker()
        self.next_tid = 1
        self.outstanding = 0
        self.slots = 0                  # admitted waiters (running or deferred)
        self.failure = None
        self.active = 1                 # agents not asleep; the orchestrating thread first
        self.core_idle = self.core_tokens = 0
        self.watch_idle = self.watch_tokens = 0
        self.main_sleeping = False
        self.spare = 0                  # ready entries the running core will take itself
        self.borrow = 0                 # the completing watcher would run one on a free slot
        self.borrowed = 0               # slots of idle cores that watchers run tasks on
        self.claim = 0                  # the thread ending a waiter's body would watch it
        self.claimed = None             # ... and this is the one it watches
        self.free_slots: list = []      # core agents no thread runs a task on
        self.stopping = False
        self.threads: list = []
        self.agents: list = []
        self.core_agents: list = []
        self.watchers: list = []
        # RunConfig.ring_task_window: tasks in flight at most; a submission
        # beyond it waits (asleep, as an idle agent) for one to complete
        self.window = task_window
        self.contexts: list = []        # each thread's copy of the rank's context
        self.cls = None                 # the class the contexts have (a run's recording one)
        self.followed = ()              # ... and the rank context's FOLLOWED objects they have
        self.held_hooks = ()            # the recorders told of conditions true at body end
        # an explored run's: cores start tasks only while the orchestrating
        # thread sleeps, so which task a core takes next never depends on how
        # far the orchestration got (see ``_gate_opens``)
        self.gated = False
        # an explored run's: (ready entries) -> the index of the one to run
        # next (default: the first, in submission order)
        self.chooser = None

    # ------------------------------------------------------------ dispatches
    def begin(self):
        """A dispatch of an orchestration function starts submitting."""
        with self.lock:
            self.failure = None
            self.gated = False          # an explored run's context sets it again
            self.chooser = None
            # a run that records gives each run its own recorders: follow a
            # new one even when the class is the last run's
            if type(self.rc) is not self.cls or \
                    any(a is not b for a, b in zip(self._followed(), self.followed)):
                self._follow_class()
            if not self.core_agents:
                for _ in range(self.cores):
                    self._thread(self._core, "core", self.core_agents)
                # the core agents are slots, taken by whichever thread runs a task
                self.free_slots = list(reversed(self.core_agents))
        return self

    def submit(self, fn, args, name, loc, deps=(), acc=(), blocks=1, waiter=False,
               manual=False) -> int:
        """Queue a task; returns its TaskId.  ``acc``: (value, mode, offsets,
        extents) per tracked argument; ``deps``: TaskIds or arrays of them."""
        with self.lock:
            if self.window is not None:
                self._wait_below(self.window)
            if self.failure is not None:
                raise TaskAbort()
            tid = self.next_tid
            self.next_tid += 1
            t = Task(tid, fn, args, name, loc, max(int(blocks), 0), waiter)
            preds = set()
            for i in explicit_ids(deps):
                p = self.live.get(i)
                if p is not None:
                    preds.add(p)
            for value, mode, offs, ext in acc:
                a = base_array(value)
                if a is not None:
                    self.tracker.add(t, mode, a, offs, ext, not manual, preds)
            preds.discard(t)
            t.preds = tuple(preds)
            for p in preds:
                p.dependents.append(t)
            t.pending = len(preds)
            self.live[tid] = t
            self.outstanding += 1
            if not preds:
                self._make_ready(t)
        return tid

    def _wait_below(self, limit: int):
        while self.outstanding >= limit and self.failure is None:
            self.main_sleeping = True
            self._gate_opens()
            self._idle_agent()
            while self.main_sleeping:
                self.main_cv.wait()

    def _follow_class(self):
        """The rank's context switched to (or back from) a recording class for
        a run: switch every thread's copy too, with the run's recorders.
        Between dispatches no task runs, so no thread is inside one of its
        methods."""
        self.cls = type(self.rc)
        self.followed = self._followed()
        found = dict(zip(FOLLOWED, self.followed))
        for ctx in self.contexts:
            ctx.__class__ = self.cls
            for k, rec in found.items():
                if rec is None:
                    ctx.__dict__.pop(k, None)
                else:
                    setattr(ctx, k, rec)
        rec = found["_rec"]
        self.held_hooks = rec.conditions_held if rec is not None else ()

    def _followed(self) -> tuple:
        return tuple(self.rc.__dict__.get(k) for k in FOLLOWED)

    def close(self):
        """End of the orchestration function: wait until every task submitted
        completed (deferred ones included); raise the first task failure."""
        with self.lock:
            while self.outstanding and self.failure is None:
                self.main_sleeping = True
                self._gate_opens()
                self._idle_agent()
                while self.main_sleeping:
                    self.main_cv.wait()
            failure = self.failure
            self.tracker.release_arrays()    # no view of this call's memory outlives it
        if failure is not None:
            raise failure

    def abandon(self, exc):
        """The orchestration function raised ``exc``: stop starting tasks and
        give back what to raise (a task's failure if that is what stopped it)."""
        with self.lock:
            if self.failure is None:
                self.failure = exc
            failure = self.failure
        return failure if isinstance(exc, TaskAbort) else exc

    def shutdown(self):
        """Let idle cores and watchers exit and join them (a rank process
        simply exits; this is for schedulers that live in a longer process)."""
        with self.lock:
            self.stopping = True
            self.core_tokens += self.core_idle
            self.watch_tokens += self.watch_idle
            self.active += self.core_idle + self.watch_idle
            self.core_idle = self.watch_idle = 0
            self.core_cv.notify_all()
            self.watch_cv.notify_all()
        for th in self.threads:
            th.join()

    # ------------------------------------------------------------ bookkeeping (lock held)
    def _wake_agent(self):
        if self.active == 0:
            self.rc.control.set_state(self.rc.device, C.RUNNING)
        self.active += 1

    def _idle_agent(self):
        self.active -= 1
        if self.active == 0:
            taskplane.publish(self.rc, self)

    def _make_ready(self, t):
        if t.waiter:
            if self.slots >= DEFER_SLOTS:
                self.held.append(t)
                return
            self.slots += 1
        t.state = READY
        for b in range(t.blocks):
            self.ready.append((t, b))
        if not t.blocks:
            self._body_done(t)
            return
        wake = t.blocks
        if self.spare:                   # the core that completed a task takes one itself
            taken = min(self.spare, wake)
            self.spare -= taken
            wake -= taken
        elif self.borrow and self.core_idle:
            # the watcher that completed a task runs one block itself, on the
            # slot of an idle core that stays asleep: no second wake-up
            self.borrow = 0
            self.core_idle -= 1
            self.borrowed += 1
            wake -= 1
        for _ in range(min(wake, self.core_idle)):
            self._wake_core()

    def _wake_core(self):
        self.core_idle -= 1
        self.core_tokens += 1
        self._wake_agent()
        self.core_cv.notify()

    def _return_slot(self, slot):
        """A watcher gives back the slot it borrowed: that core is idle again,
        and is woken when ready entries have no core coming for them (or to
        exit, after ``shutdown``)."""
        self.free_slots.append(slot)
        self.borrowed -= 1
        self.core_idle += 1
        if self.stopping or (self.failure is None and len(self.ready) > self.core_tokens):
            self._wake_core()

    def _body_done(self, t):
        # a task with an epilogue (a defer=True collective) always goes to a
        # watcher: the epilogue's signal adds run there, outside the lock (an
        # explored run steps them like any other signal operation)
        if t.conds and (t.after or not self._all_hold(t, t.conds)):
            t.state = DEFERRED
            if self.claim:               # a watcher ran the body: it watches it next
                self.claim = 0
                self.claimed = t
                return
            self.watch.append(t)
            if self.watch_idle:
                self.watch_idle -= 1
                self.watch_tokens += 1
                self._wake_agent()
                self.watch_cv.notify()
            elif len(self.watchers) < DEFER_SLOTS + self.cores:
                # one per deferred task, plus one per slot a watcher may be
                # running a task on (and not watching)
                self._wake_agent()       # counted active from birth
                self._thread(self._watcher, "watcher", self.watchers)
            return
        self._complete(t)

    def _all_hold(self, t, conds) -> bool:
        """Every condition already true (a counter that arrived before the
        waiter registered): the TaskId completes at once, no watcher involved."""
        read = self.rc.transport.read_cell
        held = all(holds(CMP_GE_U, read(cell), expected) for cell, expected, _ in conds)
        if held and self.held_hooks:
            for hook in self.held_hooks:
                hook(t, conds, read)
        return held

    def _complete(self, t):
        if t.after:
            # a defer=True collective on a domain of one rank: nothing to wait
            # for, steps and an epilogue with no cells
            after, t.after = t.after, ()
            for step in after:
                step()
        t.state = DONE
        t.fn = t.args = None
        self.live.pop(t.tid, None)
        self.tracker.forget(t)
        self.outstanding -= 1
        if t.waiter:
            self.slots -= 1
            while self.held and self.slots < DEFER_SLOTS:
                self._make_ready(self.held.popleft())
        for d in t.dependents:
            d.pending -= 1
            if d.pending == 0:
                self._make_ready(d)
        t.dependents = []
        if self.outstanding == 0 or self.outstanding + 1 == self.window:
            self._wake_main()

    def _gate_opens(self):
        """The orchestrating thread goes to sleep: in a gated scheduler, wake
        idle cores for the tasks it made ready meanwhile."""
        if self.gated:
            for _ in range(min(len(self.ready) - self.core_tokens, self.core_idle)):
                self._wake_core()

    def _wake_main(self):
        if self.main_sleeping:
            self.main_sleeping = False
            self._wake_agent()
            self.main_cv.notify()

    def _failed(self, exc):
        if self.failure is None:
            self.failure = exc
        self._wake_main()

    # ------------------------------------------------------------ threads
    def _thread(self, target, kind, group):
        agent = Agent(len(group), kind)
        self.agents.append(agent)
        group.append(agent)
        ctx = copy.copy(self.rc)
        ctx.sites = {}                   # a site's reused tiles are its thread's own
        ctx.agent = agent
        ctx.sched = self
        self.contexts.append(ctx)
        th = threading.Thread(target=target, args=(agent, ctx), daemon=True,
                              name=f"tilecomm-{kind}-{agent.index}")
        self.threads.append(th)
        if kind == "core":
            self.active += 1             # cores start active and go idle at once
        th.start()

    def hooks(self, agent, record, rc):
        return _TaskBlocked(self, agent, record, rc)

    def _run(self, ctx, slot, t, b):
        """Run block ``b`` of ``t`` on core slot ``slot`` (lock held on entry
        and return); the exception it raised, or None."""
        t.state = RUNNING
        slot.task, slot.block = t, b
        ctx.agent = slot                 # its waits are published as that core's
        self.lock.release()
        try:
            # what the worker sets per dispatch, as of this task's dispatch
            ctx.task, ctx.block_idx = t, b
            ctx.func_id, ctx.image = self.rc.func_id, self.rc.image
            t.fn(ctx, *t.args)
            exc = None
        except BaseException as e:       # reported by the orchestrating thread
            exc = e
        self.lock.acquire()
        slot.task = None
        if exc is not None:
            exc.task_name, exc.task_loc = t.name, t.loc
            self._failed(exc)
        return exc

    def _core(self, agent, ctx):
        lock = self.lock
        slot = None                      # the core agent this thread runs tasks as
        lock.acquire()
        try:
            while True:
                while not self.ready or self.failure is not None or \
                        (self.gated and not self.main_sleeping):
                    if slot is not None:
                        self.free_slots.append(slot)
                        slot = None
                    if self.stopping:
                        return
                    self.core_idle += 1
                    self._idle_agent()
                    while not self.core_tokens:
                        self.core_cv.wait()
                    self.core_tokens -= 1
                if slot is None:
                    # awake cores + borrowed slots never exceed the cores, so
                    # one is free
                    slot = self.free_slots.pop()
                entry = self._take_ready()
                if entry is None:
                    continue
                t, b = entry
                if self._run(ctx, slot, t, b) is not None:
                    continue
                t.left -= 1
                if t.left == 0:
                    # a dependent made ready here is picked up by this core on its
                    # next turn: waking an idle one would only make them race
                    self.spare = 1
                    self._body_done(t)
                    self.spare = 0
        finally:
            lock.release()

    def _take_ready(self):
        """The ready entry to run next (lock held): the first, or an explored
        run's choice."""
        if self.chooser is None:
            return self.ready.popleft()
        try:
            i = self.chooser(list(self.ready))
        except BaseException as exc:     # the run is stopping (or did not replay)
            self._failed(exc)
            return None
        entry = self.ready[i]
        del self.ready[i]
        return entry

    def _borrowed(self, ctx):
        """A watcher completed a task and holds an idle core's slot (lock
        held): run ready tasks on it as that core would, until none is ready
        or one of them deferred itself (this thread then watches that one).
        Returns the task to watch, or None."""
        slot = self.free_slots.pop()
        mine = None
        while self.ready and self.failure is None and mine is None:
            entry = self._take_ready()
            if entry is None:
                break
            t, b = entry
            if self._run(ctx, slot, t, b) is not None:
                break
            t.left -= 1
            if t.left == 0:
                self.spare = self.claim = 1
                self._body_done(t)
                self.spare = self.claim = 0
                mine, self.claimed = self.claimed, None
        self._return_slot(slot)
        return mine

    def _watcher(self, agent, ctx):
        lock = self.lock
        lock.acquire()
        mine = None                      # a deferred task this thread ran itself
        try:
            while True:
                if mine is None:
                    while not self.watch:
                        if self.stopping:
                            return
                        self.watch_idle += 1
                        self._idle_agent()
                        while not self.watch_tokens:
                            self.watch_cv.wait()
                        self.watch_tokens -= 1
                    t = self.watch.popleft()
                else:
                    t, mine = mine, None
                agent.task = t
                ctx.agent = agent
                ctx.func_id, ctx.image = self.rc.func_id, self.rc.image
                lock.release()
                try:
                    conds = t.conds
                    while True:
                        for i, (cell, expected, record) in enumerate(conds):
                            agent.cond = i
                            ctx.wait_cell(cell, CMP_GE_U, expected, record)
                        # every condition holds: the next step of the task's
                        # completion (a defer=True collective's work after a
                        # barrier generation, or its epilogue), before the
                        # TaskId completes and releases anything ordered
                        # after it.  A step may leave conditions of its own.
                        if not t.after:
                            break
                        step, t.after = t.after[0], t.after[1:]
                        conds = step() or ()
                        if conds:
                            with lock:           # a snapshot reads them under the lock
                                t.conds, agent.cond = conds, 0
                    exc = None
                except BaseException as e:
                    exc = e
                lock.acquire()
                agent.task = None
                if exc is not None:
                    exc.task_name, exc.task_loc = t.name, t.loc
                    self._failed(exc)
                    continue
                self.borrow = 1
                self._complete(t)
                took, self.borrow = not self.borrow, 0
                if took:
                    mine = self._borrowed(ctx)
        finally:
            lock.release()
