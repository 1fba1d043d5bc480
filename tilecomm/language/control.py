"""Control-flow forms of the ``pl`` surface (defined with the IR, which
recognises them by identity)."""
from ..ir.forms import (SpecialForm, at, manual_scope, parallel, range, scope, spmd, spmd_submit,
                        submit, unroll, yield_)

__all__ = ["SpecialForm", "at", "manual_scope", "parallel", "range", "scope", "spmd", "spmd_submit",
           "submit", "unroll", "yield_"]
