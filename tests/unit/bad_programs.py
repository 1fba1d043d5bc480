"""Programs with one mistake each (except the "several mistakes" section), for the
compile-error tests, plus the correct wrappers they share.

Each offending line carries a marker comment ``# E:<tag>`` (the error code,
or the code plus a suffix where one function has two marked lines); the tests
find the expected line from the marker, so editing this file never breaks them.
Kernels share one wrapper (``host_for``) so each case is only the lines that
matter.  Every program is compiled for a world of ``W`` ranks.
"""
import tilecomm.language as pl
import tilecomm.language.distributed as pld

R, C = 2, 8
W = 2

X = pl.Tensor[[R, C], pl.FP32]
Y = pl.Out[pl.Tensor[[R, C], pl.FP32]]
WIN = pl.InOut[pld.DistributedTensor[[R, C], pl.FP32]]
SIG = pl.InOut[pld.DistributedTensor[[W, 1], pl.INT32]]
XS = pl.Tensor[[W, R, C], pl.FP32]
YS = pl.Out[pl.Tensor[[W, R, C], pl.FP32]]

SET = pld.NotifyOp.Set
GE = pld.WaitCmp.Ge
ADD = pld.AtomicType.Add


def host_for(kernel, wdt=pl.FP32):
    """A correct chip wrapper and HOST orchestrator around ``kernel``; the window
    ``win`` has dtype ``wdt``."""

    @pl.jit
    def chip(x: X, y: Y, win: pl.InOut[pld.DistributedTensor[[R, C], wdt]], sig: SIG):
        return kernel(x, y, win, sig)

    @pl.jit.host
    def main(xs: XS, ys: YS):
        wbuf = pld.alloc_window_buffer([R, C], dtype=wdt)
        sbuf = pld.alloc_window_buffer([W, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            chip(xs[r], ys[r], pld.window(wbuf, [R, C], dtype=wdt),
                 pld.window(sbuf, [W, 1], dtype=pl.INT32), device=r)
        return ys

    return main


def host_for_chip(chip):
    """A correct HOST orchestrator dispatching ``chip`` on every rank."""

    @pl.jit.host
    def main(xs: XS, ys: YS):
        wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
        sbuf = pld.alloc_window_buffer([W, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            chip(xs[r], ys[r], pld.window(wbuf, [R, C], dtype=pl.FP32),
                 pld.window(sbuf, [W, 1], dtype=pl.INT32), device=r)
        return ys

    return main


# ---------------------------------------------------------------- a correct program
@pl.jit.incore
def ok_kernel(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.load(x, [0, 0], [R, C])
    y = pl.store(t, [0, 0], y)
    return y


@pl.jit
def ok_chip(x: X, y: Y, win: WIN, sig: SIG):
    return ok_kernel(x, y, win, sig)


ok_main = host_for(ok_kernel)


# ---------------------------------------------------------------- wrong function kind
@pl.jit.host
def host_uses_load(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W, 1], dtype=pl.INT32)
    t = pl.load(xs, [0, 0, 0], [1, R, C])  # E:TC301
    for r in pl.range(pld.world_size()):
        ok_chip(xs[r], ys[r], pld.window(wbuf, [R, C], dtype=pl.FP32),
                pld.window(sbuf, [W, 1], dtype=pl.INT32), device=r)
    return ys


@pl.jit.incore
def k_world_size(x: X, y: Y, win: WIN, sig: SIG):
    n = pld.system.world_size()  # E:TC301
    t = pl.load(x, [0, 0], [R, C])
    y = pl.store(t, [0, 0], y)
    return y


@pl.jit.incore
def k_alloc(x: X, y: Y, win: WIN, sig: SIG):
    buf = pld.alloc_window_buffer([W, 1], dtype=pl.INT32)  # E:TC301
    return y


# ---------------------------------------------------------------- wrong operand kinds
@pl.jit.incore
def k_notify_plain(x: X, y: Y, win: WIN, sig: SIG):
    pld.system.notify(x, 0, [0, 0], 1, op=SET)  # E:TC101


@pl.jit.incore
def k_wait_plain(x: X, y: Y, win: WIN, sig: SIG):
    pld.system.wait(y, [0, 0], 1, cmp=GE)  # E:TC101


@pl.jit.incore
def k_remote_load_plain(x: X, y: Y, win: WIN, sig: SIG):
    t = pld.tile.remote_load(x, 0, [0, 0], [R, C])  # E:TC101
    y = pl.store(t, [0, 0], y)
    return y


@pl.jit.incore
def k_put_plain_dst(x: X, y: Y, win: WIN, sig: SIG):
    pld.tensor.put(y, 0, win)  # E:TC101


@pl.jit.incore
def k_get_plain_src(x: X, y: Y, win: WIN, sig: SIG):
    pld.tensor.get(y, 0, x)  # E:TC101


@pl.jit.incore
def k_tile_put_stage_tensor(x: X, y: Y, win: WIN, sig: SIG):
    pld.tile.put(win, 0, x, x)  # E:TC102


@pl.jit.incore
def k_tile_get_stage_dtype(x: X, y: Y, win: WIN, sig: SIG):
    st = pl.tile.create([R, C], dtype=pl.FP16)
    pld.tile.get(y, 0, win, st)  # E:TC204


@pl.jit.incore
def k_comm_ctx_plain(x: X, y: Y, win: WIN, sig: SIG):
    ctx = pld.get_comm_ctx(x)  # E:TC101


@pl.jit.incore
def k_tensor_store_window_src(x: X, y: Y, win: WIN, sig: SIG):
    pld.tensor.remote_store(win, win, 0, [0, 0])  # E:TC102


@pl.jit.incore
def k_tile_store_tensor_src(x: X, y: Y, win: WIN, sig: SIG):
    pld.tile.remote_store(x, win, 0, [0, 0])  # E:TC102


@pl.jit.incore
def k_store_tensor_as_tile(x: X, y: Y, win: WIN, sig: SIG):
    y = pl.store(x, [0, 0], y)  # E:TC102
    return y


@pl.jit.incore
def k_rank_of_window(x: X, y: Y, win: WIN, sig: SIG):
    me = pld.rank(win)  # E:TC102


@pl.jit.incore
def k_nranks_of_tensor(x: X, y: Y, win: WIN, sig: SIG):
    n = pld.nranks(x)  # E:TC102


@pl.jit.incore
def k_write_tile_value(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.load(x, [0, 0], [R, C])
    pl.write(y, [0, 0], t)  # E:TC102


@pl.jit.incore
def k_mul_ctx(x: X, y: Y, win: WIN, sig: SIG):
    ctx = pld.get_comm_ctx(win)
    t = pl.load(x, [0, 0], [R, C])
    u = pl.mul(t, ctx)  # E:TC102


@pl.jit.incore
def k_div_tile_by_tensor(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.load(x, [0, 0], [R, C])
    u = pl.div(t, x)  # E:TC102


@pl.jit.incore
def k_cast_to_int(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.load(x, [0, 0], [R, C])
    u = pl.cast(t, 3)  # E:TC102


@pl.jit.incore
def k_const_of_runtime(x: X, y: Y, win: WIN, sig: SIG):
    n = pld.nranks(pld.get_comm_ctx(win))
    k = pl.const(n, pl.INT32)  # E:TC102


@pl.jit.incore
def k_min_of_tile(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.load(x, [0, 0], [R, C])
    m = pl.min(t, 1)  # E:TC102


@pl.jit.incore
def k_max_of_tile(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.load(x, [0, 0], [R, C])
    m = pl.max(1, t)  # E:TC102


# ---------------------------------------------------------------- ranks, bounds, values
@pl.jit.incore
def k_offsets_rank(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.load(x, [0], [R, C])  # E:TC201
    y = pl.store(t, [0, 0], y)
    return y


@pl.jit.incore
def k_wait_offsets_rank(x: X, y: Y, win: WIN, sig: SIG):
    pld.system.wait(sig, [0], 1, cmp=GE)  # E:TC201


@pl.jit.incore
def k_short_store_offsets_rank(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.load(x, [0, 0], [R, C])
    pld.remote_store(t, win, 0, [0])  # E:TC201


@pl.jit.incore
def k_load_oob(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.load(x, [1, 0], [R, C])  # E:TC202
    y = pl.store(t, [0, 0], y)
    return y


@pl.jit.incore
def k_store_oob(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.load(x, [0, 0], [R, C])
    y = pl.store(t, [0, 4], y)  # E:TC202
    return y


@pl.jit.incore
def k_push_oob(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.load(x, [0, 0], [R, C])
    pld.tile.remote_store(t, win, 0, [1, 0])  # E:TC202


@pl.jit.incore
def k_put_region_oob(x: X, y: Y, win: WIN, sig: SIG):
    pld.tensor.put(win, 0, x, [1, 0], [0, 0], [R, C])  # E:TC202


@pl.jit.incore
def k_read_oob(x: X, y: Y, win: WIN, sig: SIG):
    v = pl.read(sig, [W, 0])  # E:TC202


@pl.jit.incore
def k_slice_oob(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.load(x, [0, 0], [R, C])
    s = pl.slice(t, [R, C], [1, 0])  # E:TC202


@pl.jit.incore
def k_atomic_int64(x: X, y: Y, win: pl.InOut[pld.DistributedTensor[[R, C], pl.INT64]], sig: SIG):
    t = pl.load(win, [0, 0], [R, C])
    pld.tile.remote_store(t, win, 0, [0, 0], atomic=ADD)  # E:TC203


@pl.jit.incore
def k_atomic_fp64(x: X, y: Y, win: pl.InOut[pld.DistributedTensor[[R, C], pl.FP64]], sig: SIG):
    t = pl.load(win, [0, 0], [R, C])
    win = pl.store(t, [0, 0], win, atomic=ADD)  # E:TC203


@pl.jit.incore
def k_atomic_bf16(x: X, y: Y, win: pl.InOut[pld.DistributedTensor[[R, C], pl.BF16]], sig: SIG):
    t = pl.load(win, [0, 0], [R, C])
    pld.tile.remote_store(t, win, 0, [0, 0], atomic=ADD)  # E:TC215


@pl.jit.incore
def k_add_dtypes(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.load(x, [0, 0], [R, C])
    s = pl.cast(t, pl.INT32)
    u = pl.add(t, s)  # E:TC204


@pl.jit.incore
def k_maximum_dtypes(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.load(x, [0, 0], [R, C])
    s = pl.cast(t, pl.FP16)
    u = pl.maximum(t, s)  # E:TC204


@pl.jit.incore
def k_notify_fp32_cell(x: X, y: Y, win: WIN, sig: SIG):
    pld.system.notify(win, 0, [0, 0], 1, op=SET)  # E:TC204


@pl.jit.incore
def k_sub_shapes(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.load(x, [0, 0], [R, C])
    u = pl.load(x, [0, 0], [1, C])
    v = pl.sub(t, u)  # E:TC208


@pl.jit.incore
def k_minimum_shapes(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.load(x, [0, 0], [R, C])
    u = pl.load(x, [0, 0], [R, 4])
    v = pl.minimum(t, u)  # E:TC208


@pl.jit.incore
def k_put_partial_region(x: X, y: Y, win: WIN, sig: SIG):
    pld.tensor.put(win, 0, x, [0, 0])  # E:TC205


@pl.jit.incore
def k_get_partial_region(x: X, y: Y, win: WIN, sig: SIG):
    pld.tensor.get(y, 0, win, shape=[1, C])  # E:TC205


@pl.jit.incore
def k_chunk_float(x: X, y: Y, win: WIN, sig: SIG):
    pld.tensor.put(win, 0, x, chunk_rows=1.5)  # E:TC105


@pl.jit.incore
def k_chunk_bool(x: X, y: Y, win: WIN, sig: SIG):
    pld.tensor.get(x, 0, win, chunk_cols=True)  # E:TC105


@pl.jit.incore
def k_chunk_negative(x: X, y: Y, win: WIN, sig: SIG):
    pld.tensor.put(win, 0, x, chunk_rows=-1)  # E:TC206


@pl.jit.incore
def k_pipeline_unchunked(x: X, y: Y, win: WIN, sig: SIG):
    pld.tensor.put(win, 0, x, chunk_rows=1, pipeline=True)  # E:TC207


@pl.jit.incore
def k_notify_bad_op(x: X, y: Y, win: WIN, sig: SIG):
    pld.system.notify(sig, 0, [0, 0], 1, op=7)  # E:TC214


@pl.jit.incore
def k_runtime_tile_shape(x: X, y: Y, win: WIN, sig: SIG):
    n = pld.nranks(pld.get_comm_ctx(win))
    t = pl.tile.create([1, n], pl.FP32)  # E:TC216


@pl.jit.incore
def k_runtime_put_extent(x: X, y: Y, win: WIN, sig: SIG):
    n = pld.nranks(pld.get_comm_ctx(win))
    pld.tensor.put(win, 0, x, [0, 0], [0, 0], [1, n])  # E:TC217


@pl.jit.incore
def k_full_zero_dim(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.tile.full([R, 0], pl.FP32, 0.0)  # E:TC210


@pl.jit.incore
def k_create_tensor_zero_dim(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.create_tensor([0, C], pl.FP32)  # E:TC210


@pl.jit.incore
def k_zero_step(x: X, y: Y, win: WIN, sig: SIG):
    for i in pl.range(0, R, 0):  # E:TC200
        pass


@pl.jit.incore
def k_op_arity(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.load(x, [0, 0])  # E:TC103


# ---------------------------------------------------------------- syntax and names
@pl.jit.incore
def k_notify_short(x: X, y: Y, win: WIN, sig: SIG):
    pld.notify(sig, 0, [0, 0], 1, op=SET)  # E:TC306


@pl.jit.incore
def k_while(x: X, y: Y, win: WIN, sig: SIG):
    i = 0
    while i < R:  # E:TC302
        i = i + 1
    else:
        i = 0


@pl.jit.incore
def k_lambda(x: X, y: Y, win: WIN, sig: SIG):
    f = lambda v: v  # E:TC302


@pl.jit.incore
def k_unknown_name(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.load(x, [0, 0], [R, C])
    u = pl.add(t, no_such_tile)  # E:TC307


@pl.jit.incore
def k_unknown_pl_op(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.frobnicate(x)  # E:TC307


@pl.jit.incore
def k_yield_outside_loop(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.load(x, [0, 0], [R, C])
    u = pl.yield_(t)  # E:TC309


@pl.jit.incore
def k_yield_unassigned(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.load(x, [0, 0], [R, C])
    for i, (acc,) in pl.range(R, init_values=(t,)):
        pl.yield_(acc)  # E:TC309


@pl.jit.incore
def k_bad_annotation(x: X, y: Y, win: WIN,
                     sig: int):  # E:TC106
    pass


@pl.jit.incore
def k_bare(x: X, y: Y, win: WIN, sig: SIG, extra: pl.Tensor):
    pass


@pl.jit
def chip_scalar_for_bare_tensor(x: X, y: Y, win: WIN, sig: SIG):
    return k_bare(x, y, win, sig, 1)  # E:TC107


# ---------------------------------------------------------------- calls between functions
@pl.jit
def chip_short_call(x: X, y: Y, win: WIN, sig: SIG):
    return ok_kernel(x, y, win)  # E:TC103


@pl.jit
def chip_kernel_device(x: X, y: Y, win: WIN, sig: SIG):
    return ok_kernel(x, y, win, sig, device=0)  # E:TC308


@pl.jit.host
def host_plain_for_window(xs: XS, ys: YS):
    sbuf = pld.alloc_window_buffer([W, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        ok_chip(xs[r], ys[r], xs[r], pld.window(sbuf, [W, 1], dtype=pl.INT32), device=r)  # E:TC104
    return ys


@pl.jit.host
def host_incore_device(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W, 1], dtype=pl.INT32)
    ok_kernel(xs[0], ys[0], pld.window(wbuf, [R, C], dtype=pl.FP32),
              pld.window(sbuf, [W, 1], dtype=pl.INT32), device=0)  # E:TC308
    return ys


N = pl.dynamic("N")


@pl.jit.incore
def dyn_kernel(x: pl.Tensor[[N, C], pl.FP32], y: pl.Out[pl.Tensor[[N, C], pl.FP32]]):
    t = pl.load(x, [0, 0], [1, C])
    y = pl.store(t, [0, 0], y)
    return y


@pl.jit
def dyn_chip(x: pl.Tensor[[N, C], pl.FP32], y: pl.Out[pl.Tensor[[N, C], pl.FP32]]):
    return dyn_kernel(x, y)


@pl.jit.host
def host_dynamic(xs: pl.Tensor[[N, C], pl.FP32],
                 ys: pl.Out[pl.Tensor[[N, C], pl.FP32]]):  # E:TC208
    for r in pl.range(pld.world_size()):
        dyn_chip(xs, ys, device=r)
    return ys


# ---------------------------------------------------------------- window buffers
@pl.jit.host
def host_alloc_unassigned(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W, 1], dtype=pl.INT32)
    pld.alloc_window_buffer([W, 1], dtype=pl.INT32)  # E:TC303
    for r in pl.range(pld.world_size()):
        ok_chip(xs[r], ys[r], pld.window(wbuf, [R, C], dtype=pl.FP32),
                pld.window(sbuf, [W, 1], dtype=pl.INT32), device=r)
    return ys


@pl.jit.host
def host_alloc_tuple_target(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W, 1], dtype=pl.INT32)
    a, b = pld.alloc_window_buffer([W, 1], dtype=pl.INT32)  # E:TC303
    for r in pl.range(pld.world_size()):
        ok_chip(xs[r], ys[r], pld.window(wbuf, [R, C], dtype=pl.FP32),
                pld.window(sbuf, [W, 1], dtype=pl.INT32), device=r)
    return ys


@pl.jit.host
def host_alloc_name(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W, 1], dtype=pl.INT32, name="sig")  # E:TC304
    for r in pl.range(pld.world_size()):
        ok_chip(xs[r], ys[r], pld.window(wbuf, [R, C], dtype=pl.FP32),
                pld.window(sbuf, [W, 1], dtype=pl.INT32), device=r)
    return ys


@pl.jit.host
def host_alloc_duplicate(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W, 1], dtype=pl.INT32)  # E:first-sbuf
    v = pld.window(sbuf, [W, 1], dtype=pl.INT32)
    sbuf = pld.alloc_window_buffer([W, 1], dtype=pl.INT32)  # E:TC305
    for r in pl.range(pld.world_size()):
        ok_chip(xs[r], ys[r], pld.window(wbuf, [R, C], dtype=pl.FP32), v, device=r)
    return ys


@pl.jit.host
def host_alloc_bytes_with_dtype(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer(W * 4, dtype=pl.INT32)  # E:TC209
    for r in pl.range(pld.world_size()):
        ok_chip(xs[r], ys[r], pld.window(wbuf, [R, C], dtype=pl.FP32),
                pld.window(sbuf, [W, 1], dtype=pl.INT32), device=r)
    return ys


@pl.jit.host
def host_alloc_shape_without_dtype(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W, 1])  # E:TC209
    for r in pl.range(pld.world_size()):
        ok_chip(xs[r], ys[r], pld.window(wbuf, [R, C], dtype=pl.FP32),
                pld.window(sbuf, [W, 1], dtype=pl.INT32), device=r)
    return ys


@pl.jit.host
def host_alloc_zero_dim(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W, 0], dtype=pl.INT32)  # E:TC210
    for r in pl.range(pld.world_size()):
        ok_chip(xs[r], ys[r], pld.window(wbuf, [R, C], dtype=pl.FP32),
                pld.window(sbuf, [W, 1], dtype=pl.INT32), device=r)
    return ys


@pl.jit.host
def host_window_of_tensor(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W, 1], dtype=pl.INT32)
    v = pld.window(xs, [W, 1], dtype=pl.INT32)  # E:TC102
    for r in pl.range(pld.world_size()):
        ok_chip(xs[r], ys[r], pld.window(wbuf, [R, C], dtype=pl.FP32),
                pld.window(sbuf, [W, 1], dtype=pl.INT32), device=r)
    return ys


@pl.jit.host
def host_window_too_big(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        ok_chip(xs[r], ys[r], pld.window(wbuf, [R, C], dtype=pl.FP32),
                pld.window(sbuf, [W, 2], dtype=pl.INT32), device=r)  # E:TC202
    return ys


@pl.jit.host
def host_dead_alloc(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W, 1], dtype=pl.INT32)
    spare = pld.alloc_window_buffer([W, 1], dtype=pl.INT32)  # E:TC213
    for r in pl.range(pld.world_size()):
        ok_chip(xs[r], ys[r], pld.window(wbuf, [R, C], dtype=pl.FP32),
                pld.window(sbuf, [W, 1], dtype=pl.INT32), device=r)
    return ys


@pl.jit.host
def host_view_not_dispatched(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W, 1], dtype=pl.INT32)
    spare = pld.alloc_window_buffer([W, 1], dtype=pl.INT32)  # E:TC213
    v = pld.window(spare, [W, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        ok_chip(xs[r], ys[r], pld.window(wbuf, [R, C], dtype=pl.FP32),
                pld.window(sbuf, [W, 1], dtype=pl.INT32), device=r)
    return ys


# ---------------------------------------------------------------- device= forms
@pl.jit.host
def host_device_expr(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size() - 1):
        ok_chip(xs[r], ys[r], pld.window(wbuf, [R, C], dtype=pl.FP32),
                pld.window(sbuf, [W, 1], dtype=pl.INT32), device=r + 1)  # E:TC211
    return ys


@pl.jit.host
def host_device_out_of_range(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W, 1], dtype=pl.INT32)
    ok_chip(xs[0], ys[0], pld.window(wbuf, [R, C], dtype=pl.FP32),
            pld.window(sbuf, [W, 1], dtype=pl.INT32), device=5)  # E:TC212
    return ys


@pl.jit.host
def host_device_loop_too_long(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W, 1], dtype=pl.INT32)
    for r in pl.range(0, W + 1):
        ok_chip(xs[0], ys[0], pld.window(wbuf, [R, C], dtype=pl.FP32),
                pld.window(sbuf, [W, 1], dtype=pl.INT32), device=r)  # E:TC212
    return ys


# ---------------------------------------------------------------- dispatches that would run wrong
@pl.jit.incore
def plain_kernel(x: X, y: Y):
    y = pl.store(pl.load(x, [0, 0], [R, C]), [0, 0], y)
    return y


@pl.jit
def plain_chip(x: X, y: Y):
    """A comm-less chip function: no windows."""
    return plain_kernel(x, y)


@pl.jit.host
def host_windows_without_device(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        ok_chip(xs[r], ys[r], pld.window(wbuf, [R, C], dtype=pl.FP32),  # E:TC227
                pld.window(sbuf, [W, 1], dtype=pl.INT32))
    return ys


@pl.jit.host
def host_rank_loop_without_device(xs: XS, ys: YS):
    n = pld.world_size()
    for r in pl.range(n):
        plain_chip(xs[r], ys[r])  # E:TC227
    return ys


@pl.jit.host
def host_input_to_chip_out(xs: XS, ys: XS):
    for r in pl.range(pld.world_size()):
        plain_chip(xs[r], ys[r], device=r)  # E:TC228
    return ys


@pl.jit.host
def host_input_to_chip_inout(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    for r in pl.range(pld.world_size()):
        inout_chip(ys[r], xs[r], pld.window(wbuf, [R, C], dtype=pl.FP32), device=r)  # E:TC228
    return ys


@pl.jit.incore
def inout_kernel(x: X, acc: pl.InOut[pl.Tensor[[R, C], pl.FP32]], win: WIN):
    acc = pl.store(pl.add(pl.load(acc, [0, 0], [R, C]), pl.load(x, [0, 0], [R, C])), [0, 0],
                   acc)
    return acc


@pl.jit
def inout_chip(x: X, acc: pl.InOut[pl.Tensor[[R, C], pl.FP32]], win: WIN):
    return inout_kernel(x, acc, win)


# ---------------------------------------------------------------- several mistakes at once
@pl.jit.incore
def k_three_mistakes(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.load(x, [0], [R, C])  # E:TC201
    u = pl.add(t, missing_name)  # E:TC307
    pld.system.notify(x, 0, [0, 0], 1, op=SET)  # E:TC101
    y = pl.store(pl.load(x, [0, 0], [R, C]), [0, 0], y)
    return y


@pl.jit.host
def host_two_mistakes(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W, 1])  # E:TC209
    spare = pld.alloc_window_buffer([W, 0], dtype=pl.INT32)  # E:TC210
    for r in pl.range(pld.world_size()):
        ok_chip(xs[r], ys[r], pld.window(wbuf, [R, C], dtype=pl.FP32),
                pld.window(sbuf, [W, 1], dtype=pl.INT32), device=r)
    return ys



@pl.jit.host
def host_parse_and_verify_mistakes(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    spare = pld.alloc_window_buffer([W, 1], dtype=pl.INT32)  # E:TC213
    bad = pld.window(xs, [W, 1], dtype=pl.INT32)  # E:TC102
    for r in pl.range(pld.world_size()):
        sbuf = pld.alloc_window_buffer([W, 1], dtype=pl.INT32)  # E:TC310
        ok_chip(xs[r], ys[r], pld.window(wbuf, [R, C], dtype=pl.FP32),
                pld.window(sbuf, [W, 1], dtype=pl.INT32), device=r)
    return ys


@pl.jit.host
def host_failed_dispatch_hides_no_view(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        ok_chip(xs[r], ys[r], pld.window(wbuf, [R, C], dtype=pl.FP32),
                pld.window(sbuf, [W, 1], dtype=pl.INT32), device=r, extra=1)  # E:TC103
    return ys


# ---------------------------------------------------------------- host arguments
@pl.jit.host
def host_args(xs: XS,  # E:TC410-xs
              ys: YS):  # E:TC410-ys
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        ok_chip(xs[r], ys[r], pld.window(wbuf, [R, C], dtype=pl.FP32),
                pld.window(sbuf, [W, 1], dtype=pl.INT32), device=r)
    return ys


# ---------------------------------------------------------------- static parameters
@pl.jit.incore
def k_load_runtime_clamp(x: X, y: Y, win: WIN, sig: SIG):
    k = pl.read(sig, [0, 0])
    t = pl.load(x, [0, 0], [R, C], clamp=k > 0)  # E:TC216
    y = pl.store(t, [0, 0], y)
    return y


# ---------------------------------------------------------------- allocation placement
@pl.jit.host
def host_alloc_in_rank_loop(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    for r in pl.range(pld.world_size()):
        sbuf = pld.alloc_window_buffer([W, 1], dtype=pl.INT32)  # E:TC310
        ok_chip(xs[r], ys[r], pld.window(wbuf, [R, C], dtype=pl.FP32),
                pld.window(sbuf, [W, 1], dtype=pl.INT32), device=r)
    return ys


@pl.jit.host
def host_alloc_in_inner_loop(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    for i in pl.range(2):
        if i == 0:
            sbuf = pld.alloc_window_buffer([W, 1], dtype=pl.INT32)  # E:TC310
            for r in pl.range(pld.world_size()):
                ok_chip(xs[r], ys[r], pld.window(wbuf, [R, C], dtype=pl.FP32),
                        pld.window(sbuf, [W, 1], dtype=pl.INT32), device=r)
    return ys


# ---------------------------------------------------------------- integer operands
@pl.jit.incore
def k_notify_float_peer(x: X, y: Y, win: WIN, sig: SIG):
    pld.system.notify(sig, 1.9, [0, 0], 1, op=SET)  # E:TC102


@pl.jit.incore
def k_remote_load_fp32_peer(x: X, y: Y, win: WIN, sig: SIG):
    p = pl.read(x, [0, 0])
    t = pld.tile.remote_load(win, p, [0, 0], [R, C])  # E:TC102
    y = pl.store(t, [0, 0], y)
    return y


@pl.jit.incore
def k_put_bool_peer(x: X, y: Y, win: WIN, sig: SIG):
    pld.tensor.put(win, True, x)  # E:TC102


@pl.jit.incore
def k_remote_store_enum_peer(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.load(x, [0, 0], [R, C])
    pld.remote_store(t, win, SET, [0, 0])  # E:TC102


@pl.jit.incore
def k_load_float_offset(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.load(x, [0.5, 0], [R, C])  # E:TC102
    y = pl.store(t, [0, 0], y)
    return y


@pl.jit.incore
def k_wait_bool_offset(x: X, y: Y, win: WIN, sig: SIG):
    pld.system.wait(sig, [True, 0], 1, cmp=GE)  # E:TC102


@pl.jit.incore
def k_notify_float_value(x: X, y: Y, win: WIN, sig: SIG):
    pld.system.notify(sig, 0, [0, 0], 1.5, op=SET)  # E:TC102


@pl.jit.incore
def k_wait_expected_too_big(x: X, y: Y, win: WIN, sig: SIG):
    pld.system.wait(sig, [0, 0], 2 ** 31, cmp=GE)  # E:TC218


@pl.jit.incore
def k_notify_value_too_small(x: X, y: Y, win: WIN, sig: SIG):
    pld.system.notify(sig, 0, [0, 0], -2 ** 31 - 1, op=SET)  # E:TC218


# ---------------------------------------------------------------- enums and keywords
@pl.jit.incore
def k_wait_cross_enum(x: X, y: Y, win: WIN, sig: SIG):
    pld.system.wait(sig, [0, 0], 1, cmp=pld.NotifyOp.Set)  # E:TC214


@pl.jit.incore
def k_notify_cross_enum(x: X, y: Y, win: WIN, sig: SIG):
    pld.system.notify(sig, 0, [0, 0], 1, op=pld.WaitCmp.Eq)  # E:TC214


@pl.jit.host
def host_duplicate_keyword(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        ok_chip(xs[r], ys[r], pld.window(wbuf, [R, C], dtype=pl.FP32),
                pld.window(sbuf, [W, 1], dtype=pl.INT32), x=xs[r], device=r)  # E:TC103
    return ys


# ---------------------------------------------------------------- constant folding
@pl.jit.incore
def k_negative_shift(x: X, y: Y, win: WIN, sig: SIG):
    n = 1 << -1  # E:TC200


@pl.jit.incore
def k_float_pow_overflow(x: X, y: Y, win: WIN, sig: SIG):
    f = 2.0 ** 5000  # E:TC218


@pl.jit.incore
def k_pow_tower(x: X, y: Y, win: WIN, sig: SIG):
    n = 7 ** 7 ** 8  # E:TC218


@pl.jit.incore
def k_get_byte_arity(x: X, y: Y, win: WIN, sig: SIG):
    n = pl.FP32.get_byte(3)  # E:TC103


# ---------------------------------------------------------------- annotation dims and sizes
@pl.jit.incore
def k_float_annotation_dim(x: pl.Tensor[[2.5, C], pl.FP32],  # E:TC106
                           y: Y, win: WIN, sig: SIG):
    return y


@pl.jit.incore
def k_negative_annotation_dim(x: pl.Tensor[[-1, C], pl.FP32],  # E:TC210
                              y: Y, win: WIN, sig: SIG):
    return y


@pl.jit.host
def host_alloc_float_size(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer(64.5)  # E:TC102
    for r in pl.range(pld.world_size()):
        ok_chip(xs[r], ys[r], pld.window(wbuf, [R, C], dtype=pl.FP32),
                pld.window(sbuf, [W, 1], dtype=pl.INT32), device=r)
    return ys


@pl.jit.incore
def k_float_loop_bound(x: X, y: Y, win: WIN, sig: SIG):
    for i in pl.range(2.5):  # E:TC102
        pass


@pl.jit.host
def host_float_index(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        ok_chip(xs[r / 1], ys[r], pld.window(wbuf, [R, C], dtype=pl.FP32),  # E:TC102
                pld.window(sbuf, [W, 1], dtype=pl.INT32), device=r)
    return ys


# ---------------------------------------------------------------- collectives
@pl.jit.incore
def k_allreduce_ring_mesh_signal(x: X, y: Y, win: WIN, sig: SIG):
    win = pld.tensor.allreduce(win, sig, mode="ring")  # E:TC220


@pl.jit.incore
def k_broadcast_same_buffer(x: X, y: Y, win: WIN, sig: SIG):
    pld.tensor.broadcast(sig, sig, root=0)  # E:TC221


@pl.jit.incore
def k_allreduce_core_num(x: X, y: Y, win: WIN, sig: SIG):
    win = pld.tensor.allreduce(win, sig, core_num=2)  # E:TC222


@pl.jit.incore
def k_broadcast_negative_root(x: X, y: Y, win: WIN, sig: SIG):
    win = pld.tensor.broadcast(win, sig, root=-1)  # E:TC224


@pl.jit.incore
def k_allreduce_no_signal(x: X, y: Y, win: WIN, sig: SIG):
    win = pld.tensor.allreduce(win)  # E:TC312


@pl.jit.incore
def k_all_to_all_window_input(x: X, y: Y, win: WIN, sig: SIG):
    pld.tensor.all_to_all(win, win, sig)  # E:TC102


@pl.jit.incore
def k_allgather_two_rows(x: X, y: Y, win: WIN, sig: SIG):
    pld.tensor.allgather(x, win, sig)  # E:TC208


@pl.jit.incore
def k_all_to_all_v_float_counts(x: X, y: Y, win: WIN, sig: SIG):
    pld.tensor.all_to_all_v(x, win, sig, x, sig)  # E:TC204


@pl.jit.incore
def k_barrier_fp32(x: X, y: Y, win: WIN, sig: SIG):
    pld.tensor.barrier(win)  # E:TC204


# HOST collectives: windows made in the HOST body; W ranks, every operand in one
# domain unless the case is about domains
SV = pl.INT32


@pl.jit.incore
def k_touch(win: WIN, sig: SIG):
    return win


@pl.jit
def touch(win: WIN, sig: SIG):
    """Puts ``win`` and ``sig`` into the comm domain of the dispatching ranks."""
    return k_touch(win, sig)


@pl.jit.host
def host_collective_param_window(xs: XS, ys: YS, d: pld.DistributedTensor[[R, C], pl.FP32]):
    sbuf = pld.alloc_window_buffer([W], dtype=SV)
    pld.tensor.allreduce(d, pld.window(sbuf, [W], dtype=SV))  # E:TC101
    return ys


@pl.jit.host
def host_collective_plain_tensor(xs: XS, ys: YS):
    sbuf = pld.alloc_window_buffer([W], dtype=SV)
    pld.tensor.reduce_scatter(xs[0], pld.window(sbuf, [W], dtype=SV))  # E:TC101
    return ys


@pl.jit.host
def host_barrier_rank2_signal(xs: XS, ys: YS):
    sbuf = pld.alloc_window_buffer([W, 1], dtype=SV)
    pld.tensor.barrier(pld.window(sbuf, [W, 1], dtype=SV))  # E:TC220
    return ys


@pl.jit.host
def host_allgather_ring_signal(xs: XS, ys: YS):
    lbuf = pld.alloc_window_buffer([1, C], dtype=pl.FP32)
    tbuf = pld.alloc_window_buffer([W, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([2 * (W - 1) + 1, W], dtype=SV)
    pld.tensor.allgather(pld.window(lbuf, [1, C], dtype=pl.FP32),
                         pld.window(tbuf, [W, C], dtype=pl.FP32),
                         pld.window(sbuf, [2 * (W - 1) + 1, W], dtype=SV))  # E:TC220
    return ys


@pl.jit.host
def host_all_to_all_same_buffer(xs: XS, ys: YS):
    tbuf = pld.alloc_window_buffer([W, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W], dtype=SV)
    pld.tensor.all_to_all(pld.window(tbuf, [W, C], dtype=pl.FP32),
                          pld.window(tbuf, [W, C], dtype=pl.FP32),  # E:TC221
                          pld.window(sbuf, [W], dtype=SV))
    return ys


@pl.jit.host
def host_all_to_all_v_in_loop(xs: XS, ys: YS):
    ibuf = pld.alloc_window_buffer([W, C], dtype=pl.FP32)
    tbuf = pld.alloc_window_buffer([W, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W, 1], dtype=SV)
    cbuf = pld.alloc_window_buffer([W], dtype=SV)
    rbuf = pld.alloc_window_buffer([W, 1], dtype=SV)
    for i in pl.range(2):
        pld.tensor.all_to_all_v(  # E:TC311
            pld.window(ibuf, [W, C], dtype=pl.FP32), pld.window(tbuf, [W, C], dtype=pl.FP32),
            pld.window(sbuf, [W, 1], dtype=SV), pld.window(cbuf, [W], dtype=SV),
            pld.window(rbuf, [W, 1], dtype=SV))
    return ys


@pl.jit.host
def host_allreduce_nested_synthesis(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W], dtype=SV)
    pld.tensor.broadcast(pld.tensor.allreduce(pld.window(wbuf, [R, C], dtype=pl.FP32)),  # E:TC311
                         pld.window(sbuf, [W], dtype=SV), root=0)
    return ys


@pl.jit.host
def host_allreduce_signal_none(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    pld.tensor.allreduce(pld.window(wbuf, [R, C], dtype=pl.FP32), None)  # E:TC312
    return ys


@pl.jit.host
def host_allreduce_ring_synthesis(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    pld.tensor.allreduce(pld.window(wbuf, [R, C], dtype=pl.FP32), mode="ring")  # E:TC312
    return ys


@pl.jit.host
def host_allreduce_int32(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.INT32)
    sbuf = pld.alloc_window_buffer([W], dtype=SV)
    pld.tensor.allreduce(pld.window(wbuf, [R, C], dtype=pl.INT32),  # E:TC219
                         pld.window(sbuf, [W], dtype=SV))
    return ys


@pl.jit.host
def host_allreduce_bad_mode(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W], dtype=SV)
    pld.tensor.allreduce(pld.window(wbuf, [R, C], dtype=pl.FP32),
                         pld.window(sbuf, [W], dtype=SV), mode="tree")  # E:TC214
    return ys


@pl.jit.incore
def k_allreduce_runtime_mode(x: X, y: Y, win: WIN, sig: SIG):
    n = pld.nranks(pld.get_comm_ctx(win))
    win = pld.tensor.allreduce(win, sig, mode=n)  # E:TC216


@pl.jit.incore
def k_allreduce_bool_core_num(x: X, y: Y, win: WIN, sig: SIG):
    win = pld.tensor.allreduce(win, sig, core_num=True)  # E:TC222


@pl.jit.incore
def k_allreduce_zero_core_num(x: X, y: Y, win: WIN, sig: SIG):
    win = pld.tensor.allreduce(win, sig, core_num=0)  # E:TC222


@pl.jit.host
def host_allreduce_ring_core_num(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([2 * (W - 1) + 1, W], dtype=SV)
    pld.tensor.allreduce(pld.window(wbuf, [R, C], dtype=pl.FP32),
                         pld.window(sbuf, [2 * (W - 1) + 1, W], dtype=SV),
                         mode="ring", core_num=2)  # E:TC222
    return ys


@pl.jit.host
def host_allreduce_rank1_lanes(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W], dtype=SV)
    pld.tensor.allreduce(pld.window(wbuf, [R, C], dtype=pl.FP32),
                         pld.window(sbuf, [W], dtype=SV), core_num=2)  # E:TC220
    return ys


@pl.jit.host
def host_allreduce_narrow_lanes(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W, 2], dtype=SV)
    pld.tensor.allreduce(pld.window(wbuf, [R, C], dtype=pl.FP32),
                         pld.window(sbuf, [W, 2], dtype=SV), core_num=4)  # E:TC220
    return ys


@pl.jit.host
def host_allreduce_ring_rank1_signal(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W], dtype=SV)
    pld.tensor.allreduce(pld.window(wbuf, [R, C], dtype=pl.FP32),
                         pld.window(sbuf, [W], dtype=SV), mode="ring")  # E:TC220
    return ys


@pl.jit.host
def host_allreduce_ring_kernel_shape(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([2 * (W - 1), W], dtype=SV)
    pld.tensor.allreduce(pld.window(wbuf, [R, C], dtype=pl.FP32),
                         pld.window(sbuf, [2 * (W - 1), W], dtype=SV), mode="ring")  # E:TC220
    return ys


@pl.jit.incore
def k_broadcast_runtime_root(x: X, y: Y, win: WIN, sig: SIG):
    n = pld.nranks(pld.get_comm_ctx(win))
    win = pld.tensor.broadcast(win, sig, root=n - 1)  # E:TC216


@pl.jit.incore
def k_broadcast_float_root(x: X, y: Y, win: WIN, sig: SIG):
    win = pld.tensor.broadcast(win, sig, root=1.0)  # E:TC105


@pl.jit.host
def host_allgather_dtype(xs: XS, ys: YS):
    lbuf = pld.alloc_window_buffer([1, C], dtype=pl.FP16)
    tbuf = pld.alloc_window_buffer([W, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W], dtype=SV)
    pld.tensor.allgather(pld.window(lbuf, [1, C], dtype=pl.FP16),
                         pld.window(tbuf, [W, C], dtype=pl.FP32),  # E:TC204
                         pld.window(sbuf, [W], dtype=SV))
    return ys


@pl.jit.host
def host_allgather_size(xs: XS, ys: YS):
    lbuf = pld.alloc_window_buffer([1, C], dtype=pl.FP32)
    tbuf = pld.alloc_window_buffer([W, C + 1], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W], dtype=SV)
    pld.tensor.allgather(pld.window(lbuf, [1, C], dtype=pl.FP32),
                         pld.window(tbuf, [W, C + 1], dtype=pl.FP32),  # E:TC208
                         pld.window(sbuf, [W], dtype=SV))
    return ys


@pl.jit.host
def host_reduce_scatter_rank1(xs: XS, ys: YS):
    tbuf = pld.alloc_window_buffer([W * C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W], dtype=SV)
    pld.tensor.reduce_scatter(pld.window(tbuf, [W * C], dtype=pl.FP32),  # E:TC201
                              pld.window(sbuf, [W], dtype=SV))
    return ys


@pl.jit.host
def host_reduce_scatter_bool(xs: XS, ys: YS):
    tbuf = pld.alloc_window_buffer([W, C], dtype=pl.BOOL)
    sbuf = pld.alloc_window_buffer([W], dtype=SV)
    pld.tensor.reduce_scatter(pld.window(tbuf, [W, C], dtype=pl.BOOL),  # E:TC219
                              pld.window(sbuf, [W], dtype=SV))
    return ys


@pl.jit.incore
def k_all_to_all_dtype(x: X, y: Y, win: WIN, sig: SIG):
    pld.tensor.all_to_all(x, sig, sig)  # E:TC204


@pl.jit.host
def host_all_to_all_shape(xs: XS, ys: YS):
    ibuf = pld.alloc_window_buffer([W, C], dtype=pl.FP32)
    tbuf = pld.alloc_window_buffer([W, 2 * C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W], dtype=SV)
    pld.tensor.all_to_all(pld.window(ibuf, [W, C], dtype=pl.FP32),
                          pld.window(tbuf, [W, 2 * C], dtype=pl.FP32),  # E:TC208
                          pld.window(sbuf, [W], dtype=SV))
    return ys


def host_a2av(*, dt=pl.FP32, tdt=pl.FP32, rows=W, trows=W, size=C, tsize=C, sig=[W, 1],
              counts=[W], cdt=pl.INT32, recv=[W, 1]):
    """A HOST all_to_all_v whose operands have these shapes and dtypes."""

    @pl.jit.host
    def host_all_to_all_v(xs: XS, ys: YS):
        ibuf = pld.alloc_window_buffer([rows, size], dtype=dt)
        tbuf = pld.alloc_window_buffer([trows, tsize], dtype=tdt)
        sbuf = pld.alloc_window_buffer(sig, dtype=SV)
        cbuf = pld.alloc_window_buffer(counts, dtype=cdt)
        rbuf = pld.alloc_window_buffer(recv, dtype=SV)
        pld.tensor.all_to_all_v(pld.window(ibuf, [rows, size], dtype=dt),  # E:input
                                pld.window(tbuf, [trows, tsize], dtype=tdt),  # E:target
                                pld.window(sbuf, sig, dtype=SV),  # E:signal
                                pld.window(cbuf, counts, dtype=cdt),  # E:send_counts
                                pld.window(rbuf, recv, dtype=SV))  # E:recv_counts
        return ys

    return host_all_to_all_v


# whole-program rules: the comm domain of a HOST collective
@pl.jit.host
def host_collective_two_domains(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    other = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W, 1], dtype=SV)
    spare = pld.alloc_window_buffer([W, 1], dtype=SV)
    touch(pld.window(wbuf, [R, C], dtype=pl.FP32), pld.window(spare, [W, 1], dtype=SV), device=0)
    for r in pl.range(pld.world_size()):
        touch(pld.window(other, [R, C], dtype=pl.FP32), pld.window(sbuf, [W, 1], dtype=SV),
              device=r)
    pld.tensor.broadcast(pld.window(wbuf, [R, C], dtype=pl.FP32),  # E:TC225
                         pld.window(sbuf, [W], dtype=SV), root=0)
    return ys


@pl.jit.host
def host_signal_below_domain(xs: XS, ys: YS):
    sbuf = pld.alloc_window_buffer([W - 1], dtype=SV)
    pld.tensor.barrier(pld.window(sbuf, [W - 1], dtype=SV))  # E:TC226
    return ys


@pl.jit.host
def host_ring_signal_other_nr(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([2 * W + 1, W + 1], dtype=SV)
    pld.tensor.allreduce(pld.window(wbuf, [R, C], dtype=pl.FP32),
                         pld.window(sbuf, [2 * W + 1, W + 1], dtype=SV), mode="ring")  # E:TC226
    return ys


@pl.jit.host
def host_all_to_all_v_subset_signal(xs: XS, ys: YS):
    ibuf = pld.alloc_window_buffer([W, C], dtype=pl.FP32)
    tbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W, 1], dtype=SV)
    cbuf = pld.alloc_window_buffer([W], dtype=SV)
    rbuf = pld.alloc_window_buffer([W, 1], dtype=SV)
    touch(pld.window(tbuf, [R, C], dtype=pl.FP32), pld.window(sbuf, [W, 1], dtype=SV), device=1)
    pld.tensor.all_to_all_v(pld.window(ibuf, [W, C], dtype=pl.FP32),
                            pld.window(tbuf, [R, C], dtype=pl.FP32),
                            pld.window(sbuf, [W, 1], dtype=SV),  # E:TC226
                            pld.window(cbuf, [W], dtype=SV), pld.window(rbuf, [W, 1], dtype=SV))
    return ys


@pl.jit.host
def host_broadcast_root_outside_subset(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W, 1], dtype=SV)
    touch(pld.window(wbuf, [R, C], dtype=pl.FP32), pld.window(sbuf, [W, 1], dtype=SV), device=1)
    pld.tensor.broadcast(pld.window(wbuf, [R, C], dtype=pl.FP32), pld.window(sbuf, [W], dtype=SV),
                         root=1)  # E:TC224
    return ys


@pl.jit.host
def host_allgather_rows_not_domain(xs: XS, ys: YS):
    lbuf = pld.alloc_window_buffer([1, C], dtype=pl.FP32)
    tbuf = pld.alloc_window_buffer([W + 1, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W + 1], dtype=SV)
    pld.tensor.allgather(pld.window(lbuf, [1, C], dtype=pl.FP32),
                         pld.window(tbuf, [W + 1, C], dtype=pl.FP32),  # E:TC208
                         pld.window(sbuf, [W + 1], dtype=SV))
    return ys


@pl.jit.host
def host_all_to_all_v_rows_not_domain(xs: XS, ys: YS):
    ibuf = pld.alloc_window_buffer([W + 1, C], dtype=pl.FP32)
    tbuf = pld.alloc_window_buffer([W + 1, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W + 1, 1], dtype=SV)
    cbuf = pld.alloc_window_buffer([W + 1], dtype=SV)
    rbuf = pld.alloc_window_buffer([W + 1, 1], dtype=SV)
    pld.tensor.all_to_all_v(pld.window(ibuf, [W + 1, C], dtype=pl.FP32),
                            pld.window(tbuf, [W + 1, C], dtype=pl.FP32),  # E:TC208
                            pld.window(sbuf, [W + 1, 1], dtype=SV),
                            pld.window(cbuf, [W + 1], dtype=SV),
                            pld.window(rbuf, [W + 1, 1], dtype=SV))
    return ys


# ---------------------------------------------------------------- tasks
@pl.jit
def chip_nested_at(x: X, y: Y, win: WIN, sig: SIG):
    with pl.at(level=pl.Level.CORE_GROUP):
        with pl.at(level=pl.Level.CORE_GROUP):  # E:TC330
            y = pl.store(pl.load(x, [0, 0], [R, C]), [0, 0], y)
    return y


@pl.jit
def chip_at_chip_level(x: X, y: Y, win: WIN, sig: SIG):
    with pl.at(level=pl.Level.CHIP):  # E:TC330
        y = pl.store(pl.load(x, [0, 0], [R, C]), [0, 0], y)
    return y


@pl.jit.incore
def k_at_in_kernel(x: X, y: Y, win: WIN, sig: SIG):
    with pl.at(level=pl.Level.CORE_GROUP):  # E:TC301
        y = pl.store(pl.load(x, [0, 0], [R, C]), [0, 0], y)
    return y


@pl.jit
def chip_spmd_deps_without_tid(x: X, y: Y, win: WIN, sig: SIG):
    with pl.at(level=pl.Level.CORE_GROUP) as tid:
        y = pl.store(pl.load(x, [0, 0], [R, C]), [0, 0], y)
    for i in pl.spmd(2, deps=[tid]):  # E:TC330
        y = pl.store(pl.load(x, [i, 0], [1, C]), [i, 0], y)
    return y


@pl.jit
def chip_spmd_without_block_idx(x: X, y: Y, win: WIN, sig: SIG):
    with pl.spmd(2):  # E:TC330
        y = pl.store(pl.load(x, [0, 0], [R, C]), [0, 0], y)
    return y


@pl.jit
def chip_manual_in_manual(x: X, y: Y, win: WIN, sig: SIG):
    with pl.manual_scope():
        with pl.manual_scope():  # E:TC330
            y = ok_kernel(x, y, win, sig)
    return y


@pl.jit
def chip_auto_in_manual(x: X, y: Y, win: WIN, sig: SIG):
    with pl.manual_scope():
        with pl.scope(mode=pl.ScopeMode.AUTO):  # E:TC330
            y = ok_kernel(x, y, win, sig)
    return y


@pl.jit
def chip_deps_not_taskid(x: X, y: Y, win: WIN, sig: SIG):
    with pl.at(level=pl.Level.CORE_GROUP, deps=[x]):  # E:TC330
        y = pl.store(pl.load(x, [0, 0], [R, C]), [0, 0], y)
    return y


@pl.jit
def chip_at_as_call(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.at(level=pl.Level.CORE_GROUP)  # E:TC330
    return ok_kernel(x, y, win, sig)


@pl.jit
def chip_task_returns(x: X, y: Y, win: WIN, sig: SIG):
    with pl.at(level=pl.Level.CORE_GROUP):
        return pl.store(pl.load(x, [0, 0], [R, C]), [0, 0], y)  # E:TC330


@pl.jit.host
def host_inline_chip_window(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W, 1], dtype=pl.INT32)
    w = pld.window(wbuf, [R, C], dtype=pl.FP32)
    for r in pl.range(pld.world_size()):
        ok_chip(xs[r], ys[r], w, pld.window(sbuf, [W, 1], dtype=pl.INT32), device=r)
    with pl.at(level=pl.Level.CHIP, role=pl.Role.Orchestrator):  # E:TC330
        pl.write(ys[0], [0, 0, 0], pl.read(w, [0, 0]))
    return ys


@pl.jit
def chip_submit_not_a_kernel(x: X, y: Y, win: WIN, sig: SIG):
    t = pl.submit(x, y)  # E:TC330
    return y


@pl.jit.incore
def k_defer_in_kernel(x: X, y: Y, win: WIN, sig: SIG):
    pld.system.defer_wait(sig, [0, 0], 1, cmp=GE)  # E:TC331
    return y


@pl.jit
def chip_defer_in_spmd(x: X, y: Y, win: WIN, sig: SIG):
    for i in pl.spmd(2):
        pld.system.defer_wait(sig, [i, 0], 1, cmp=GE)  # E:TC331
    return y


@pl.jit
def chip_defer_assigned(x: X, y: Y, win: WIN, sig: SIG):
    with pl.at(level=pl.Level.CORE_GROUP):
        d = pld.system.defer_wait(sig, [0, 0], 1, cmp=GE)  # E:TC331
    return y


@pl.jit
def chip_defer_early_resolve(x: X, y: Y, win: WIN, sig: SIG):
    with pl.at(level=pl.Level.CORE_GROUP, allow_early_resolve=True):  # E:TC331
        pld.system.defer_wait(sig, [0, 0], 1, cmp=GE)
    return y


@pl.jit
def chip_defer_then_store(x: X, y: Y, win: WIN, sig: SIG):
    with pl.at(level=pl.Level.CORE_GROUP):
        pld.system.defer_wait(sig, [0, 0], 1, cmp=GE)
        t = pl.load(x, [0, 0], [R, C])  # E:TC331
    return y


@pl.jit
def chip_defer_runtime_loop(x: X, y: Y, win: WIN, sig: SIG):
    with pl.at(level=pl.Level.CORE_GROUP):
        n = pl.read(sig, [1, 0])
        for i in pl.range(n):  # E:TC331
            pld.system.defer_wait(sig, [0, 0], i, cmp=GE)
    return y


@pl.jit
def chip_defer_sliced_signal(x: X, y: Y, win: WIN, sig: SIG):
    with pl.at(level=pl.Level.CORE_GROUP):
        pld.system.defer_wait(sig[0:1, :], [0, 0], 1, cmp=GE)  # E:TC331
    return y


@pl.jit
def chip_defer_eq(x: X, y: Y, win: WIN, sig: SIG):
    with pl.at(level=pl.Level.CORE_GROUP):
        pld.system.defer_wait(sig, [0, 0], 1, cmp=pld.WaitCmp.Eq)  # E:TC240
    return y


@pl.jit
def chip_defer_negative(x: X, y: Y, win: WIN, sig: SIG):
    with pl.at(level=pl.Level.CORE_GROUP):
        pld.system.defer_wait(sig, [0, 0], -1, cmp=GE)  # E:TC218
    return y


@pl.jit
def chip_defer_fp32_signal(x: X, y: Y, win: WIN, sig: SIG):
    with pl.at(level=pl.Level.CORE_GROUP):
        pld.system.defer_wait(win, [0, 0], 1, cmp=GE)  # E:TC204
    return y


@pl.jit
def chip_defer_too_many(x: X, y: Y, win: WIN, sig: SIG):
    with pl.at(level=pl.Level.CORE_GROUP):
        for i in pl.range(65):
            pld.system.defer_wait(sig, [0, 0], i, cmp=GE)  # E:TC241
    return y


@pl.jit.incore
def k_defer_collective(x: X, y: Y, win: WIN, sig: SIG):
    pld.tensor.barrier(sig, defer=True)  # E:TC332
    return y


@pl.jit
def chip_defer_collective_in_spmd(x: X, y: Y, win: WIN, sig: SIG):
    for i in pl.spmd(2):
        pld.tensor.barrier(sig, defer=True)  # E:TC332
    return y


@pl.jit
def chip_defer_collective_early(x: X, y: Y, win: WIN, sig: SIG):
    with pl.at(level=pl.Level.CORE_GROUP, allow_early_resolve=True):  # E:TC332
        win = pld.tensor.all_to_all(x, win, sig, defer=True)
    return y


@pl.jit
def chip_defer_collective_then_load(x: X, y: Y, win: WIN, sig: SIG):
    with pl.at(level=pl.Level.CORE_GROUP):
        win = pld.tensor.all_to_all(x, win, sig, defer=True)
        y = pl.store(pl.load(win, [0, 0], [R, C]), [0, 0], y)  # E:TC332
    return y


@pl.jit
def chip_defer_collective_in_loop(x: X, y: Y, win: WIN, sig: SIG):
    with pl.at(level=pl.Level.CORE_GROUP):
        for i in pl.range(2):
            pld.tensor.barrier(sig, defer=True)  # E:TC332
    return y


@pl.jit
def chip_defer_collective_twice(x: X, y: Y, win: WIN, sig: SIG):
    with pl.at(level=pl.Level.CORE_GROUP):
        win = pld.tensor.all_to_all(x, win, sig, defer=True)
        pld.tensor.barrier(sig, defer=True)  # E:TC332
    return y


@pl.jit
def chip_defer_collective_in_expr(x: X, y: Y, win: WIN, sig: SIG):
    with pl.at(level=pl.Level.CORE_GROUP):
        t = pl.load(pld.tensor.all_to_all(x, win, sig, defer=True), [0, 0], [R, C])  # E:TC332
    return y


@pl.jit
def chip_defer_collective_not_bool(x: X, y: Y, win: WIN, sig: SIG):
    with pl.at(level=pl.Level.CORE_GROUP):
        pld.tensor.barrier(sig, defer=1)  # E:TC105
    return y


@pl.jit
def chip_defer_collective_and_wait(x: X, y: Y, win: WIN, sig: SIG):
    with pl.at(level=pl.Level.CORE_GROUP):
        pld.system.defer_wait(sig, [0, 0], 1, cmp=GE)  # E:TC332
        pld.tensor.barrier(sig, defer=True)
    return y


@pl.jit.host
def host_defer_collective(xs: XS, ys: YS):
    sbuf = pld.alloc_window_buffer([W, 1], dtype=pl.INT32)
    pld.tensor.barrier(pld.window(sbuf, [W], dtype=pl.INT32), defer=True)  # E:TC332
    return ys


@pl.jit.host
def host_block_idx(xs: XS, ys: YS):
    b = pl.get_block_idx()  # E:TC301
    return ys


@pl.jit.incore
def k_array_zero(x: X, y: Y, win: WIN, sig: SIG):
    tids = pl.array.create(0, pl.TASK_ID)  # E:TC210
    return y


# ------------------------------------------------------------------ ergonomic collectives
@pl.jit.host
def host_all_reduce_ring_no_nranks(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    pld.all_reduce(pld.window(wbuf, [R, C], dtype=pl.FP32), mode="ring")  # E:TC313
    return ys


@pl.jit.host
def host_all_reduce_mesh_nranks(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    pld.all_reduce(pld.window(wbuf, [R, C], dtype=pl.FP32), nranks=2)  # E:TC313
    return ys


@pl.jit.incore
def k_all_gather(x: X, y: Y, win: WIN, sig: SIG):
    pld.all_gather(win, win)  # E:TC301


@pl.jit.host
def host_reduce_scatter_plain(xs: XS, ys: YS):
    pld.reduce_scatter(xs[0])  # E:TC101
    return ys


@pl.jit.host
def host_broadcast_negative_root(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([R, C], dtype=pl.FP32)
    pld.broadcast(pld.window(wbuf, [R, C], dtype=pl.FP32), root=-1)  # E:TC224
    return ys


@pl.jit.host
def host_ergonomic_barrier_fp32(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([W], dtype=pl.FP32)
    pld.barrier(pld.window(wbuf, [W], dtype=pl.FP32))  # E:TC204
    return ys


@pl.jit.host
def host_all_to_all_one_buffer(xs: XS, ys: YS):
    wbuf = pld.alloc_window_buffer([W, C], dtype=pl.FP32)
    a = pld.window(wbuf, [W, C], dtype=pl.FP32)
    pld.all_to_all(a, a)  # E:TC221
    return ys


@pl.jit.host
def host_all_to_all_v_zero_nranks(xs: XS, ys: YS):
    ibuf = pld.alloc_window_buffer([W, C], dtype=pl.FP32)
    tbuf = pld.alloc_window_buffer([W, C], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([W], dtype=SV)
    rbuf = pld.alloc_window_buffer([W, 1], dtype=SV)
    i = pld.window(ibuf, [W, C], dtype=pl.FP32)
    t = pld.window(tbuf, [W, C], dtype=pl.FP32)
    s = pld.window(sbuf, [W], dtype=SV)
    r = pld.window(rbuf, [W, 1], dtype=SV)
    pld.all_to_all_v(i, t, s, r, nranks=0)  # E:TC313
    return ys


@pl.jit.incore
def k_all_to_all_v_lanes(x: X, y: Y, win: WIN, sig: SIG):
    pld.tensor.all_to_all_v(x, win, sig, x, sig, core_num=2)  # E:TC222
