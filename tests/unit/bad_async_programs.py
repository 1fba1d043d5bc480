"""Programs with one mistake each in asynchronous puts (pld.system.async_session,
pld.tensor.put_async, pld.system.wait_async_event and their tile forms), and
the table of their compile-error cases: upstream's contract for each, as
``test_compile_errors`` checks it (``# E:<tag>`` markers locate the line)."""
import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.errors import ProgramSyntaxError, ProgramTypeError, ProgramValueError

from bad_programs import C, R, SIG, WIN, X, Y

SYNTAX = (SyntaxError, ProgramSyntaxError)
TYPE = (TypeError, ProgramTypeError)
VALUE = (ValueError, ProgramValueError)


# ------------------------------------------------------------------ sessions
@pl.jit.incore
def k_async_sync_id_too_big(x: X, y: Y, win: WIN, sig: SIG):
    s = pld.system.async_session(sync_id=8)  # E:TC243
    return y


@pl.jit.incore
def k_async_negative_block(x: X, y: Y, win: WIN, sig: SIG):
    s = pld.system.async_session(block_bytes=-1)  # E:TC243
    return y


@pl.jit.incore
def k_async_float_sync_id(x: X, y: Y, win: WIN, sig: SIG):
    s = pld.system.async_session(sync_id=1.5)  # E:TC105
    return y


@pl.jit.incore
def k_async_session_positional(x: X, y: Y, win: WIN, sig: SIG):
    s = pld.system.async_session(x)  # E:TC103
    return y


@pl.jit.incore
def k_tile_session_tensor_scratch(x: X, y: Y, win: WIN, sig: SIG):
    s = pld.tile.async_session(x)  # E:TC102
    return y


# ------------------------------------------------------------------ the put
@pl.jit.incore
def k_put_async_plain_dst(x: X, y: Y, win: WIN, sig: SIG):
    s = pld.system.async_session()
    e = pld.tensor.put_async(y, 0, x, s, [0, 0], [0, 0], [1, C])  # E:TC101
    pld.system.wait_async_event(e, s)
    return y


@pl.jit.incore
def k_put_async_no_session(x: X, y: Y, win: WIN, sig: SIG):
    e = pld.tensor.put_async(win, 0, x, sig, [0, 0], [0, 0], [1, C])  # E:TC102
    return y


@pl.jit.incore
def k_put_async_2d(x: X, y: Y, win: WIN, sig: SIG):
    s = pld.system.async_session()
    e = pld.tensor.put_async(win, 0, x, s)  # E:TC242
    pld.system.wait_async_event(e, s)
    return y


@pl.jit.incore
def k_put_async_column(x: X, y: Y, win: WIN, sig: SIG):
    s = pld.system.async_session()
    e = pld.tensor.put_async(win, 0, x, s, [0, 0], [0, 0], [R, 1])  # E:TC242
    pld.system.wait_async_event(e, s)
    return y


@pl.jit.incore
def k_put_async_runtime_extent(x: X, y: Y, win: WIN, sig: SIG):
    n = pld.nranks(pld.get_comm_ctx(win))
    s = pld.system.async_session()
    e = pld.tensor.put_async(win, 0, x, s, [0, 0], [0, 0], [1, n])  # E:TC242
    pld.system.wait_async_event(e, s)
    return y


@pl.jit.incore
def k_put_async_atomic(x: X, y: Y, win: WIN, sig: SIG):
    s = pld.system.async_session()
    e = pld.tensor.put_async(win, 0, x, s, [0, 0], [0, 0], [1, C], atomic=pld.AtomicType.Add)  # E:TC103
    pld.system.wait_async_event(e, s)
    return y


@pl.jit.incore
def k_put_async_partial_region(x: X, y: Y, win: WIN, sig: SIG):
    s = pld.system.async_session()
    e = pld.tensor.put_async(win, 0, x, s, [0, 0])  # E:TC205
    pld.system.wait_async_event(e, s)
    return y


@pl.jit.incore
def k_put_async_dtype(x: X, y: Y, win: WIN, sig: SIG):
    s = pld.system.async_session()
    e = pld.tensor.put_async(sig, 0, x, s, [0, 0], [0, 0], [1, 1])  # E:TC204
    pld.system.wait_async_event(e, s)
    return y


