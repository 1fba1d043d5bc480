"""Interleaving exploration: run a program under many schedules of its
ranks' visible operations, and replay the one that failed.

``explore(program, *args, world_size=2, check=...)`` runs the program again
and again, each time on fresh copies of ``args``, with its ranks taking
turns (``runtime/rank/exploring.py``): at every notify, every check of a
wait, every access of window memory and every dispatch's end, one rank
moves, and the schedule says which.  Which schedules run is decided by
dynamic partial-order reduction with a preemption bound that widens while
the time budget lasts (``check/schedules.py``): bound 0 (each rank runs
until it blocks), then 1, 2, ...  Every explored run also checks for data
races.  The first failure ends the search:

========  ==========================================================
deadlock  every rank blocked with nothing left to release it (the
          report a normal run gives)
race      two accesses to one window copy that nothing orders
          (``DataRaceError``'s report)
error     a rank raised (its traceback, in the program's lines)
check     ``check(args)`` raised ``AssertionError`` on the results
========  ==========================================================

Each failure carries its schedule (a short token) and replays it exactly.

What a verdict covers.  ``ExploreResult.complete``: the search ran every
order of dependent operations there is -- at some preemption bound it
pruned nothing (a choice beyond the bound) and the time budget did not cut
it.  ``verified``: no failure, and a complete search at the bound asked for
(``preemption_bound=``; by default none: every order) finished.  A search
the budget ended, or one complete only up to a bound where orders with more
preemptions exist, is not verified, and ``coverage`` says so in words.

A schedule token (``tcs2-<world>-<program>-<bound>-<choices>``) records the
world size, the program's identity (a hash of its lowered code) and the
preemption bound of the search that found it; a replay refuses a token
recorded for another world size or program, and a malformed one, with a
``ConfigError`` (TC605).

An explored run runs under the program's own ``RunConfig`` (its
``spin_iters``, ``wait_timeout_s`` and the rest carry over) with these
fields overridden, because the explored run needs them: ``transport="shm"``
and ``platform="cpu"`` (the ranks take turns through the shared control
block, one core each), ``cores=1`` (one thread of a rank moves at a time),
``detect_races=True`` (every explored run checks races),
``deadlock_timeout_s=0.05`` (a stuck explored run is known stuck: no rank
can take a turn), and no run artefacts (each schedule would overwrite the
last one's).
"""
from __future__ import annotations

import dataclasses
import hashlib
import re
import time
from typing import NamedTuple

import numpy as np

from ..check.schedules import Prefix, Search
from ..errors import (ConfigError, DataRaceError, DeadlockError, RankFailure, TilecommError)
from ..ir.functions import KernelFunction
from ..runtime.config import DistributedConfig, RunConfig, from_env
from ..runtime.controller.ranks import Ranks
from ..runtime.controller.run import execute

TOKEN = "tcs2"                  # schedule tokens of this format start with it
DEFAULT_STEPS = 5000            # steps one schedule may take
_TOKEN = re.compile(
    rf"{TOKEN}-(\d{{1,2}})-([0-9a-f]{{12}})-(u|\d{{1,3}})-(d|\d+[xp]\d+(?:\.\d+[xp]\d+)*)")


class _Plan:
    """What an explored run is told (``schedule``: the ranks chosen at its
    first steps; ``picks``: (step index, ready task) at its PICK steps;
    ``limit``) and gives back (``steps``)."""

    def __init__(self, schedule: tuple, limit: int, picks: tuple = ()):
        self.schedule, self.limit, self.picks = schedule, limit, picks
        self.steps: list = []


class Failure:
    """The first failure an exploration found.

    ``kind``: "deadlock", "race", "error" or "check"; ``report``: the
    failure's own report followed by the schedule that led to it, one
    line per step; ``schedule``: the schedule as a token (a str); ``error``:
    the exception the run raised.  ``replay()`` runs that schedule again
    and raises the same exception, every time."""

    def __init__(self, kind: str, error: BaseException, steps: list, schedule: str, rerun):
        self.kind, self.error, self.steps, self.schedule = kind, error, steps, schedule
        self._rerun = rerun
        lines = [f"  {i + 1:>3}. {s.text}" for i, s in enumerate(steps)]
        self.report = (f"{type(error).__name__}: {error}\n\nschedule {schedule} "
                       f"({len(steps)} steps):\n" + "\n".join(lines))

    def replay(self):
        """Run the schedule again: raises the failure's exception."""
        self._rerun()

    def __repr__(self):
        return f"<explore failure {self.kind}: {self.schedule}>"


