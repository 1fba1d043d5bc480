"""Error quality of compile-time mistakes: type, stable code, line:col, message.

Each case compiles one program of ``bad_programs`` that has exactly one
mistake, through the normal call path, and checks that

* the error is raised before any rank process exists (``os.fork`` is patched
  to fail, and the autouse fixture checks for child processes),
* it is the tilecomm class *and* the builtin a Python user would catch,
* ``.code`` is the stable code, ``.line`` is the line marked ``# E:<tag>`` in
  ``bad_programs.py`` and ``.col`` the 1-based column of the offending
  expression on it,
* the message says what was expected and what was got, and leaks no
  compiler-internal names,
* exactly one diagnostic is reported (no cascade of follow-on errors).
"""
import inspect
import os
import re
import time

import numpy as np
import pytest

import bad_async_programs as BA
import bad_pl_programs as BP
import bad_programs as B
import tilecomm.language as pl
from tilecomm.errors import (CODES, ArgumentError, ConfigError, ProgramSyntaxError,
                             ProgramTypeError, ProgramValueError, UserError)
from tilecomm.ops.registry import records
from tilecomm.runtime import DistributedConfig, RunConfig

BAD_FILE = os.path.realpath(B.__file__)
# the pl op set's cases live in a module of their own (same checks)
BAD_FILES = {BAD_FILE, os.path.realpath(BP.__file__), os.path.realpath(BA.__file__)}
INTERNAL = [r"\bIR\b", r"Expr", r"FunctionIR", r"CallCheck", r"SkipCheck", r"\bast\.",
            r"\bnode\b", r"TensorType", r"TileType", r"ScalarType", r"PtrType", r"FuncCall",
            r"OpRecord", r"Traceback"]

SYNTAX = (SyntaxError, ProgramSyntaxError)
TYPE = (TypeError, ProgramTypeError)
VALUE = (ValueError, ProgramValueError)


def config(world=B.W, platform="cpu"):
    return RunConfig(platform=platform,
                     distributed_config=DistributedConfig(device_ids=list(range(world))))


def host_args(world=B.W):
    return (np.ones((world, B.R, B.C), np.float32), np.zeros((world, B.R, B.C), np.float32))


@pytest.fixture(autouse=True)
def no_fork(monkeypatch):
    """A compile error must be raised before any rank process is started."""

    def forbidden():
        raise AssertionError("a process was forked although the program has a compile error")

    monkeypatch.setattr(os, "fork", forbidden)


# ------------------------------------------------------------------ helpers
def marked_line(func, tag):
    """(line number, text) of the line of ``func``'s source marked ``# E:<tag>``."""
    fn = getattr(func, "fn", func)
    lines, first = inspect.getsourcelines(fn)
    hits = [(first + i, text.rstrip("\n")) for i, text in enumerate(lines)
            if re.search(rf"#\s*E:{re.escape(tag)}\s*$", text)]
    assert len(hits) == 1, f"marker E:{tag} must occur once in {fn.__name__}, found {len(hits)}"
    line, text = hits[0]
    return line, re.sub(r"\s*#\s*E:\S+\s*$", "", text)      # code only, for column search


def column_of(text, token):
    """1-based column of ``token`` in ``text``; a '^' in the token marks the exact spot."""
    pre = token.partition("^")[0] if "^" in token else ""
    probe = token.replace("^", "")
    idx = text.find(probe)
    assert idx >= 0, f"token {probe!r} not on line {text!r}"
    assert text.find(probe, idx + 1) < 0 or "^" in token, f"token {probe!r} is ambiguous"
    return idx + len(pre) + 1


def program_for(obj, wdt=pl.FP32):
    """The HOST entry that compiles ``obj`` (a HOST program, a chip function or a kernel)."""
    if obj.kind == "host":
        return obj
    if obj.kind == "orchestration":
        return B.host_for_chip(obj)
    return B.host_for(obj, wdt)


def compile_error(main, args=None, cfg=None) -> UserError:
    """Call ``main`` as a user would and return the compile error it raises."""
    args = host_args() if args is None else args
    with pytest.raises(UserError) as ei:
        main(*args, config=cfg or config())
    return ei.value


def check_location(e, func, tag, token):
    line, text = marked_line(func, tag)
    assert e.span is not None, f"{e.code} has no source location"
    assert os.path.realpath(e.span.file) in BAD_FILES
    assert (e.line, e.col) == (line, column_of(text, token)), (
        f"{e.code} reported at {e.line}:{e.col}, expected {line}:{column_of(text, token)} "
        f"(token {token!r})\n  {text.strip()}\n{e}")
    assert str(e).startswith(f"{e.span.file}:{line}:{e.col}: error[{e.code}]")


def check_message(e, needles):
    text = str(e)
    for needle in needles:
        assert needle in e.message, f"message lacks {needle!r}: {e.message}"
    for pat in INTERNAL:
        assert not re.search(pat, text), f"compiler-internal name {pat!r} in: {text}"


