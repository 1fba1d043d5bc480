"""Small pieces shared by the front-end modules."""
from __future__ import annotations

from ..ir.types import Type


class PyValue(Type):
    """Compile-time type of a Python object used as a callee (op stub, function)."""

    kind = "python object"


_PY = PyValue()


def _err(cls, msg, span, code, hint=None):
    return cls(msg, code=code, span=span, hint=hint)
