"""The schedule search (check/schedules.py) against brute force: on small
programs of a model machine (ranks that write, add to, read and wait on
shared cells), the partial-order search reaches every outcome that some
interleaving reaches, running fewer schedules than there are
interleavings."""
import itertools

import pytest

from tilecomm.check.schedules import ADD, READ, WRITE, Search, Step, dependent, preemptions, races


def step(i, actor, effect, target, runs=(), enabled=(0, 1)):
    return Step(i, actor, enabled, effect, target, runs, "")


# ---------------------------------------------------------------- dependence
@pytest.mark.parametrize("a, b, want", [
    ((READ, ("cell", "s", 0)), (READ, ("cell", "s", 0)), False),
    ((ADD, ("cell", "s", 0)), (ADD, ("cell", "s", 0)), False),
    ((ADD, ("cell", "s", 0)), (READ, ("cell", "s", 0)), True),
    ((WRITE, ("cell", "s", 0)), (ADD, ("cell", "s", 0)), True),
    ((WRITE, ("cell", "s", 0)), (WRITE, ("cell", "s", 4)), False),
    ((WRITE, ("done", 1)), (READ, ("done", 1)), True),
])
def test_steps_depend_when_their_order_can_matter(a, b, want):
    assert dependent(step(0, 0, *a), step(1, 1, *b)) is want
    assert dependent(step(0, 1, *b), step(1, 0, *a)) is want


@pytest.mark.parametrize("x, y, want", [
    (((0, 8),), ((8, 16),), False),
    (((0, 8),), ((7, 9),), True),
    (((0, 4), (16, 20)), ((4, 16), (20, 24)), False),
    (((0, 4), (16, 20)), ((4, 17),), True),
])
def test_data_steps_depend_when_their_bytes_overlap(x, y, want):
    a = step(0, 0, WRITE, ("data", "w"), x)
    b = step(1, 1, READ, ("data", "w"), y)
    assert dependent(a, b) is want


def test_a_race_is_the_last_dependent_step_not_ordered_before():
    c, d = ("cell", "s", 0), ("cell", "s", 8)
    trace = [step(0, 0, WRITE, c), step(1, 0, WRITE, d), step(2, 1, READ, d), step(3, 1, READ, c)]
    # step 2 reads what step 1 wrote (a race with it); step 3 then reads c,
    # which step 0 wrote before step 1: ordered through 1 -> 2, no race
    assert races(trace) == [(1, 2)]


def test_preemptions_count_switches_away_from_a_rank_that_could_go_on():
    assert preemptions([0, 0, 1, 1], [(0, 1)] * 4) == 1
    assert preemptions([0, 1], [(0, 1), (1,)]) == 0       # 0 could not go on


# ---------------------------------------------------------------- a model machine
# A program: per rank, a list of ops ("w", cell, value) / ("a", cell, value)
# / ("r", cell) / ("g", cell, k) (wait until cell >= k).  A rank's reads are
# its observations; an outcome is (final cells, every rank's observations,
# whether it got stuck).

def run_model(program, choose):
    cells: dict = {}
    pc = [0] * len(program)
    seen = [[] for _ in program]
    steps = []
    parked: dict = {}                # rank -> the cell its failed wait is on

    def enabled():
        return tuple(r for r in range(len(program)) if pc[r] < len(program[r])
                     and r not in parked)

    while True:
        en = enabled()
        if not en:
            stuck = any(pc[r] < len(program[r]) for r in range(len(program)))
            return steps, (tuple(sorted(cells.items())), tuple(map(tuple, seen)), stuck)
        r = choose(len(steps), en, steps)
        op = program[r][pc[r]]
        kind, cell = op[0], op[1]
        target = ("cell", "m", cell)
        if kind == "w":
            cells[cell] = op[2]
            effect = WRITE
        elif kind == "a":
            cells[cell] = cells.get(cell, 0) + op[2]
            effect = ADD
        else:
            effect = READ
        steps.append(Step(len(steps), r, en, effect, target, (), ""))
        if kind == "r":
            seen[r].append(cells.get(cell, 0))
        if kind == "g" and cells.get(cell, 0) < op[2]:
            parked[r] = cell           # checks again once the cell is written
            continue
        pc[r] += 1
        if kind in ("w", "a"):
            for q in [q for q, c in parked.items() if c == cell]:
                del parked[q]


