"""The op registry: one record per primitive.

A record is declared once, next to its type rule, and drives everything else:
the stub users call (its signature binds call arguments), where the op may be
used, the type/shape rule run by the front end, the effects the runtime and
tools care about, the runtime implementation the lowering calls, and the doc.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Callable

HOST, ORCH, INCORE = "host", "orchestration", "incore"
KIND_NAMES = {HOST: "a HOST orchestrator (@pl.jit.host)",
              ORCH: "a chip orchestration function (@pl.jit)",
              INCORE: "an InCore kernel (@pl.jit.incore)"}


@dataclass(eq=False)
class OpRecord:
    name: str                      # canonical dotted name, e.g. "pld.system.notify"
    stub: "OpStub"
    contexts: frozenset            # function kinds that may call it
    signature: inspect.Signature
    doc: str
    effects: frozenset = frozenset()   # reads / writes / remote_write / signal / wait / alloc
    impl: str | None = None        # name of the runtime function in runtime.kernel_ops / host
    static: tuple = ()             # parameters that must be compile-time constants
    rule: Callable | None = None   # type rule: rule(call) -> Type
    lower: Callable | None = None  # custom lowering: lower(gen, call) -> python expr source
    aliases: list = field(default_factory=list)

    def __repr__(self):
        return f"<op {self.name}>"


class OpStub:
    """What ``pl.load`` / ``pld.system.notify`` are at Python level.

    Calling one outside a program is a mistake: tilecomm programs are parsed,
    not executed, so the call raises with a hint."""

    def __init__(self, record_name: str, fn: Callable):
        self.__name__ = fn.__name__
        self.__qualname__ = record_name
        self.__doc__ = fn.__doc__
        self.__signature__ = inspect.signature(fn)
        self.__wrapped__ = fn
        self.record: OpRecord | None = None

    def __call__(self, *args, **kwargs):
        raise RuntimeError(
            f"{self.__qualname__}() can only be used inside a tilecomm program "
            f"(a function decorated with @pl.jit.host / @pl.jit / @pl.jit.incore); "
            f"such bodies are compiled, not run as plain Python")

    def rule(self, fn):
        self.record.rule = fn
        return fn

    def lowering(self, fn):
        self.record.lower = fn
        return fn

    def __repr__(self):
        return f"<tilecomm op {self.__qualname__}>"


_RECORDS: dict[str, OpRecord] = {}


def op(name: str, *, where, effects=(), impl=None, static=()):
    """Declare a primitive from its stub function (signature + docstring)."""

    def deco(fn):
        stub = OpStub(name, fn)
        rec = OpRecord(name=name, stub=stub, contexts=frozenset(where),
                       signature=inspect.signature(fn), doc=inspect.cleandoc(fn.__doc__ or ""),
                       effects=frozenset(effects), impl=impl, static=tuple(static))
        if name in _RECORDS:
            raise AssertionError(f"op {name} declared twice")
        _RECORDS[name] = rec
        stub.record = rec
        return stub

    return deco


def records() -> list[OpRecord]:
    from . import load_all  # noqa: F401  (records register on import)
    return list(_RECORDS.values())


def lookup(stub) -> OpRecord | None:
    rec = getattr(stub, "record", None)
    return rec if isinstance(rec, OpRecord) else None
