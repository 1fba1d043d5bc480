"""The ``tilecomm`` command (also ``python -m tilecomm``).

One group, a verb a module: ``doctor`` (what this machine offers a run),
``ops`` (the op catalogue, from the registry), ``check`` (compile a file's
programs and lint their protocols without running them), ``trace`` (a run's
trace summarised and drawn), ``explore`` (a program run under its ranks'
schedules) and ``run`` (a script or program run with checkers chosen on the
command line).  Built on click; nothing here runs at ``import tilecomm``."""
from __future__ import annotations

import click

from ..errors import InternalError, TilecommError
from .check import check
from .doctor import doctor
from .explore import explore_cmd
from .ops import ops
from .run import run
from .trace import trace


class _Group(click.Group):
    """What tilecomm reports about a program (an error in it or its
    arguments, a deadlock, a race, a rank's failure) is a verb's answer, not
    a crash: its report, exit status 1, no traceback of the command's own.
    A defect of tilecomm itself (InternalError) keeps its traceback."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except InternalError:
            raise
        except TilecommError as e:
            # on stdout, named by its type, as the verb's answer
            click.echo(f"{type(e).__name__}: {e}")
            ctx.exit(1)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tilecomm", prog_name="tilecomm")
def main():
    """tilecomm: PyPTO's distributed tile programs (pl + pld) on real processes,
    shared memory and MPI.

    \b
    Examples:
      tilecomm doctor                   what this machine offers a run
      tilecomm ops                      every op, where it may be used
      tilecomm ops pld.system.notify    one op: signature, effects, doc
      tilecomm check prog.py --ranks 4  compile and lint prog.py's programs
      tilecomm trace merged.json        a trace's time per rank, waits, critical path
      tilecomm explore prog.py::main    run main under its ranks' schedules
      tilecomm run --detect-races prog.py --ranks 4
                                        run a script with every call race-checked
    """


main.add_command(doctor)
main.add_command(ops)
main.add_command(trace)
main.add_command(check)
main.add_command(explore_cmd, name="explore")
main.add_command(run)

__all__ = ["main"]
