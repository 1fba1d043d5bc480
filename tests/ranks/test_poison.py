"""RunConfig(poison_windows=True): data windows and pl.Out tensors start as a
sentinel (NaN for floats, 0xA5 bytes for integers), so elements read before
anybody wrote them show up in the outputs instead of reading as zeros; signal
windows (INT32) start at 0 and every protocol works as without it."""
import warnings

import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.errors import ConfigError, TilecommWarning
from tilecomm.runtime import RunConfig
from tilecomm.runtime.poison import POISON_BYTE, poisoned, sentinel

from programs_prims import config_for, line_of

NR = pl.dynamic("NR")
S = 8
WR = 5                     # window rows: more than the gathering ranks fill at 2 and 3 ranks
ADD = pld.NotifyOp.AtomicAdd
GE = pld.WaitCmp.Ge


# every rank stores its row into rank 0's window at row ``me`` and counts
# itself in; rank 0 waits for all of them and copies ``rows`` rows out.  The
# bug: ``rows`` = WR, every row of the window, though only n were written.
@pl.jit.incore
def gather(x: pl.Tensor[[1, S], pl.FP32], y: pl.Out[pl.Tensor[[WR, S], pl.FP32]],
           marks: pl.Out[pl.Tensor[[1, S], pl.INT32]],
           win: pl.InOut[pld.DistributedTensor[[WR, S], pl.FP32]],
           sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
           rows: pl.Scalar[pl.INT32]):
    ctx = pld.get_comm_ctx(win)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    pld.tile.remote_store(pl.load(x, [0, 0], [1, S]), win, 0, [me, 0])
    pld.system.notify(sig, 0, [0, 0], 1, op=ADD)
    if me == 0:
        pld.system.wait(sig, [0, 0], n, cmp=GE)
        for i in pl.range(rows):
            pl.store(pl.load(win, [i, 0], [1, S]), [i, 0], y)  # gather-load
        pl.write(marks, [0, 0], pl.read(sig, [0, 0]))
    return y


@pl.jit
def gather_chip(x: pl.Tensor[[1, S], pl.FP32], y: pl.Out[pl.Tensor[[WR, S], pl.FP32]],
                marks: pl.Out[pl.Tensor[[1, S], pl.INT32]],
                win: pl.InOut[pld.DistributedTensor[[WR, S], pl.FP32]],
                sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
                rows: pl.Scalar[pl.INT32]):
    return gather(x, y, marks, win, sig, rows)


