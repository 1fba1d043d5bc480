"""Loading a decorated function's source, and mapping AST positions to spans."""
from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass

from ..errors import ProgramSyntaxError, Span


@dataclass
class FunctionSource:
    fn: object
    tree: ast.FunctionDef
    file: str
    line_offset: int
    col_offset: int
    globals: dict
    closure: dict

    def span(self, node) -> Span:
        line = getattr(node, "lineno", 1) + self.line_offset
        col = getattr(node, "col_offset", 0) + self.col_offset + 1
        return Span(self.file, line, col, self.tree.name)


_CACHE: dict = {}


def load(fn) -> FunctionSource:
    """Parse ``fn``'s source once (cached by the function object)."""
    cached = _CACHE.get(fn)
    if cached is not None:
        return cached
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError) as e:
        raise ProgramSyntaxError(f"cannot read the source of {getattr(fn, '__qualname__', fn)}: "
                                 f"{e}", code="TC302",
                                 hint="tilecomm programs must be defined in a file") from None
    raw = "".join(lines)
    dedented = textwrap.dedent(raw)
    indent = len(lines[0]) - len(lines[0].lstrip()) if lines else 0
    tree = ast.parse(dedented)
    fdef = tree.body[0]
    if not isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise ProgramSyntaxError(f"{fn!r} is not a plain function definition", code="TC302")
    try:
        cv = inspect.getclosurevars(fn)
        closure = dict(cv.nonlocals)
    except (TypeError, ValueError):
        closure = {}
    src = FunctionSource(fn=fn, tree=fdef, file=inspect.getsourcefile(fn) or "<unknown>",
                         line_offset=first - 1, col_offset=indent, globals=fn.__globals__,
                         closure=closure)
    _CACHE[fn] = src
    return src
