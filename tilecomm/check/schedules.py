"""Which orders of an explored run's steps are worth running: dynamic
partial-order reduction over the steps an explored run records, with a
bound on preemptions.

An explored run (``runtime/rank/exploring.py``) lets one rank move at a
time: at every visible operation (a notify, each check of a wait, each
access of window memory, a dispatch's end or a wait for one) the ranks stop,
and the rank that moves next is the schedule's choice.  The run records a
``Step`` per operation: who moved, who could have, and what the operation
touched.  A *schedule* is the list of ranks chosen, step by step; running a
prefix of one replays exactly that far (the ranks are deterministic between
steps), and a run past its prefix follows the default choice: the rank that
moved last, if it still can, else the lowest rank that can.

Two steps *depend* on each other when their order can change what either
does: they touch the same signal cell or overlapping bytes of one window
copy, and they are not both reads, nor both atomic adds (adds commute), nor
a ``Ge`` check that held followed by an add of >= 0 (it would hold with the
add landed first: a counter only grows).  A check that fails is made once,
and its rank then sleeps until a write satisfies it (``exploring.Turns``):
a failing check run again changes nothing, and the search would try it in
every order.  Steps of one rank keep
their order.  ``Search`` explores the schedules of one program in the
style of Flanagan and Godefroid's dynamic partial-order reduction: after
each run, for every step it finds the last earlier step of another rank
that it depends on and that does not happen before it, and asks for a run
in which the later step's rank moves first at that point (or, if that rank
could not move there, each rank that could).  Orders of independent steps
are never tried twice.

A *preemption* is a step where the rank that moved last could still move
and another is chosen.  A search at bound ``b`` runs no schedule with more
than ``b`` preemptions; choices it had to skip are counted in ``pruned``, so
a search that finished with nothing pruned has run every order of dependent
steps there is.
"""
from __future__ import annotations

from typing import NamedTuple

from ..waits import CMP_GE, CMP_GE_U

# what a step does to what it touches; PICK: the rank's core takes one of
# several ready tasks (or spmd blocks) next, or an asynchronous put's
# transfer lands at once or at the wait of its event
READ, WRITE, ADD, PICK = "read", "write", "add", "pick"


class Step(NamedTuple):
    """One visible operation of an explored run."""

    index: int          # its place in the run
    actor: int          # the rank that moved
    enabled: tuple      # the ranks that could have moved (sorted)
    effect: str         # READ / WRITE / ADD / PICK
    target: tuple       # ("cell", window, byte offset) / ("data", window) / ("done", rank)
                        # / ("tasks", rank) / ("transfer", rank)
    runs: tuple         # ((start, end), ...) bytes of a "data" target; () otherwise
    text: str           # what happened, as a line of a report
    # a PICK: the ready (task id, block) it chose among, or where an
    # asynchronous put's transfer lands ("transfer" target)
    options: tuple = ()
    picked: int = 0      # ... and the one it took (an index into options)
    # an ADD: (the value added,); a wait's check: (comparison, expected, whether it held)
    detail: tuple = ()


class Prefix(NamedTuple):
    """What a run is told to do: the rank chosen at each of its first steps,
    and at PICK steps the ready task taken, where not the first one
    (``picks``: (step index, option index) pairs)."""

    choices: tuple
    picks: tuple = ()


def dependent(a: Step, b: Step) -> bool:
    """Whether running ``b`` before ``a`` (steps of different ranks; ``a``
    came first) can change the outcome."""
    if a.target != b.target:
        return False
    if (a.effect == READ and b.effect == READ) or (a.effect == ADD and b.effect == ADD):
        return False
    if a.effect == READ and b.effect == ADD and _still_holds(a, b):
        return False
    if not a.runs:
        return True
    return _overlap(a.runs, b.runs)


def _still_holds(check: Step, add: Step) -> bool:
    """A wait's ``Ge`` check that held still holds with an add of >= 0 landed
    before it (a counter only grows): the two orders do the same."""
    d = check.detail
    return len(d) == 3 and d[2] and d[0] in (CMP_GE, CMP_GE_U) and bool(add.detail) and \
        add.detail[0] >= 0


def _overlap(x: tuple, y: tuple) -> bool:
    i = j = 0
    while i < len(x) and j < len(y):
        if x[i][0] < y[j][1] and y[j][0] < x[i][1]:
            return True
        if x[i][1] <= y[j][1]:
            i += 1
        else:
            j += 1
    return False


def preemptions(choices, enabled) -> int:
    """How many of the choices ``choices[k]`` (made among ``enabled[k]``)
    took the turn from a rank that could have gone on."""
    n = 0
    for k in range(1, len(choices)):
        if choices[k] != choices[k - 1] and choices[k - 1] in enabled[k]:
            n += 1
    return n


def races(steps: list, clocks: list | None = None) -> list:
    """(j, i) for each step i and the last earlier step j of another rank
    that i depends on and that does not happen before i (by program order
    and chains of dependent steps).  ``clocks``: filled with each step's
    vector clock ({rank: index of its last step + 1 that happens before
    it, itself included})."""
    clocks = [] if clocks is None else clocks
    last_of: dict = {}              # rank -> clock after its last step
    out = []
    for i, s in enumerate(steps):
        before = last_of.get(s.actor, {})
        vc = dict(before)
        found = None
        for j in range(i - 1, -1, -1):
            t = steps[j]
            if t.actor == s.actor or not dependent(t, s):
                continue
            happened = before.get(t.actor, 0) > j
            if found is None and not happened:
                found = j
            for r, v in clocks[j].items():
                if vc.get(r, 0) < v:
                    vc[r] = v
        vc[s.actor] = i + 1
        clocks.append(vc)
        last_of[s.actor] = vc
        if found is not None:
            out.append((found, i))
    return out


