"""``tilecomm run``: a user's script, or one program of a file, run with the
run-time checkers switched on from the command line.

Two forms, told apart by ``::`` in the target:

* ``tilecomm run SCRIPT.py ARGS...`` runs the script as ``python SCRIPT.py
  ARGS...`` would, in this process.  The options reach the runtime through
  the environment variables ``runtime/config.py: from_env`` reads (the one
  place they are read), set before the script starts: so every call the
  script makes, ranks it forks, and every process of ``mpiexec -n N tilecomm
  run SCRIPT.py`` see them.
* ``tilecomm run FILE.py::NAME`` calls one ``@pl.jit.host`` program (or
  ``@pl.program`` class) of the file once, with arguments made from its
  annotations (as ``tilecomm explore`` makes them), the options given as
  its ``RunConfig``, and prints a checksum of each output."""
from __future__ import annotations

import contextlib
import os
import runpy
import sys
import time

import click
import numpy as np

from ..ir import compile as compile_program
from ..ir.enums import ParamDirection
from ..ir.functions import KernelFunction, ProgramClass
from ..ir.kinds import HOST
from ..runtime.config import ALL_TRANSPORTS, LINT_MODES, DistributedConfig, RunConfig
from .arguments import (dim_values, host_args, load_quietly, program_options, scalar_values,
                        split_target)
from .programs import default_ranks, targets

# option -> the variable ``from_env`` reads for it (the script form)
ENV_OF = {"detect_races": "TILECOMM_DETECT_RACES", "transport": "TILECOMM_TRANSPORT",
          "lint": "TILECOMM_LINT", "trace": "TILECOMM_TRACE",
          "poison_windows": "TILECOMM_POISON_WINDOWS"}
# options only the FILE.py::NAME form takes (a script reads its own argv)
PROGRAM_ONLY = ("--ranks", "--dim", "--scalar")
# the shell's status of a process ended by Ctrl-C (128 + SIGINT)
INTERRUPTED = 130


class _RunCommand(click.Command):
    """The script form hands everything after SCRIPT.py to the script
    untouched; the FILE.py::NAME form has no argv of its own, so its options
    may also follow the target, as in ``tilecomm explore``."""

    def parse_args(self, ctx, args):
        target = _first_positional(self, args)
        if target is not None and "::" in target:
            ctx.allow_interspersed_args = True
            ctx.ignore_unknown_options = False
        return super().parse_args(ctx, args)


def _first_positional(command, args):
    """The first argument that is neither an option nor an option's value."""
    takes_value = {name for p in command.params if isinstance(p, click.Option)
                   and not p.is_flag for name in p.opts}
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return args[i + 1] if i + 1 < len(args) else None
        if not a.startswith("-") or a == "-":
            return a
        i += 2 if a in takes_value else 1
    return None


@click.command(cls=_RunCommand, context_settings={"ignore_unknown_options": True,
                                                  "allow_interspersed_args": False})
@click.argument("target", metavar="SCRIPT.py|FILE.py::NAME")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option("--detect-races", is_flag=True,
              help="Check every call for data races (TILECOMM_DETECT_RACES=1): a race "
                   "raises DataRaceError (TC601) naming both accesses.")
@click.option("--poison-windows", is_flag=True,
              help="Fill every data window and pl.Out tensor with a sentinel before each "
                   "call (TILECOMM_POISON_WINDOWS=1): NaN for floats, 0xA5 bytes for "
                   "integers; elements nobody wrote show up in the outputs.")
@click.option("--transport", type=click.Choice(ALL_TRANSPORTS),
              help="How ranks reach each other's windows (TILECOMM_TRANSPORT).  "
                   "Default: mpi under mpiexec, else shm.")
@click.option("--lint", type=click.Choice(LINT_MODES),
              help="The protocol lint at compile time (TILECOMM_LINT): warn, error (a "
                   "finding is a LintError before any rank starts) or off.  Default: warn "
                   "up to 32 ranks.")
@click.option("--trace", "trace", metavar="DIR", type=click.Path(file_okay=False),
              help="Trace every call (TILECOMM_TRACE=DIR): each call's Perfetto trace is "
                   "written to DIR as BUILD-N.json, and its path printed.")