# ------------------------------------------------------------------ the table
# (program, marker tag, code, builtin+tilecomm classes, token locating the column, needles)
# needles: what was expected and what was got, as the user reads them.
CASES = [
    # wrong kind of function
    (B.host_uses_load, "TC301", SYNTAX, "pl.load(", ["InCore kernel", "HOST orchestrator"]),
    (B.k_world_size, "TC301", SYNTAX, "pld.system.world_size(",
     ["HOST orchestrator", "InCore kernel"]),
    (B.k_alloc, "TC301", SYNTAX, "pld.alloc_window_buffer(", ["HOST orchestrator", "InCore"]),
    # wrong operand kinds
    (B.k_notify_plain, "TC101", TYPE, "x, 0", ["DistributedTensor target", "got Tensor[2, 8]"]),
    (B.k_wait_plain, "TC101", TYPE, "y, [", ["DistributedTensor signal", "got Tensor[2, 8]"]),
    (B.k_remote_load_plain, "TC101", TYPE, "x, 0", ["DistributedTensor target", "got Tensor"]),
    (B.k_put_plain_dst, "TC101", TYPE, "y, 0", ["DistributedTensor dst", "got Tensor"]),
    (B.k_get_plain_src, "TC101", TYPE, "x)", ["DistributedTensor src", "got Tensor"]),
    (B.k_comm_ctx_plain, "TC101", TYPE, "x)", ["DistributedTensor", "got Tensor"]),
    (B.k_tile_put_stage_tensor, "TC102", TYPE, "x)", ["stage must be a Tile", "got Tensor"]),
    (B.k_tile_get_stage_dtype, "TC204", TYPE, "st)", ["stage dtype FP16", "FP32"]),
    (B.k_tensor_store_window_src, "TC102", TYPE, "win, win",
     ["Tensor src", "got DistributedTensor"]),
    (B.k_tile_store_tensor_src, "TC102", TYPE, "x, win", ["Tile src_tile", "got Tensor"]),
    (B.k_store_tensor_as_tile, "TC102", TYPE, "x, [", ["Tile", "got Tensor"]),
    (B.k_rank_of_window, "TC102", TYPE, "win)", ["CommCtx", "got DistributedTensor"]),
    (B.k_nranks_of_tensor, "TC102", TYPE, "x)", ["CommCtx", "got Tensor"]),
    (B.k_write_tile_value, "TC102", TYPE, "t)", ["scalar value", "got Tile[2, 8]"]),
    (B.k_mul_ctx, "TC102", TYPE, "ctx)", ["tiles, tensors or scalars", "CommCtx"]),
    (B.k_div_tile_by_tensor, "TC102", TYPE, "x)", ["Tile", "Tensor"]),
    (B.k_cast_to_int, "TC102", TYPE, "3)", ["dtype", "got Scalar"]),
    (B.k_const_of_runtime, "TC102", TYPE, "n, pl", ["number literal", "got Scalar<INT32>"]),
    (B.k_min_of_tile, "TC102", TYPE, "t, 1", ["scalar", "got Tile"]),
    (B.k_max_of_tile, "TC102", TYPE, "t)", ["scalar", "got Tile"]),
    (B.host_window_of_tensor, "TC102", TYPE, "xs, [", ["Ptr", "got Tensor[2, 2, 8]"]),
    # ranks and static bounds
    (B.k_offsets_rank, "TC201", VALUE, "[0]", ["offsets rank (1)", "rank (2)"]),
    (B.k_wait_offsets_rank, "TC201", VALUE, "[0]", ["offsets rank (1)", "rank (2)"]),
    (B.k_short_store_offsets_rank, "TC201", VALUE, "[0]", ["offsets rank (1)", "rank (2)"]),
    (B.k_load_oob, "TC202", VALUE, "[R, C]", ["dimension 0", "offset=1", "extent=2", "dim=2"]),
    (B.k_store_oob, "TC202", VALUE, "[0, 4]", ["dimension 1", "offset=4", "extent=8", "dim=8"]),
    (B.k_push_oob, "TC202", VALUE, "[1, 0]", ["offset=1", "extent=2", "target_dim=2"]),
    (B.k_put_region_oob, "TC202", VALUE, "[1, 0]", ["dst subregion", "offset=1", "dst_dim=2"]),
    (B.k_read_oob, "TC202", VALUE, "[W, 0]", ["offset=2", "dim=2"]),
    (B.k_slice_oob, "TC202", VALUE, "[1, 0]", ["offset=1", "dim=2"]),
    (B.host_window_too_big, "TC202", VALUE, "[W, 2]", ["16 bytes", "'sbuf' of 8 bytes"]),
    # dtypes and shapes of operands
    (B.k_add_dtypes, "TC204", TYPE, "s)", ["FP32 vs INT32"]),
    (B.k_maximum_dtypes, "TC204", TYPE, "s)", ["FP32 vs FP16"]),
    (B.k_notify_fp32_cell, "TC204", TYPE, "win, 0", ["INT32", "got FP32"]),
    (B.k_sub_shapes, "TC208", VALUE, "u)", ["Tile[2, 8]<FP32> vs Tile[1, 8]<FP32>"]),
    (B.k_minimum_shapes, "TC208", VALUE, "u)", ["Tile[2, 8]<FP32> vs Tile[2, 4]<FP32>"]),
    # put / get arguments
    (B.k_put_partial_region, "TC205", VALUE, "pld.tensor.put(",
     ["must be provided together", "got only dst_offsets"]),
    (B.k_get_partial_region, "TC205", VALUE, "pld.tensor.get(",
     ["must be provided together", "got only shape"]),
    (B.k_chunk_float, "TC105", TYPE, "1.5", ["chunk_rows must be an int", "got float"]),
    (B.k_chunk_bool, "TC105", TYPE, "True", ["chunk_cols must be an int", "got bool"]),
    (B.k_chunk_negative, "TC206", VALUE, "-1", ["non-negative", "got -1"]),
    (B.k_pipeline_unchunked, "TC207", VALUE, "True", ["chunk_rows>0 and chunk_cols>0",
                                                      "chunk_rows=1, chunk_cols=0"]),
    (B.k_runtime_put_extent, "TC217", VALUE, "[1, n]", ["runtime", "chunk_cols"]),
    # values
    (B.k_notify_bad_op, "TC214", VALUE, "7)", ["NotifyOp", "AtomicAdd, Set", "got 7"]),
    (B.k_runtime_tile_shape, "TC216", VALUE, "[1, n]", ["compile-time", "runtime value"]),
    (B.k_load_runtime_clamp, "TC216", VALUE, "k > 0",
     ["pl.load clamp", "compile-time constant", "runtime Scalar<BOOL>"]),
    (B.k_full_zero_dim, "TC210", VALUE, "[R, 0]", ["positive", "got 0"]),
    (B.k_create_tensor_zero_dim, "TC210", VALUE, "[0, C]", ["positive", "got 0"]),
    (B.k_zero_step, "TC200", VALUE, "pl.range(", ["step must not be 0"]),
    # calls
    (B.k_op_arity, "TC103", TYPE, "pl.load(", ["missing", "'shapes'"]),
    (B.chip_short_call, "TC103", TYPE, "ok_kernel(", ["takes 4 argument", "got 3"]),
    (B.host_plain_for_window, "TC104", TYPE, "ys[r], ^xs[r]",
     ["'win'", "DistributedTensor", "got Tensor[2, 8]"]),
    (B.chip_scalar_for_bare_tensor, "TC107", TYPE, "k_bare(",
     ["'extra'", "tensor argument", "got Scalar"]),
    (B.k_bad_annotation, "TC106", TYPE, "sig", ["'sig'", "int", "not a tilecomm type"]),
    # syntax and names
    (B.k_notify_short, "TC306", SYNTAX, "pld.notify", ["'pld.notify'"]),
    (B.k_while, "TC302", SYNTAX, "while", ["unsupported syntax", "While"]),
    (B.k_lambda, "TC302", SYNTAX, "lambda", ["unsupported syntax", "Lambda"]),
    (B.k_unknown_name, "TC307", SYNTAX, "no_such_tile", ["'no_such_tile'"]),
    (B.k_unknown_pl_op, "TC307", SYNTAX, "pl.frobnicate", ["'pl.frobnicate'"]),
    (B.k_yield_outside_loop, "TC309", SYNTAX, "u = ", ["pl.yield_", "init_values"]),
    (B.k_yield_unassigned, "TC309", SYNTAX, "pl.yield_", ["must be assigned"]),
    # window buffers
    (B.host_alloc_unassigned, "TC303", SYNTAX, "pld.alloc_window_buffer(",
     ["simple assignment"]),
    (B.host_alloc_tuple_target, "TC303", SYNTAX, "a, b", ["single variable name"]),
    (B.host_alloc_name, "TC304", SYNTAX, '"sig"', ["'name'", "('sbuf')"]),
    (B.host_alloc_duplicate, "TC305", SYNTAX, "pld.alloc_window_buffer(",
     ["'sbuf'", "already declared"]),
    (B.host_alloc_bytes_with_dtype, "TC209", VALUE, "pl.INT32)", ["dtype=", "shape", "bytes"]),
    (B.host_alloc_shape_without_dtype, "TC209", VALUE, "[W, 1]", ["requires dtype="]),
    (B.host_alloc_zero_dim, "TC210", VALUE, "[W, 0]", ["dimension[1] is 0", "positive"]),
    (B.host_dead_alloc, "TC213", VALUE, "pld.alloc_window_buffer(", ["'spare'", "never viewed"]),
    (B.host_view_not_dispatched, "TC213", VALUE, "pld.alloc_window_buffer(",
     ["'spare'", "never passed to a chip dispatch"]),
    (B.host_alloc_in_rank_loop, "TC310", SYNTAX, "pld.alloc_window_buffer(",
     ["inside a loop", "'for r in ...'", "separate buffer"]),
    (B.host_alloc_in_inner_loop, "TC310", SYNTAX, "pld.alloc_window_buffer(",
     ["inside a loop", "'for i in ...'"]),
    # integer operands: never truncated silently
    (B.k_notify_float_peer, "TC102", TYPE, "1.9", ["peer must be an integer", "got 1.9"]),
    (B.k_remote_load_fp32_peer, "TC102", TYPE, "p, [", ["peer must be an integer",
                                                        "Scalar<FP32>"]),
    (B.k_put_bool_peer, "TC102", TYPE, "True", ["peer must be an integer", "got True"]),
    (B.k_remote_store_enum_peer, "TC102", TYPE, "SET", ["peer", "NotifyOp"]),
    (B.k_load_float_offset, "TC102", TYPE, "[0.5", ["offsets entries must be integer",
                                                    "got 0.5"]),
    (B.k_wait_bool_offset, "TC102", TYPE, "[True", ["offsets entries must be integer",
                                                    "got True"]),
    (B.k_notify_float_value, "TC102", TYPE, "1.5", ["value must be an integer", "got 1.5"]),
    (B.k_wait_expected_too_big, "TC218", VALUE, "2 **", ["expected 2147483648", "INT32"]),
    (B.k_notify_value_too_small, "TC218", VALUE, "-2 **", ["value -2147483649", "INT32"]),
    (B.host_alloc_float_size, "TC102", TYPE, "64.5", ["size in bytes must be an integer",
                                                      "got 64.5"]),
    (B.k_float_loop_bound, "TC102", TYPE, "2.5", ["bounds must be integer", "got 2.5"]),
    (B.host_float_index, "TC102", TYPE, "r / 1", ["indices must be integer",
                                                   "got Scalar<FP32>"]),
    # enums by type, keywords once
    (B.k_wait_cross_enum, "TC214", VALUE, "pld.NotifyOp", ["cmp must be a WaitCmp member",
                                                            "got NotifyOp.Set"]),
    (B.k_notify_cross_enum, "TC214", VALUE, "pld.WaitCmp", ["op must be a NotifyOp member",
                                                             "got WaitCmp.Eq"]),
    (B.host_duplicate_keyword, "TC103", TYPE, "x=^xs[r]", ["multiple values", "'x'"]),
    # constant folding
    (B.k_negative_shift, "TC200", VALUE, "1 <<", ["negative shift count -1"]),
    (B.k_float_pow_overflow, "TC218", VALUE, "2.0 **", ["2.0 ** 5000", "overflows"]),
    (B.k_pow_tower, "TC218", VALUE, "7 ** 7", ["7 ** 5764801", "too large"]),
    (B.k_get_byte_arity, "TC103", TYPE, "pl.FP32.get_byte(", ["pl.FP32.get_byte()",
                                                              "positional argument"]),
    # annotation dims
    (B.k_float_annotation_dim, "TC106", TYPE, "x:", ["'x'", "dimension [0] is 2.5"]),
    (B.k_negative_annotation_dim, "TC210", VALUE, "x:", ["'x'", "dimension [0] is -1",
                                                        "positive"]),
    # device=
    (B.host_device_expr, "TC211", VALUE, "r + 1", ["induction variable", "got 'r + 1'"]),
    (B.host_device_out_of_range, "TC212", VALUE, "device=^5", ["device=5", "2 rank(s)"]),
    (B.host_device_loop_too_long, "TC212", VALUE, "device=^r", ["0..2", "2 rank(s)"]),
    (B.chip_kernel_device, "TC308", TYPE, "device=", ["device=", "InCore kernel"]),
    (B.host_incore_device, "TC308", TYPE, "device=", ["device=", "InCore kernel"]),
    (B.host_windows_without_device, "TC227", VALUE, "ok_chip(",
     ["without device=", "window views (win, sig)", "round-robin"]),
    (B.host_rank_loop_without_device, "TC227", VALUE, "plain_chip(",
     ["without device=", "loop over the ranks", "not on rank r"]),
    # a HOST input where the chip writes
    (B.host_input_to_chip_out, "TC228", TYPE, "ys[r]",
     ["'ys' is an input of host_input_to_chip_out", "parameter 'y' of plain_chip", "pl.Out"]),
    (B.host_input_to_chip_inout, "TC228", TYPE, "xs[r]",
     ["'xs' is an input", "parameter 'acc' of inout_chip", "pl.InOut"]),
    # collectives
    (B.k_allreduce_ring_mesh_signal, "TC220", VALUE, "sig,", ["ring", "[2*(NR-1), NR]",
                                                              "[2, 1]"]),
    (B.k_broadcast_same_buffer, "TC221", VALUE, "sig, root", ["target and signal",
                                                              "different buffers"]),
    (B.k_allreduce_core_num, "TC222", VALUE, "2)", ["core_num > 1", "HOST orchestrator"]),
    (B.k_broadcast_negative_root, "TC224", VALUE, "-1", ["non-negative", "got -1"]),
    (B.k_allreduce_no_signal, "TC312", TYPE, "win)", ["requires an explicit signal"]),
    (B.k_all_to_all_window_input, "TC102", TYPE, "win, win", ["input must be a plain Tensor",
                                                              "got DistributedTensor"]),
    (B.k_allgather_two_rows, "TC208", VALUE, "x, win", ["[1, SIZE]", "got first dim 2"]),
    (B.k_all_to_all_v_float_counts, "TC204", TYPE, "x, sig)", ["send_counts must be INT32",
                                                               "got FP32"]),
    (B.k_barrier_fp32, "TC204", TYPE, "win)", ["INT32 window", "got FP32"]),
    # collectives: operands of a HOST builtin
    (B.host_collective_plain_tensor, "TC101", TYPE, "xs[0]",
     ["window-bound DistributedTensor (a view of an alloc_window_buffer)",
      "HOST orchestrator", "got Tensor[2, 8]"]),
    (B.host_all_to_all_same_buffer, "TC221", VALUE, "pld.window(",
     ["input and target must be different buffers", "same window buffer 'tbuf'"]),
    (B.host_all_to_all_v_in_loop, "TC311", VALUE, "pld.tensor.all_to_all_v(",
     ["all_to_all_v is not supported inside a for/while loop in a HOST orchestrator"]),
    # collectives: signal shapes per path
    (B.host_barrier_rank2_signal, "TC220", VALUE, "pld.window(",
     ["rank-1 [ws]", "got DistributedTensor[2, 1]"]),
    (B.host_allgather_ring_signal, "TC220", VALUE, "pld.window(",
     ["shape[1] must be 1 (one cell per rank), got 2", "mode=\"ring\"",
      "cannot be shared with this collective"]),
    (B.host_allreduce_rank1_lanes, "TC220", VALUE, "pld.window(",
     ["core_num=2", "rank-2 [ws, stride]", "stride >= 2", "got DistributedTensor[2]<INT32>"]),
    (B.host_allreduce_narrow_lanes, "TC220", VALUE, "pld.window(",
     ["stride >= core_num (4)", "got DistributedTensor[2, 2]"]),
    (B.host_allreduce_ring_rank1_signal, "TC220", VALUE, "pld.window(",
     ["rank-2 [2*(NR-1)+1, NR]", "compile-time constant", "got DistributedTensor[2]"]),
    (B.host_allreduce_ring_kernel_shape, "TC220", VALUE, "pld.window(",
     ["shape[0] must equal 3", "[2*(NR-1)+1, NR] for NR=2", "got DistributedTensor[2, 2]"]),
    # collectives: allreduce arguments
    (B.host_allreduce_int32, "TC219", VALUE, "pld.window(",
     ["target dtype must be FP16 or FP32", "got INT32"]),
    (B.host_allreduce_bad_mode, "TC214", VALUE, '"tree"',
     ['mode must be "ring" or "mesh"', "got 'tree'"]),
    (B.k_allreduce_runtime_mode, "TC216", VALUE, "mode=^n",
     ["compile-time string", "got a runtime Scalar<INT32>"]),
    (B.k_allreduce_bool_core_num, "TC222", TYPE, "True",
     ["core_num must be a positive compile-time int", "got bool"]),
    (B.k_allreduce_zero_core_num, "TC222", VALUE, "0)", ["core_num must be positive", "got 0"]),
    (B.host_allreduce_ring_core_num, "TC222", VALUE, "core_num=^2",
     ['mode="ring" does not support core_num > 1', "got core_num=2"]),
    (B.host_allreduce_signal_none, "TC312", TYPE, "None",
     ["signal cannot be None", "omit the signal argument"]),
    (B.host_allreduce_ring_synthesis, "TC312", VALUE, '"ring"',
     ['mode="ring" requires an explicit signal', "only supports mesh mode"]),
    (B.host_allreduce_nested_synthesis, "TC311", VALUE, "pld.tensor.allreduce(",
     ["without a signal must be a statement of its own", "larger expression"]),
    # collectives: broadcast root, data operands
    (B.k_broadcast_runtime_root, "TC216", VALUE, "n - 1",
     ["root must be a compile-time int", "got a runtime Scalar<INT32>"]),
    (B.k_broadcast_float_root, "TC105", TYPE, "1.0", ["root must be an int rank", "got 1.0"]),
    (B.host_allgather_dtype, "TC204", TYPE, "pld.window(",
     ["local_data dtype FP16 differs from target dtype FP32"]),
    (B.host_allgather_size, "TC208", VALUE, "pld.window(",
     ["target SIZE must equal input SIZE", "9 != 8"]),
    (B.host_reduce_scatter_rank1, "TC201", VALUE, "pld.window(",
     ["rank-2 [NR, SIZE]", "got DistributedTensor[16]"]),
    (B.host_reduce_scatter_bool, "TC219", VALUE, "pld.window(", ["numeric", "got BOOL"]),
    (B.k_all_to_all_dtype, "TC204", TYPE, "sig, sig",
     ["input dtype FP32 differs from target dtype INT32"]),
    (B.host_all_to_all_shape, "TC208", VALUE, "pld.window(",
     ["target shape must equal input shape", "got DistributedTensor[2, 16]<FP32>",
      "DistributedTensor[2, 8]<FP32>"]),
    # collectives: the comm domain a HOST builtin runs on
    (B.host_collective_two_domains, "TC225", VALUE, "pld.window(",
     ["one comm domain", "signal 'sbuf' is dispatched to devices [0, 1]",
      "target 'wbuf' to devices [0]"]),
    (B.host_signal_below_domain, "TC226", VALUE, "pld.window(",
     ["collective signal shape[0] (1) must be at least the participating device count (2)"]),
    (B.host_ring_signal_other_nr, "TC226", VALUE, "pld.window(",
     ["participating device count (2)", "[3, 2]", "got DistributedTensor[5, 3]"]),
    (B.host_all_to_all_v_subset_signal, "TC226", VALUE, "pld.window(",
     ["explicit device subset of 1 device(s)", "equal to the subset size (1)", "got 2"]),
    (B.host_broadcast_root_outside_subset, "TC224", VALUE, "1)",
     ["pld.tensor.broadcast root (1) must be a valid rank in [0, 1) for this explicit device "
      "subset"]),
    (B.host_allgather_rows_not_domain, "TC208", VALUE, "pld.window(",
     ["participating device count (2)", "got DistributedTensor[3, 8]"]),
    (B.host_all_to_all_v_rows_not_domain, "TC208", VALUE, "pld.window(",
     ["target.shape[0] (3) must be a multiple of the participating device count (2)",
      "got DistributedTensor[3, 8]"]),
]