def _initials(steps: list, clocks: list, j: int, i: int) -> set:
    """The ranks whose first step among those after ``j`` that do not happen
    after it, up to ``i``, is preceded by none of them: the ranks that can
    take the run from ``j`` towards ``i`` without ``j``."""
    def before(a, b):                   # step a happens before step b (a < b)
        return clocks[b].get(steps[a].actor, 0) > a

    part = [k for k in range(j + 1, i + 1) if not before(j, k)]
    out = set()
    for n, k in enumerate(part):
        if not any(before(m, k) for m in part[:n]):
            out.add(steps[k].actor)
    return out


class _Node:
    """One decision along the current path: who could move, who did, which
    choices are asked for (``wanted``) and which were run (``tried``); the
    ranks asleep on entry (``sleep``: rank -> the step it would make) and the
    step each choice run here made (``done``).  At a PICK step also the ready
    tasks the rank could take (``options``), the one it took (``picked``) and
    which of them are still to be run."""

    __slots__ = ("enabled", "chosen", "wanted", "tried", "sleep", "done", "options", "picked",
                 "picks_left")

    def __init__(self, enabled: tuple, chosen: int, sleep: dict, options=(), picked=0):
        self.enabled, self.chosen = enabled, chosen
        self.wanted = {chosen}
        self.tried = {chosen}
        self.sleep = sleep
        self.done: dict = {}
        self.options, self.picked = options, picked
        # every order of a rank's ready tasks is run: which task a core takes
        # next is the chip's choice, and what the tasks share need not be
        # visible to the search (a plain intermediate tensor)
        self.picks_left = set(range(len(options))) - {picked}


class Search:
    """The schedules of one program at one preemption bound, one run at a
    time: ``next_prefix()`` is the ``Prefix`` to run next (None: the search
    is over), ``record(steps)`` what that run did."""

    def __init__(self, bound: int):
        self.bound = bound
        self.path: list = []            # _Node per step of the last run
        # the first run follows the default choice throughout
        self.prefix: Prefix | None = Prefix(())
        self.pruned = 0
        self.runs = 0

    def next_prefix(self) -> Prefix | None:
        return self.prefix

    def record(self, steps: list) -> None:
        """The steps of the run of ``next_prefix()``: extend the path with
        the decisions past the prefix, ask for the reorderings its races
        call for, and pick the next prefix (depth-first, deepest first).

        Sleep sets: a rank whose step was already explored at a decision
        sleeps in the branches explored there after it, until a step
        dependent on its own is made -- before that, running it first gives
        an order of independent steps already run.  The part of a run past
        the first step of a sleeping rank adds nothing."""
        self.runs += 1
        n = len(self.prefix.choices)
        start = max(n - 1, 0)
        del self.path[start + 1 if n else 0:]
        end, sleep = len(steps), {}
        for d in range(start, len(steps)):
            s = steps[d]
            if d == len(self.path):
                self.path.append(_Node(s.enabled, s.actor, sleep, s.options, s.picked))
            node = self.path[d]
            if s.options and not node.options:        # a rank chosen anew here picks
                node.options, node.picked = s.options, s.picked
                node.picks_left = set(range(len(s.options))) - {s.picked}
            if d >= n and s.actor in node.sleep:      # an order already covered
                del self.path[d:]
                end = d
                break
            node.done[s.actor] = s
            asleep = dict(node.sleep)
            asleep.update((q, t) for q, t in node.done.items() if q != s.actor)
            sleep = {q: t for q, t in asleep.items() if not dependent(t, s)}
        clocks: list = []
        for j, i in races(steps[:end], clocks):
            node, who = self.path[j], steps[i].actor
            if who in node.enabled:
                node.wanted.add(who)
                continue
            # the rank of i cannot move at j: a rank that can start what leads
            # to i there will do (a source set, Abdulla et al.) -- one is
            # enough, and none is needed when one is already asked for
            starts = _initials(steps, clocks, j, i) & set(node.enabled)
            if not starts:
                node.wanted |= set(node.enabled)
            elif not starts & node.wanted:
                node.wanted.add(min(starts))
        self.prefix = self._next()

    def _picks(self, upto: int) -> tuple:
        return tuple((k, x.picked) for k, x in enumerate(self.path[:upto]) if x.picked)

    def _next(self) -> Prefix | None:
        for k in range(len(self.path) - 1, -1, -1):
            node = self.path[k]
            if node.picks_left:         # another ready task first: the same rank moves
                node.picked = min(node.picks_left)
                node.picks_left.discard(node.picked)
                del self.path[k + 1:]
                return Prefix(tuple(x.chosen for x in self.path[:k + 1]), self._picks(k + 1))
            for p in sorted(node.wanted - node.tried):
                node.tried.add(p)
                if p in node.sleep:
                    continue
                choices = [x.chosen for x in self.path[:k]] + [p]
                enabled = [x.enabled for x in self.path[:k]] + [node.enabled]
                if preemptions(choices, enabled) > self.bound:
                    self.pruned += 1
                    continue
                node.chosen = p
                node.options, node.picked, node.picks_left = (), 0, set()
                del self.path[k + 1:]
                return Prefix(tuple(choices), self._picks(k))
        return None


__all__ = ["ADD", "PICK", "Prefix", "READ", "WRITE", "Search", "Step", "dependent", "preemptions",
           "races"]
