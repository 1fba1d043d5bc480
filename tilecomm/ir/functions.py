"""Program functions as the decorators leave them: a Python function plus its
kind, and the ``@pl.program`` class that groups them.

These are leaf objects: the front end reads them, the compiler compiles them,
and neither is imported here.  Compiling is reached through ``driver``, the
compiler the decorator that made the object handed in; so ``fn.compile()``
works without this module knowing the compiler exists."""
from __future__ import annotations

import ast
import functools
import inspect
import textwrap

from .enums import FunctionType, Level, Role
from .kinds import HOST, INCORE, ORCH, SUBWORKER


class KernelFunction:
    """A program function.  Only HOST entry points are callable from Python."""

    def __init__(self, fn, kind: str, *, is_method: bool = False, driver=None):
        self.fn = fn
        self.kind = kind
        self.is_method = is_method
        self.driver = driver
        self._compiled: dict = {}        # RunConfig -> compiled program, kept by the driver
        functools.update_wrapper(self, fn)

    def __repr__(self):
        return f"<tilecomm {self.kind} function {self.fn.__qualname__}>"

    @property
    def requires_runtime_binding(self) -> bool:
        """A SubWorker whose body is only ``...`` (after a docstring): an
        abstract callback that ``prepare(callbacks={name: fn})`` must bind."""
        if self.kind != SUBWORKER:
            return False
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(self.fn)))
        except (OSError, TypeError, SyntaxError):
            return False
        body = tree.body[0].body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str) and len(body) > 1:
            body = body[1:]                  # a docstring does not make a body concrete
        return len(body) == 1 and isinstance(body[0], ast.Expr) and \
            isinstance(body[0].value, ast.Constant) and body[0].value.value is Ellipsis

    def _require_host(self, what):
        if self.kind != HOST:
            raise TypeError(f"{self.fn.__qualname__} is a {self.kind} function; only "
                            f"@pl.jit.host entry points can be {what} from Python")
        if self.driver is None:
            raise TypeError(f"{self.fn.__qualname__} was not made by a tilecomm decorator "
                            f"that can compile it")

    def compile(self, *args, config=None):
        """Compile for ``config`` (cached); with tensors, also specialise for them."""
        self._require_host("compiled")
        return self.driver.compile_function(self, args, config)

    def __call__(self, *args, config=None):
        self._require_host("called")
        return self.compile(config=config)(*args)


def kind_of(type_, level, role, name) -> str:
    """The function kind ``@pl.function(type=, level=, role=)`` denotes."""
    if level == Level.HOST:
        return SUBWORKER if role == Role.SubWorker else HOST
    if type_ == FunctionType.Orchestration:
        return ORCH
    if type_ in (FunctionType.InCore, FunctionType.AIV, FunctionType.AIC, None):
        return INCORE
    raise TypeError(f"{name}: function type {type_!r} is not supported")


class ProgramClass:
    """A ``@pl.program`` class: its marked methods form one program."""

    def __init__(self, cls, *, driver=None):
        self.cls = cls
        self.__name__ = cls.__name__
        self.driver = driver
        self.functions: dict = {}
        for name, member in vars(cls).items():
            spec = getattr(member, "__tilecomm_kind__", None)
            if spec is None:
                continue
            kind = kind_of(*spec, name=f"{cls.__name__}.{name}")
            # SubWorker methods are declared without ``self``
            self.functions[name] = KernelFunction(member, kind, is_method=kind != SUBWORKER,
                                                  driver=driver)
        # HOST orchestrators: each is an entry a call can name (compiled["name"])
        self.entries = {n: f for n, f in self.functions.items() if f.kind == HOST}
        if not self.entries:
            raise TypeError(f"@pl.program {cls.__name__} needs a "
                            f"@pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator) "
                            f"entry; found none")
        self.entry = next(iter(self.entries.values())) if len(self.entries) == 1 else None
        self.sub_workers = {n: f for n, f in self.functions.items() if f.kind == SUBWORKER}

    def __repr__(self):
        return f"<tilecomm program {self.cls.__name__}>"


__all__ = ["KernelFunction", "ProgramClass", "kind_of"]