CASES += [
    # task scopes
    (B.chip_nested_at, "TC330", SYNTAX, "pl.at(", ["cannot be nested", "line"]),
    (B.chip_at_chip_level, "TC330", VALUE, "pl.Level.CHIP", ["CORE_GROUP", "got pl.Level.CHIP"]),
    (B.k_at_in_kernel, "TC301", SYNTAX, "pl.at(", ["chip orchestration", "InCore kernel"]),
    (B.chip_spmd_deps_without_tid, "TC330", SYNTAX, "[tid]", ["does not accept 'deps=' here"]),
    (B.chip_spmd_without_block_idx, "TC330", SYNTAX, "with", ["pl.get_block_idx()"]),
    (B.chip_manual_in_manual, "TC330", SYNTAX, "pl.manual_scope(", ["manual scope", "nested"]),
    (B.chip_auto_in_manual, "TC330", SYNTAX, "pl.scope(", ["AUTO scope", "manual scope"]),
    (B.chip_deps_not_taskid, "TC330", TYPE, "x]", ["TaskIds", "got Tensor[2, 8]"]),
    (B.chip_at_as_call, "TC330", SYNTAX, "pl.at(", ["with statement"]),
    (B.chip_task_returns, "TC330", SYNTAX, "return", ["cannot return"]),
    (B.host_inline_chip_window, "TC330", TYPE, "with", ["comm-less", "'w'"]),
    (B.chip_submit_not_a_kernel, "TC330", SYNTAX, "x, y", ["InCore kernel", "got x"]),
    # deferred completion
    (B.k_defer_in_kernel, "TC331", SYNTAX, "pld.system.defer_wait(",
     ["dedicated top-level", "CORE_GROUP"]),
    (B.chip_defer_in_spmd, "TC331", SYNTAX, "pld.system.defer_wait(", ["under pl.spmd"]),
    (B.chip_defer_assigned, "TC331", SYNTAX, "pld.system.defer_wait(", ["standalone statement"]),
    (B.chip_defer_early_resolve, "TC331", VALUE, "True", ["allow_early_resolve=True"]),
    (B.chip_defer_then_store, "TC331", SYNTAX, "pl.load(", ["after pld.system.defer_wait"]),
    (B.chip_defer_runtime_loop, "TC331", VALUE, "for", ["statically known"]),
    (B.chip_defer_sliced_signal, "TC331", SYNTAX, "sig[0:1", ["directly", "slice"]),
    (B.chip_defer_eq, "TC240", VALUE, "pld.WaitCmp.Eq", ["only supports WaitCmp.Ge",
                                                         "got WaitCmp.Eq"]),
    (B.chip_defer_negative, "TC218", VALUE, "-1", ["[0, INT32_MAX]", "got -1"]),
    (B.chip_defer_fp32_signal, "TC204", TYPE, "win, [", ["INT32", "got FP32"]),
    (B.chip_defer_too_many, "TC241", VALUE, "pld.system.defer_wait(", ["at most 64",
                                                                       "register 65"]),
    # split-phase collectives (defer=True)
    (B.k_defer_collective, "TC332", SYNTAX, "pld.tensor.barrier(", ["pl.at(", "InCore kernel"]),
    (B.chip_defer_collective_in_spmd, "TC332", SYNTAX, "pld.tensor.barrier(",
     ["under pl.spmd"]),
    (B.chip_defer_collective_early, "TC332", VALUE, "True", ["allow_early_resolve=True",
                                                            "defer=True collective"]),
    (B.chip_defer_collective_then_load, "TC332", SYNTAX, "pl.store(",
     ["after a defer=True collective", "TaskId"]),
    (B.chip_defer_collective_in_loop, "TC332", SYNTAX, "pld.tensor.barrier(", ["in a loop"]),
    (B.chip_defer_collective_twice, "TC332", SYNTAX, "pld.tensor.barrier(", ["at most one"]),
    (B.chip_defer_collective_in_expr, "TC332", SYNTAX, "pld.tensor.all_to_all(",
     ["statement of its own"]),
    (B.chip_defer_collective_not_bool, "TC105", TYPE, "1)", ["True or False", "got 1"]),
    (B.chip_defer_collective_and_wait, "TC332", SYNTAX, "pld.system.defer_wait(",
     ["cannot also register pld.system.defer_wait"]),
    (B.host_defer_collective, "TC332", VALUE, "True", ["HOST builtin", "TaskId"]),
    (B.host_block_idx, "TC301", SYNTAX, "pl.get_block_idx(", ["InCore kernel",
                                                               "HOST orchestrator"]),
    (B.k_array_zero, "TC210", VALUE, "0,", ["positive", "got 0"]),
]

