"""Build-time pages of the documentation site (an MkDocs hook module).

The op reference is written from the op registry, one page per namespace,
through the same functions ``tilecomm ops`` prints with; the error reference
from ``tilecomm.errors.CODES`` and its ``FIXES``, with an example for each
code that the compile-error and lint tests mark in their programs
(``# E:TCnnn`` / ``# W:TCnnn``) -- programs those tests compile and check
for exactly that code, so an example cannot show the wrong one.  Nothing
here is kept in docs/: every build writes these pages anew.
"""
from __future__ import annotations

import ast
import os
import re

from mkdocs.structure.files import File

from tilecomm.cli.ops import catalogue, facts, raised, where
from tilecomm.errors import CODES, FIXES
from tilecomm.ir.effects import Effect
from tilecomm.ir.kinds import KIND_NAMES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPS_DIR = "reference/ops"
OPS_NAV_TITLE = "Ops"
ERRORS_PAGE = "reference/errors.md"
# test programs whose marked lines raise (E) or warn (W) with the code they name
EXAMPLE_FILES = ("tests/unit/bad_programs.py", "tests/unit/bad_pl_programs.py",
                 "tests/unit/bad_async_programs.py",
                 "tests/unit/bad_dump_programs.py", "tests/unit/lint_programs.py")
MARKER = re.compile(r"#\s*([EW]):(TC\d{3})\b[-\w]*")
# code ranges of the error reference, by their leading digit
CODE_GROUPS = {
    "1": "Operands and calls (compile time)",
    "2": "Values, shapes and dtypes (compile time)",
    "3": "Constructs and placement (compile time)",
    "4": "Configuration, host arguments, the worker API and run artefacts",
    "5": "While ranks run",
    "6": "Checkers: races and exploration",
    "7": "Protocol lint (warnings; errors under lint=\"error\")",
}
EFFECT_MEANING = {
    Effect.READ: "reads local memory (a tensor, or this rank's window copy)",
    Effect.WRITE: "writes local memory",
    Effect.REMOTE_READ: "reads a peer's window copy",
    Effect.REMOTE_WRITE: "writes a peer's window copy",
    Effect.SIGNAL: "sets or adds a signal cell that a wait may be blocked on",
    Effect.WAIT: "blocks until a signal cell reaches a value",
    Effect.ALLOC: "allocates memory (a window buffer, an intermediate tensor)",
}


# ------------------------------------------------------------------ op pages
def _namespace(rec) -> str:
    return rec.name.rsplit(".", 1)[0]


def _records():
    """The registry's records, each once, by name."""
    return sorted({id(r): r for r in catalogue().values()}.values(), key=lambda r: r.name)


def _namespaces() -> list:
    return sorted({_namespace(r) for r in _records()})


def _page_of(namespace: str) -> str:
    return f"{OPS_DIR}/{namespace}.md"


def _anchor(name: str) -> str:
    return name.replace(".", "-")


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _plain(text: str) -> str:
    """``text`` as Markdown that shows it as written: characters Markdown
    would read as emphasis, links or HTML escaped, outside `code` spans."""
    parts = text.split("`")
    for i in range(0, len(parts), 2):
        parts[i] = re.sub(r"([\\*_\[\]])", r"\\\1", parts[i]).replace("<", "&lt;")
    return "`".join(parts)


def _op_section(rec) -> list:
    lines = [f"## `{rec.name}` {{#{_anchor(rec.name)}}}", "",
             "```python", f"{rec.name}{rec.signature}", "```", "",
             "| | |", "|---|---|"]
    for label, text in facts(rec):
        lines.append(f"| {label or 'collective'} | {_cell(text)} |")
    codes = ", ".join(f"[{code}](../errors.md#{code.lower()})" for code, _ in raised(rec))
    lines.append(f"| errors it can raise | {codes} |")
    lines.append("")
    if rec.doc:
        lines += [rec.doc.strip(), ""]
    return lines


def namespace_page(namespace: str) -> str:
    recs = [r for r in _records() if _namespace(r) == namespace]
    lines = [f"# `{namespace}`", "",
             f"The {len(recs)} op(s) whose name is in `{namespace}`, written from the op "
             f"registry when this site was built (`tilecomm ops NAME` prints the same).", ""]
    for rec in recs:
        lines += _op_section(rec)
    return "\n".join(lines)


