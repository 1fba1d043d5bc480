"""``pld`` primitives: windows, comm contexts, signals, remote tiles, put/get."""
from __future__ import annotations

from ..dtypes import DataType, INDEX, INT32
from ..ir import nodes as N
from ..ir.enums import AtomicType, NotifyOp, WaitCmp
from ..ir.types import (CommCtxType, NONE, PtrType, ScalarType, TensorType, TileType,
                        is_static, numel)
from .check import const_value, describe
from ..ir.kinds import HOST, INCORE, ORCH
from ..runtime.controller.orchestrator import HostRuntime
from ..runtime.rank.context import RankContext
from ..ir.effects import reads, remote_reads, remote_writes, writes
from ..runtime.rank import touched as T

# the parameters a put's / get's regions are computed from
_TRANSFER = ("dst", "src", "dst_offsets", "src_offsets", "shape")
from .registry import op

KERNEL = (INCORE,)


# ------------------------------------------------------------------ system
_WORLD_SIZE_HINT = "pass the rank count or derive it in the kernel with " \
    "pld.nranks(pld.get_comm_ctx(w))"


# a compiled program is specific to its rank count, so the value is known
@op("pld.system.world_size", where=(HOST,), host=HostRuntime.world_size,
    aliases=("pld.world_size",), value=lambda world: world,
    context_hint={ORCH: _WORLD_SIZE_HINT, INCORE: _WORLD_SIZE_HINT})
def world_size():
    """Number of ranks of the run (``len(DistributedConfig.device_ids)``); HOST only."""


@world_size.rule
def _world_size(c):
    return ScalarType(INDEX)


def _ctx_rule(c):
    if not isinstance(c.type("ctx"), CommCtxType):
        c.type_error(f"{c.op} expects a CommCtx (output of pld.system.get_comm_ctx), got "
                     f"{describe(c.type('ctx'))}", at="ctx")
    return ScalarType(INT32)


@op("pld.system.rank", where=KERNEL, kernel=RankContext.rank, aliases=("pld.rank",),
    raises=("TC102",))
def rank(ctx):
    """This rank's index within the comm domain of ``ctx`` (INT32)."""


@op("pld.system.nranks", where=KERNEL, kernel=RankContext.nranks, aliases=("pld.nranks",),
    raises=("TC102",))
def nranks(ctx):
    """Number of ranks in the comm domain of ``ctx`` (INT32)."""


rank.rule(_ctx_rule)
nranks.rule(_ctx_rule)


@op("pld.system.get_comm_ctx", where=(HOST, ORCH, INCORE), kernel=RankContext.get_comm_ctx,
    host=HostRuntime.get_comm_ctx, aliases=("pld.get_comm_ctx",),
    raises=("TC101",))
def get_comm_ctx(dist_tensor):
    """The communication context of the domain a window belongs to."""


@get_comm_ctx.rule
def _get_comm_ctx(c):
    t = c.type("dist_tensor")
    if not (isinstance(t, TensorType) and t.dist):
        c.type_error(f"pld.system.get_comm_ctx expects a DistributedTensor (window-bound), got "
                     f"{describe(t)}", code="TC101", at="dist_tensor")
    return CommCtxType()


def _signal_cell(c, name, role):
    t = c.dist(name, role)
    if t.dtype is not INT32:
        c.type_error(f"{c.op} {role} must be an INT32 window (signal cells are 32-bit counters); "
                     f"got {t.dtype.name}", code="TC204", at=name)
    offs = c.index_list("offsets", t.rank, target_what=f"{role} tensor")
    c.region_in_bounds(offs, [1] * len(offs), t.shape, what="signal cell", at="offsets")
    return t


@op("pld.system.notify", where=KERNEL, kernel=RankContext.notify,
    effects=("signal", "remote_write"), static=("op",), notifies="target", untracked=("target",),
    raises=("TC101", "TC102", "TC201", "TC202", "TC204", "TC214", "TC216", "TC218", "TC501",
            "TC502", "TC503"))
def notify(target, peer, offsets, value, *, op):
    """Deposit ``value`` into ``target[offsets]`` of rank ``peer``'s copy:
    ``op=NotifyOp.Set`` stores it, ``op=NotifyOp.AtomicAdd`` adds it atomically."""