@pl.jit.incore
def k_put_async_oob(x: X, y: Y, win: WIN, sig: SIG):
    s = pld.system.async_session()
    e = pld.tensor.put_async(win, 0, x, s, [R, 0], [0, 0], [1, C])  # E:TC202
    pld.system.wait_async_event(e, s)
    return y


@pl.jit.incore
def k_tile_put_async_2d(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.tile.create([1, 256], dtype=pl.INT8)
    s = pld.tile.async_session(t)
    e = pld.tile.put_async(win, 0, x, s)  # E:TC242
    pld.tile.wait_async_event(e, s, t)
    return y


@pl.jit
def chip_put_async(x: X, y: Y, win: WIN, sig: SIG):
    s = pld.system.async_session()  # E:TC301
    return y


# ------------------------------------------------------------------ the wait
@pl.jit.incore
def k_wait_async_not_event(x: X, y: Y, win: WIN, sig: SIG):
    s = pld.system.async_session()
    pld.system.wait_async_event(sig, s)  # E:TC102
    return y


@pl.jit.incore
def k_wait_async_not_session(x: X, y: Y, win: WIN, sig: SIG):
    s = pld.system.async_session()
    e = pld.tensor.put_async(win, 0, x, s, [0, 0], [0, 0], [1, C])
    pld.system.wait_async_event(e, win)  # E:TC102
    return y


@pl.jit.incore
def k_tile_wait_async_no_scratch(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.tile.create([1, 256], dtype=pl.INT8)
    s = pld.tile.async_session(t)
    e = pld.tile.put_async(win, 0, x, s, [0, 0], [0, 0], [1, C])
    pld.tile.wait_async_event(e, s)  # E:TC103
    return y


# (program, code, builtin+tilecomm classes, token locating the column, needles)
CASES = [
    (k_async_sync_id_too_big, "TC243", VALUE, "8)", ["sync_id must be in [0, 7]", "got 8"]),
    (k_async_negative_block, "TC243", VALUE, "-1)", ["block_bytes must be positive", "got -1"]),
    (k_async_float_sync_id, "TC105", TYPE, "1.5", ["sync_id must be an int", "got float"]),
    (k_async_session_positional, "TC103", TYPE, "pld.system.async_session(",
     ["positional argument"]),
    (k_tile_session_tensor_scratch, "TC102", TYPE, "x)", ["scratch must be a Tile",
                                                          "got Tensor[2, 8]"]),
    (k_put_async_plain_dst, "TC101", TYPE, "y, 0", ["DistributedTensor dst", "got Tensor"]),
    (k_put_async_no_session, "TC102", TYPE, "sig, [", ["AsyncSession",
                                                        "got DistributedTensor[2, 1]"]),
    (k_put_async_2d, "TC242", VALUE, "win, 0", ["flat-contiguous logical-1D", "[2, 8]"]),
    (k_put_async_column, "TC242", VALUE, "[R, 1]", ["flat-contiguous logical-1D",
                                                    "region [2, 1] of a [2, 8] tensor"]),
    (k_put_async_runtime_extent, "TC242", VALUE, "[1, n]", ["fully static"]),
    (k_put_async_atomic, "TC103", TYPE, "pld.tensor.put_async(", ["'atomic'"]),
    (k_put_async_partial_region, "TC205", VALUE, "pld.tensor.put_async(",
     ["must be provided together", "got only dst_offsets"]),
    (k_put_async_dtype, "TC204", TYPE, "x, s", ["dst dtype INT32", "src dtype FP32"]),
    (k_put_async_oob, "TC202", VALUE, "[R, 0]", ["dst subregion", "offset=2", "dst_dim=2"]),
    (k_tile_put_async_2d, "TC242", VALUE, "win, 0", ["pld.tile.put_async",
                                                     "flat-contiguous logical-1D"]),
    (chip_put_async, "TC301", SYNTAX, "pld.system.async_session(", ["InCore"]),
    (k_wait_async_not_event, "TC102", TYPE, "sig, s", ["AsyncEvent", "got DistributedTensor"]),
    (k_wait_async_not_session, "TC102", TYPE, "win)", ["AsyncSession",
                                                       "got DistributedTensor[2, 8]"]),
    (k_tile_wait_async_no_scratch, "TC103", TYPE, "pld.tile.wait_async_event(",
     ["'scratch'"]),
]
