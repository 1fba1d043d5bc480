"""``tilecomm run``: run a script, or one program of a file, with the
run-time checkers chosen on the command line.

``tilecomm run [OPTIONS] SCRIPT.py [ARGS]...`` runs the script as ``python
SCRIPT.py ARGS...`` would; the options reach every call it makes through
the environment the runtime reads (``runtime/config.py: from_env``), so ranks
it starts and processes of an ``mpiexec`` job see them too.
``tilecomm run [OPTIONS] FILE.py::NAME`` calls one HOST program once, with
arguments made from its annotations, and prints what it wrote."""
from __future__ import annotations

import os
import runpy
import sys
import traceback

import click
import numpy as np

from ..ir.annotations import annotation_type
from ..ir.types import TensorType
from ..runtime.config import ALL_TRANSPORTS, LINT_MODES, DistributedConfig, RunConfig
from .arguments import dim_values, host_args, host_entry, program_options, scalar_values
from .programs import _annotation, default_ranks

# option -> the variable ``from_env`` reads for it
ENV = {"detect_races": "TILECOMM_DETECT_RACES", "transport": "TILECOMM_TRANSPORT",
       "lint": "TILECOMM_LINT"}


def script_env(detect_races: bool, transport, lint) -> dict:
    """The variables that carry the options to every call of a script."""
    out = {}
    if detect_races:
        out[ENV["detect_races"]] = "1"
    if transport:
        out[ENV["transport"]] = transport
    if lint:
        out[ENV["lint"]] = lint
    return out


def run_script(path: str, argv: tuple, env: dict) -> int:
    """Run ``path`` as ``python path *argv`` would; its exit status."""
    if not os.path.isfile(path):
        raise click.UsageError(f"no such script: {path}")
    os.environ.update(env)
    script = os.path.abspath(path)
    sys.argv = [path, *argv]
    sys.path.insert(0, os.path.dirname(script))
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        code = e.code
        if code is None or isinstance(code, int):
            return code or 0
        print(code, file=sys.stderr)         # SystemExit("message"), as python prints it
        return 1
    except Exception as e:
        # the traceback python would print: from the script's own frame on
        tb = e.__traceback__
        while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) != script:
            tb = tb.tb_next
        traceback.print_exception(type(e), e, tb or e.__traceback__)
        return 1
    return 0


def _outputs(entry, args) -> list:
    """(name, array) of each argument the program may write."""
    code = entry.fn.__code__
    out = []
    for name, value in zip(code.co_varnames[:code.co_argcount], args):
        t = annotation_type(_annotation(entry, name))
        if isinstance(t, TensorType) and t.direction in ("Out", "InOut"):
            out.append((name, value))
    return out


def run_program(target: str, ranks, dims, scalars, detect_races, transport, lint) -> None:
    path, entry = host_entry(target)
    world = ranks or default_ranks(path)
    args = host_args(entry, world, dim_values(dims), scalar_values(scalars))
    config = RunConfig(distributed_config=DistributedConfig(device_ids=list(range(world))),
                       transport=transport, detect_races=True if detect_races else None,
                       lint=lint)
    entry(*args, config=config)
    click.echo(f"{entry.fn.__name__} ran on {world} rank(s)")
    for name, a in _outputs(entry, args):
        v = np.asarray(a, dtype=np.float64)
        click.echo(f"  {name}: {list(a.shape)} {a.dtype}  sum {v.sum():.6g}  "
                   f"max|x| {np.abs(v).max() if v.size else 0:.6g}")


@click.command(context_settings={"ignore_unknown_options": True,
                                 "allow_interspersed_args": False})
@click.option("--detect-races", is_flag=True,
              help="Check every call for data races (TILECOMM_DETECT_RACES=1): a racy "
                   "call raises DataRaceError after writing its results back.")
@click.option("--transport", type=click.Choice(ALL_TRANSPORTS),
              help="The transport of every call (TILECOMM_TRANSPORT).")
@click.option("--lint", type=click.Choice(LINT_MODES),
              help="The protocol lint at compile time (TILECOMM_LINT): warn, error or off.")
@program_options(max_ranks=1024, only="FILE.py::NAME only.  ")
@click.argument("target", metavar="SCRIPT.py|FILE.py::NAME")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def run(detect_races, transport, lint, ranks, dims, scalars, target, args):
    """Run SCRIPT.py with ARGS as python would, with the checkers chosen here
    on for every call it makes (also under mpiexec: mpiexec -n 2 tilecomm run
    SCRIPT.py).  Options go before SCRIPT.py; what follows it is the
    script's own.  A call whose RunConfig sets transport, detect_races or
    lint itself keeps its own value: these options fill what it leaves
    unset (None).  Exit status: the script's.

    \b
    FILE.py::NAME instead calls the HOST program NAME once, on --ranks
    ranks, with arguments made from its annotations (inputs of small
    integers from a fixed seed, outputs zero), and prints each output's
    shape, sum and largest magnitude.  A deadlock, data race or rank error
    prints its report.  Exit status: 0 if the call returned, 1 otherwise.

    \b
    Examples:
      tilecomm run --detect-races examples/allreduce_quickstart.py --ranks 4
      tilecomm run --transport copy --ranks 3 prog.py::main
    """
    if "::" in target:
        if args:            # options after FILE.py::NAME: a program has no argv of its own
            p = run.make_context(click.get_current_context().info_name, [*args, target]).params
            if p["target"] != target or p["args"]:
                extra = [a for a in (p["target"], *p["args"]) if a != target]
                raise click.UsageError(f"FILE.py::NAME takes options only; got "
                                       f"{' '.join(extra)}")
            detect_races = detect_races or p["detect_races"]
            transport, lint = p["transport"] or transport, p["lint"] or lint
            ranks = p["ranks"] if p["ranks"] is not None else ranks
            dims, scalars = dims + p["dims"], scalars + p["scalars"]
        run_program(target, ranks, dims, scalars, detect_races, transport, lint)
        return
    for opt, given in (("--ranks", ranks is not None), ("--dim", dims), ("--scalar", scalars)):
        if given:
            raise click.UsageError(f"{opt} is for FILE.py::NAME; a script takes its own "
                                   f"arguments after its name")
    sys.exit(run_script(target, args, script_env(detect_races, transport, lint)))