@pl.jit.host
def gather_all_rows(xs: pl.Tensor[[NR, 1, S], pl.FP32],
                    ys: pl.Out[pl.Tensor[[NR, WR, S], pl.FP32]],
                    ms: pl.Out[pl.Tensor[[NR, 1, S], pl.INT32]]):
    wbuf = pld.alloc_window_buffer([WR, S], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        gather_chip(xs[r], ys[r], ms[r], pld.window(wbuf, [WR, S], dtype=pl.FP32),
                    pld.window(sbuf, [1, 1], dtype=pl.INT32), WR, device=r)
    return ys


@pl.jit.host
def gather_written_rows(xs: pl.Tensor[[NR, 1, S], pl.FP32],
                        ys: pl.Out[pl.Tensor[[NR, WR, S], pl.FP32]],
                        ms: pl.Out[pl.Tensor[[NR, 1, S], pl.INT32]]):
    wbuf = pld.alloc_window_buffer([WR, S], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        gather_chip(xs[r], ys[r], ms[r], pld.window(wbuf, [WR, S], dtype=pl.FP32),
                    pld.window(sbuf, [1, 1], dtype=pl.INT32), pld.world_size(), device=r)
    return ys


def call(main, n, **config):
    xs = np.random.default_rng(n).integers(-9, 10, (n, 1, S)).astype(np.float32)
    ys = np.full((n, WR, S), 7.0, np.float32)
    ms = np.full((n, 1, S), 7, np.int32)
    main(xs, ys, ms, config=config_for(n, **config))
    return xs, ys, ms


@pytest.mark.parametrize("n", [2, 3])
def test_rows_nobody_wrote_reach_the_output_as_nan(n):
    xs, ys, ms = call(gather_all_rows, n, poison_windows=True)
    np.testing.assert_array_equal(ys[0, :n], xs[:, 0])
    assert np.isnan(ys[0, n:]).all()              # read from the window, never written
    assert poisoned(ys[0, n:]).all()              # the sentinel itself, copied through
    # the other ranks write no row of their pl.Out: all of it is the sentinel
    assert np.isnan(ys[1:]).all()
    # the signal window started at 0: rank 0 read exactly n arrivals
    assert ms[0, 0, 0] == n
    # an INT32 pl.Out: the integer sentinel where nothing was written
    assert (ms[0, 0, 1:] == sentinel(np.int32)[0]).all()
    assert sentinel(np.int32).view(np.uint8).tolist() == [POISON_BYTE] * 4
    assert (ms[1:] == sentinel(np.int32)[0]).all()


@pytest.mark.parametrize("n", [2, 3])
def test_without_poison_the_same_rows_read_as_zeros(n):
    xs, ys, ms = call(gather_all_rows, n)
    np.testing.assert_array_equal(ys[0, :n], xs[:, 0])
    np.testing.assert_array_equal(ys[0, n:], 0)   # the silent case the option shows
    np.testing.assert_array_equal(ys[1:], 7.0)    # untouched outputs keep the caller's values


@pytest.mark.parametrize("n", [2, 3])
def test_reading_only_written_rows_shows_no_sentinel(n):
    xs, ys, ms = call(gather_written_rows, n, poison_windows=True)
    np.testing.assert_array_equal(ys[0, :n], xs[:, 0])
    assert not np.isnan(ys[0, :n]).any()
    assert ms[0, 0, 0] == n


@pytest.mark.parametrize("n", [2])
def test_the_environment_variable_turns_poison_on(n, monkeypatch):
    monkeypatch.setenv("TILECOMM_POISON_WINDOWS", "1")
    _, ys, _ = call(gather_all_rows, n)
    assert np.isnan(ys[0, n:]).all()
    _, ys, _ = call(gather_all_rows, n, poison_windows=False)    # the config wins
    np.testing.assert_array_equal(ys[0, n:], 0)


def test_bad_values_are_config_errors(monkeypatch):
    with pytest.raises(ConfigError) as ei:
        RunConfig(poison_windows="yes")
    assert ei.value.code == "TC402" and "poison_windows" in str(ei.value)
    monkeypatch.setenv("TILECOMM_POISON_WINDOWS", "2")
    with pytest.raises(ConfigError) as ei:
        _ = RunConfig().poison_enabled
    assert ei.value.code == "TC402" and "TILECOMM_POISON_WINDOWS" in str(ei.value)


def test_sentinels():
    assert np.isnan(sentinel(np.float32)[0]) and np.isnan(sentinel(np.float16)[0])
    assert sentinel(np.uint8)[0] == POISON_BYTE
    assert sentinel(np.int16).view(np.uint8).tolist() == [POISON_BYTE] * 2
    a = np.zeros((2, 3), np.float32)
    a[1, 1:] = sentinel(np.float32)[0]
    a[0, 0] = np.float32(0) / np.float32(1) - np.inf + np.inf      # a computed NaN
    assert poisoned(a).tolist() == [[False, False, False], [False, True, True]]


# ------------------------------------------------------------------ the report
@pytest.mark.parametrize("n", [2, 3])
def test_the_read_of_unwritten_rows_is_named_with_window_rows_and_iteration(n):
    with pytest.warns(TilecommWarning) as got:
        call(gather_all_rows, n, poison_windows=True, lint="off")
    found = [w.message for w in got if getattr(w.message, "code", None) == "TC606"]
    assert len(found) == 1, [str(w.message) for w in got]
    w = found[0]
    assert w.span.line == line_of(gather, "gather-load")
    # rows n.. are the ones nobody wrote, each read in its own iteration (the
    # load, and the store of the loaded view)
    its = "; ".join(f"i={i}" for i in range(n, WR))
    text = str(w)
    assert f"rank 0's pl.load / pl.store (iterations {its}) in gather read row(s) {n}:{WR} " \
           f"of window 'wbuf' (its own copy) before anything wrote them" in text, text


@pytest.mark.parametrize("n", [2, 3])
def test_reading_only_written_rows_warns_nothing(n):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        call(gather_written_rows, n, poison_windows=True, lint="off")
    assert not [w for w in got if getattr(w.message, "code", None) == "TC606"]


# rank 0 writes row 0 of its window and lets rank 1 in; rank 1 loads rows of
# rank 0's copy: both rows (row 1 nobody wrote), or only row 0 (near miss)
@pl.jit.incore
def peek(x: pl.Tensor[[1, S], pl.FP32], y: pl.Out[pl.Tensor[[2, S], pl.FP32]],
         win: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
         sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
         rows: pl.Scalar[pl.INT32]):
    me = pld.rank(pld.get_comm_ctx(win))
    if me == 0:
        pl.store(pl.load(x, [0, 0], [1, S]), [0, 0], win)
        pld.system.notify(sig, 1, [0, 0], 1, op=ADD)
    if me == 1:
        pld.system.wait(sig, [0, 0], 1, cmp=GE)
        if rows == 2:
            pl.store(pld.tile.remote_load(win, 0, [0, 0], [2, S]), [0, 0], y)  # peek-both
        else:
            pl.store(pld.tile.remote_load(win, 0, [0, 0], [1, S]), [0, 0], y)
    return y


@pl.jit
def peek_chip(x: pl.Tensor[[1, S], pl.FP32], y: pl.Out[pl.Tensor[[2, S], pl.FP32]],
              win: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
              sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
              rows: pl.Scalar[pl.INT32]):
    return peek(x, y, win, sig, rows)


def peek_main(rows):
    @pl.jit.host
    def main(xs: pl.Tensor[[NR, 1, S], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 2, S], pl.FP32]]):
        wbuf = pld.alloc_window_buffer([2, S], dtype=pl.FP32)
        sbuf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            peek_chip(xs[r], ys[r], pld.window(wbuf, [2, S], dtype=pl.FP32),
                      pld.window(sbuf, [1, 1], dtype=pl.INT32), rows, device=r)
        return ys
    return main


peek_both, peek_written = peek_main(2), peek_main(1)


@pytest.mark.parametrize("n", [2, 3])
def test_a_remote_load_of_a_peers_unwritten_row_is_named(n):
    xs = np.random.default_rng(n).integers(-9, 10, (n, 1, S)).astype(np.float32)
    ys = np.zeros((n, 2, S), np.float32)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        peek_both(xs, ys, config=config_for(n, poison_windows=True, lint="off"))
    np.testing.assert_array_equal(ys[1, 0], xs[0, 0])
    assert poisoned(ys[1, 1]).all()
    found = [str(w.message) for w in got if getattr(w.message, "code", None) == "TC606"]
    assert len(found) == 1, found
    assert f":{line_of(peek, 'peek-both')}:" in found[0]
    assert "rank 1's pld.tile.remote_load in peek read row(s) 1 of window 'wbuf' " \
           "(rank 0's copy)" in found[0], found[0]
    ys = np.zeros((n, 2, S), np.float32)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        peek_written(xs, ys, config=config_for(n, poison_windows=True, lint="off"))
    np.testing.assert_array_equal(ys[1, 0], xs[0, 0])
    assert not [w for w in got if getattr(w.message, "code", None) == "TC606"]
