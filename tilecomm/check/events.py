"""The events a race-checking run records on each rank, as plain tuples.

A rank appends one tuple per fact to one list, from every thread it runs
(``list.append`` is atomic); the first two fields are the event's kind and
its thread: ``MAIN`` (the rank's dispatch thread, which runs dispatches in
order and orchestrates their tasks) or ``(task id, block index)`` for a
block of a task on one of the rank's cores.  Everything else is numbers,
strings and tuples of them, so a rank can write the list as it is.

========  ==================================================================
ACCESS    (ACCESS, thread, (buffer id, owner), runs, kind, op, line, who,
          shape, itemsize, iteration, parts): bytes ``runs`` ((start, end)
          pairs, sorted) of rank ``owner``'s copy of the buffer, viewed as
          ``shape`` (a plain tensor's buffer id: ``(PLAIN, rank, address)``);
          the thread's accesses of one copy, kind, op and line between two
          of its synchronisations are one event, ``runs`` their union and
          ``parts`` ((iteration, runs), ...) the iteration of each, or None
          when they were all in one iteration (``iteration``)
NOTIFY    (NOTIFY, thread, cell, op, value, result, seq, line, who, prev,
          iteration): a notify into ``cell`` = (buffer id, owner, byte
          offset); ``seq`` its place in the cell's modification order,
          ``result`` the value it left, ``prev`` the value it changed
WAIT      (WAIT, thread, cell, cmp, expected, seen, line, who, label,
          iteration): a satisfied wait; ``seen`` the modification order's
          length when it returned, ``label`` the cell as the program names it
COND      (COND, ("cond", task id), cell, cmp, expected, seen, line, who,
          label): a deferred condition of the task found true (its TaskId
          completes)
SUBMIT    (SUBMIT, thread, task id, name, blocks, predecessors, line)
CLOSE     (CLOSE, thread, task ids[, what]): the thread waited for those
          tasks (``what``: the wait in words, when it is not the end of a
          task scope)
BARRIER   (BARRIER, thread, key, members, line, op, me, credits): one
          barrier generation of a collective; ``key`` names it on every
          member, ``me`` is this member's domain rank and ``credits[src]``
          the byte offset in its signal copy where ``src``'s arrival lands
DONE      (DONE, thread, seq): the rank completed its dispatch ``seq``
AFTER     (AFTER, thread, rank, seq): waited for that rank's dispatch
END       (END, thread): a task block's body ended
DEFER     (DEFER, thread): the task registered one more deferred condition
BASE      (BASE, None, counts): the sequencer's count per stripe when the
          rank began the run (a rank's first event)
========  ==================================================================

An asynchronous put's transfer is a task of one block whose id is
``(ASYNC_TASK, k)``: SUBMIT at the issue, its accesses and END on the
block's thread, CLOSE at the wait of its event.

``iteration`` is the iteration of the loops the op was in, as a report
prints it (``step=2``; "" outside loops; an older log's tuple may end
before it).  A thread reads it for its first ``ITERATIONS_READ`` accesses
of one line, kind and copy between two of its synchronisations; the
gathered event's last part then holds the bytes of the rest, as "``last``
or later" (a loop of many rounds costs a frame walk per round otherwise,
most of a checked run's time).

Notifies are numbered per stripe of the sequencer, a signal cell's stripe
being ``stripe_of(cell)``; the numbers of one stripe are consecutive.
"""
from bisect import bisect_right

ACCESS, NOTIFY, WAIT, COND, SUBMIT, CLOSE, BARRIER, DONE, AFTER, END, DEFER, BASE = range(12)

MAIN = "main"
# the first field of the task id of an asynchronous put's transfer
ASYNC_TASK = "async"
# the buffer id of a plain tensor (a dispatch's array argument) is
# (PLAIN, rank, address): its accesses race only with its own rank's
PLAIN = "tensor"

# a thread's accesses of one line, kind and copy between two of its
# synchronisations whose loop iteration is read (``iteration`` above)
ITERATIONS_READ = 64

# stripes of the sequencer (each a ticket lock and a count in the control block)
SEQ_STRIPES = 64


def iteration_of(ev, at: int) -> str:
    """An event's iteration text, at index ``at`` ("" if it has none)."""
    it = ev[at] if len(ev) > at and ev[at] else ""
    return it if type(it) is str else f"{it[0]} or later"


