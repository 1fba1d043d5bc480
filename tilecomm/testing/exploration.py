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
"""
from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

from ..check.schedules import Search
from ..errors import (ConfigError, DataRaceError, DeadlockError, RankFailure, TilecommError)
from ..ir.functions import KernelFunction
from ..runtime.config import DistributedConfig, RunConfig, from_env
from ..runtime.controller.ranks import Ranks
from ..runtime.controller.run import execute

TOKEN = "tcs1"                  # schedule tokens of this format start with it
DEFAULT_STEPS = 5000            # steps one schedule may take


class _Plan:
    """What an explored run is told (``schedule``, ``limit``) and gives back
    (``steps``)."""

    def __init__(self, schedule: tuple, limit: int):
        self.schedule, self.limit = schedule, limit
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
    """What an exploration found.  ``verified``: no failure, and the search
    at preemption bound ``bound`` finished (``complete``: it skipped no
    schedule for the bound, so every order of dependent operations ran);
    ``failure``: the first failure, or None; ``schedules``: complete
    schedules run; ``world_size``: the ranks explored."""

    verified: bool
    failure: Failure | None
    schedules: int
    bound: int | None
    complete: bool
    world_size: int
    seconds: float


def encode(world: int, choices) -> str:
    """A schedule as a token: ``tcs1-<world>-<rank>x<count>.<rank>x<count>...``."""
    runs: list = []
    for c in choices:
        if runs and runs[-1][0] == c:
            runs[-1][1] += 1
        else:
            runs.append([c, 1])
    return f"{TOKEN}-{world}-" + ".".join(f"{c}x{n}" for c, n in runs)


def decode(token: str) -> tuple:
    """(world size, choices) of a schedule token."""
    try:
        head, world, body = str(token).split("-", 2)
        if head != TOKEN:
            raise ValueError
        choices = []
        for part in body.split(".") if body else ():
            c, n = part.split("x")
            choices += [int(c)] * int(n)
        return int(world), tuple(choices)
    except ValueError:
        raise ConfigError(f"not a schedule token: {token!r} (expected {TOKEN}-<world>-...)",
                          code="TC604") from None


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
        # every explored run checks for races; a deadlock is a run's stuck
        # state, so it needs no long grace period to be believed
        self.config = RunConfig(distributed_config=DistributedConfig(
            device_ids=list(range(exe.world))), transport="shm", detect_races=True,
            deadlock_timeout_s=0.05, cores=1)
        self.check = check
        self.max_steps = max_steps
        self.ranks = None

    def run(self, schedule: tuple, args=None):
        """(steps, None) of a run that passed; (steps, (kind, exception)).
        ``args``: what to run on (fresh copies of the program's by default)."""
        plan = _Plan(schedule, self.max_steps)
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

    def failure(self, steps, found, choices) -> Failure:
        kind, error = found
        token = encode(self.world, choices)

        def rerun():
            _replay_on(self, token)

        return Failure(kind, error, steps, token, rerun)


def _replay_on(runs: _Runs, token: str) -> None:
    world, choices = decode(token)
    if world != runs.world:
        raise ConfigError(f"schedule {token} is for {world} ranks; the program runs on "
                          f"{runs.world}", code="TC604")
    try:
        _, found = runs.run(choices)
    finally:
        runs.close()
    if found is not None:
        raise found[1]


def explore(program, *args, world_size: int | None = None, check=None,
            time_budget_s: float = 60.0, max_steps: int = DEFAULT_STEPS,
            progress=None) -> ExploreResult:
    """Explore the schedules of ``program(*args)`` on ``world_size`` ranks
    (see the module doc).  ``program``: a ``@pl.jit.host`` function (then
    ``world_size`` defaults to 2) or a compiled program (its own world);
    ``check(args)``: raises ``AssertionError`` if a run's results (the
    arguments after the call, outputs included) are wrong.
    ``time_budget_s`` is scaled by ``$TILECOMM_EXPLORE_BUDGET`` (the pytest
    option ``--tilecomm-explore`` sets it).  ``max_steps``: the most steps one
    schedule may take (more is an error: a loop that polls window memory).
    ``progress(schedules, bound)``: called after every schedule."""
    budget = float(time_budget_s) * float(from_env().get("explore_budget", 1.0))
    start = time.monotonic()
    runs = _Runs(program, args, world_size, check, max_steps)
    schedules, bound, done_bound, complete = 0, 0, None, False
    try:
        while True:
            search = Search(bound)
            prefix = search.next_prefix()
            while prefix is not None:
                if time.monotonic() - start > budget:
                    return ExploreResult(done_bound is not None, None, schedules, done_bound,
                                         complete, runs.world, time.monotonic() - start)
                steps, found = runs.run(prefix)
                schedules += 1
                if progress is not None:
                    progress(schedules, bound)
                if found is not None:
                    choices = tuple(s.actor for s in steps)
                    return ExploreResult(False, runs.failure(steps, found, choices), schedules,
                                         done_bound, False, runs.world,
                                         time.monotonic() - start)
                search.record(steps)
                prefix = search.next_prefix()
            done_bound, complete = bound, search.pruned == 0
            if complete:
                return ExploreResult(True, None, schedules, bound, True, runs.world,
                                     time.monotonic() - start)
            bound += 1
    finally:
        runs.close()


def replay(program, *args, schedule: str, world_size: int | None = None) -> None:
    """Run ``program(*args)`` under ``schedule`` (a token from
    ``Failure.schedule``): raises what that schedule raised; returns if it
    passes now (the arguments hold the results)."""
    world, choices = decode(schedule)
    runs = _Runs(program, args, world_size or world, None, DEFAULT_STEPS)
    try:
        _, found = runs.run(choices, runs.args)
    finally:
        runs.close()
    if found is not None:
        raise found[1]


__all__ = ["ExploreResult", "Failure", "decode", "encode", "explore", "replay"]