@program_options(max_ranks=4096, only="FILE.py::NAME only.  ")
@click.pass_context
def run(ctx, target, args, detect_races, poison_windows, transport, lint, trace, ranks, dims,
        scalars):
    """Run SCRIPT.py as `python SCRIPT.py ARGS...` would, with the run-time
    checkers the options name switched on for every call it makes; or call
    the program NAME of FILE.py once.

    \b
    SCRIPT.py: the options go before the script; everything after it is the
    script's own (sys.argv = [SCRIPT.py, ARGS...]).  They are set in the
    environment before the script starts, so ranks it forks and every
    process of `mpiexec -n N tilecomm run SCRIPT.py` see them.  A RunConfig
    field the script sets itself wins over them: RunConfig(detect_races=False),
    RunConfig(transport="shm") or RunConfig(lint="off") keeps that call as
    the script says; fields left unset (None, the default) follow the option.
    Options not given leave the environment as it is.  Exit status: the
    script's, as under python (an uncaught exception prints its traceback
    and exits 1; a data race found is the script's uncaught DataRaceError).

    \b
    FILE.py::NAME: NAME is a module-level @pl.jit.host function or a
    @pl.program class (Class.entry for one of several HOST entries).  The
    file is imported under a module name of its own, so its
    `if __name__ == "__main__":` block does not run.  Arguments come from the
    annotations: inputs of small integers from a fixed seed, outputs zero.
    The options are the call's RunConfig.  Prints one line per output
    (name, shape, dtype, sum, largest magnitude).  Exit status: 0; 1 on a
    tilecomm error (a data race, a deadlock, a compile error, a rank's
    failure: its report is printed); 2 on a bad target or option.
    """
    if target.startswith("-") and target != "-":
        raise click.NoSuchOption(target, ctx=ctx)
    if "::" in target:
        if args:
            raise click.UsageError(f"{target} takes no arguments of its own; got "
                                   f"{' '.join(args)}")
        with _environment({ENV_OF["trace"]: os.path.abspath(trace) if trace else None}):
            _run_program(target, detect_races, transport, lint, ranks, dims, scalars,
                         poison_windows)
        return
    given = [opt for opt, v in zip(PROGRAM_ONLY, (ranks, dims, scalars)) if v]
    if given:
        raise click.UsageError(f"{', '.join(given)}: for FILE.py::NAME only; a script's own "
                               f"options go after SCRIPT.py")
    if not os.path.isfile(target):
        raise click.UsageError(f"no such script: {target}")
    env = {ENV_OF["detect_races"]: "1" if detect_races else None,
           ENV_OF["poison_windows"]: "1" if poison_windows else None,
           ENV_OF["transport"]: transport, ENV_OF["lint"]: lint,
           ENV_OF["trace"]: os.path.abspath(trace) if trace else None}
    sys.exit(run_script(target, list(args), env))


@contextlib.contextmanager
def _environment(env: dict):
    """The variables of ``env`` that are not None set for the block, then as
    they were."""
    env = {k: v for k, v in env.items() if v is not None}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# ---------------------------------------------------------------- SCRIPT.py
def run_script(path: str, argv: list, env: dict) -> int:
    """Run ``path`` as ``__main__`` with ``sys.argv = [path, *argv]`` and the
    variables of ``env`` that are not None set; the exit status python would
    give (a ``SystemExit`` of the script propagates, as under python)."""
    full = os.path.abspath(path)      # python gives the main script an absolute __file__
    env = {k: v for k, v in env.items() if v is not None}
    saved = list(sys.argv), list(sys.path), {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    sys.argv = [path, *argv]
    sys.path.insert(0, os.path.dirname(os.path.realpath(path)))
    try:
        runpy.run_path(full, run_name="__main__")
    except SystemExit:
        raise
    except BaseException as e:       # the script's uncaught exception, as python reports it
        report_uncaught(e, full)
        return INTERRUPTED if isinstance(e, KeyboardInterrupt) else 1
    finally:
        sys.argv, sys.path[:] = saved[0], saved[1]
        for k, v in saved[2].items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return 0


def report_uncaught(e: BaseException, filename: str) -> None:
    """Print ``e`` through ``sys.excepthook``, as python does for an uncaught
    exception (the MPI backend chains the hook to end the whole job), with
    the traceback starting at ``filename``'s first frame: the frames above
    it are this command's and runpy's, not the user's.  A ``SyntaxError``
    of the file itself has no frame of it and prints without a traceback,
    again as python prints it."""
    tb = e.__traceback__
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) != filename:
        tb = tb.tb_next
    sys.excepthook(type(e), e.with_traceback(tb), tb)