def parts_of(ev) -> tuple | None:
    """The ((iteration, runs), ...) of an ACCESS event of several iterations."""
    return ev[11] if len(ev) > 11 else None


def covered(mine: list, runs) -> bool:
    """Every byte of sorted runs ``runs`` lies in sorted, disjoint ``mine``."""
    for lo, hi in runs:
        i = bisect_right(mine, (lo, _END)) - 1
        if i < 0 or mine[i][1] < hi:
            return False
    return True


def merge_runs(mine: list, runs) -> None:
    """``mine`` (sorted, disjoint runs) becomes its union with ``runs``, in
    place: a loop's accesses element after element cost an append or a
    bisection each, not a sort of everything so far."""
    for lo, hi in runs:
        if not mine or lo >= mine[-1][0]:
            if mine and lo <= mine[-1][1]:     # the common case: a loop going forward
                if hi > mine[-1][1]:
                    mine[-1] = (mine[-1][0], hi)
            else:
                mine.append((lo, hi))
            continue
        i = bisect_right(mine, (lo, _END))
        if i and mine[i - 1][1] >= lo:
            i -= 1
            lo, hi = mine[i][0], max(hi, mine[i][1])
        j = i
        while j < len(mine) and mine[j][0] <= hi:
            hi = max(hi, mine[j][1])
            j += 1
        mine[i:j] = [(lo, hi)]


# past every byte: (lo, _END) sorts after each run starting at lo
_END = float("inf")


def stripe_of(cell: tuple) -> int:
    """The sequencer stripe of a signal cell's key (ints and tuples of them
    hash alike in every process)."""
    return hash(cell) % SEQ_STRIPES

# access kinds: a plain read or write, an atomic modification (an AtomicAdd
# store, a notify), an atomic read (a wait's look at its cell)
READ, WRITE, ATOMIC, SYNC_READ = range(4)
KIND_NAMES = ("read", "write", "atomic", "read")

# the kinds each kind races with (at least one writes, not both atomic)
CONFLICTS = ({WRITE, ATOMIC}, {READ, WRITE, ATOMIC, SYNC_READ}, {READ, WRITE}, {WRITE})


def dominates(later: int, earlier: int) -> bool:
    """Whatever races with an ``earlier`` access races with a ``later`` one
    over the same bytes (so the earlier can be forgotten once the later is
    ordered after it)."""
    return CONFLICTS[earlier] <= CONFLICTS[later]


def byte_runs(region, base: int, addr: int | None = None) -> tuple:
    """The bytes an ndarray view ``region`` covers, as sorted (start, end)
    pairs relative to address ``base``: one pair when the view is contiguous,
    else one per innermost contiguous run.  ``addr``: the view's first
    address, when the caller has it already."""
    n = region.size
    if n == 0:
        return ()
    start = (region.__array_interface__["data"][0] if addr is None else addr) - base
    if region.flags.c_contiguous:
        return ((start, start + region.nbytes),)
    shape, strides, item = region.shape, region.strides, region.itemsize
    # the innermost dims that are packed form one run
    k = len(shape)
    run = item
    while k > 0 and (shape[k - 1] == 1 or strides[k - 1] == run):
        run *= shape[k - 1]
        k -= 1
    runs = []

    def walk(d, off):
        if d == k:
            runs.append((off, off + run))
            return
        for i in range(shape[d]):
            walk(d + 1, off + i * strides[d])

    walk(0, start)
    runs.sort()
    merged = [runs[0]]
    for a, b in runs[1:]:
        if a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(b, merged[-1][1]))
        else:
            merged.append((a, b))
    return tuple(merged)


__all__ = ["ACCESS", "AFTER", "ASYNC_TASK", "ATOMIC", "BARRIER", "BASE", "CLOSE", "COND",
           "CONFLICTS", "DEFER", "DONE", "END", "ITERATIONS_READ", "KIND_NAMES", "MAIN", "NOTIFY",
           "PLAIN", "READ", "SEQ_STRIPES", "SUBMIT", "SYNC_READ", "WAIT", "WRITE", "byte_runs",
           "covered", "dominates", "iteration_of", "merge_runs", "parts_of", "stripe_of"]
