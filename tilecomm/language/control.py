"""Control-flow forms of the ``pl`` surface (defined with the IR, which
recognises them by identity)."""
from ..ir.forms import (SpecialForm, at, cond, dump_tag, manual_scope, parallel, range, scope, spmd,
                        spmd_submit, split_aiv, submit, unroll, while_, yield_)

__all__ = ["SpecialForm", "at", "cond", "dump_tag", "split_aiv", "while_", "manual_scope", "parallel", "range", "scope", "spmd", "spmd_submit",
           "submit", "unroll", "yield_"]