CASES += [
    # ergonomic collectives: their own contract, and the collective's rules at their call
    (B.host_all_reduce_ring_no_nranks, "TC313", VALUE, '"ring"', ["needs nranks=", "ring signal"]),
    (B.host_all_reduce_mesh_nranks, "TC313", VALUE, "=^2)", ["ring signal only", "mesh"]),
    (B.k_all_gather, "TC301", SYNTAX, "pld.all_gather(", ["HOST orchestrator", "InCore kernel"]),
    (B.host_reduce_scatter_plain, "TC101", TYPE, "xs[0]",
     ["window-bound DistributedTensor", "got Tensor[2, 8]"]),
    (B.host_broadcast_negative_root, "TC224", VALUE, "-1", ["non-negative", "got -1"]),
    (B.host_ergonomic_barrier_fp32, "TC204", TYPE, "pld.window(", ["INT32 window", "got FP32"]),
    (B.host_all_to_all_one_buffer, "TC221", VALUE, "a)", ["different buffers", "'wbuf'"]),
    (B.k_all_to_all_v_lanes, "TC222", VALUE, "=^2)", ["only in a HOST orchestrator",
                                                      "core_num=2"]),
    (B.host_all_to_all_v_zero_nranks, "TC313", VALUE, "=^0)", ["positive compile-time int",
                                                             "got 0"]),
]

