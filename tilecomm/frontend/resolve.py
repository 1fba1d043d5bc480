"""Resolve names by value: what Python object does ``pl.load`` / ``P.notify``
/ ``SIZE`` denote in the function's globals and closure?"""
from __future__ import annotations

import ast
import builtins
import types

from ..errors import ProgramSyntaxError
from ..ops.registry import records

_MISSING = object()


class SelfNamespace:
    """``self`` inside a ``@pl.program`` class: ``self.f`` names a sibling function."""

    def __init__(self, program_cls, functions: dict):
        self.program_cls = program_cls
        self.functions = functions


def lookup_name(src, name: str):
    if name in src.closure:
        return src.closure[name]
    if name in src.globals:
        return src.globals[name]
    b = getattr(builtins, name, _MISSING)
    return b


def _pld_hint_for(mod_name: str, attr: str) -> str | None:
    if mod_name == "tilecomm.language.distributed":
        spellings = [s for r in records() for s in r.spellings]
        for cat in ("system", "tensor", "tile"):
            if f"pld.{cat}.{attr}" in spellings:
                return f"pld.{attr} has no short form; write pld.{cat}.{attr}"
        short = [s for s in spellings if s.startswith("pld.") and s.count(".") == 1]
        return "short forms are " + ", ".join(short)
    return None


def resolve_attr(base, attr: str, node: ast.AST, span):
    """getattr on a Python value, with tilecomm's own diagnostics for unknown ops."""
    value = getattr(base, attr, _MISSING)
    if value is not _MISSING:
        return value
    if isinstance(base, types.ModuleType) or hasattr(base, "__tilecomm_namespace__"):
        qual = getattr(base, "__tilecomm_namespace__", None) or base.__name__
        if qual in ("tilecomm.language.distributed", "pld"):
            raise ProgramSyntaxError(f"Unknown distributed operation 'pld.{attr}'", code="TC306",
                                     span=span, hint=_pld_hint_for("tilecomm.language.distributed",
                                                                   attr))
        if qual.startswith("pld."):
            raise ProgramSyntaxError(f"Unknown distributed operation '{qual}.{attr}'",
                                     code="TC306", span=span,
                                     hint="pld categories are pld.system, pld.tensor, pld.tile")
        if qual.startswith("tilecomm.language") or qual.startswith("pl"):
            raise ProgramSyntaxError(f"Unknown operation '{_short(qual)}.{attr}'", code="TC307",
                                     span=span)
    raise ProgramSyntaxError(f"'{type(base).__name__}' object has no attribute '{attr}'",
                             code="TC307", span=span)


def _short(qual: str) -> str:
    return {"tilecomm.language": "pl"}.get(qual, qual)
