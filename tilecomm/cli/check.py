"""``tilecomm check FILE.py``: compile every program of a file without
starting a rank, and print its errors and protocol-lint warnings."""
from __future__ import annotations

import contextlib
import json
import os
import sys

import click

from ..ir.kinds import HOST
from ..ir.types import TensorType
from ..runtime.config import PLATFORMS
from .arguments import dim_values
from ..verify.world import rank_rows
from .programs import (Diagnostic, compile_target, file_sizes, import_error, load_module,
                       targets)


def _takes_windows(entry) -> bool:
    from_ann = [p.type for p in entry.params]
    return any(isinstance(t, TensorType) and t.dist for t in from_ann)


def _progress(items, show: bool):
    if not show:
        return contextlib.nullcontext(items)
    return click.progressbar(items, label="checking", file=sys.stderr,
                             item_show_func=lambda j: j[0].name if j else None)


# world sizes a program is checked at when neither --ranks, the program nor
# its file says which: the small sizes where protocols differ (2 has one
# neighbour each way, 3 the first odd ring, 4 a power of two > 2)
DEFAULT_SIZES = (2, 3, 4)


def implied_sizes(t, dims, platform) -> list:
    """The world size a HOST program implies: the row count of a HOST tensor
    it indexes by the dispatch's rank (``xs[r]`` with ``device=r``), when
    static.  Empty when nothing says."""
    _, _, prog = compile_target(t, DEFAULT_SIZES[0], dims, platform)
    if prog is None:
        return []
    # rows the annotation fixes (a pl.dynamic one was bound to the size just tried)
    fixed = {p.name for p in t.entry.params if p.type is not None and p.type.shape and
             isinstance(p.type.shape[0], int)}
    rows = sorted({r for name, r, _, _ in rank_rows(prog) if r and name in fixed})
    return rows[:1] if len(rows) == 1 else []


def sizes_for(t, ranks, file_default, dims, platform) -> list:
    """--ranks, else what the program implies, else its file's DistributedConfig
    sizes, else ``DEFAULT_SIZES``."""
    return list(ranks) or implied_sizes(t, dims, platform) or file_default or \
        list(DEFAULT_SIZES)


def run_check(path, ranks, dims, platform, show_progress=False) -> tuple:
    """(every diagnostic of the file's programs, in order, without duplicates;
    the world sizes checked)."""
    try:
        # the file's own prints must not mix with the report (JSON on stdout)
        with contextlib.redirect_stdout(sys.stderr):
            module = load_module(path)
    except (Exception, SystemExit) as e:         # the user's top level: report, don't crash
        return [import_error(path, e)], list(ranks)
    found = targets(module)
    hosts = [t for t in found if t.entry.kind == HOST]
    file_default = file_sizes(path, module)
    jobs = [(t, n) for t in hosts for n in sizes_for(t, ranks, file_default, dims, platform)]
    diags, reached, failed = [], set(), False
    with _progress(jobs, show_progress) as bar:
        for t, n in bar:
            d, names, _ = compile_target(t, n, dims, platform)
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
    # one finding per place and code: the same line at several world sizes is
    # one mistake (its message says the first size it was found at)
    seen, out = set(), []
    for d in diags:
        key = d[:5]
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out, sorted({n for _, n in jobs}) or list(ranks)


def shown(d: Diagnostic) -> Diagnostic:
    """``d`` with its file as a user typing paths from here would name it (a
    path under the current directory is shown relative to it, as compilers
    print the paths they were given)."""
    here = os.getcwd() + os.sep
    return d._replace(file=os.path.relpath(d.file)) if d.file.startswith(here) else d


def python_files(paths) -> list:
    """The files ``paths`` name: each file, and every ``*.py`` under each
    folder (hidden folders and ``__pycache__`` skipped), in order."""
    out = []
    for p in paths:
        if not os.path.isdir(p):
            out.append(p)
            continue
        for root, dirs, files in os.walk(p):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
            out += [os.path.join(root, f) for f in sorted(files) if f.endswith(".py")]
    return list(dict.fromkeys(out))


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--ranks", "-n", type=click.IntRange(1, 4096), multiple=True,
              help="World size to compile for (repeat for several).  Default: the size "
                   "the program implies (a HOST tensor with a static row per rank), else "
                   "the sizes the file's DistributedConfig(device_ids=...) names, else 2, "
                   "3 and 4.")
@click.option("--dim", "dims", multiple=True, metavar="NAME=VALUE",
              help="Bind the pl.dynamic dim NAME of the HOST parameters (repeatable); "
                   "unbound dims are the world size, as explore and run bind them.")
@click.option("--platform", type=click.Choice(sorted(PLATFORMS)), default="cpu",
              show_default=True, help="Profile whose limits are enforced.")
@click.option("--strict", is_flag=True, help="Exit 1 on warnings too.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="json: a list of {file, line, col, severity, code, "
                                      "message, hint, program}.")
def check(paths, ranks, dims, platform, strict, fmt):
    """Compile every program of each FILE (every *.py of a folder) without
    starting a rank; print its errors and protocol-lint warnings (TC7xx) as
    file:line:col: severity[code].

    \b
    Checked: every @pl.jit.host function and @pl.program class bound to a
    module-level name -- one a factory built (main = build(4)) included --
    and the @pl.jit / @pl.jit.incore functions they dispatch; a chip or
    InCore function no HOST function reaches is compiled on its own when it
    takes no window.  A program built only inside a function (when the script
    runs) is not seen: bind one at module level to check it.  Argument shapes
    come from the annotations (pl.Tensor[[shape], dtype]); a bare pl.Tensor
    parameter cannot be checked.

    \b
    FILE is imported under a module name of its own, so its
    `if __name__ == "__main__":` block does not run -- the rest of its top
    level does, as on any import.

    Exit status: 0 clean, 1 on errors (and on warnings with --strict).
    """
    bound = dim_values(dims)
    ranks = list(dict.fromkeys(ranks))
    show = fmt == "text" and sys.stderr.isatty()
    every, status = [], 0
    for file in python_files(paths):
        diags, sizes = run_check(file, ranks, bound, platform, show_progress=show)
        every += diags
        errors = sum(d.severity == "error" for d in diags)
        warns = sum(d.severity == "warning" for d in diags)
        if fmt == "text":
            for d in diags:
                click.echo(shown(d).render())
            sizes_text = (f"world size {sizes[0]}" if len(sizes) == 1 else
                          f"world sizes {', '.join(map(str, sizes))}" if sizes else
                          "no HOST program")
            click.echo(f"{file}: {errors} error(s), {warns} warning(s) ({sizes_text})",
                       err=True)
        if errors or (strict and warns):
            status = 1
    if fmt == "json":
        click.echo(json.dumps([d._asdict() for d in every], indent=2))
    if status:
        sys.exit(1)