CASES += BP.CASES
CASES += BA.CASES

WINDOW_DTYPE = {B.k_atomic_int64: pl.INT64, B.k_atomic_fp64: pl.FP64, B.k_atomic_bf16: pl.BF16}


def _case_id(case):
    return f"{case[1]}-{getattr(case[0], 'fn', case[0]).__name__}"


@pytest.fixture
def rule_errors(monkeypatch):
    """(record, code) of every error an op's type rule raises during the test."""
    seen = []

    def watched(rec):
        def rule(c):
            try:
                return watched_rule(c)
            except UserError as e:
                seen.append((rec, e.code))
                raise
        watched_rule = rec.rule
        return rule

    for rec in records():
        if rec.rule is not None:
            monkeypatch.setattr(rec, "rule", watched(rec))
    return seen


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_compile_error(case, rule_errors):
    obj, code, classes, token, needles = case
    e = compile_error(program_for(obj))
    for rec, raised in rule_errors:        # tilecomm ops NAME lists what a rule raises
        assert raised in rec.raises, f"{rec.name} raised {raised}, not in its raises="
    assert isinstance(e, classes[0]) and isinstance(e, classes[1]), type(e).__mro__
    assert e.code == code, str(e)
    assert code in CODES
    check_location(e, obj, code, token)
    check_message(e, needles)
    assert e.diagnostics == [e], "one mistake must give one diagnostic:\n" + str(e)
    if isinstance(e, SyntaxError):          # tracebacks point at the user's line
        assert (e.filename, e.lineno, e.offset) == (e.span.file, e.line, e.col)


