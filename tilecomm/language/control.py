"""Control-flow forms of the ``pl`` surface (defined with the IR, which
recognises them by identity)."""
from ..ir.forms import SpecialForm, parallel, range, unroll, yield_

__all__ = ["SpecialForm", "parallel", "range", "unroll", "yield_"]
