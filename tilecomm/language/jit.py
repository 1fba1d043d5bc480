"""Decorators: ``@pl.jit.host`` / ``@pl.jit`` / ``@pl.jit.incore`` and the class
form ``@pl.program`` + ``@pl.function``."""
from __future__ import annotations

import functools

from ..ir.enums import FunctionType, Level, Role
from ..ops.registry import HOST, INCORE, ORCH


class KernelFunction:
    """A program function.  Only HOST entry points are callable from Python."""

    def __init__(self, fn, kind: str, *, is_method: bool = False):
        self.fn = fn
        self.kind = kind
        self.is_method = is_method
        self._compiled: dict = {}
        functools.update_wrapper(self, fn)

    def __repr__(self):
        return f"<tilecomm {self.kind} function {self.fn.__qualname__}>"

    def _require_host(self, what):
        if self.kind != HOST:
            raise TypeError(f"{self.fn.__qualname__} is a {self.kind} function; only "
                            f"@pl.jit.host entry points can be {what} from Python")

    def compile(self, *args, config=None):
        """Compile for ``config`` (cached); with tensors, also specialise for them."""
        self._require_host("compiled")
        from ..runtime.config import RunConfig
        from ..runtime.program import CompiledProgram
        config = config or RunConfig()
        if not isinstance(config, RunConfig):
            raise TypeError(f"config must be a RunConfig, got {type(config).__name__}")
        cp = self._compiled.get(config)
        if cp is None:
            cp = self._compiled[config] = CompiledProgram(self, config=config)
        if args:
            cp.specialise(args)
        else:
            cp.precheck()
        return cp

    def __call__(self, *args, config=None):
        self._require_host("called")
        return self.compile(config=config)(*args)


class _Jit:
    """``@pl.jit`` (chip orchestration), ``.host`` and ``.incore``."""

    def __call__(self, fn=None, **kw):
        if kw:
            raise TypeError(f"@pl.jit does not take options here (got {sorted(kw)})")
        return KernelFunction(fn, ORCH)

    def host(self, fn=None, **kw):
        if "level" in kw:
            raise TypeError("@pl.jit.host does not accept level=: it always defines the HOST "
                            "orchestrator")
        if kw:
            raise TypeError(f"@pl.jit.host got unexpected options {sorted(kw)}")
        return KernelFunction(fn, HOST)

    def incore(self, fn=None, **kw):
        if kw:
            raise TypeError(f"@pl.jit.incore got unexpected options {sorted(kw)}")
        return KernelFunction(fn, INCORE)


jit = _Jit()


def function(fn=None, *, type=None, level=None, role=None):
    """Mark a method of a ``@pl.program`` class with its function kind."""

    def mark(f):
        f.__tilecomm_kind__ = (type, level, role)
        return f

    return mark(fn) if fn is not None else mark


def _kind_of(type_, level, role, name):
    if level == Level.HOST:
        if role == Role.SubWorker:
            raise TypeError(f"{name}: HOST SubWorker callbacks are not supported by tilecomm; "
                            f"run host-side checks after the call returns")
        return HOST
    if type_ == FunctionType.Orchestration:
        return ORCH
    if type_ in (FunctionType.InCore, FunctionType.AIV, FunctionType.AIC, None):
        return INCORE
    raise TypeError(f"{name}: function type {type_!r} is not supported")


class ProgramClass:
    """A ``@pl.program`` class: its marked methods form one program."""

    def __init__(self, cls):
        self.cls = cls
        self.__name__ = cls.__name__
        self.functions: dict = {}
        for name, member in vars(cls).items():
            spec = getattr(member, "__tilecomm_kind__", None)
            if spec is None:
                continue
            kind = _kind_of(*spec, name=f"{cls.__name__}.{name}")
            self.functions[name] = KernelFunction(member, kind, is_method=True)
        hosts = [f for f in self.functions.values() if f.kind == HOST]
        if len(hosts) != 1:
            raise TypeError(f"@pl.program {cls.__name__} needs exactly one "
                            f"@pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator) "
                            f"entry; found {len(hosts)}")
        self.entry = hosts[0]

    def __repr__(self):
        return f"<tilecomm program {self.cls.__name__}>"


def program(cls):
    return ProgramClass(cls)