@notify.rule
def _notify(c):
    _signal_cell(c, "target", "target")
    c.integer("peer")
    c.integer("value", int32=True)
    c.enum("op", NotifyOp)
    return NONE


@op("pld.system.wait", where=KERNEL, kernel=RankContext.wait, effects=("wait", "read"),
    static=("cmp",), untracked=("signal",),
    raises=("TC101", "TC102", "TC201", "TC202", "TC204", "TC214", "TC216", "TC218", "TC501",
            "TC502", "TC503", "TC504"))
def wait(signal, offsets, expected, *, cmp):
    """Block until this rank's ``signal[offsets]`` equals (``WaitCmp.Eq``) or is at
    least (``WaitCmp.Ge``) ``expected``."""


@wait.rule
def _wait(c):
    _signal_cell(c, "signal", "signal")
    c.integer("expected", int32=True)
    c.enum("cmp", WaitCmp)
    return NONE


@op("pld.system.defer_wait", where=KERNEL, kernel=RankContext.defer_wait, effects=("wait",),
    static=("cmp",), untracked=("signal",), defers=True,
    raises=("TC101", "TC102", "TC201", "TC202", "TC204", "TC214", "TC216", "TC218", "TC240",
            "TC331", "TC503"))
def defer_wait(signal, offsets, expected, *, cmp):
    """Register the completion condition ``signal[offsets] >= expected`` (uint32)
    on the enclosing waiter task and return at once: the task's core is freed
    when its body ends, its TaskId completes once every condition holds."""


@defer_wait.rule
def _defer_wait(c):
    sig = c.type("signal")
    if isinstance(sig, TensorType) and not (isinstance(c.arg("signal"), N.Var) and
                                            isinstance(sig.origin, tuple) and
                                            sig.origin[0] == "param"):
        c.syntax_error("pld.system.defer_wait signal must be a window passed to the task "
                       "directly (a function parameter), not a slice, view or alias",
                       code="TC331", at="signal")
    if isinstance(sig, TensorType) and sig.dist and sig.dtype is not INT32:
        c.type_error(f"pld.system.defer_wait signal dtype must be INT32; got {sig.dtype.name}",
                     code="TC204", at="signal")
    _signal_cell(c, "signal", "signal")
    c.integer("expected")
    v = const_value(c.arg("expected"))
    if isinstance(v, int) and not isinstance(v, bool) and not 0 <= v <= 2**31 - 1:
        c.value_error(f"pld.system.defer_wait constant expected must be in [0, INT32_MAX], got "
                      f"{v}", code="TC218", at="expected",
                      hint="deferred conditions compare unsigned counters that never go "
                           "negative")
    cmp = c.enum("cmp", WaitCmp)
    if cmp is not WaitCmp.Ge:
        c.value_error(f"pld.system.defer_wait only supports WaitCmp.Ge; got WaitCmp.{cmp.name}",
                      code="TC240", at="cmp", hint="an Eq condition needs a blocking "
                      "pld.system.wait")
    return NONE


# ------------------------------------------------------------------ windows
@op("pld.tensor.alloc_window_buffer", where=(HOST,), host=HostRuntime.alloc_window_buffer,
    effects=("alloc",), aliases=("pld.alloc_window_buffer",), compile_only=("name",),
    declares_buffer=True,
    raises=("TC102", "TC201", "TC209", "TC210", "TC218", "TC304", "TC503"))
def alloc_window_buffer(size, *, dtype=None, name=""):
    """Declare a per-rank, zero-initialised window buffer of ``size`` bytes, or of
    ``prod(shape) * dtype.get_byte()`` bytes when given a shape and ``dtype=``.
    The buffer is named after the variable it is assigned to."""


