"""What ``tilecomm check`` compiles: the programs a Python file defines at
module level, for a world size, from their annotations alone.

The file is imported under a module name of its own (not ``__main__``), so
its ``if __name__ == "__main__":`` block does not run; the rest of its top
level does, as on any import."""
from __future__ import annotations

import ast
import importlib.util
import os
import sys
import traceback
import uuid
from typing import NamedTuple

from ..compiler import CompiledProgram
from ..errors import Span, UserError
from ..frontend.resolve import SelfNamespace
from ..ir.annotations import annotation_type
from ..ir.functions import KernelFunction, ProgramClass
from ..ir.kinds import HOST, INCORE, ORCH
from ..ir.types import Dim, TensorType, bind_shape
from ..runtime.config import DistributedConfig, RunConfig

DEFAULT_RANKS = 2


class Diagnostic(NamedTuple):
    """One finding, as ``--format json`` prints it."""

    file: str
    line: int
    col: int
    severity: str              # "error", "warning" or "note"
    code: str                  # "TCnnn", or "" for an error outside the compiler
    message: str
    hint: str | None = None
    program: str = ""

    def render(self) -> str:
        tag = f"{self.severity}[{self.code}]" if self.code else self.severity
        text = f"{self.file}:{self.line}:{self.col}: {tag}: {self.message}"
        return text + (f"\n  hint: {self.hint}" if self.hint else "")


class Target(NamedTuple):
    """A program to compile: its name, entry function and ``self`` namespace."""

    name: str
    entry: KernelFunction
    self_ns: object = None


def load_module(path: str):
    """Import ``path`` as a fresh module whose ``__name__`` is not ``__main__``."""
    name = f"_tilecomm_check_{uuid.uuid4().hex[:8]}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module           # dataclasses and pickling look modules up by name
    old_path = list(sys.path)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))   # as `python FILE.py` would
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = old_path
    return module


def import_error(path: str, exc: BaseException) -> Diagnostic:
    """An exception raised while importing ``path``, at the file's deepest line."""
    if isinstance(exc, UserError) and exc.span is not None:
        return from_user_error(exc, "")
    line, col = 1, 1
    if isinstance(exc, SyntaxError) and exc.filename == path:
        line, col = exc.lineno or 1, exc.offset or 1
    else:
        for fr in traceback.extract_tb(exc.__traceback__):
            if os.path.abspath(fr.filename) == os.path.abspath(path):
                line, col = fr.lineno, (fr.colno or 0) + 1
    return Diagnostic(path, line, col, "error", getattr(exc, "code", "") or "",
                      f"importing the file raised {type(exc).__name__}: {exc}")


def targets(module) -> list:
    """Module-level programs: HOST functions, ``@pl.program`` classes (each
    entry), and chip / InCore functions no HOST function of the file
    reaches (checked on their own afterwards).  A program a factory built
    and the file binds to a module-level name counts, wherever the factory
    is defined."""
    out = []
    for name, obj in vars(module).items():
        if isinstance(obj, KernelFunction) and obj.kind in (HOST, ORCH, INCORE) and \
                (obj.fn.__module__ == module.__name__ or "<locals>" in obj.fn.__qualname__):
            out.append(Target(name, obj))
        elif isinstance(obj, ProgramClass) and (obj.cls.__module__ == module.__name__ or
                                                "<locals>" in obj.cls.__qualname__):
            ns = SelfNamespace(obj.cls, obj.functions)
            for entry_name, fn in obj.entries.items():
                out.append(Target(f"{name}.{entry_name}", fn, ns))
    # HOST programs first: the chip functions they reach are checked through them
    return sorted(out, key=lambda t: t.entry.kind != HOST)


def default_ranks(path: str) -> int:
    """The world size the file's own ``DistributedConfig(device_ids=...)`` names
    when every such call spells it literally and they agree, else 2."""
    sizes = file_sizes(path)
    return sizes[0] if len(sizes) == 1 else DEFAULT_RANKS


def file_sizes(path: str, module=None) -> list:
    """The world sizes the file's ``DistributedConfig(device_ids=...)`` calls
    name: spelled literally (``[0, 1, 2]``, ``list(range(3))``) or computed
    from module-level names (``list(range(N))``, N a constant of the file),
    in ``module``'s namespace when given.  Sizes that depend on a function's
    locals (a ``--ranks`` option) are not known here."""
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError, ValueError):
        return []
    sizes = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id",
                                                  getattr(node.func, "attr", "")) == \
                "DistributedConfig":
            for kw in node.keywords:
                if kw.arg == "device_ids":
                    n = _literal_len(kw.value)
                    sizes.add(n if n is not None or module is None else
                              _computed_len(kw.value, module))
    sizes.discard(None)
    return sorted(sizes)


def _computed_len(node, module):
    """len() of an expression of module-level names (None if it needs more)."""
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    ns = vars(module)
    if not names <= set(ns) | {"list", "range", "tuple", "len"}:
        return None                       # a local of some function: known only at run time
    try:
        # the file's own expression, over the file's own constants (it ran on import)
        value = eval(compile(ast.Expression(node), "<device_ids>", "eval"), dict(ns))
        return len(value) if len(value) > 0 else None
    except Exception:
        return None


