"""What a verifier rule is, and the driver that runs them all."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class VerifyContext:
    prog: object                 # ir.nodes.ProgramIR
    facts: object                # analysis.facts.ProgramFacts
    # names mentioned by statements the front end rejected: facts about them are
    # incomplete, so rules that report an absence (a buffer never viewed) stay quiet
    incomplete: frozenset = frozenset()


@dataclass(frozen=True)
class Rule:
    name: str
    doc: str
    check: Callable              # check(ctx) -> iterable of UserError


RULES: list = []


def rule(name: str):
    """Register ``fn(ctx)`` as the verifier rule ``name``."""

    def deco(fn):
        if any(r.name == name for r in RULES):
            raise AssertionError(f"verifier rule {name} declared twice")
        RULES.append(Rule(name, (fn.__doc__ or "").strip(), fn))
        return fn

    return deco


def verify(prog, facts, incomplete=frozenset()) -> list:
    """Diagnostics of every rule, in rule order."""
    ctx = VerifyContext(prog, facts, frozenset(incomplete))
    out = []
    for r in RULES:
        out.extend(r.check(ctx))
    return out
