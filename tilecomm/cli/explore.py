"""``tilecomm explore FILE.py::NAME``: run a HOST program under the
schedules of its ranks' visible operations (``tilecomm.testing.explore``)
and print the first failure with the schedule that leads to it."""
from __future__ import annotations

import sys

import click

from ..errors import ConfigError
from ..testing.exploration import explore, replay
from .arguments import dim_values, host_args, host_entry, program_options, scalar_values
from .programs import default_ranks


def _progress(show: bool):
    if not show:
        return None

    def report(schedules: int, bound: int):
        click.echo(f"\r  {schedules} schedules, preemption bound {bound}", err=True, nl=False)
    return report


# exit statuses (the docstring's table)
VERIFIED, FAILURE, USAGE, INCONCLUSIVE, INTERRUPTED = 0, 1, 2, 3, 130


@click.command()
@click.argument("target", metavar="FILE.py::NAME")
@program_options(max_ranks=16)
@click.option("--time-budget", type=click.FloatRange(0), default=60.0, show_default=True,
              help="Seconds the search may take ($TILECOMM_EXPLORE_BUDGET scales it).")
@click.option("--bound", type=click.IntRange(0), default=None,
              help="Verify every schedule with at most this many preemptions (default: every "
                   "schedule).")
@click.option("--replay", "token", metavar="SCHEDULE",
              help="Run this one schedule (a token a failure printed) instead of searching.")
def explore_cmd(target, ranks, dims, scalars, time_budget, bound, token):
    """Explore the schedules of the HOST program NAME of FILE.py: its ranks take
    turns at every notify, check of a wait, window access and dispatch end,
    in every order of dependent operations (partial-order reduction, with a
    preemption bound that widens while the time budget lasts), with the race
    check on.  The first deadlock, data race or rank error is printed with
    the schedule that leads to it, one line per step, and a token that
    --replay runs again.  The last line says what the search covered.

    \b
    Arguments come from the annotations: inputs of small integers from a
    fixed seed, outputs zero (nothing checks the results: use
    tilecomm.testing.explore(check=...) in a test for that).  FILE is
    imported under a module name of its own, so its
    `if __name__ == "__main__":` block does not run.

    \b
    Exit status:
      0    verified: a complete search (at --bound, if given) found no
           failure; or the replayed schedule ran without one
      1    a failure was found (or the replayed schedule failed)
      2    usage: bad arguments, a malformed token or one recorded for
           another program or world size, a program explore cannot run
      3    nothing verified: the time budget ended first
      130  interrupted (Ctrl-C)
    """
    path, entry = host_entry(target)
    world = ranks or default_ranks(path)
    args = host_args(entry, world, dim_values(dims), scalar_values(scalars))
    try:
        if token:
            _replay(entry, args, token, world)
        res = explore(entry, *args, world_size=world, time_budget_s=time_budget,
                      progress=_progress(sys.stderr.isatty()), preemption_bound=bound)
    except ConfigError as e:            # what explore refuses is a usage error
        click.echo(f"{type(e).__name__}: {e}")
        sys.exit(USAGE)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(INTERRUPTED)
    if sys.stderr.isatty():
        click.echo("", err=True)
    if res.failure is not None:
        click.echo(f"{res.failure.kind} after {res.schedules} schedule(s), "
                   f"{res.seconds:.2f} s:\n")
        click.echo(res.failure.report)
        click.echo(f"\nreplay: tilecomm explore {target} --ranks {world} --replay "
                   f"{res.failure.schedule}")
        sys.exit(FAILURE)
    verdict = "verified" if res.verified else "not verified"
    click.echo(f"no failure, {verdict}: {world} ranks, {res.seconds:.2f} s; {res.coverage}")
    sys.exit(VERIFIED if res.verified else INCONCLUSIVE)


def _replay(entry, args, token, world) -> None:
    try:
        replay(entry, *args, schedule=token, world_size=world)
    except ConfigError:
        raise
    except Exception as e:               # the schedule's failure is the answer
        click.echo(f"{type(e).__name__}: {e}")
        sys.exit(FAILURE)
    click.echo(f"schedule {token}: no failure")
    sys.exit(VERIFIED)
