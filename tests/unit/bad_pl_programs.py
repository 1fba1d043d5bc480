"""Programs with one mistake each in the pl op set (arrays, memory spaces,
matmul, assemble, slicing, casts, loops, lanes, placement), and the table of
their compile-error cases.  ``test_compile_errors`` runs the table with the
same checks as its own (``# E:<tag>`` markers locate the expected line)."""
import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.errors import ProgramSyntaxError, ProgramTypeError, ProgramValueError

from bad_programs import SIG, WIN, X, Y

SYNTAX = (SyntaxError, ProgramSyntaxError)
TYPE = (TypeError, ProgramTypeError)
VALUE = (ValueError, ProgramValueError)


# ------------------------------------------------------------------ pl.Array
@pl.jit.incore
def k_array_two_indices(x: X, y: Y, win: WIN, sig: SIG):
    h = pl.array.create(4, pl.INT32)
    v = h[0, 1]  # E:TC250
    return y


@pl.jit.incore
def k_array_float_element(x: X, y: Y, win: WIN, sig: SIG):
    h = pl.array.create(4, pl.INT32)
    h[0] = 1.5  # E:TC250
    return y


@pl.jit.incore
def k_array_index_out_of_bounds(x: X, y: Y, win: WIN, sig: SIG):
    h = pl.array.create(4, pl.INT32)
    v = h[4]  # E:TC202
    return y


@pl.jit.incore
def k_array_bool_dtype(x: X, y: Y, win: WIN, sig: SIG):
    h = pl.array.create(4, pl.BOOL)  # E:TC250
    return y


@pl.jit.incore
def k_array_float_index(x: X, y: Y, win: WIN, sig: SIG):
    h = pl.array.create(4, pl.INT32)
    v = h[1.0]  # E:TC250
    return y


CASES = [
    (k_array_two_indices, "TC250", TYPE, "0, 1", ["one integer index", "got '(0, 1)'"]),
    (k_array_float_element, "TC250", TYPE, "1.5", ["Array[4]<INT32>", "integer scalar",
                                                   "got 1.5"]),
    (k_array_index_out_of_bounds, "TC202", VALUE, "4]", ["index 4", "Array[4]<INT32>"]),
    (k_array_bool_dtype, "TC250", TYPE, "pl.BOOL", ["integer, float or pl.TASK_ID", "got BOOL"]),
    (k_array_float_index, "TC250", TYPE, "1.0", ["integer scalar", "got 1.0"]),
]
