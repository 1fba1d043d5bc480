"""The race check and split-phase collectives (``defer=True``).

A deferred allgather's peers push their rows into this rank's target while
the call's TaskId is pending: a task ordered after that TaskId
(``deps=[tid]``, or inferred from the target it reads outside a manual
scope) reads the gathered rows cleanly; a task of a manual scope that reads
them without the dependency races with the pushes, and the check says so --
whatever this machine's timing did.  A task that overwrites the target
without the dependency races the same way."""
import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from conftest import config_for
from tilecomm.errors import DataRaceError
from test_collectives_deferred import check_gather, gather_args, gather_main

NR = pl.dynamic("NR")
SZ = 32
ROW = pl.Tensor[[1, SZ], pl.FP32]
ROWS = pl.Tensor[[NR, SZ], pl.FP32]
TGT = pl.InOut[pld.DistributedTensor[[NR, SZ], pl.FP32]]
CSIG = pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]
CG = pl.Level.CORE_GROUP


@pl.jit
def manual_chip(x: ROW, y: pl.Out[ROWS], t: TGT, sig: CSIG, ordered: pl.Scalar[pl.INT32]):
    with pl.manual_scope():
        with pl.at(level=CG, name_hint="gather") as g:
            t = pld.tensor.allgather(x, t, sig, defer=True)  # ag-call
        if ordered == 1:
            with pl.at(level=CG, name_hint="consume", deps=[g]):
                y = pl.store(pl.load(t, [0, 0], [NR, SZ]), [0, 0], y)
        else:
            with pl.at(level=CG, name_hint="consume"):
                y = pl.store(pl.load(t, [0, 0], [NR, SZ]), [0, 0], y)  # ag-read
    return y


@pl.jit
def auto_chip(x: ROW, y: pl.Out[ROWS], t: TGT, sig: CSIG, ordered: pl.Scalar[pl.INT32]):
    # no deps=: the consumer reads t, which the gather task writes, so the
    # scheduler orders it after the gather's TaskId
    with pl.at(level=CG, name_hint="gather"):
        t = pld.tensor.allgather(x, t, sig, defer=True)
    with pl.at(level=CG, name_hint="consume"):
        y = pl.store(pl.load(t, [0, 0], [NR, SZ]), [0, 0], y)
    return y


@pl.jit
def overwrite_chip(x: ROW, y: pl.Out[ROWS], t: TGT, sig: CSIG, ordered: pl.Scalar[pl.INT32]):
    with pl.manual_scope():
        with pl.at(level=CG, name_hint="gather") as g:
            t = pld.tensor.allgather(x, t, sig, defer=True)  # ow-call
        if ordered == 1:
            with pl.at(level=CG, name_hint="consume", deps=[g]) as c:
                y = pl.store(pl.load(t, [0, 0], [NR, SZ]), [0, 0], y)
            with pl.at(level=CG, name_hint="reset", deps=[c]):
                t = pl.store(pl.mul(pl.load(t, [0, 0], [NR, SZ]), 0.0), [0, 0], t)
        else:
            with pl.at(level=CG, name_hint="consume", deps=[g]) as c:
                y = pl.store(pl.load(t, [0, 0], [NR, SZ]), [0, 0], y)
            with pl.at(level=CG, name_hint="reset"):
                t = pl.store(pl.mul(pl.load(x, [0, 0], [1, SZ]), 0.0), [0, 0], t)  # ow-write
    return y


@pl.jit
def regather_chip(x: ROW, y: pl.Out[ROWS], t: TGT, sig: CSIG, ordered: pl.Scalar[pl.INT32]):
    # gather twice into t; the second gather is ordered after this rank's
    # reader of the first, and -- in the clean twin -- after a deferred
    # barrier that every rank enters only once it has read
    with pl.manual_scope():
        with pl.at(level=CG, name_hint="gather") as g:
            t = pld.tensor.allgather(x, t, sig, defer=True)
        with pl.at(level=CG, name_hint="read", deps=[g]) as r:
            y = pl.store(pl.load(t, [0, 0], [NR, SZ]), [0, 0], y)  # rg-read
        if ordered == 1:
            with pl.at(level=CG, name_hint="all_read", deps=[r]) as b:
                sig = pld.tensor.barrier(sig, defer=True)
            with pl.at(level=CG, name_hint="regather", deps=[b]):
                t = pld.tensor.allgather(x, t, sig, defer=True)
        else:
            with pl.at(level=CG, name_hint="regather", deps=[r]):
                t = pld.tensor.allgather(x, t, sig, defer=True)  # rg-call
    return y


