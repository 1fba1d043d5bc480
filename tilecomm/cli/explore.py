"""``tilecomm explore FILE.py::NAME``: run a HOST program under the
schedules of its ranks' visible operations (``tilecomm.testing.explore``)
and print the first failure with the schedule that leads to it."""
from __future__ import annotations

import sys

import click

from ..testing.exploration import explore, replay
from .arguments import dim_values, host_args, host_entry, program_options, scalar_values
from .programs import default_ranks


def _progress(show: bool):
    if not show:
        return None

    def report(schedules: int, bound: int):
        click.echo(f"\r  {schedules} schedules, preemption bound {bound}", err=True, nl=False)
    return report


@click.command()
@click.argument("target", metavar="FILE.py::NAME")
@program_options(max_ranks=16)
@click.option("--time-budget", type=click.FloatRange(0), default=60.0, show_default=True,
              help="Seconds the search may take ($TILECOMM_EXPLORE_BUDGET scales it).")
@click.option("--replay", "token", metavar="SCHEDULE",
              help="Run this one schedule (a token a failure printed) instead of searching.")
def explore_cmd(target, ranks, dims, scalars, time_budget, token):
    """Explore the schedules of the HOST program NAME of FILE.py: its ranks take
    turns at every notify, check of a wait, window access and dispatch end,
    in every order of dependent operations (partial-order reduction, with a
    preemption bound that widens while the time budget lasts), with the race
    check on.  The first deadlock, data race or rank error is printed with
    the schedule that leads to it, one line per step, and a token that
    --replay runs again.

    \b
    Arguments come from the annotations: inputs of small integers from a
    fixed seed, outputs zero (nothing checks the results: use
    tilecomm.testing.explore(check=...) in a test for that).  FILE is
    imported under a module name of its own, so its
    `if __name__ == "__main__":` block does not run.

    Exit status: 0 no failure, 1 a failure (or the replayed schedule failed).
    """
    path, entry = host_entry(target)
    world = ranks or default_ranks(path)
    args = host_args(entry, world, dim_values(dims), scalar_values(scalars))
    if token:
        try:
            replay(entry, *args, schedule=token, world_size=world)
        except Exception as e:           # the schedule's failure is the answer
            click.echo(f"{type(e).__name__}: {e}")
            sys.exit(1)
        click.echo(f"schedule {token}: no failure")
        return
    res = explore(entry, *args, world_size=world, time_budget_s=time_budget,
                  progress=_progress(sys.stderr.isatty()))
    if sys.stderr.isatty():
        click.echo("", err=True)
    if res.failure is not None:
        click.echo(f"{res.failure.kind} after {res.schedules} schedule(s), "
                   f"{res.seconds:.2f} s:\n")
        click.echo(res.failure.report)
        click.echo(f"\nreplay: tilecomm explore {target} --ranks {world} --replay "
                   f"{res.failure.schedule}")
        sys.exit(1)
    if res.verified:
        scope = ("every order of dependent operations" if res.complete else
                 f"the partial-order search at preemption bound {res.bound}")
        click.echo(f"no failure: {res.schedules} schedule(s) on {world} ranks in "
                   f"{res.seconds:.2f} s covered {scope}")
    else:
        click.echo(f"no failure in {res.schedules} schedule(s) on {world} ranks; the time "
                   f"budget ended before the search without preemptions finished")
