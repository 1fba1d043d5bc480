"""The task scheduler and its dependency inference, in one process: region
overlap against numpy's own answer, ordering, explicit edges, deferred
completion on real int32 cells, the 64-slot cap, failures, quiescence."""
import threading
import time
import types

import numpy as np
import pytest

from tilecomm import _native_core as native
from tilecomm.runtime.rank import scheduler as S
from tilecomm.runtime import taskplane
from tilecomm.runtime.rank.deps import Access, Tracker, region
from tilecomm.transport.shm import SPIN_WINDOW_NS, sleep_wait


# ------------------------------------------------------------------ overlap
def access(a, offsets, extents):
    off, shape = region(a, offsets, extents)
    return Access(None, "w", a.__array_interface__["data"][0] + off, shape, a.strides,
                  a.itemsize, 0)


def test_region_overlap_never_misses_what_numpy_sees_and_is_exact_for_boxes():
    rng = np.random.default_rng(0)
    m = np.zeros((6, 10), np.float32)
    for _ in range(2000):
        boxes = []
        for _ in range(2):
            r, c = rng.integers(0, 6), rng.integers(0, 10)
            h, w = rng.integers(1, 7 - r), rng.integers(1, 11 - c)
            boxes.append(((r, c), (h, w)))
        (o1, e1), (o2, e2) = boxes
        v1 = m[o1[0]:o1[0] + e1[0], o1[1]:o1[1] + e1[1]]
        v2 = m[o2[0]:o2[0] + e2[0], o2[1]:o2[1] + e2[1]]
        assert access(m, o1, e1).overlaps(access(m, o2, e2)) == np.shares_memory(v1, v2), boxes


def test_views_of_different_layouts_are_ordered_conservatively():
    m = np.zeros((4, 8), np.int32)
    whole = access(m, None, None)
    t = m.T                                   # another layout of the same bytes
    other = Access(None, "w", t.__array_interface__["data"][0], t.shape, t.strides,
                   t.itemsize, 0)
    assert whole.overlaps(other) and other.overlaps(whole)
    far = np.zeros((4, 8), np.int32)
    assert not whole.overlaps(access(far, None, None))


class _Task:
    def __init__(self):
        self.accesses = []


@pytest.mark.parametrize("first,second,ordered", [
    ("r", "r", False), ("r", "w", True), ("w", "r", True), ("w", "w", True)])
def test_tracker_rules(first, second, ordered):
    m = np.zeros((2, 4), np.float32)
    tr, a, b = Tracker(), _Task(), _Task()
    preds = set()
    tr.add(a, first, m, None, None, True, set())
    tr.add(b, second, m, (0, 0), (1, 4), True, preds)
    assert (a in preds) == ordered
    preds = set()
    c = _Task()
    tr.add(c, "w", m, (1, 0), (1, 4), True, preds)       # row 1: touches a only
    assert preds == {a}                                   # row 1 is not b's row 0
    tr.forget(a)
    preds = set()
    tr.add(_Task(), "w", m, None, None, True, preds)
    assert a not in preds                                  # completed: forgotten


# ------------------------------------------------------------------ an in-process scheduler
class Cells:
    """int32 cells in this process's memory, with the transport calls the
    scheduler and its contexts use."""

    def __init__(self, n=4):
        self.mem = np.zeros(n, np.int32)
        self.base = self.mem.__array_interface__["data"][0]

    def cell(self, i):
        return (self.base + 4 * i, 0)

    def read_cell(self, cell):
        return native.load_i32(cell[0])

    def set(self, i, v):
        native.notify_i32(self.base + 4 * i, 1, v, 0)

    def try_wait(self, cell, cmp, expected, spin):
        return native.wait_i32(cell[0], cmp, expected, 0, SPIN_WINDOW_NS, spin)[0]

    def wait(self, cell, cmp, expected, hooks):
        sleep_wait(cell[0], cmp, expected, 0, hooks)


class Ctx:
    """What the scheduler needs of a rank context."""

    agent = sched = task = None
    block_idx = 0

    def __init__(self, cells):
        self.device, self.func_id, self.image, self.spin = 0, 0, None, 100
        self.transport = cells
        self._try_wait = cells.try_wait
        self.knobs = types.SimpleNamespace(wait_timeout_s=0)
        self.control = types.SimpleNamespace(set_state=lambda *a: None, aborted=lambda: False)

    def wait_cell(self, cell, cmp, expected, record):
        if self._try_wait(cell, cmp, expected, self.spin):
            return
        self.transport.wait(cell, cmp, expected, self.sched.hooks(self.agent, record, self))

    def defer(self, cell, expected):
        self.task.conds.append((cell, expected, None))