def _literal_len(node):
    """len() of ``[0, 1, ...]``, ``range(K)`` or ``list(range(K))`` with literal K."""
    if isinstance(node, (ast.List, ast.Tuple)):
        return len(node.elts) if node.elts else None
    if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "list" and node.args:
        return _literal_len(node.args[0])
    if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "range":
        vals = [a.value for a in node.args if isinstance(a, ast.Constant)]
        if len(vals) == len(node.args) and all(isinstance(v, int) for v in vals):
            return len(range(*vals))
    return None


def arg_types(entry: KernelFunction, dims: dict):
    """The entry's parameter types from its annotations, ``pl.dynamic`` dims
    named in ``dims`` bound (None when nothing needs binding: the builder reads
    the annotations itself).  Raises ``UnboundShape`` for a bare ``pl.Tensor``."""
    names = list(entry.fn.__code__.co_varnames[:entry.fn.__code__.co_argcount])
    names = names[1:] if entry.is_method else names
    out, bound = [], False
    for n in names:
        t = annotation_type(_annotation(entry, n))
        if isinstance(t, TensorType):
            if t.shape is None:
                raise UnboundShape(n)
            free = {v for d in t.shape if isinstance(d, Dim) for v in d.free_vars()}
            binds = {v: dims[v.name] for v in free if v.name in dims}
            if binds:
                bound = True
                t = t.with_(shape=bind_shape(t.shape, binds))
        out.append(t)
    return out if bound else None


def unbound_dims(entry: KernelFunction) -> list:
    """Names of the ``pl.dynamic`` dims of the entry's annotations."""
    names = set()
    for key in entry.fn.__annotations__:
        t = annotation_type(_annotation(entry, key))
        if isinstance(t, TensorType) and t.shape:
            for d in t.shape:
                if isinstance(d, Dim):
                    names |= {v.name for v in d.free_vars()}
    return sorted(names)


def _annotation(entry, key):
    ann = entry.fn.__annotations__.get(key)
    if isinstance(ann, str):
        try:
            ann = eval(ann, entry.fn.__globals__)     # the user's own annotation expression
        except Exception:
            return None
    return ann


class UnboundShape(Exception):
    """A bare ``pl.Tensor`` parameter: its shape comes only from a real argument."""


def compile_target(t: Target, ranks: int, dims: dict, platform: str) -> tuple:
    """(diagnostics, qualified names of the functions the program reached,
    the program's IR or None).  A ``pl.dynamic`` dim ``dims`` does not bind is
    the world size, as ``explore`` and ``run`` make it; if the program does not
    compile that way but does with the dim left open, it is checked open."""
    cfg = RunConfig(platform=platform, lint="off",
                    distributed_config=DistributedConfig(device_ids=list(range(ranks))))
    cp = CompiledProgram(t.entry, config=cfg, self_ns=t.self_ns)
    auto = {n: ranks for n in unbound_dims(t.entry) if n not in dims}
    try:
        types = arg_types(t.entry, {**auto, **dims})
    except UnboundShape as e:
        span = _def_span(t.entry)
        return [Diagnostic(span.file, span.line, span.col, "note", "", (
            f"{t.name} not checked: parameter '{e}' is a bare pl.Tensor, whose shape comes "
            f"from the call's argument"), "annotate it pl.Tensor[[shape], dtype]", t.name)], \
            set(), None
    try:
        prog, found = cp.check(types)
    except UserError as e:
        if not auto:
            return [from_user_error(d, t.name) for d in e.diagnostics], set(), None
        try:                         # is it the binding that fails, or the program?
            prog, found = cp.check(arg_types(t.entry, dims))
        except UserError:
            return [from_user_error(d, t.name) for d in e.diagnostics], set(), None
        auto = {}
    diags = [from_warning(w, t.name) for w in found]
    missing = [n for n in unbound_dims(t.entry) if n not in dims and n not in auto]
    if missing and t.entry.kind == HOST:
        span = _def_span(t.entry)
        diags.append(Diagnostic(span.file, span.line, span.col, "note", "", (
            f"{t.name}: pl.dynamic dims {', '.join(missing)} left unbound (the world size "
            f"{ranks} does not fit them): windows sized by them are checked without the "
            f"protocol lint's cell-level rules"),
            f"bind them, e.g. --dim {missing[0]}=VALUE", t.name))
    return diags, {fn.py_name for fn in prog.functions.values()}, prog


def _def_span(entry) -> Span:
    code = entry.fn.__code__
    return Span(code.co_filename, code.co_firstlineno, 1)


def from_user_error(e: UserError, program: str) -> Diagnostic:
    s = e.span
    return Diagnostic(s.file if s else "?", s.line if s else 0, s.col if s else 0, "error",
                      e.code, e.message, e.hint, program)


def from_warning(w, program: str) -> Diagnostic:
    s = w.span
    return Diagnostic(s.file if s else "?", s.line if s else 0, s.col if s else 0, "warning",
                      w.code, w.message, w.hint, program)


__all__ = ["DEFAULT_RANKS", "Diagnostic", "Target", "compile_target", "default_ranks",
           "file_sizes", "import_error", "load_module", "targets"]
