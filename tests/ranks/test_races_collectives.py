"""The race check orders a collective's accesses as the chip's algorithm
does, not as tilecomm's implementation happens to (collectives/footprints.py):

* reduce_scatter stores each rank's reduced row *after* its last barrier, so
  a peer that reads that row right after the call races with the store;
* broadcast has no barrier after the non-roots read the root's copy, so a
  root that overwrites its copy right after the call races with them.

tilecomm's own implementations synchronise after both (the results below are
right either way); the check still reports what the chip leaves unordered.
Each racy form has a twin with a ``pld.tensor.barrier`` in between."""
import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from conftest import config_for
from tilecomm.errors import DataRaceError

NR = pl.dynamic("NR")
SZ = 64
ROWS = pl.Tensor[[NR, SZ], pl.FP32]
ROW = pl.Tensor[[1, SZ], pl.FP32]
TGT = pl.InOut[pld.DistributedTensor[[NR, SZ], pl.FP32]]
ONE = pl.InOut[pld.DistributedTensor[[1, SZ], pl.FP32]]
CSIG = pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]


# ------------------------------------------------------------------ reduce_scatter
@pl.jit.incore
def scatter_then_read(x: ROWS, y: pl.Out[ROW], t: TGT, sig: CSIG, fence: CSIG,
                      fenced: pl.Scalar[pl.INT32]) -> ROW:
    ctx = pld.get_comm_ctx(t)
    me = pld.rank(ctx)
    peer = (me + 1) % pld.nranks(ctx)
    t = pl.store(pl.load(x, [0, 0], [NR, SZ]), [0, 0], t)
    t = pld.tensor.reduce_scatter(t, sig)  # rs-call
    if fenced == 1:
        pld.tensor.barrier(fence)
    y = pl.store(pld.tile.remote_load(t, peer, [peer, 0], [1, SZ]), [0, 0], y)  # rs-read
    return y


@pl.jit
def scatter_chip(x: ROWS, y: pl.Out[ROW], t: TGT, sig: CSIG, fence: CSIG,
                 fenced: pl.Scalar[pl.INT32]):
    return scatter_then_read(x, y, t, sig, fence, fenced)


@pl.jit.host
def scatter_main(xs: pl.Tensor[[NR, NR, SZ], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, SZ], pl.FP32]],
                 fenced: pl.Scalar[pl.INT32]):
    tbuf = pld.alloc_window_buffer([NR, SZ], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    fbuf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        scatter_chip(xs[r], ys[r], pld.window(tbuf, [NR, SZ], dtype=pl.FP32),
                     pld.window(sbuf, [NR, 1], dtype=pl.INT32),
                     pld.window(fbuf, [NR, 1], dtype=pl.INT32), fenced, device=r)
    return ys


# ------------------------------------------------------------------ broadcast
@pl.jit.incore
def broadcast_then_overwrite(x: ROW, y: pl.Out[ROW], t: ONE, sig: CSIG, fence: CSIG,
                             fenced: pl.Scalar[pl.INT32]) -> ROW:
    me = pld.rank(pld.get_comm_ctx(t))
    if me == 0:
        t = pl.store(pl.load(x, [0, 0], [1, SZ]), [0, 0], t)
    t = pld.tensor.broadcast(t, sig, root=0)  # bc-call
    y = pl.store(pl.load(t, [0, 0], [1, SZ]), [0, 0], y)
    if fenced == 1:
        pld.tensor.barrier(fence)
    if me == 0:
        t = pl.store(pl.mul(pl.load(x, [0, 0], [1, SZ]), 2.0), [0, 0], t)  # bc-overwrite
    return y


@pl.jit
def broadcast_chip(x: ROW, y: pl.Out[ROW], t: ONE, sig: CSIG, fence: CSIG,
                   fenced: pl.Scalar[pl.INT32]):
    return broadcast_then_overwrite(x, y, t, sig, fence, fenced)


@pl.jit.host
def broadcast_main(xs: pl.Tensor[[NR, 1, SZ], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, SZ], pl.FP32]],
                   fenced: pl.Scalar[pl.INT32]):
    tbuf = pld.alloc_window_buffer([1, SZ], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    fbuf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        broadcast_chip(xs[r], ys[r], pld.window(tbuf, [1, SZ], dtype=pl.FP32),
                       pld.window(sbuf, [NR, 1], dtype=pl.INT32),
                       pld.window(fbuf, [NR, 1], dtype=pl.INT32), fenced, device=r)
    return ys


# ------------------------------------------------------------------ the tests
def _pairs(err) -> set:
    return {frozenset(((r.first.rank, r.first.line), (r.second.rank, r.second.line)))
            for r in err.races}


def _scatter(n):
    xs = np.random.default_rng(n).integers(-9, 10, (n, n, SZ)).astype(np.float32)
    ys = np.full((n, 1, SZ), np.nan, np.float32)
    want = np.stack([xs[:, (r + 1) % n].sum(axis=0)[None] for r in range(n)])
    return xs, ys, want


def _broadcast(n):
    xs = np.random.default_rng(n).integers(-9, 10, (n, 1, SZ)).astype(np.float32)
    return xs, np.full((n, 1, SZ), np.nan, np.float32), np.repeat(xs[:1], n, axis=0)


def line_of(tag: str) -> str:
    """``file:line`` of the line marked ``# tag`` in this file."""
    with open(__file__, encoding="utf-8") as f:
        i = next(k for k, text in enumerate(f) if text.rstrip().endswith(f"# {tag}"))
    return f"{__file__}:{i + 1}"


@pytest.mark.parametrize("n", [2, 3])
def test_reading_a_peers_row_right_after_reduce_scatter_races_with_its_store(n):
    xs, ys, want = _scatter(n)
    scatter_main(xs, ys, 1, config=config_for(n, detect_races=True))     # fenced: clean
    np.testing.assert_array_equal(ys, want)
    with pytest.raises(DataRaceError) as ei:
        scatter_main(xs, ys, 0, config=config_for(n, detect_races=True))
    np.testing.assert_array_equal(ys, want)          # tilecomm's own order: right anyway
    call, read = line_of("rs-call"), line_of("rs-read")
    want_pairs = {frozenset({((r + 1) % n, call), (r, read)}) for r in range(n)}
    assert want_pairs & _pairs(ei.value), str(ei.value)


@pytest.mark.parametrize("n", [2, 3])
def test_a_root_overwriting_right_after_broadcast_races_with_the_readers(n):
    xs, ys, want = _broadcast(n)
    broadcast_main(xs, ys, 1, config=config_for(n, detect_races=True))   # fenced: clean
    np.testing.assert_array_equal(ys, want)
    with pytest.raises(DataRaceError) as ei:
        broadcast_main(xs, ys, 0, config=config_for(n, detect_races=True))
    np.testing.assert_array_equal(ys, want)
    call, over = line_of("bc-call"), line_of("bc-overwrite")
    want_pairs = {frozenset({(r, call), (0, over)}) for r in range(1, n)}
    assert want_pairs & _pairs(ei.value), str(ei.value)