class ExploreResult(NamedTuple):
    """What an exploration found (see the module doc for what a verdict
    covers).  ``verified``: no failure, and a complete search at the bound
    asked for finished; ``failure``: the first failure, or None;
    ``schedules``: complete schedules run; ``bound``: the highest preemption
    bound whose search finished (None: none did); ``complete``: that search
    pruned nothing -- every order of dependent operations ran;
    ``requested_bound``: the bound asked for (None: every order);
    ``world_size``: the ranks explored."""

    verified: bool
    failure: Failure | None
    schedules: int
    bound: int | None
    complete: bool
    world_size: int
    seconds: float
    requested_bound: int | None = None

    @property
    def coverage(self) -> str:
        """What the search covered, in words."""
        if self.failure is not None:
            return f"stopped at the first failure, after {self.schedules} schedule(s)"
        if self.complete:
            return (f"complete: every order of dependent operations ({self.schedules} "
                    f"schedule(s), preemption bound {self.bound} pruned nothing)")
        if self.bound is None:
            return (f"incomplete: the time budget ended before the search without preemptions "
                    f"finished ({self.schedules} schedule(s))")
        more = "" if self.verified else "; orders with more preemptions were not run"
        return (f"complete up to preemption bound {self.bound} ({self.schedules} schedule(s))"
                f"{more}")


class Schedule(NamedTuple):
    """A decoded schedule token."""

    world: int
    program: str            # the program's identity (``program_id``)
    bound: int | None       # the preemption bound of the search that found it
    choices: tuple          # the rank chosen at each step of the prefix
    picks: tuple = ()       # (step index, ready task taken) where not the first

    @property
    def prefix(self) -> Prefix:
        return Prefix(self.choices, self.picks)


def program_id(exe) -> str:
    """The identity of an executable: a hash of its lowered code (an edit to
    the program, or another specialisation, changes it)."""
    return hashlib.sha256(exe.image.source.encode()).hexdigest()[:12]


def encode(world: int, choices, program: str = "0" * 12, bound: int | None = None,
           picks=()) -> str:
    """A schedule as a token: ``tcs2-<world>-<program>-<bound>-<body>``, the
    body ``<r>x<n>`` for n steps of rank r, ``<r>p<k>`` for one step of rank
    r that takes its k-th ready task (counting from 0; 0 is the default),
    joined by dots (``d``: the default choice throughout; bound ``u``:
    none)."""
    picks = dict(picks)
    parts: list = []
    for i, c in enumerate(choices):
        if picks.get(i):
            parts.append([c, "p", picks[i]])
        elif parts and parts[-1][0] == c and parts[-1][1] == "x":
            parts[-1][2] += 1
        else:
            parts.append([c, "x", 1])
    body = ".".join(f"{c}{k}{n}" for c, k, n in parts) or "d"
    return f"{TOKEN}-{world}-{program}-{'u' if bound is None else bound}-{body}"


def decode(token: str) -> Schedule:
    """A schedule token's parts; a malformed token is a ``ConfigError``
    (TC605): every count at least 1, every rank below the world size."""
    m = _TOKEN.fullmatch(str(token))
    world = int(m.group(1)) if m else 0
    choices: list = []
    picks: list = []
    if m and m.group(4) != "d":
        for part in m.group(4).split("."):
            kind = "p" if "p" in part else "x"
            c, n = (int(v) for v in part.split(kind))
            if n < 1 or c >= world:
                m = None
                break
            if kind == "p":
                picks.append((len(choices), n))
                choices.append(c)
            else:
                choices += [c] * n
    if m is None or not 1 <= world <= 16:
        raise ConfigError(f"not a schedule token: {token!r} (expected {TOKEN}-<world>-<program>-"
                          f"<bound>-<rank>x<count>..., as a failure printed it)", code="TC605")
    bound = None if m.group(3) == "u" else int(m.group(3))
    return Schedule(world, m.group(2), bound, tuple(choices), tuple(picks))