def main_for(chip):
    @pl.jit.host
    def main(xs: pl.Tensor[[NR, 1, SZ], pl.FP32], ys: pl.Out[pl.Tensor[[NR, NR, SZ], pl.FP32]],
             ordered: pl.Scalar[pl.INT32]):
        tbuf = pld.alloc_window_buffer([NR, SZ], dtype=pl.FP32)
        sbuf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            chip(xs[r], ys[r], pld.window(tbuf, [NR, SZ], dtype=pl.FP32),
                 pld.window(sbuf, [NR, 1], dtype=pl.INT32), ordered, device=r)
        return ys
    return main


manual_main, auto_main, overwrite_main, regather_main = (
    main_for(c) for c in (manual_chip, auto_chip, overwrite_chip, regather_chip))


def _pairs(err) -> set:
    return {frozenset(((r.first.rank, r.first.line), (r.second.rank, r.second.line)))
            for r in err.races}


def line_of(tag: str) -> str:
    with open(__file__, encoding="utf-8") as f:
        i = next(k for k, text in enumerate(f) if text.rstrip().endswith(f"# {tag}"))
    return f"{__file__}:{i + 1}"


def _data(n):
    xs = np.random.default_rng(40 + n).standard_normal((n, 1, SZ)).astype(np.float32)
    return xs, np.full((n, n, SZ), np.nan, np.float32), np.repeat(xs[None, :, 0], n, axis=0)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_a_consumer_without_the_dependency_races_with_the_deferred_pushes(n):
    xs, ys, want = _data(n)
    manual_main(xs, ys, 1, config=config_for(n, detect_races=True))   # deps=[g]: clean
    np.testing.assert_array_equal(ys, want)
    with pytest.raises(DataRaceError) as ei:
        manual_main(xs, ys, 0, config=config_for(n, detect_races=True))
    call, read = line_of("ag-call"), line_of("ag-read")
    # rank r's consumer reads the row rank (r + 1) % n pushed into it
    want_pairs = {frozenset({((r + 1) % n, call), (r, read)}) for r in range(n)}
    assert want_pairs & _pairs(ei.value), str(ei.value)


@pytest.mark.parametrize("n", [2, 3])
def test_an_inferred_dependency_orders_the_consumer(n):
    xs, ys, want = _data(n)
    auto_main(xs, ys, 0, config=config_for(n, detect_races=True))
    np.testing.assert_array_equal(ys, want)


@pytest.mark.parametrize("n", [2, 3])
def test_overwriting_the_target_without_the_dependency_races(n):
    xs, ys, want = _data(n)
    overwrite_main(xs, ys, 1, config=config_for(n, detect_races=True))
    np.testing.assert_array_equal(ys, want)
    with pytest.raises(DataRaceError) as ei:
        overwrite_main(xs, ys, 0, config=config_for(n, detect_races=True))
    call, write = line_of("ow-call"), line_of("ow-write")
    want_pairs = {frozenset({((r + 1) % n, call), (r, write)}) for r in range(n)}
    assert want_pairs & _pairs(ei.value), str(ei.value)


@pytest.mark.parametrize("n", [2, 3])
def test_the_numpy_test_program_is_race_free(n):
    """Every reader of test_collectives_deferred's program is ordered after
    the deferred call it reads (and the second gather into t1 after every
    rank's reader of the first): the race check finds nothing."""
    args, outs = gather_args(n, 9500 + n, 0)
    gather_main(*args, *outs, config=config_for(n, detect_races=True))
    check_gather(args, outs)


@pytest.mark.parametrize("n", [2, 3])
def test_regathering_after_only_this_ranks_reader_races_with_a_slow_peer(n):
    """A second gather into the target ordered after this rank's reader only:
    a fast rank's new row can land in a slow rank's target while that rank
    still reads the first; a deferred barrier after the readers orders it."""
    xs, ys, want = _data(n)
    regather_main(xs, ys, 1, config=config_for(n, detect_races=True))
    np.testing.assert_array_equal(ys, want)
    with pytest.raises(DataRaceError) as ei:
        regather_main(xs, ys, 0, config=config_for(n, detect_races=True))
    call, read = line_of("rg-call"), line_of("rg-read")
    want_pairs = {frozenset({((r + 1) % n, call), (r, read)}) for r in range(n)}
    assert want_pairs & _pairs(ei.value), str(ei.value)