@pytest.fixture
def sched(monkeypatch):
    blocked = []
    monkeypatch.setattr(taskplane, "publish", lambda rc, s: blocked.append(
        [(a.task.name, a.wait) for a in s.core_agents if a.task is not None]))
    cells = Cells()
    s = S.Scheduler(Ctx(cells), 3, RuntimeError)
    s.cells, s.blocked = cells, blocked
    s.begin()
    yield s
    s.shutdown()


def test_chain_runs_in_dependency_order(sched):
    m = np.zeros((1, 1), np.int64)
    seen = []

    def step(ctx, i):
        seen.append(i)
        m[0, 0] = m[0, 0] * 10 + i
    for i in range(1, 8):
        sched.submit(step, (i,), "step", i, (), ((m, "w", None, None),))
    sched.close()
    assert seen == list(range(1, 8)) and m[0, 0] == 1234567


def test_explicit_deps_and_task_id_arrays(sched):
    gate = threading.Event()
    order = []

    def slow(ctx):
        gate.wait(5)
        order.append("slow")

    def after(ctx):
        order.append("after")
    a = sched.submit(slow, (), "slow", 0)
    ids = np.array([a, -1], np.int64)                      # -1: names no task
    sched.submit(after, (), "after", 1, (ids,), manual=True)
    sched.submit(lambda ctx: gate.set(), (), "opener", 2)
    sched.close()
    assert order == ["slow", "after"]


def test_satisfied_conditions_complete_without_a_watcher(sched):
    sched.cells.set(0, 5)
    done = []

    def waiter(ctx):
        ctx.defer(sched.cells.cell(0), 5)
    t = sched.submit(waiter, (), "waiter", 0, waiter=True)
    sched.submit(lambda ctx: done.append(1), (), "consumer", 1, (t,))
    sched.close()
    assert done == [1] and sched.watchers == []


def test_deferred_task_completes_when_the_counter_arrives(sched):
    got = []

    def waiter(ctx):
        ctx.defer(sched.cells.cell(1), 3)
        ctx.defer(sched.cells.cell(2), 1)
    t = sched.submit(waiter, (), "waiter", 0, waiter=True)
    sched.submit(lambda ctx: got.append(sched.cells.mem.tolist()), (), "consumer", 1, (t,))

    def publish(ctx):
        sched.cells.set(2, 1)
        sched.cells.set(1, 3)
    sched.submit(publish, (), "publisher", 2)
    sched.close()
    assert got and got[0][1] == 3 and got[0][2] == 1


def test_at_most_64_waiters_are_admitted_and_the_rest_are_held(sched):
    n = S.DEFER_SLOTS + 6
    high = []

    def waiter(ctx, k):
        high.append(sched.slots)
        ctx.defer(sched.cells.cell(3), k + 1)
    for k in range(n):
        sched.submit(waiter, (k,), "waiter", k, waiter=True)

    def count_up(ctx):
        for v in range(1, n + 1):
            sched.cells.set(3, v)
    sched.submit(count_up, (), "publisher", n)
    sched.close()
    assert max(high) <= S.DEFER_SLOTS and len(high) == n
    assert len(sched.watchers) <= S.DEFER_SLOTS


def test_a_failing_task_stops_the_function_and_is_named(sched):
    def bad(ctx):
        raise ValueError("boom")
    sched.submit(bad, (), "bad_task", 7)
    with pytest.raises(ValueError) as ei:
        sched.close()
    assert ei.value.task_name == "bad_task" and ei.value.task_loc == 7
    with pytest.raises(S.TaskAbort):
        sched.submit(lambda ctx: None, (), "later", 8)


def test_quiescence_is_published_once_every_agent_sleeps(sched):
    def waits(ctx):
        ctx.wait_cell(sched.cells.cell(0), 1, 9, "record")
    sched.submit(waits, (), "blocked_task", 3)
    t = threading.Thread(target=sched.close)
    t.start()
    deadline = 200
    while not sched.blocked and deadline:
        threading.Event().wait(0.01)
        deadline -= 1
    assert sched.blocked[-1] == [("blocked_task", "record")]
    assert sched.active == 0
    sched.cells.set(0, 9)
    t.join(5)
    assert not t.is_alive()


# ------------------------------------------------------------------ releases
def _until(pred, limit=10.0):
    end = time.monotonic() + limit
    while not pred():
        assert time.monotonic() < end, "condition not reached"
        time.sleep(0.001)


def _deferred(s, tid):
    t = s.live.get(tid)
    return t is not None and t.state == S.DEFERRED