@alloc_window_buffer.rule
def _alloc(c):
    a = c.arg("size")
    dt = c.const("dtype")
    lhs = c.extra.get("lhs")
    if c.given("name"):
        c.syntax_error("pld.tensor.alloc_window_buffer 'name' cannot be passed explicitly; it is "
                       f"taken from the assignment's left side ('{lhs or 'buf'}')", code="TC304",
                       at="name", hint="drop the name= argument")
    if hasattr(a, "items"):                       # shape form
        if dt is None:
            c.value_error("pld.tensor.alloc_window_buffer requires dtype= when the first argument "
                          "is a shape", code="TC209", at="size",
                          hint="write alloc_window_buffer([rows, cols], dtype=pl.INT32)")
        if not isinstance(dt, DataType):
            c.type_error(f"pld.tensor.alloc_window_buffer dtype must be a dtype; got "
                         f"{describe(c.type('dtype'))}", at="dtype")
        dims = c.index_list("size", None, what="shape")
        if not dims:
            c.value_error("pld.tensor.alloc_window_buffer shape must be non-empty", code="TC209",
                          at="size")
        for i, d in enumerate(dims):
            if is_static(d) and d <= 0:
                c.value_error(f"pld.tensor.alloc_window_buffer shape dimension[{i}] is {d}; all "
                              f"dimensions must be positive", code="TC210", at="size")
        n = numel(dims)
        c.extra["nbytes"] = None if n is None else n * dt.get_byte()
    else:
        if c.given("dtype"):
            c.value_error("pld.tensor.alloc_window_buffer dtype= is only valid when the first "
                          "argument is a shape; a scalar first argument is a size in bytes",
                          code="TC209", at="dtype")
        c.integer("size", "size in bytes")
        v = const_value(a)
        if isinstance(v, int) and v <= 0:
            c.value_error(f"pld.tensor.alloc_window_buffer size must be positive; got {v}",
                          code="TC210", at="size")
        c.extra["nbytes"] = v if isinstance(v, int) else None
    return PtrType(buffer=c.extra.get("buffer"))


@op("pld.tensor.window", where=(HOST,), host=HostRuntime.window, static=("dtype",),
    aliases=("pld.window",),
    raises=("TC102", "TC201", "TC202", "TC210", "TC216", "TC502"))
def window(buf, shape, *, dtype):
    """A typed DistributedTensor view of a window buffer; views of one buffer share
    storage."""


@window.rule
def _window(c):
    t = c.type("buf")
    if not isinstance(t, PtrType):
        c.type_error(f"pld.tensor.window expects a Ptr handle (output of "
                     f"pld.tensor.alloc_window_buffer); got {describe(t)}", at="buf")
    dt = c.const("dtype")
    if not isinstance(dt, DataType):
        c.type_error(f"pld.tensor.window dtype must be a dtype; got {describe(c.type('dtype'))}",
                     at="dtype")
    dims = c.index_list("shape", None, what="shape")
    for i, d in enumerate(dims):
        if is_static(d) and d <= 0:
            c.value_error(f"pld.tensor.window shape dimension[{i}] is {d}; all dimensions must be "
                          f"positive", code="TC210", at="shape")
    buf = t.buffer
    n = numel(dims)
    if buf is not None:
        if n is not None and buf.nbytes is not None and n * dt.get_byte() > buf.nbytes:
            c.value_error(f"pld.tensor.window view of {n * dt.get_byte()} bytes does not fit in "
                          f"window buffer '{buf.name}' of {buf.nbytes} bytes", code="TC202",
                          at="shape", hint="alloc_window_buffer takes a size in BYTES "
                          "(or a shape with dtype=)")
    return TensorType(tuple(dims), dt, dist=True, origin=buf)


# ------------------------------------------------------------------ tile RMA
@op("pld.tile.remote_load", where=KERNEL, kernel=RankContext.remote_load,
    effects=("remote_read",), aliases=("pld.remote_load",), untracked=("target",),
    touches=(remote_reads("target", T.remote_loaded, ("target", "offsets", "shape",
                                                      "valid_shape")),),
    raises=("TC101", "TC102", "TC201", "TC202", "TC216", "TC218", "TC501", "TC502", "TC503"))
def remote_load(target, peer, offsets, shape, valid_shape=None):
    """Load ``target[offsets : offsets + shape]`` from rank ``peer``'s copy into a
    new tile (``valid_shape`` reads only a ragged leading extent)."""