def _refuse_if_cores_ran_out(e: DeadlockError) -> None:
    """An explored rank runs its tasks on one core.  A run stuck with a task
    blocked in a wait on that core while another task of the rank is ready
    may be stuck only for want of a second core, which the program would
    have: no verdict, rather than a deadlock that may not be one."""
    for b in e.blocked:
        ready = b.get("ready_without_core")
        if ready and b.get("core", -1) >= 0:
            task, span = ready[0]
            raise ConfigError(
                f"explore runs each rank's tasks one at a time on one core, and this program "
                f"needs two of rank {b['rank']}'s at once: task '{b['task']}' holds the core, "
                f"blocked in pld.system.wait at {b['span']}, while task '{task}'"
                f"{f' (at {span})' if span else ''} is ready; explore cannot check it",
                code="TC604",
                hint="explore the protocol written without concurrent tasks; ordinary runs "
                     "with RunConfig(detect_races=True) still check this program for races")


def explored_config(base, world: int) -> RunConfig:
    """The program's own config with what an explored run needs (the module
    doc says why each field is overridden)."""
    if not isinstance(base, RunConfig):
        base = RunConfig()
    return dataclasses.replace(
        base, distributed_config=DistributedConfig(device_ids=list(range(world))),
        transport="shm", platform="cpu", cores=1, detect_races=True, deadlock_timeout_s=0.05,
        enable_chip_swimlane=0, enable_l2_swimlane=None, enable_dump_args=0,
        enable_dep_gen=False, enable_scope_stats=False)


def _fresh(args) -> list:
    """Copies of the host tensors (each schedule starts from the same values)."""
    out = []
    for a in args:
        if isinstance(a, np.ndarray):
            out.append(a.copy())
        elif type(a).__module__.startswith("torch"):
            out.append(a.clone())
        else:
            out.append(a)
    return out


class _Runs:
    """Explored runs of one program on one set of ranks (started again after
    a run that failed: a failure stops them)."""

    def __init__(self, program, args, world_size, check, max_steps):
        if world_size is not None and (isinstance(world_size, bool) or
                                       not isinstance(world_size, int) or
                                       not 1 <= world_size <= 16):
            raise ConfigError(f"explore(world_size=) must be an int in [1, 16], got "
                              f"{world_size!r}", code="TC604",
                              hint="exploration is for small protocols: 2 to 4 ranks")
        if isinstance(program, KernelFunction):
            n = world_size or 2
            compiled = program.compile(config=RunConfig(
                distributed_config=DistributedConfig(device_ids=list(range(n)))))
        else:
            compiled = program
        self.args = tuple(compiled.complete_args(args))
        exe = compiled.specialise(self.args)
        if world_size is not None and exe.world != world_size:
            raise ConfigError(f"explore(world_size={world_size}): the program was compiled for "
                              f"{exe.world} ranks", code="TC604",
                              hint="leave world_size out, or pass the @pl.jit.host function")
        self.exe, self.world = exe, exe.world
        self.program = program_id(exe)
        self.config = explored_config(getattr(exe, "config", None), exe.world)
        self.check = check
        self.max_steps = max_steps
        self.ranks = None

    def run(self, prefix: Prefix, args=None):
        """(steps, None) of a run that passed; (steps, (kind, exception)).
        ``args``: what to run on (fresh copies of the program's by default)."""
        plan = _Plan(prefix.choices, self.max_steps, prefix.picks)
        args = _fresh(self.args) if args is None else list(args)
        if self.ranks is None:
            self.ranks = Ranks(self.world, self.config)
        try:
            execute(self.ranks, self.exe, list(args), self.config, explore=plan)
        except DataRaceError as e:
            return plan.steps, ("race", e)
        except DeadlockError as e:
            self._restart()
            _refuse_if_cores_ran_out(e)
            return plan.steps, ("deadlock", e)
        except RankFailure as e:
            self._restart()
            if getattr(e, "error_code", None) in ("TC602", "TC604"):
                raise ConfigError(str(e), code=e.error_code) from None
            return plan.steps, ("error", e)
        except TilecommError:
            self._restart()
            raise
        if self.check is not None:
            try:
                self.check(args)
            except AssertionError as e:
                return plan.steps, ("check", e)
        return plan.steps, None

    def _restart(self) -> None:
        if self.ranks is not None:
            self.ranks.close()
            self.ranks = None

    def close(self) -> None:
        self._restart()

    def failure(self, steps, found, bound) -> Failure:
        kind, error = found
        token = encode(self.world, tuple(s.actor for s in steps), self.program, bound,
                       tuple((s.index, s.picked) for s in steps if s.picked))

        def rerun():
            _replay_on(self, token)

        return Failure(kind, error, steps, token, rerun)

    def matching(self, token: str) -> Schedule:
        """The token's schedule, if it was recorded for this program at this
        world size (else a ``ConfigError``, TC605)."""
        sched = decode(token)
        if sched.world != self.world:
            raise ConfigError(f"schedule {token} was recorded on {sched.world} ranks; the program "
                              f"runs on {self.world}", code="TC605",
                              hint=f"replay it with world_size={sched.world} (--ranks "
                                   f"{sched.world})")
        if sched.program != self.program:
            raise ConfigError(f"schedule {token} was recorded for another program (its lowered "
                              f"code was {sched.program}, this one's is {self.program}): its "
                              f"steps need not be this program's", code="TC605",
                              hint="explore the program again for a token of its own")
        return sched