def test_the_watcher_that_sees_the_counter_runs_the_dependent_on_an_idle_cores_slot(sched):
    ran = []

    def waiter(ctx):
        ctx.defer(sched.cells.cell(1), 1)

    def consumer(ctx):
        ran.append((threading.current_thread().name, ctx.agent.kind, ctx.agent.task.name,
                    sched.borrowed, len(sched.free_slots)))
    t = sched.submit(waiter, (), "waiter", 0, waiter=True)
    sched.submit(consumer, (), "consumer", 1, (t,))
    _until(lambda: _deferred(sched, t))               # released by the watcher, not at once
    sched.cells.set(1, 1)
    sched.close()
    name, kind, task, borrowed, free = ran[0]
    # run by the watcher itself, as a core: one slot lent, the other two free
    assert name.startswith("tilecomm-watcher") and kind == "core" and task == "consumer"
    assert borrowed == 1 and free == sched.cores - 1
    assert sched.borrowed == 0 and len(sched.free_slots) == sched.cores


def _scheduler(monkeypatch, cores):
    monkeypatch.setattr(taskplane, "publish", lambda rc, s: None)
    cells = Cells()
    s = S.Scheduler(Ctx(cells), cores, RuntimeError)
    s.cells = cells
    return s.begin()


def test_a_release_never_runs_more_tasks_than_cores(monkeypatch):
    s = _scheduler(monkeypatch, 1)
    gate = threading.Event()
    lock, now, peak, ran = threading.Lock(), [0], [0], []

    def busy(fn):
        def body(ctx):
            with lock:
                now[0] += 1
                peak[0] = max(peak[0], now[0])
            try:
                fn(ctx)
            finally:
                with lock:
                    now[0] -= 1
        return body
    try:
        t = s.submit(busy(lambda ctx: ctx.defer(s.cells.cell(2), 1)), (), "waiter", 0,
                     waiter=True)
        s.submit(busy(lambda ctx: ran.append(threading.current_thread().name)), (),
                 "consumer", 1, (t,))
        _until(lambda: _deferred(s, t))
        s.submit(busy(lambda ctx: gate.wait(10)), (), "holder", 2)   # takes the only core
        _until(lambda: s.core_agents[0].task is not None)
        s.cells.set(2, 1)
        _until(lambda: t not in s.live)                  # the waiter completed ...
        time.sleep(0.05)
        assert ran == []                                 # ... and its dependent waits for the core
        gate.set()
        s.close()
        assert ran and ran[0].startswith("tilecomm-core") and peak[0] == 1
    finally:
        gate.set()
        s.shutdown()


def test_a_waiter_run_by_a_watcher_is_watched_by_that_watcher(sched):
    seen = []

    def first(ctx):
        ctx.defer(sched.cells.cell(1), 1)

    def second(ctx):
        seen.append(threading.current_thread().name)
        ctx.defer(sched.cells.cell(2), 1)

    def consumer(ctx):
        seen.append(threading.current_thread().name)
    a = sched.submit(first, (), "first", 0, waiter=True)
    b = sched.submit(second, (), "second", 1, (a,), waiter=True)
    sched.submit(consumer, (), "consumer", 2, (b,))
    _until(lambda: _deferred(sched, a))
    sched.cells.set(1, 1)
    _until(lambda: _deferred(sched, b))
    sched.cells.set(2, 1)
    sched.close()
    # one watcher did it all: no second watcher was woken or started for `second`
    assert len(seen) == 2 and seen[0] == seen[1] and seen[0].startswith("tilecomm-watcher")
    assert len(sched.watchers) == 1


def test_quiescence_counts_a_task_a_watcher_runs_as_a_core(sched):
    def waiter(ctx):
        ctx.defer(sched.cells.cell(1), 1)

    def blocks(ctx):
        ctx.wait_cell(sched.cells.cell(0), 1, 9, "record")
    t = sched.submit(waiter, (), "waiter", 0, waiter=True)
    sched.submit(blocks, (), "blocked_dependent", 1, (t,))
    closer = threading.Thread(target=sched.close)
    closer.start()
    _until(lambda: _deferred(sched, t))
    sched.cells.set(1, 1)
    try:
        _until(lambda: sched.blocked and sched.blocked[-1])
        # the snapshot shows it under a core with its wait, and every agent asleep
        assert sched.blocked[-1] == [("blocked_dependent", "record")]
        assert sched.active == 0 and sched.borrowed == 1
    finally:
        sched.cells.set(0, 9)
    closer.join(5)
    assert not closer.is_alive() and sched.borrowed == 0


def test_snapshot_counts_every_queued_task_and_lists_a_bounded_few(sched):
    gate = threading.Event()
    m = np.zeros((1, 1), np.int64)
    try:
        sched.submit(lambda ctx: gate.wait(10), (), "holder", 0, (), ((m, "w", None, None),))
        for i in range(100):
            sched.submit(lambda ctx: None, (), "queued", i + 1, (), ((m, "w", None, None),))
        _until(lambda: any(a.task is not None for a in sched.core_agents))
        with sched.lock:
            snap = taskplane.snapshot(sched)
        assert snap["counts"]["queued"] == 100 and len(snap["queued"]) == taskplane.LIST_MAX
        assert [e["task"] for e in snap["running"]] == ["holder"]
    finally:
        gate.set()
    sched.close()