# ------------------------------------------------------------------ atomics and platforms
@pytest.mark.parametrize("kernel,dtype_name", [(B.k_atomic_int64, "INT64"),
                                               (B.k_atomic_fp64, "FP64")])
@pytest.mark.parametrize("platform", ["cpu", "a2a3", "a5"])
def test_atomic_add_dtype(kernel, dtype_name, platform):
    e = compile_error(B.host_for(kernel, WINDOW_DTYPE[kernel]), cfg=config(platform=platform))
    assert isinstance(e, ValueError) and isinstance(e, ProgramValueError)
    assert e.code == "TC203"
    check_location(e, kernel, "TC203", "ADD)")
    check_message(e, ["atomic=AtomicType.Add", "fp32/bf16/fp16/int32/int16/int8",
                      f"got {dtype_name}"])


def test_bf16_atomic_add_rejected_on_a5():
    e = compile_error(B.host_for(B.k_atomic_bf16, pl.BF16), cfg=config(platform="a5"))
    assert isinstance(e, ValueError) and isinstance(e, ProgramValueError)
    assert e.code == "TC215"
    check_location(e, B.k_atomic_bf16, "TC215", "ADD)")
    check_message(e, ["BF16", "a2a3", "'a5'"])


@pytest.mark.parametrize("platform", ["a2a3", "a2a3sim", "cpu"])
def test_bf16_atomic_add_accepted_where_supported(platform):
    main = B.host_for(B.k_atomic_bf16, pl.BF16)
    exe = main.compile(*host_args(), config=config(platform=platform)).specialise(host_args())
    assert exe.world == B.W


