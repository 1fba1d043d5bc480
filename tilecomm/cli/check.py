"""``tilecomm check FILE.py``: compile every program of a file without
starting a rank, and print its errors and protocol-lint warnings."""
from __future__ import annotations

import contextlib
import json
import sys

import click

from ..ir.kinds import HOST
from ..ir.types import TensorType
from ..runtime.config import PLATFORMS
from .arguments import dim_values
from .programs import (Diagnostic, compile_target, default_ranks, import_error, load_module,
                       targets)


def _takes_windows(entry) -> bool:
    from_ann = [p.type for p in entry.params]
    return any(isinstance(t, TensorType) and t.dist for t in from_ann)


def _progress(items, show: bool):
    if not show:
        return contextlib.nullcontext(items)
    return click.progressbar(items, label="checking", file=sys.stderr,
                             item_show_func=lambda j: j[0].name if j else None)


def run_check(path, ranks, dims, platform, show_progress=False) -> list:
    """Every diagnostic of the file's programs, in order, without duplicates."""
    try:
        # the file's own prints must not mix with the report (JSON on stdout)
        with contextlib.redirect_stdout(sys.stderr):
            module = load_module(path)
    except (Exception, SystemExit) as e:         # the user's top level: report, don't crash
        return [import_error(path, e)]
    found = targets(module)
    hosts = [t for t in found if t.entry.kind == HOST]
    jobs = [(t, n) for t in hosts for n in ranks]
    diags, reached, failed = [], set(), False
    with _progress(jobs, show_progress) as bar:
        for t, n in bar:
            d, names = compile_target(t, n, dims, platform)
            diags += d
            reached |= names
            failed = failed or any(x.severity == "error" for x in d)
    for t in found:
        if t.entry.kind == HOST or t.entry.fn.__qualname__ in reached:
            continue
        code = t.entry.fn.__code__
        if _takes_windows(t.entry):
            if failed:      # a HOST program that did not build may be the one that reaches it
                continue
            diags.append(Diagnostic(code.co_filename, code.co_firstlineno, 1, "note", "", (
                f"{t.name} not checked: no @pl.jit.host program of this file dispatches it, "
                f"and its window parameters need one to allocate them"), None, t.name))
            continue
        diags += compile_target(t, 1, dims, platform)[0]      # a single-chip program
    seen, out = set(), []
    for d in diags:
        key = d[:6]
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


@click.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--ranks", "-n", type=click.IntRange(1, 4096), multiple=True,
              help="World size to compile for (repeat for several).  Default: the size "
                   "the file's own DistributedConfig(device_ids=...) spells literally, "
                   "else 2.")
@click.option("--dim", "dims", multiple=True, metavar="NAME=VALUE",
              help="Bind the pl.dynamic dim NAME of the HOST parameters (repeatable); "
                   "unbound dims stay symbolic.")
@click.option("--platform", type=click.Choice(sorted(PLATFORMS)), default="cpu",
              show_default=True, help="Profile whose limits are enforced.")
@click.option("--strict", is_flag=True, help="Exit 1 on warnings too.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="json: a list of {file, line, col, severity, code, "
                                      "message, hint, program}.")
def check(file, ranks, dims, platform, strict, fmt):
    """Compile every program of FILE without starting a rank; print its errors
    and protocol-lint warnings (TC7xx) as file:line:col: severity[code].

    \b
    Checked: every module-level @pl.jit.host function and @pl.program class,
    and the @pl.jit / @pl.jit.incore functions they dispatch; a chip or
    InCore function no HOST function reaches is compiled on its own when it
    takes no window.  Programs made inside a factory function (built when it
    is called) are not seen.  Argument shapes come from the annotations
    (pl.Tensor[[shape], dtype]); a bare pl.Tensor parameter cannot be checked.

    \b
    FILE is imported under a module name of its own, so its
    `if __name__ == "__main__":` block does not run -- the rest of its top
    level does, as on any import.

    Exit status: 0 clean, 1 on errors (and on warnings with --strict).
    """
    bound = dim_values(dims)
    sizes = list(dict.fromkeys(ranks)) or [default_ranks(file)]
    show = fmt == "text" and sys.stderr.isatty()
    diags = run_check(file, sizes, bound, platform, show_progress=show)
    errors = sum(d.severity == "error" for d in diags)
    warns = sum(d.severity == "warning" for d in diags)
    if fmt == "json":
        click.echo(json.dumps([d._asdict() for d in diags], indent=2))
    else:
        for d in diags:
            click.echo(d.render())
        sizes_text = ", ".join(map(str, sizes))
        click.echo(f"{file}: {errors} error(s), {warns} warning(s) "
                   f"(world size {sizes_text})", err=True)
    if errors or (strict and warns):
        sys.exit(1)