@remote_load.rule
def _remote_load(c):
    t = c.dist("target", "target")
    c.integer("peer")
    if t.rank == 0:
        c.value_error("pld.tile.remote_load target must have rank > 0", code="TC201", at="target")
    offs = c.index_list("offsets", t.rank)
    shp = c.index_list("shape", t.rank, what="shape")
    for v in shp:
        if not is_static(v) or v <= 0:
            c.value_error(f"pld.tile.remote_load shape must be positive compile-time integers; "
                          f"got {shp}", code="TC216", at="shape")
    valid = c.index_list("valid_shape", t.rank, what="valid_shape") \
        if c.given("valid_shape") else None
    ext = [v if v is not None else s for v, s in zip(valid, shp)] if valid else shp
    c.region_in_bounds(offs, ext, t.shape, what="remote region", at="offsets")
    return TileType(tuple(shp), t.dtype, tuple(valid) if valid else None)


def _push_rule(c, src_name, src_shape, src_dtype):
    t = c.dist("target", "target")
    if t.rank is not None and t.rank < 2:
        c.value_error(f"{c.op} target rank must be >= 2 to hold a 2-D push; got rank {t.rank}",
                      code="TC201", at="target")
    c.integer("peer")
    offs = c.index_list("offsets", t.rank)
    if src_dtype is not t.dtype:
        c.type_error(f"{c.op} src dtype {src_dtype.name} differs from target dtype "
                     f"{t.dtype.name}", code="TC204", at=src_name, hint="convert with pl.cast")
    if len(src_shape) > 2 and any(is_static(d) and d != 1 for d in src_shape[:-2]):
        c.value_error(f"{c.op} src must be 2-D (or have all leading dims of size 1); got shape "
                      f"{list(src_shape)}", code="TC201", at=src_name)
    ext = [1] * (len(offs) - 2) + list(src_shape[-2:]) if len(src_shape) >= 2 \
        else [1] * (len(offs) - len(src_shape)) + list(src_shape)
    for i, (o, e, d) in enumerate(zip(offs, ext, t.shape)):
        if is_static(o) and o < 0:
            c.value_error(f"{c.op} offset {o} in dimension {i} is negative", code="TC202",
                          at="offsets")
        if is_static(o) and is_static(e) and is_static(d) and o + e > d:
            c.value_error(f"{c.op} push exceeds the peer's target region in dimension {i} "
                          f"(offset={o}, extent={e}, target_dim={d})", code="TC202", at="offsets")
    c.atomic_dtype(c.enum("atomic", AtomicType), t.dtype)
    return NONE


@op("pld.tile.remote_store", where=KERNEL, kernel=RankContext.remote_store,
    effects=("remote_write",), impl_renames={"src_tile": "src"}, untracked=("target",),
    touches=(reads("src", T.store_source, ("src",)),
             remote_writes("target", T.remote_stored, ("src", "target", "offsets"),
                           atomic="atomic")),
    raises=("TC101", "TC102", "TC201", "TC202", "TC203", "TC204", "TC214", "TC215", "TC218",
            "TC501", "TC502", "TC503"))
def remote_store(src_tile, target, peer, offsets, *, atomic=AtomicType.None_):
    """Write a local 2-D tile into rank ``peer``'s copy of ``target`` at ``offsets``;
    ``atomic=AtomicType.Add`` accumulates instead.  No synchronisation of its own."""


@remote_store.rule
def _tile_remote_store(c):
    s = c.type("src_tile")
    if not isinstance(s, TileType):
        c.type_error(f"pld.tile.remote_store expects a Tile src_tile; got {describe(s)}",
                     at="src_tile", hint="for a tensor-level value use pld.tensor.remote_store")
    return _push_rule(c, "src_tile", s.valid_shape or s.shape, s.dtype)


@op("pld.tensor.remote_store", where=KERNEL, kernel=RankContext.remote_store,
    effects=("read", "remote_write"), untracked=("target",),
    touches=(reads("src", T.store_source, ("src",)),
             remote_writes("target", T.remote_stored, ("src", "target", "offsets"),
                           atomic="atomic")),
    raises=("TC101", "TC102", "TC201", "TC202", "TC203", "TC204", "TC214", "TC215", "TC218",
            "TC501", "TC502", "TC503"))
def tensor_remote_store(src, target, peer, offsets, *, atomic=AtomicType.None_):
    """Tensor-level form of remote_store: push a computed tensor value (or a GM
    tensor, loaded implicitly) into rank ``peer``'s copy of ``target``."""


