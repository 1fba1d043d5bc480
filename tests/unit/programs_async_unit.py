"""A kernel that builds a DMA session, for test_async_platforms.py."""
import inspect

import tilecomm.language as pl
import tilecomm.language.distributed as pld

S = 8
X = pl.Tensor[[1, S], pl.FP32]
Y = pl.Out[pl.Tensor[[2, S], pl.FP32]]
WIN = pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]]


@pl.jit.incore
def kernel(x: X, y: Y, win: WIN) -> pl.Tensor[[2, S], pl.FP32]:
    ctx = pld.get_comm_ctx(win)
    nxt = (pld.rank(ctx) + 1) % pld.nranks(ctx)
    sess = pld.system.async_session()  # session
    evt = pld.tensor.put_async(win, nxt, x, sess)
    pld.system.wait_async_event(evt, sess)
    return y


@pl.jit
def chip(x: X, y: Y, win: WIN):
    return kernel(x, y, win)


@pl.jit.host
def ring(xs: pl.Tensor[[2, 1, S], pl.FP32], ys: pl.Out[pl.Tensor[[2, 2, S], pl.FP32]]):
    buf = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
    for r in pl.range(pld.world_size()):
        chip(xs[r], ys[r], pld.window(buf, [1, S], dtype=pl.FP32), device=r)
    return ys


_lines, _first = inspect.getsourcelines(kernel.fn)
SESSION_LINE = next(_first + i for i, t in enumerate(_lines) if t.rstrip().endswith("# session"))