def _replay_on(runs: _Runs, token: str, args=None) -> None:
    try:
        _, found = runs.run(runs.matching(token).prefix, args)
    finally:
        runs.close()
    if found is not None:
        raise found[1]


def explore(program, *args, world_size: int | None = None, check=None,
            time_budget_s: float = 60.0, max_steps: int = DEFAULT_STEPS,
            progress=None, preemption_bound: int | None = None) -> ExploreResult:
    """Explore the schedules of ``program(*args)`` on ``world_size`` ranks
    (see the module doc).  ``program``: a ``@pl.jit.host`` function (then
    ``world_size`` defaults to 2) or a compiled program (its own world);
    ``check(args)``: raises ``AssertionError`` if a run's results (the
    arguments after the call, outputs included) are wrong.
    ``time_budget_s`` is scaled by ``$TILECOMM_EXPLORE_BUDGET`` (the pytest
    option ``--tilecomm-explore`` sets it).  ``max_steps``: the most steps one
    schedule may take (more is an error: a loop that polls window memory).
    ``preemption_bound``: verify every schedule with at most that many
    preemptions (None: every schedule; the search widens its bound from 0
    until nothing is pruned).  ``progress(schedules, bound)``: called after
    every schedule."""
    if preemption_bound is not None and (isinstance(preemption_bound, bool) or
                                         not isinstance(preemption_bound, int) or
                                         preemption_bound < 0):
        raise ConfigError(f"explore(preemption_bound=) must be None or an int >= 0, got "
                          f"{preemption_bound!r}", code="TC604")
    budget = float(time_budget_s) * float(from_env().get("explore_budget", 1.0))
    start = time.monotonic()
    runs = _Runs(program, args, world_size, check, max_steps)

    def result(verified, failure, schedules, bound, complete):
        return ExploreResult(verified, failure, schedules, bound, complete, runs.world,
                             time.monotonic() - start, preemption_bound)

    schedules, bound, done_bound = 0, 0, None
    try:
        while True:
            search = Search(bound)
            prefix = search.next_prefix()
            while prefix is not None:
                if time.monotonic() - start > budget:
                    return result(False, None, schedules, done_bound, False)
                steps, found = runs.run(prefix)
                schedules += 1
                if progress is not None:
                    progress(schedules, bound)
                if found is not None:
                    return result(False, runs.failure(steps, found, bound), schedules,
                                  done_bound, False)
                search.record(steps)
                prefix = search.next_prefix()
            done_bound, complete = bound, search.pruned == 0
            if complete or bound == preemption_bound:
                return result(True, None, schedules, bound, complete)
            bound += 1
    finally:
        runs.close()


def replay(program, *args, schedule: str, world_size: int | None = None) -> None:
    """Run ``program(*args)`` under ``schedule`` (a token from
    ``Failure.schedule``): raises what that schedule raised; returns if it
    passes now (the arguments hold the results).  A token recorded for
    another program or world size is refused (``ConfigError``, TC605)."""
    sched = decode(schedule)
    runs = _Runs(program, args, world_size or sched.world, None, DEFAULT_STEPS)
    _replay_on(runs, schedule, runs.args)


__all__ = ["ExploreResult", "Failure", "Schedule", "decode", "encode", "explore",
           "explored_config", "program_id", "replay"]