@tensor_remote_store.rule
def _tensor_remote_store(c):
    s = c.type("src")
    if not isinstance(s, TensorType) or s.dist:
        c.type_error(f"pld.tensor.remote_store expects a Tensor src (a tensor-level value); got "
                     f"{describe(s)}", at="src",
                     hint="in a tile-level kernel use pld.tile.remote_store; to push one window "
                          "buffer into another use pld.tensor.put")
    if not isinstance(c.type("target"), TensorType) or not c.type("target").dist:
        c.type_error(f"pld.tensor.remote_store expects a DistributedTensor target (window-bound); "
                     f"got {describe(c.type('target'))}", code="TC101", at="target")
    return _push_rule(c, "src", s.shape, s.dtype)


@op("pld.remote_store", where=KERNEL, kernel=RankContext.remote_store,
    effects=("read", "remote_write"), untracked=("target",),
    touches=(reads("src", T.store_source, ("src",)),
             remote_writes("target", T.remote_stored, ("src", "target", "offsets"),
                           atomic="atomic")),
    raises=("TC101", "TC102", "TC201", "TC202", "TC203", "TC204", "TC214", "TC215", "TC218",
            "TC501", "TC502", "TC503"))
def remote_store_short(src, target, peer, offsets, *, atomic=AtomicType.None_):
    """Short form: ``pld.tile.remote_store`` for a Tile ``src``, otherwise
    ``pld.tensor.remote_store``."""


@remote_store_short.rule
def _remote_store_short(c):
    s = c.type("src")
    if isinstance(s, TileType):
        return _push_rule(c, "src", s.valid_shape or s.shape, s.dtype)
    return _tensor_remote_store(c)


# ------------------------------------------------------------------ put / get
def _chunk_args(c):
    vals = {}
    for k in ("chunk_rows", "chunk_cols"):
        v = c.const(k, 0 if not c.given(k) else None)
        if not isinstance(v, int) or isinstance(v, bool):
            c.type_error(f"{c.op} {k} must be an int (static), got {describe(c.type(k)) if v is None else type(v).__name__}",
                         code="TC105", at=k)
        if v < 0:
            c.value_error(f"{c.op} {k} must be non-negative (0 = full), got {v}", code="TC206",
                          at=k)
        vals[k] = v
    p = c.const("pipeline", False)
    if not isinstance(p, bool):
        c.type_error(f"{c.op} pipeline must be a bool literal; got {describe(c.type('pipeline'))}",
                     code="TC105", at="pipeline")
    if p and (vals["chunk_rows"] == 0 or vals["chunk_cols"] == 0):
        c.value_error(f"{c.op} pipeline=True requires both chunk_rows>0 and chunk_cols>0 (got "
                      f"chunk_rows={vals['chunk_rows']}, chunk_cols={vals['chunk_cols']})",
                      code="TC207", at="pipeline",
                      hint="double buffering only helps when the transfer is chunked")
    return vals


def _transfer_rule(c):
    """Region, dtype and chunk rules shared by put and get."""
    chunks = _chunk_args(c)
    shp = _region_rule(c)
    if shp is not None:
        if shp and not is_static(shp[-1]) and chunks["chunk_cols"] == 0:
            c.value_error(f"{c.op} a runtime innermost extent needs a static chunk_cols",
                          code="TC217", at="shape", hint="set chunk_cols to bound the staging tile")
        if len(shp) > 1 and not is_static(shp[0]) and chunks["chunk_rows"] == 0:
            c.value_error(f"{c.op} a runtime leading extent needs a static chunk_rows",
                          code="TC217", at="shape", hint="set chunk_rows to bound the staging tile")
    return NONE