def test_a5sim_is_checked_like_a5():
    e = compile_error(B.host_for(B.k_atomic_bf16, pl.BF16), cfg=config(platform="a5sim"))
    assert e.code == "TC215"


# ------------------------------------------------------------------ call-time checks
def test_dynamic_dim_bound_inconsistently():
    e = compile_error(B.host_dynamic, args=(np.zeros((2, B.C), np.float32),
                                            np.zeros((3, B.C), np.float32)))
    assert isinstance(e, ValueError) and isinstance(e, ProgramValueError)
    assert e.code == "TC208"
    check_location(e, B.host_dynamic, "TC208", "ys")
    check_message(e, ["'ys'", "N", "bound to 2", "has 3"])


def test_dynamic_dim_bound_consistently_compiles():
    """Each binding of pl.dynamic("N") is its own specialisation, with N bound in
    every function the entry reaches; the same shapes reuse it."""
    exes = {}
    for n in (1, 3, 1):
        a = (np.zeros((n, B.C), np.float32), np.zeros((n, B.C), np.float32))
        exe = B.host_dynamic.compile(*a, config=config()).specialise(a)
        assert exes.setdefault(n, exe) is exe
        for fn in exe.ir.functions.values():
            assert [tuple(p.type.shape) for p in fn.params] == [(n, B.C), (n, B.C)], fn.name
        assert all(shapes == [(n, B.C), (n, B.C)] for shapes in exe.image.param_shapes.values())
    assert exes[1] is not exes[3]


@pytest.mark.parametrize("which,xs_shape,ys_shape,ys_dtype,needles", [
    ("xs", (3, B.R, B.C), (B.W, B.R, B.C), np.float32, ["'xs'", "[2, 2, 8]", "got [3, 2, 8]"]),
    ("ys", (B.W, B.R, B.C), (B.W, B.R, 7), np.float32, ["'ys'", "[2, 2, 8]", "got [2, 2, 7]"]),
    ("ys", (B.W, B.R, B.C), (B.W, B.R * B.C), np.float32, ["'ys'", "got [2, 16]"]),
    ("ys", (B.W, B.R, B.C), (B.W, B.R, B.C), np.float64, ["'ys'", "FP32", "got FP64"]),
    ("ys", (B.W, B.R, B.C), (B.W, B.R, B.C), np.int32, ["'ys'", "FP32", "got INT32"]),
])
def test_host_argument_shape_and_dtype(which, xs_shape, ys_shape, ys_dtype, needles):
    args = (np.zeros(xs_shape, np.float32), np.zeros(ys_shape, ys_dtype))
    e = compile_error(B.host_args, args=args)
    assert isinstance(e, ArgumentError) and isinstance(e, TypeError)
    assert e.code == "TC410"
    check_location(e, B.host_args, f"TC410-{which}", which)
    check_message(e, needles)


@pytest.mark.parametrize("nargs", [0, 1, 3])
def test_host_argument_count(nargs):
    args = [np.zeros((B.W, B.R, B.C), np.float32) for _ in range(nargs)]
    e = compile_error(B.host_args, args=args)
    assert isinstance(e, ArgumentError) and isinstance(e, TypeError)
    assert e.code == "TC410"
    check_message(e, ["expects 2 arguments", f"got {nargs}", "'xs', 'ys'"])


def test_host_argument_scalar_for_tensor():
    e = compile_error(B.host_args, args=(np.zeros((B.W, B.R, B.C), np.float32), 3))
    assert isinstance(e, ArgumentError) and e.code == "TC410"
    check_location(e, B.host_args, "TC410-ys", "ys")
    check_message(e, ["'ys'", "tensor", "got a scalar"])


