"""Decorators: ``@pl.jit.host`` / ``@pl.jit`` / ``@pl.jit.incore`` and the class
form ``@pl.program`` + ``@pl.function``.

They make the leaf objects of ``ir.functions`` and attach the compiler as
their driver, which is how ``fn.compile()`` and ``tilecomm.ir.compile`` reach
it without the front end ever importing the surface."""
from __future__ import annotations

from .. import compiler as _compiler
from ..ir.functions import KernelFunction, ProgramClass
from ..ir.kinds import HOST, INCORE, ORCH


class _Jit:
    """``@pl.jit`` (chip orchestration), ``.host`` and ``.incore``."""

    def __call__(self, fn=None, **kw):
        if kw:
            raise TypeError(f"@pl.jit does not take options here (got {sorted(kw)})")
        return KernelFunction(fn, ORCH, driver=_compiler)

    def host(self, fn=None, **kw):
        if "level" in kw:
            raise TypeError("@pl.jit.host does not accept level=: it always defines the HOST "
                            "orchestrator")
        if kw:
            raise TypeError(f"@pl.jit.host got unexpected options {sorted(kw)}")
        return KernelFunction(fn, HOST, driver=_compiler)

    def incore(self, fn=None, **kw):
        if kw:
            raise TypeError(f"@pl.jit.incore got unexpected options {sorted(kw)}")
        return KernelFunction(fn, INCORE, driver=_compiler)


jit = _Jit()


def function(fn=None, *, type=None, level=None, role=None):
    """Mark a method of a ``@pl.program`` class with its function kind."""

    def mark(f):
        f.__tilecomm_kind__ = (type, level, role)
        return f

    return mark(fn) if fn is not None else mark


def program(cls):
    return ProgramClass(cls, driver=_compiler)


__all__ = ["KernelFunction", "ProgramClass", "function", "jit", "program"]