def _region_rule(c):
    """The region and dtype rules of a transfer between ``dst`` and ``src``
    (put, get, put_async): the sub-region's shape, or None for whole tensors."""
    given = [c.given(k) for k in ("dst_offsets", "src_offsets", "shape")]
    if any(given) and not all(given):
        names = [k for k, g in zip(("dst_offsets", "src_offsets", "shape"), given) if g]
        c.value_error(f"{c.op} dst_offsets, src_offsets, and shape must be provided together; "
                      f"got only {', '.join(names)}", code="TC205", hint="give all three for a sub-region, or none for the "
                      "whole tensor")
    dst, src = c.type("dst"), c.type("src")
    if dst.dtype is not src.dtype:
        c.type_error(f"{c.op} dst dtype {dst.dtype.name} differs from src dtype {src.dtype.name}",
                     code="TC204", at="src")
    if dst.rank != src.rank:
        c.value_error(f"{c.op} dst rank ({dst.rank}) must equal src rank ({src.rank})",
                      code="TC201", at="src")
    if all(given):
        shp = c.index_list("shape", dst.rank, what="shape", target_what="dst tensor")
        for role, t in (("dst", dst), ("src", src)):
            offs = c.index_list(f"{role}_offsets", t.rank, target_what=f"{role} tensor")
            for i, (o, e, d) in enumerate(zip(offs, shp, t.shape)):
                if is_static(o) and o < 0:
                    c.value_error(f"{c.op} {role} offset {o} in dimension {i} is negative",
                                  code="TC202", at=f"{role}_offsets")
                if is_static(e) and e <= 0:
                    c.value_error(f"{c.op} shape entries must be positive; got {e}",
                                  code="TC210", at="shape")
                if is_static(o) and is_static(e) and is_static(d) and o + e > d:
                    c.value_error(f"{c.op} {role} subregion dimension {i} exceeds {role} shape "
                                  f"(offset={o}, shape={e}, {role}_dim={d})", code="TC202",
                                  at=f"{role}_offsets")
        return shp
    if any(is_static(a) and is_static(b) and a != b for a, b in zip(dst.shape, src.shape)):
        c.value_error(f"{c.op} whole-tensor transfer needs equal shapes; dst is "
                      f"{describe(dst)}, src is {describe(src)}", code="TC208", at="src",
                      hint="pass dst_offsets, src_offsets and shape for a sub-region")
    return None


@op("pld.tensor.put", where=KERNEL, kernel=RankContext.put, effects=("read", "remote_write"),
    static=("chunk_rows", "chunk_cols", "pipeline"), untracked=("dst",),
    touches=(reads("src", T.put_local, _TRANSFER),
             remote_writes("dst", T.put_remote, _TRANSFER, atomic="atomic")),
    raises=("TC101", "TC102", "TC105", "TC201", "TC202", "TC203", "TC204", "TC205", "TC206",
            "TC207", "TC208", "TC210", "TC214", "TC215", "TC216", "TC217", "TC218", "TC501",
            "TC502", "TC503"))
def put(dst, peer, src, dst_offsets=None, src_offsets=None, shape=None, *,
        atomic=AtomicType.None_, chunk_rows=0, chunk_cols=0, pipeline=False):
    """Copy local ``src`` (a Tensor or window) into rank ``peer``'s copy of window
    ``dst`` -- whole tensors, or ``src[src_offsets:+shape]`` into
    ``dst[dst_offsets:+shape]``.  ``atomic=AtomicType.Add`` accumulates."""


@put.rule
def _put(c):
    c.dist("dst", "dst")
    s = c.type("src")
    if not isinstance(s, TensorType):
        c.type_error(f"pld.tensor.put expects a Tensor or DistributedTensor src; got "
                     f"{describe(s)}", at="src")
    c.integer("peer")
    _transfer_rule(c)
    c.atomic_dtype(c.enum("atomic", AtomicType), c.type("dst").dtype)
    return NONE


@op("pld.tensor.get", where=KERNEL, kernel=RankContext.get, effects=("remote_read", "write"),
    static=("chunk_rows", "chunk_cols", "pipeline"), writes=("dst",), untracked=("src",),
    touches=(remote_reads("src", T.get_remote, _TRANSFER),
             writes("dst", T.get_local, _TRANSFER)),
    raises=("TC101", "TC102", "TC105", "TC201", "TC202", "TC204", "TC205", "TC206", "TC207",
            "TC208", "TC210", "TC216", "TC217", "TC218", "TC501", "TC502", "TC503"))
def get(dst, peer, src, dst_offsets=None, src_offsets=None, shape=None, *, chunk_rows=0,
        chunk_cols=0, pipeline=False):
    """Copy rank ``peer``'s copy of window ``src`` into local ``dst`` (a Tensor or
    window) -- whole tensors or matching sub-regions."""