@pytest.mark.parametrize("bad,needles", [
    ([[1.0, 2.0]], ["'xs'", "numpy array", "got list"]),
    (np.zeros((B.W, B.R, B.C), np.complex64), ["'xs'", "complex64"]),
])
def test_host_argument_of_wrong_type(bad, needles):
    e = compile_error(B.host_args, args=(bad, np.zeros((B.W, B.R, B.C), np.float32)))
    assert isinstance(e, ArgumentError) and isinstance(e, TypeError)
    assert e.code == "TC411"
    check_message(e, needles)


# ------------------------------------------------------------------ configuration errors
@pytest.mark.parametrize("ids,needles", [([], ["must not be empty"]),
                                         ([0, -1], ["non-negative", "[0, -1]"]),
                                         ([0, 1, 1], ["distinct", "[0, 1, 1]"]),
                                         (3, ["list of device indices", "got 3"])])
def test_distributed_config_errors(ids, needles):
    with pytest.raises(ConfigError) as ei:
        DistributedConfig(device_ids=ids)
    e = ei.value
    assert isinstance(e, ValueError) and e.code == "TC401"
    check_message(e, needles)


def test_run_config_bad_platform():
    with pytest.raises(ConfigError) as ei:
        RunConfig(platform="a9")
    e = ei.value
    assert isinstance(e, ValueError) and e.code == "TC402"
    check_message(e, ["'a9'", "a2a3", "a5", "cpu"])


# ------------------------------------------------------------------ several mistakes at once
def test_every_independent_mistake_in_a_kernel_is_reported():
    e = compile_error(B.host_for(B.k_three_mistakes))
    got = [(d.code, d.line) for d in e.diagnostics]
    want = [(code, marked_line(B.k_three_mistakes, code)[0]) for code in ("TC201", "TC307",
                                                                          "TC101")]
    assert got == want, str(e)
    assert e is e.diagnostics[0]
    text = str(e)
    assert "2 more diagnostic(s)" in text
    for code, line in want:
        assert f":{line}:" in text and f"error[{code}]" in text


def test_every_independent_mistake_in_a_host_program_is_reported():
    e = compile_error(B.host_two_mistakes)
    got = [(d.code, d.line) for d in e.diagnostics]
    want = [(code, marked_line(B.host_two_mistakes, code)[0]) for code in ("TC209", "TC210")]
    assert got == want, str(e)


def test_constant_folding_bounds_its_work():
    """7 ** 7 ** 8 is refused before it is computed (computing it takes seconds)."""
    t0 = time.perf_counter()
    e = compile_error(program_for(B.k_pow_tower))
    assert e.code == "TC218" and time.perf_counter() - t0 < 1.0


def test_verifier_rules_run_after_a_statement_failed():
    """A rejected statement does not stop the whole-program rules: the parse
    error, a dead buffer and an allocation in a loop are reported together."""
    e = compile_error(B.host_parse_and_verify_mistakes)
    got = [(d.code, d.line) for d in e.diagnostics]
    want = [(code, marked_line(B.host_parse_and_verify_mistakes, code)[0])
            for code in ("TC102", "TC310", "TC213")]
    assert got == want, str(e)


def test_a_failed_dispatch_does_not_make_its_buffers_look_unused():
    """Facts about names in a rejected statement are incomplete: the rules that
    report an absence (never viewed / never dispatched) say nothing about them."""
    e = compile_error(B.host_failed_dispatch_hides_no_view)
    assert [(d.code, d.line) for d in e.diagnostics] == \
        [("TC103", marked_line(B.host_failed_dispatch_hides_no_view, "TC103")[0])], str(e)


def test_verifier_rules_are_named_units():
    from tilecomm import verify
    names = [r.name for r in verify.RULES]
    assert len(names) == len(set(names))
    assert {"window-buffer-has-view", "window-view-reaches-dispatch", "tensors-before-scalars",
            "alloc-outside-loops"} <= set(names)
    assert all(r.doc for r in verify.RULES)


def test_duplicate_buffer_message_points_at_first_declaration():
    e = compile_error(B.host_alloc_duplicate)
    first, _ = marked_line(B.host_alloc_duplicate, "first-sbuf")
    assert f"{e.span.file}:{first}:" in e.message


def test_unknown_pld_op_hint_names_the_canonical_op():
    e = compile_error(B.host_for(B.k_notify_short))
    assert e.code == "TC306"
    assert e.hint and "pld.system.notify" in e.hint
    assert "pld.system.notify" in str(e)


# ------------------------------------------------------------------ nothing runs
def test_compile_errors_start_no_process(monkeypatch):
    forks = []

    def fork():
        forks.append(1)
        raise AssertionError("forked")

    monkeypatch.setattr(os, "fork", fork)
    kids = _children()
    for obj in (B.k_three_mistakes, B.host_dead_alloc, B.k_notify_plain):
        compile_error(program_for(obj))
    assert forks == [] and _children() == kids


def test_the_correct_program_compiles():
    """The shared wrapper itself is correct, so every failure above is the case's own."""
    exe = B.ok_main.compile(*host_args(), config=config()).specialise(host_args())
    assert exe.world == B.W


def test_every_compile_time_code_has_a_negative_case():
    covered = {c[1] for c in CASES} | {"TC203", "TC215", "TC208", "TC410", "TC411", "TC401",
                                       "TC402"}
    compile_time = {c for c in CODES if "TC101" <= c <= "TC399" or c in ("TC401", "TC402",
                                                                          "TC410", "TC411")}
    # TC300 is only the default code of ProgramSyntaxError; every raise site names its own
    assert compile_time - covered == {"TC300"}


def _children():
    try:
        with open(f"/proc/{os.getpid()}/task/{os.getpid()}/children") as f:
            return set(f.read().split())
    except OSError:
        return set()