def ops_index_page() -> str:
    recs = _records()
    lines = ["# Op reference", "",
             f"Every primitive a tilecomm program may call: {len(recs)} ops, one record each "
             f"in the op registry (`tilecomm/ops/`).  These pages are written from those "
             f"records when the site is built, so they list exactly what the compiler "
             f"accepts; `tilecomm ops` prints the same catalogue in a terminal.  Decorators, "
             f"types and control flow (`pl.jit`, `pl.range`, `pl.at`, ...) are part of the "
             f"language, not registry ops.", "",
             "## Where an op may be used", ""]
    for kind, text in KIND_NAMES.items():
        lines.append(f"* `{kind}`: {text}")
    lines += ["", "## Effects", "",
              "What an op does to memory and signals; the scheduler orders tasks by them and "
              "the race detector checks them.", ""]
    for effect in Effect:
        lines.append(f"* `{effect.value}`: {EFFECT_MEANING[effect]}")
    lines += ["", "## Namespaces", ""]
    for ns in _namespaces():
        n = sum(1 for r in recs if _namespace(r) == ns)
        lines.append(f"* [`{ns}`]({ns}.md): {n} op(s)")
    lines += ["", "## Every spelling", "", "| spelling | may be used in |", "|---|---|"]
    for name, rec in sorted(catalogue().items()):
        link = f"{_namespace(rec)}.md#{_anchor(rec.name)}"
        alias = "" if name == rec.name else f" (another name of `{rec.name}`)"
        lines.append(f"| [`{name}`]({link}){alias} | {where(rec)} |")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ error page
def _marked_examples() -> dict:
    """code -> (file, source of the function holding its first marked line,
    line of the mark within that source, E or W)."""
    found: dict = {}
    for rel in EXAMPLE_FILES:
        path = os.path.join(ROOT, rel)
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        lines = text.splitlines()
        funcs = [n for n in ast.walk(ast.parse(text, path))
                 if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for i, line in enumerate(lines, 1):
            m = MARKER.search(line)
            if not m or m.group(2) in found:
                continue
            holders = [f for f in funcs if f.lineno <= i <= f.end_lineno]
            if not holders:
                continue
            fn = max(holders, key=lambda f: f.lineno)      # the innermost
            first = min([fn.lineno] + [d.lineno for d in fn.decorator_list])
            body = [MARKER.sub("", ln).rstrip() for ln in lines[first - 1:fn.end_lineno]]
            found[m.group(2)] = (rel, "\n".join(body), i - first + 1, m.group(1))
    return found


def errors_page() -> str:
    examples = _marked_examples()
    lines = ["# Error reference", "",
             "Every error tilecomm raises on purpose carries a stable code `TCnnn`; a "
             "program's errors also carry `file:line:col`, what was expected and what was "
             "got, and a hint.  The codes, their meanings and the fixes below are read from "
             "`tilecomm/errors.py` (`CODES` and `FIXES`) when the site is built; tests check "
             "both tables in both directions against the code that raises them.", "",
             "An example, where there is one, is a program of the project's own compile-error "
             "or lint tests (`tests/unit/`), which check that the highlighted line gets "
             "exactly this code.  Names such as `X`, `Y`, `WIN`, `SIG` are annotations shared "
             "by that test file.", "",
             f"{len(CODES)} codes, {len(examples)} with an example.", ""]
    for digit, title in CODE_GROUPS.items():
        codes = sorted(c for c in CODES if c[2] == digit)
        if not codes:
            continue
        lines += [f"## TC{digit}xx: {title}", ""]
        for code in codes:
            lines += [f"### {code} {{#{code.lower()}}}", "", f"**{_plain(CODES[code])}.**", "",
                      f"Fix: {_plain(FIXES[code])}.", ""]
            if code in examples:
                rel, src, mark, kind = examples[code]
                what = "warns" if kind == "W" else "fails"
                lines += [f"Example (`{rel}`: the highlighted line {what} with {code}):", "",
                          f'```python hl_lines="{mark}"', src, "```", ""]
    missing = sorted(set(CODES) - {c for c in CODES if c[2] in CODE_GROUPS})
    if missing:
        raise ValueError(f"error codes outside every group of the reference: {missing}")
    return "\n".join(lines)


# ------------------------------------------------------------------ MkDocs events
def on_config(config):
    """Fill the nav entry "Ops" with the index and one page per namespace."""
    pages = [f"{OPS_DIR}/index.md"] + [{ns: _page_of(ns)} for ns in _namespaces()]

    def fill(items):
        for i, item in enumerate(items):
            if isinstance(item, dict):
                (title, value), = item.items()
                if title == OPS_NAV_TITLE:
                    items[i] = {title: pages}
                elif isinstance(value, list):
                    fill(value)

    fill(config["nav"])
    return config


def on_files(files, config):
    generated = {f"{OPS_DIR}/index.md": ops_index_page(), ERRORS_PAGE: errors_page()}
    generated.update({_page_of(ns): namespace_page(ns) for ns in _namespaces()})
    for path, content in generated.items():
        files.append(File.generated(config, path, content=content))
    return files