def by_schedule(prefix):
    def choose(k, enabled, steps):
        if k < len(prefix):
            assert prefix[k] in enabled
            return prefix[k]
        last = steps[-1].actor if steps else 0
        return last if last in enabled else enabled[0]
    return choose


def every_outcome(program):
    """Outcomes of every interleaving (brute force over choice sequences)."""
    out, todo, count = set(), [()], 0
    while todo:
        prefix = todo.pop()
        steps, outcome = run_model(program, by_schedule(prefix))
        if len(prefix) < len(steps):
            todo.extend(prefix + (r,) for r in steps[len(prefix)].enabled)
            continue
        out.add(outcome)
        count += 1
    return out, count


def searched_outcomes(program, bound):
    search, out = Search(bound), set()
    prefix = search.next_prefix()
    while prefix is not None:
        steps, outcome = run_model(program, by_schedule(prefix.choices))
        out.add(outcome)
        search.record(steps)
        prefix = search.next_prefix()
    return out, search


PROGRAMS = {
    "message passing": [[("w", "d", 7), ("w", "f", 1)], [("g", "f", 1), ("r", "d")]],
    "store buffering": [[("w", "x", 1), ("r", "y")], [("w", "y", 1), ("r", "x")]],
    "two adders and an Eq-style reader": [[("a", "c", 1)], [("a", "c", 1)],
                                          [("r", "c"), ("r", "c")]],
    "set overwrites": [[("w", "d", 1), ("w", "f", 1), ("w", "d", 2), ("w", "f", 2)],
                       [("g", "f", 1), ("r", "d"), ("g", "f", 2), ("r", "d")]],
    "reset loses a lapping add": [[("a", "b", 1), ("g", "a", 1), ("w", "a", 0), ("a", "b", 1),
                                   ("g", "a", 1)],
                                  [("a", "a", 1), ("g", "b", 1), ("w", "b", 0), ("a", "a", 1),
                                   ("g", "b", 1)]],
    "independent ranks": [[("w", "x", 1), ("w", "x", 2)], [("w", "y", 1), ("w", "y", 2)],
                          [("w", "z", 1)]],
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_search_reaches_every_outcome_brute_force_does(name):
    program = PROGRAMS[name]
    want, interleavings = every_outcome(program)
    got, search = searched_outcomes(program, bound=len(program) * 10)
    assert got == want
    assert search.pruned == 0 and search.runs <= interleavings
    if name == "independent ranks":       # nothing depends: one schedule is all of them
        assert search.runs == 1 < interleavings


def test_a_bound_of_zero_runs_only_schedules_without_preemption():
    program = PROGRAMS["store buffering"]
    got, search = searched_outcomes(program, bound=0)
    want, _ = every_outcome(program)
    assert search.pruned > 0 and got < want
    # widening the bound finds the rest
    assert searched_outcomes(program, bound=2)[0] == want


def test_a_lapping_add_lost_to_a_reset_is_reachable():
    got, _ = searched_outcomes(PROGRAMS["reset loses a lapping add"], bound=10)
    assert any(stuck for _, _, stuck in got) and any(not stuck for _, _, stuck in got)


def test_interleavings_of_the_model_are_counted_right():
    # two ranks of two independent writes each: C(4, 2) interleavings
    _, count = every_outcome([[("w", "x", 1), ("w", "x", 2)], [("w", "y", 1), ("w", "y", 2)]])
    assert count == len(set(itertools.permutations("aabb")))