@get.rule
def _get(c):
    c.dist("src", "src")
    d = c.type("dst")
    if not isinstance(d, TensorType):
        c.type_error(f"pld.tensor.get expects a Tensor or DistributedTensor dst; got "
                     f"{describe(d)}", at="dst")
    c.integer("peer")
    return _transfer_rule(c)


# ------------------------------------------------------------------ tile-level put / get
def _staged_rule(c, window: str, local: str) -> None:
    """What the tile forms of put / get check, but for their own options:
    the window operand, the local one, the peer, the regions and the
    staging tiles."""
    c.dist(window, window)
    t = c.type(local)
    if not isinstance(t, TensorType):
        c.type_error(f"{c.op} expects a Tensor or DistributedTensor {local}; got "
                     f"{describe(t)}", at=local)
    c.integer("peer")
    _transfer_rule(c)
    _stage_rule(c, c.type(window))


def _stage_rule(c, data):
    """The staging tiles of the tile forms: Tiles of the transferred dtype."""
    for name in ("stage", "stage2"):
        if name == "stage2" and not c.given(name):
            continue
        t = c.type(name)
        if not isinstance(t, TileType):
            c.type_error(f"{c.op} {name} must be a Tile (the staging buffer the transfer passes "
                         f"through); got {describe(t)}", at=name,
                         hint="make one with pl.tile.create(shape, dtype=...)")
        if t.dtype is not data.dtype:
            c.type_error(f"{c.op} {name} dtype {t.dtype.name} differs from the transferred "
                         f"dtype {data.dtype.name}", code="TC204", at=name)


@op("pld.tile.put", where=(INCORE,), kernel=RankContext.tile_put,
    effects=("read", "remote_write"), untracked=("dst",),
    touches=(reads("src", T.put_local, _TRANSFER),
             remote_writes("dst", T.put_remote, _TRANSFER, atomic="atomic")),
    raises=("TC101", "TC102", "TC105", "TC201", "TC202", "TC203", "TC204", "TC205", "TC206",
            "TC207", "TC208", "TC210", "TC214", "TC215", "TC216", "TC217", "TC218", "TC501",
            "TC502", "TC503"))
def tile_put(dst, peer, src, stage, stage2=None, dst_offsets=None, src_offsets=None, shape=None,
             *, atomic=AtomicType.None_):
    """``pld.tensor.put`` with its staging tile(s) given: ``src`` moves through
    ``stage`` (and ``stage2``, for ping-pong) into rank ``peer``'s copy of
    ``dst``.  On the CPU the copy is direct and the staging tiles keep their
    contents (on the chip they end up holding part of the data)."""


@tile_put.rule
def _tile_put(c):
    _staged_rule(c, "dst", "src")
    c.atomic_dtype(c.enum("atomic", AtomicType), c.type("dst").dtype)
    return NONE


@op("pld.tile.get", where=(INCORE,), kernel=RankContext.tile_get,
    effects=("remote_read", "write"), writes=("dst",), untracked=("src",),
    touches=(remote_reads("src", T.get_remote, _TRANSFER),
             writes("dst", T.get_local, _TRANSFER)),
    raises=("TC101", "TC102", "TC105", "TC201", "TC202", "TC204", "TC205", "TC206", "TC207",
            "TC208", "TC210", "TC216", "TC217", "TC218", "TC501", "TC502", "TC503"))
def tile_get(dst, peer, src, stage, stage2=None, dst_offsets=None, src_offsets=None, shape=None):
    """``pld.tensor.get`` with its staging tile(s) given: rank ``peer``'s copy
    of window ``src`` moves through ``stage`` into local ``dst``.  On the CPU
    the copy is direct and the staging tiles keep their contents."""


@tile_get.rule
def _tile_get(c):
    _staged_rule(c, "src", "dst")
    return NONE


__all__ = ["world_size", "get_comm_ctx", "rank", "nranks", "notify", "wait",
           "alloc_window_buffer", "window", "remote_load", "remote_store", "tensor_remote_store",
           "remote_store_short", "put", "get", "tile_put", "tile_get"]
