"""Programs with one mistake each in the pl op set (arrays, memory spaces,
matmul, assemble, slicing, casts, loops, lanes, placement), and the table of
their compile-error cases.  ``test_compile_errors`` runs the table with the
same checks as its own (``# E:<tag>`` markers locate the expected line)."""
import tilecomm.language as pl
from tilecomm.errors import ProgramSyntaxError, ProgramTypeError, ProgramValueError

from bad_programs import SIG, WIN, X, XS, Y, YS, ok_kernel

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


# ------------------------------------------------------------------ memory spaces, matmul
MAT, LEFT, RIGHT = pl.MemorySpace.Mat, pl.MemorySpace.Left, pl.MemorySpace.Right


@pl.jit.incore
def k_matmul_vec_operands(x: X, y: Y, win: WIN, sig: SIG):
    a = pl.load(x, [0, 0], [2, 8])
    b = pl.move(pl.load(x, [0, 0], [2, 8], target_memory=MAT), RIGHT)
    c = pl.matmul(a, b, b_trans=True)  # E:TC251
    return y


@pl.jit.incore
def k_matmul_rhs_in_left(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.load(x, [0, 0], [2, 8], target_memory=MAT)
    c = pl.matmul(pl.move(t, LEFT), pl.move(t, LEFT), b_trans=True)  # E:TC251
    return y


@pl.jit.incore
def k_matmul_inner_mismatch(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.load(x, [0, 0], [2, 8], target_memory=MAT)
    c = pl.matmul(pl.move(t, LEFT), pl.move(t, RIGHT))  # E:TC252
    return y


@pl.jit.incore
def k_matmul_nz(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.load(x, [0, 0], [2, 8], target_memory=MAT)
    c = pl.matmul(pl.move(t, LEFT), pl.move(t, RIGHT), b_trans=True, c_matrix_nz=True)  # E:TC253
    return y


@pl.jit.incore
def k_matmul_out_int(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.load(x, [0, 0], [2, 8], target_memory=MAT)
    c = pl.matmul(pl.move(t, LEFT), pl.move(t, RIGHT), out_dtype=pl.INT32, b_trans=True)  # E:TC204
    return y


@pl.jit.incore
def k_load_into_left(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.load(x, [0, 0], [2, 8], target_memory=LEFT)  # E:TC251
    return y


@pl.jit.incore
def k_move_into_acc(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.load(x, [0, 0], [2, 8], target_memory=MAT)
    a = pl.move(t, target_memory=pl.MemorySpace.Acc)  # E:TC251
    return y


@pl.jit.incore
def k_add_in_left(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.move(pl.load(x, [0, 0], [2, 8], target_memory=MAT), LEFT)
    u = pl.add(t, 1.0)  # E:TC251
    return y


@pl.jit.incore
def k_store_from_mat(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.load(x, [0, 0], [2, 8], target_memory=MAT)
    y = pl.store(t, [0, 0], y)  # E:TC251
    return y


# ------------------------------------------------------------------ regions, shapes, casts
@pl.jit.incore
def k_assemble_dtype(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.cast(pl.load(x, [0, 0], [1, 8]), pl.FP16)
    y = pl.assemble(y, t, [0, 0])  # E:TC204
    return y


@pl.jit.incore
def k_assemble_out_of_bounds(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.load(x, [0, 0], [2, 8])
    y = pl.assemble(y, t, [1, 0])  # E:TC202
    return y


@pl.jit.incore
def k_assemble_tensor_into_tile(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.load(x, [0, 0], [2, 8])
    t = pl.tile.assemble(t, x, [0, 0])  # E:TC102
    return y


@pl.jit.incore
def k_region_assign_dtype(x: X, y: Y, win: WIN, sig: SIG):
    y[0:1, 0:8] = pl.cast(pl.load(x, [0, 0], [1, 8]), pl.INT32)  # E:TC204
    return y


@pl.jit.incore
def k_slice_clamp(x: X, y: Y, win: WIN, sig: SIG):
    v = pl.slice(x, [1, 8], [0, 0], clamp=True)  # E:TC253
    return y


@pl.jit.incore
def k_slice_tensor_valid(x: X, y: Y, win: WIN, sig: SIG):
    v = pl.tensor.slice(x, [1, 8], [0, 0], valid_shape=[1, 4])  # E:TC253
    return y


@pl.jit.incore
def k_slice_bad_pad(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.load(x, [0, 0], [2, 8])
    v = pl.slice(t, [1, 8], [0, 0], valid_shape=[1, 4], pad_value=5)  # E:TC214
    return y


@pl.jit.incore
def k_slice_drop_wide(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.load(x, [0, 0], [2, 8])
    v = pl.slice(t, [2, 8], [0, 0], drop_dims=[0])  # E:TC208
    return y


@pl.jit.incore
def k_cast_mode(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.cast(pl.load(x, [0, 0], [2, 8]), pl.INT32, mode="nearest")  # E:TC214
    return y


@pl.jit.incore
def k_reshape_numel(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.tile.reshape(pl.load(x, [0, 0], [2, 8]), [4, 8])  # E:TC208
    return y


@pl.jit.incore
def k_row_sum_small_tmp(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.load(x, [0, 0], [2, 8])
    s = pl.tile.row_sum(t, pl.tile.create([2, 4], pl.FP32))  # E:TC208
    return y


# ------------------------------------------------------------------ loops, lanes, placement
@pl.jit.incore
def k_while_without_cond(x: X, y: Y, win: WIN, sig: SIG):
    for (i,) in pl.while_(init_values=(0,)):
        i = i + 1  # E:TC257
        j = pl.yield_(i)
    return y


@pl.jit.incore
def k_cond_outside_while(x: X, y: Y, win: WIN, sig: SIG):
    pl.cond(1 < 2)  # E:TC257
    return y


@pl.jit.incore
def k_split_three_lanes(x: X, y: Y, win: WIN, sig: SIG):
    for aiv_id in pl.split_aiv(3, mode=pl.SplitMode.NONE):  # E:TC256
        pl.write(y, [0, 0], 1.0)
    return y


@pl.jit.incore
def k_split_up_down(x: X, y: Y, win: WIN, sig: SIG):
    for aiv_id in pl.split_aiv(2, mode=pl.SplitMode.UP_DOWN):  # E:TC253
        pl.write(y, [0, 0], 1.0)
    return y


@pl.jit
def chip_split_aiv(x: X, y: Y, win: WIN, sig: SIG):
    for aiv_id in pl.split_aiv(2, mode=pl.SplitMode.NONE):  # E:TC301
        y = ok_kernel(x, y, win, sig)
    return y


@pl.jit
def chip_misplaced_tensor_op(x: X, y: Y, win: WIN, sig: SIG):
    z = pl.add(x, 1.0)  # E:TC254
    return y


@pl.jit
def chip_misplaced_operator(x: X, y: Y, win: WIN, sig: SIG):
    z = x * 2.0  # E:TC254
    return y


@pl.jit
def chip_misplaced_region_assignment(x: X, y: Y, win: WIN, sig: SIG):
    y[0:1, 0:8] = x[1:2, 0:8]  # E:TC254
    return y


@pl.jit.host
def host_subblock_idx(xs: XS, ys: YS):
    b = pl.tile.get_subblock_idx()  # E:TC301
    return ys


CASES = [
    (k_array_two_indices, "TC250", TYPE, "0, 1", ["one integer index", "got '(0, 1)'"]),
    (k_array_float_element, "TC250", TYPE, "1.5", ["Array[4]<INT32>", "integer scalar",
                                                   "got 1.5"]),
    (k_array_index_out_of_bounds, "TC202", VALUE, "4]", ["index 4", "Array[4]<INT32>"]),
    (k_array_bool_dtype, "TC250", TYPE, "pl.BOOL", ["integer, float or pl.TASK_ID", "got BOOL"]),
    (k_array_float_index, "TC250", TYPE, "1.0", ["integer scalar", "got 1.0"]),
    (k_matmul_vec_operands, "TC251", VALUE, "a, b", ["lhs tile in MemorySpace.Left",
                                                      "got a tile in MemorySpace.Vec"]),
    (k_matmul_rhs_in_left, "TC251", VALUE, "pl.move(t, LEFT), b_trans",
     ["rhs tile in MemorySpace.Right", "got a tile in MemorySpace.Left"]),
    (k_matmul_inner_mismatch, "TC252", VALUE, "pl.move(t, RIGHT)",
     ["inner dimensions differ", "[2, 8]", "[2, 8]"]),
    (k_matmul_nz, "TC253", VALUE, "True)", ["c_matrix_nz=True", "NZ"]),
    (k_matmul_out_int, "TC204", TYPE, "pl.INT32", ["FP32 or FP16 or BF16", "got 'INT32'"]),
    (k_load_into_left, "TC251", VALUE, "LEFT", ["MemorySpace.Vec or MemorySpace.Mat",
                                                "got MemorySpace.Left"]),
    (k_move_into_acc, "TC251", VALUE, "pl.MemorySpace.Acc",
     ["MemorySpace.Vec or MemorySpace.Mat or MemorySpace.Left or MemorySpace.Right",
      "got MemorySpace.Acc"]),
    (k_add_in_left, "TC251", VALUE, "t, 1.0", ["MemorySpace.Vec", "MemorySpace.Left"]),
    (k_store_from_mat, "TC251", VALUE, "t, [", ["MemorySpace.Vec or MemorySpace.Acc",
                                               "MemorySpace.Mat"]),
    (k_assemble_dtype, "TC204", TYPE, "t, [", ["FP16", "FP32"]),
    (k_assemble_out_of_bounds, "TC202", VALUE, "[1, 0]", ["exceeds", "offset=1, extent=2, dim=2"]),
    (k_assemble_tensor_into_tile, "TC102", TYPE, "x, [", ["tile source", "got Tensor[2, 8]"]),
    (k_region_assign_dtype, "TC204", TYPE, "pl.cast(", ["INT32", "FP32"]),
    (k_slice_clamp, "TC253", VALUE, "True", ["clamp=True"]),
    (k_slice_tensor_valid, "TC253", VALUE, "[1, 4]", ["valid_shape= needs a tile"]),
    (k_slice_bad_pad, "TC214", VALUE, "5)", ["pl.PadValue", "got 5"]),
    (k_slice_drop_wide, "TC208", VALUE, "[0])", ["unit dim", "extent 2"]),
    (k_cast_mode, "TC214", VALUE, "\"nearest\"", ["'round'", "'odd'", "got 'nearest'"]),
    (k_reshape_numel, "TC208", VALUE, "[4, 8]", ["16 elements", "32 elements"]),
    (k_row_sum_small_tmp, "TC208", VALUE, "pl.tile.create(", ["cover its shape [2, 8]",
                                                             "Tile[2, 4]"]),
    (k_while_without_cond, "TC257", SYNTAX, "i = i + 1", ["first statement", "pl.cond"]),
    (k_cond_outside_while, "TC257", SYNTAX, "pl.cond(", ["first statement of a pl.while_"]),
    (k_split_three_lanes, "TC256", VALUE, "3,", ["AIV lanes", "2; got 3"]),
    (k_split_up_down, "TC253", VALUE, "pl.SplitMode.UP_DOWN", ["SplitMode.UP_DOWN",
                                                             "no CPU equivalent"]),
    (chip_split_aiv, "TC301", SYNTAX, "pl.split_aiv(", ["AIV lanes of a kernel",
                                                      "chip orchestration"]),
    (chip_misplaced_tensor_op, "TC254", SYNTAX, "pl.add(", ["Misplaced tensor op pl.add",
                                                           "should be inside InCore block"]),
    (chip_misplaced_operator, "TC254", SYNTAX, "x * 2.0", ["Misplaced tensor op pl.mul"]),
    (chip_misplaced_region_assignment, "TC254", SYNTAX, "y[0:1", ["Misplaced tensor op",
                                                                  "region assignment"]),
    (host_subblock_idx, "TC301", SYNTAX, "pl.tile.get_subblock_idx(", ["InCore kernel",
                                                                      "HOST orchestrator"]),
]
