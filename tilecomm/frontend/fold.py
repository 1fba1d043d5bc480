"""Folding constant scalar expressions at compile time.

Operands come from the user's program, so folding must neither crash nor run
away: each operator is applied with its ``operator`` function (never
``eval``), work that would produce a huge integer is refused before it starts
(``7 ** 7 ** 8`` would take seconds), and every failure is a located error."""
from __future__ import annotations

import math
import operator

from ..errors import ProgramTypeError, ProgramValueError
from ..runtime.rank.tile.scalar_ops import trunc_div, trunc_rem

_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
        "//": operator.floordiv, "%": operator.mod, "**": operator.pow,
        "&": operator.and_, "|": operator.or_, "^": operator.xor,
        "<<": operator.lshift, ">>": operator.rshift}

# program integers are at most 64-bit; a constant needing far more bits is a mistake
MAX_BITS = 256


def _too_big(op, a, b) -> bool:
    """Whether an integer result would exceed MAX_BITS (estimated, not computed)."""
    if op == "<<":
        return a != 0 and a.bit_length() + b > MAX_BITS
    if op == "**" and b > 0 and abs(a) > 1:
        return a.bit_length() * b > MAX_BITS + b     # (bit_length - 1) * b <= bits of a**b
    if op == "*":
        return a.bit_length() + b.bit_length() > MAX_BITS + 1
    return False


_DEVICE_OPS = {"//": trunc_div, "%": trunc_rem}


def fold(op: str, a, b, span, device: bool = False):
    """``a <op> b`` for two Python numbers, or a located ProgramValueError.
    ``device``: the expression is device code (a kernel or a chip
    orchestration), where integer ``//`` and ``%`` truncate toward zero."""
    fn = _OPS[op]
    if device and op in _DEVICE_OPS and isinstance(a, int) and isinstance(b, int) and \
            not isinstance(a, bool) and not isinstance(b, bool):
        fn = _DEVICE_OPS[op]
    if op in ("<<", ">>", "&", "|", "^") and not (isinstance(a, int) and isinstance(b, int)):
        raise ProgramTypeError(f"operator '{op}' needs integer operands; got {a!r} and {b!r}",
                                code="TC102", span=span)
    if op in ("<<", ">>") and b < 0:
        raise ProgramValueError(f"negative shift count {b} in a constant expression",
                                code="TC200", span=span)
    if isinstance(a, int) and isinstance(b, int) and _too_big(op, a, b):
        raise ProgramValueError(f"constant expression {a} {op} {b} is too large (more than "
                                f"{MAX_BITS} bits)", code="TC218", span=span,
                                hint="program integers are at most 64-bit")
    try:
        v = fn(a, b)
    except ZeroDivisionError:
        raise ProgramValueError("division by zero in a constant expression", code="TC200",
                                span=span) from None
    except OverflowError:
        raise ProgramValueError(f"constant expression {a!r} {op} {b!r} overflows a float",
                                code="TC218", span=span) from None
    if isinstance(v, complex):
        raise ProgramValueError(f"constant expression {a!r} {op} {b!r} is not a real number",
                                code="TC200", span=span)
    if isinstance(v, float) and math.isinf(v) and not (math.isinf(a) or math.isinf(b)):
        raise ProgramValueError(f"constant expression {a!r} {op} {b!r} overflows a float",
                                code="TC218", span=span)
    return v


__all__ = ["MAX_BITS", "fold"]
