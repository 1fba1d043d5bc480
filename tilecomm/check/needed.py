"""Which notifies a satisfied wait needs, whatever order they took effect in.

A wait is ordered after a notify only when the notify is *needed*: when no
execution the program allows could satisfy the condition without it.  The
modification order one run happened to see is one such execution, not the
only one, so the rule is decided over all of them, from one run's facts:

* the cell's notifies of the call, each with its vector clock (``_Replay``);
* the waiter's clock just before the wait, and its own thread.

Against the wait, each notify ``n`` is

* **forced** (F) -- happens-before the wait: in every execution it took
  effect before the waiter looked (the waiter's own earlier notifies, and
  those it is already ordered after);
* **later** -- happens-after the wait: in no execution can it satisfy it;
* **optional** (O) -- neither: some execution has it land before the wait
  and some after.

``n`` in O is needed iff the condition cannot hold in any execution without
``n``.  Leaving ``n`` out leaves out every notify that happens-after it (a
thread's second credit cannot land without its first), so the question is
whether the values of F together with O minus ``n`` and its successors can
satisfy the condition:

* with AtomicAdds only the value is the start value plus the adds that
  landed; for ``Ge`` the best an execution can do is every forced add and
  every positive optional one (a negative optional add may land late);
* with Sets, any Set that can land last starts the value afresh, followed by
  the adds that may come after it; the value before the call's first notify
  (``prev``) is the start when no Set lands;
* ``Eq`` asks for one exact value: each subset of the optional adds is tried
  (up to ``MAX_EQ_OPTIONAL`` of them; beyond, the condition is taken as
  reachable, which can only report more, never hide a race).

For monotone counters (non-negative adds, ``Ge``) this is exact: an
execution exists where exactly the notifies of F and of a downward-closed
part of O land first, in happens-before order, and nothing else does.  With
Sets and negative adds it is an over-approximation of what can happen
(some bases or subsets may not be schedulable), so a notify is left out
only when needed in the over-approximation's terms: the rule may call a
correct protocol racy where it leans on an order the over-approximation
does not see, never the reverse.  The clocks it reads come from a replay
that itself used some choice of needed notifies, so the replay is repeated
with the needed sets until they no longer change (``races.find_races``).

A wait needs nothing when its condition already held on the cell's value
before the call's first notify, or can be reached from forced notifies and
optional ones that are not needed: "done" announced by a Set of the value
the cell starts with, or a flag kept from an earlier call whose threshold
was not raised, orders nothing.
"""
from __future__ import annotations

from itertools import combinations

from .. import _native_core as native
from ..waits import CMP_EQ, holds

NOTIFY_ADD = native.OP_ADD
MAX_EQ_OPTIONAL = 12


class Placed:
    """A notify of the cell with its clock: ``entry`` (``races._Notify``),
    ``vc`` its vector clock, ``thread`` its thread's key, ``epoch`` its own
    component."""

    __slots__ = ("entry", "vc", "thread", "epoch")

    def __init__(self, entry, vc, thread):
        self.entry, self.vc, self.thread = entry, vc, thread
        self.epoch = vc.get(thread, 0)

    def before(self, other: "Placed") -> bool:
        """Happens-before ``other`` (or is it)."""
        return other.vc.get(self.thread, 0) >= self.epoch

    @property
    def add(self) -> bool:
        return self.entry.op == NOTIFY_ADD


def needed(placed: list, start, waiter, before: dict, cmp: int, expected: int) -> tuple:
    """(the needed notifies, the optional ones not needed) of a wait, each a
    list of ``Placed``.  ``placed``: the cell's notifies of the call;
    ``start``: the cell's value before the first (None: unknown, taken as
    not satisfying); ``waiter``: the waiting thread's key, ``before`` its
    clock just before the wait."""
    mine = before.get(waiter, 0)
    forced, optional = [], []
    for p in placed:
        # the waiter's own notifies: before the wait iff at an earlier epoch
        # (the wait and what follows it up to the next release share one)
        if p.epoch < mine if p.thread == waiter else before.get(p.thread, 0) >= p.epoch:
            forced.append(p)
        elif p.vc.get(waiter, 0) < mine:           # not after the wait: may land before it
            # (a release publishes the epoch its thread is in, then moves on:
            # only a release after the wait publishes the waiter's epoch)
            optional.append(p)
    # One thread's notifies are ordered by its program: leaving one out leaves
    # out every later one, so whether a thread's notify is needed can only
    # turn from yes to no along its chain -- the needed ones are a prefix,
    # found by bisection (a counter's thousands of adds cost a few checks).
    chains: dict = {}
    for p in optional:
        chains.setdefault(p.thread, []).append(p)
    need, spare = [], []
    for chain in chains.values():
        chain.sort(key=lambda p: p.epoch)
        lo, hi = 0, len(chain)              # chain[:lo] needed, chain[hi:] not
        while lo < hi:
            mid = (lo + hi) // 2
            n = chain[mid]
            rest = [m for m in optional if m is not n and not n.before(m)]
            if can_hold(start, forced, rest, cmp, expected):
                hi = mid
            else:
                lo = mid + 1
        need.extend(chain[:lo])
        spare.extend(chain[lo:])
    return need, spare


def can_hold(start, forced: list, optional: list, cmp: int, expected: int) -> bool:
    """Whether some execution where every ``forced`` notify and any of the
    ``optional`` ones landed leaves a value satisfying the condition."""
    for base, fixed, free in _scenarios(start, forced, optional):
        value = base + sum(p.entry.value for p in fixed)
        if cmp == CMP_EQ:
            if _reaches(value, [p.entry.value for p in free], expected):
                return True
        elif holds(cmp, value + sum(p.entry.value for p in free if p.entry.value > 0),
                   expected):
            return True
    return False


def _scenarios(start, forced, optional):
    """(start value, adds that must follow it, adds that may) per candidate
    for the last Set to land, and the start of the call when none does."""
    sets_forced = [p for p in forced if not p.add]
    if not sets_forced and start is not None:
        yield start, [p for p in forced if p.add], [p for p in optional if p.add]
    adds = [(p, True) for p in forced if p.add] + [(p, False) for p in optional if p.add]
    for s in sets_forced + [p for p in optional if not p.add]:
        # a Set that happens-before another forced Set is never the last
        if any(s is not o and s.before(o) for o in sets_forced):
            continue
        fixed, free = [], []
        for p, is_forced in adds:
            if s.before(p):             # lands after the Set: counted if it lands
                (fixed if is_forced else free).append(p)
            elif not p.before(s):       # unordered with it: may land after it
                free.append(p)
        yield s.entry.value, fixed, free


def _reaches(value: int, adds: list, expected: int) -> bool:
    if len(adds) > MAX_EQ_OPTIONAL:
        return True
    for k in range(len(adds) + 1):
        for part in combinations(adds, k):
            if value + sum(part) == expected:
                return True
    return False


__all__ = ["MAX_EQ_OPTIONAL", "Placed", "can_hold", "needed"]