# ------------------------------------------------------------ FILE.py::NAME
def _run_program(target, detect_races, transport, lint, ranks, dims, scalars,
                 poison_windows=False):
    path, name = split_target(target)
    try:
        module = load_quietly(path)
    except Exception as e:                               # the file's top level raised
        report_uncaught(e, os.path.abspath(path))
        sys.exit(1)
    program, entry, world = _find_program(module, path, name, ranks)
    args = host_args(entry, world, dim_values(dims), scalar_values(scalars))
    cfg = RunConfig(distributed_config=DistributedConfig(device_ids=list(range(world))),
                    transport=transport, detect_races=True if detect_races else None,
                    lint=lint, poison_windows=True if poison_windows else None)
    start = time.monotonic()
    # a tilecomm error ends the verb with its report (the command group's)
    if isinstance(program, ProgramClass):
        compiled = compile_program(program, config=cfg)
        if program.entry is None:                    # several entries: one program each
            compiled = compiled[entry.name]
        compiled(*args)
    else:
        program(*args, config=cfg)
    seconds = time.monotonic() - start
    for p, a in zip(entry.params, args):
        if p.direction in (ParamDirection.Out, ParamDirection.InOut):
            click.echo(describe_output(p.name, a))
    races = "race check on: no race" if cfg.races_enabled else "race check off"
    click.echo(f"{name} ran on {world} rank(s) over {cfg.resolved_transport()} in "
               f"{seconds:.2f} s; {races}", err=True)


def _find_program(module, path, name, ranks):
    """(what to call, its entry function, world size) for NAME of the file."""
    head, _, entry_name = name.partition(".")
    obj = getattr(module, head, None)
    if obj is None:
        raise click.UsageError(f"{path} defines no {head!r} (its HOST programs: "
                               f"{_host_programs(module)})")
    world = ranks or default_ranks(path)
    if isinstance(obj, KernelFunction) and obj.kind == HOST and not entry_name:
        return obj, obj, world
    if isinstance(obj, ProgramClass):
        if not entry_name and obj.entry is None:
            raise click.UsageError(f"{head} has several entries: name one, e.g. "
                                   f"{path}::{head}.{next(iter(obj.entries))}")
        entry = obj.entries.get(entry_name) if entry_name else obj.entry
        if entry is None:
            raise click.UsageError(f"{head} has no entry {entry_name!r}; its entries: "
                                   f"{', '.join(obj.entries)}")
        # a single-chip program runs on one device, whatever the world asked
        return obj, entry, 1 if obj.single_chip else world
    raise click.UsageError(f"{name} in {path} is not a @pl.jit.host function or a @pl.program "
                           f"class (its HOST programs: {_host_programs(module)})")


def _host_programs(module) -> str:
    return ", ".join(t.name for t in targets(module) if t.entry.kind == HOST) or "none"


def describe_output(name: str, a) -> str:
    """``name  shape  dtype  sum=S  max|x|=M``: a checksum of one output."""
    arr = np.asarray(a)
    if arr.dtype.kind in "biu":                     # exact in integers
        wide = arr.astype(np.int64)
        total, peak = int(wide.sum()), int(np.abs(wide).max(initial=0))
        return f"{name}  {tuple(arr.shape)}  {arr.dtype}  sum={total}  max|x|={peak}"
    wide = arr.astype(np.float64)
    total, peak = float(wide.sum()), float(np.abs(wide).max(initial=0.0))
    return f"{name}  {tuple(arr.shape)}  {arr.dtype}  sum={total:.10g}  max|x|={peak:.10g}"
