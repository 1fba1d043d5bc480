"""The protocol lint: named, independent rules over the events of a
program's abstract execution (``analysis/protocol.py``), reported together.

A lint rule finds a protocol that compiles and may even pass a run, but is
wrong on some schedule (a wait that overshoots, data published after its
signal) or can never finish.  Its findings are warnings (``TC7xx``):
``RunConfig(lint="warn")`` (the default) shows them once per source line
when a program is compiled, ``"error"`` raises them as a ``LintError``
before any rank starts, ``"off"`` skips the lint; ``tilecomm check FILE.py``
prints them without running anything.

Every rule reasons only from what the abstract execution knows exactly: a
peer, cell or value it could not compute, or an event that may run any
number of times, makes the rules that need it stay silent."""
from __future__ import annotations

import warnings
from typing import Callable, NamedTuple

from ..analysis.protocol import protocol_facts
from ..errors import LintError, TilecommWarning
from ..runtime.config import LINT_MODES


class LintRule(NamedTuple):
    name: str
    code: str
    doc: str
    check: Callable              # check(pf, prog) -> iterable of TilecommWarning


LINT_RULES: list = []


def lint_rule(name: str, code: str):
    """Register ``fn(pf, prog)`` as the lint rule ``name`` reporting ``code``."""

    def deco(fn):
        if any(r.name == name or r.code == code for r in LINT_RULES):
            raise AssertionError(f"lint rule {name} ({code}) declared twice")
        LINT_RULES.append(LintRule(name, code, (fn.__doc__ or "").strip(), fn))
        return fn

    return deco


def lint(prog, facts) -> list:
    """The warnings of every lint rule, one per (code, source line), in rule order."""
    pf = protocol_facts(prog, facts)
    out, seen = [], set()
    for r in LINT_RULES:
        for w in r.check(pf, prog):
            key = (w.code, w.span)
            if key not in seen:
                seen.add(key)
                out.append(w)
    return out


def report(found, mode: str, registry: dict | None = None) -> None:
    """Act on the lint's findings as ``RunConfig.lint`` says.  ``registry`` is
    the warnings registry of the user's module: Python then shows each
    warning once per source line, as it does for warnings the code raises."""
    if not found or mode == "off":
        return
    if mode == "error":
        raise LintError(found)
    for w in found:
        span = w.span
        warnings.warn_explicit(w, TilecommWarning, span.file if span else "<program>",
                               span.line if span else 0, registry=registry)


__all__ = ["LINT_MODES", "LINT_RULES", "LintRule", "lint", "lint_rule", "report"]
