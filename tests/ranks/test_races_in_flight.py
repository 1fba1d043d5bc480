"""Two calls in flight on kept windows are one history to the race check.

Rank 0 hands a row to rank 1 in every call: it stores into rank 1's ``box``
and counts ``full`` up; rank 1 waits for the k-th count and reads the box.
With ``submit()`` a rank starts call 2 as soon as it finished call 1, so
rank 0 may store call 2's row while rank 1 still reads call 1's: racy, on
the chip as here.  The twin hands the box back: rank 1 counts ``free`` up
after reading, and rank 0 waits for call k - 1's ``free`` before storing.

The calls' results are checked against numpy where the program is right;
the racy pair is reported whatever this run's timing was."""
import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from conftest import config_for
from tilecomm.errors import DataRaceError

NR = pl.dynamic("NR")
W = 8
ROW = pl.Tensor[[1, W], pl.FP32]
BOX = pl.InOut[pld.DistributedTensor[[1, W], pl.FP32]]
CELL = pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]
ADD, GE = pld.NotifyOp.AtomicAdd, pld.WaitCmp.Ge


@pl.jit.incore
def handoff(x: ROW, y: pl.Out[ROW], box: BOX, full: CELL, free: CELL, k: pl.Scalar[pl.INT32],
            guarded: pl.Scalar[pl.INT32]) -> ROW:
    me = pld.rank(pld.get_comm_ctx(box))
    if me == 0:
        if guarded == 1:
            pld.system.wait(free, [0, 0], k - 1, cmp=GE)      # call k - 1's row was read
        pld.tile.remote_store(pl.load(x, [0, 0], [1, W]), box, 1, [0, 0])  # hand-store
        pld.system.notify(full, 1, [0, 0], 1, op=ADD)
    if me == 1:
        pld.system.wait(full, [0, 0], k, cmp=GE)
        y = pl.store(pl.load(box, [0, 0], [1, W]), [0, 0], y)  # hand-read
        if guarded == 1:
            pld.system.notify(free, 0, [0, 0], 1, op=ADD)
    return y


@pl.jit
def handoff_chip(x: ROW, y: pl.Out[ROW], box: BOX, full: CELL, free: CELL,
                 k: pl.Scalar[pl.INT32], guarded: pl.Scalar[pl.INT32]):
    return handoff(x, y, box, full, free, k, guarded)


@pl.jit.host
def handoff_main(xs: pl.Tensor[[NR, 1, W], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, W], pl.FP32]],
                 k: pl.Scalar[pl.INT32], guarded: pl.Scalar[pl.INT32]):
    bbuf = pld.alloc_window_buffer([1, W], dtype=pl.FP32)
    fbuf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    ebuf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        handoff_chip(xs[r], ys[r], pld.window(bbuf, [1, W], dtype=pl.FP32),
                     pld.window(fbuf, [1, 1], dtype=pl.INT32),
                     pld.window(ebuf, [1, 1], dtype=pl.INT32), k, guarded, device=r)
    return ys


def line_of(tag: str) -> str:
    """``file:line`` of the line marked ``# tag`` in this file."""
    with open(__file__, encoding="utf-8") as f:
        i = next(n for n, text in enumerate(f) if text.rstrip().endswith(f"# {tag}"))
    return f"{__file__}:{i + 1}"


def _data(n, seed):
    xs = np.random.default_rng(seed).integers(-9, 10, (n, 1, W)).astype(np.float32)
    return xs, np.full((n, 1, W), np.nan, np.float32)


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("guarded", [1, 0], ids=["twin", "racy"])
def test_a_call_in_flight_with_the_one_before_is_checked_with_it(n, guarded):
    checked = config_for(n, detect_races=True)
    xs, ys = _data(n, 0)
    compiled = handoff_main.compile(xs, ys, 1, guarded, config=config_for(n))
    with compiled.prepare(persistent=True, reset_persistent_windows=False) as rt:
        for rounds in range(2):        # twice: the history starts afresh after a result
            base = 2 * rounds
            (x1, y1), (x2, y2) = _data(n, base + 1), _data(n, base + 2)
            first = rt.submit(compiled, x1, y1, base + 1, guarded, config=checked)
            second = rt.submit(compiled, x2, y2, base + 2, guarded, config=checked)
            first.result()                      # call 1 alone is clean
            if guarded:                         # (racy: call 1 may read call 2's row)
                np.testing.assert_array_equal(y1[1], x1[0])
                second.result()
                np.testing.assert_array_equal(y2[1], x2[0])
                continue
            with pytest.raises(DataRaceError) as ei:
                second.result()
            pairs = {frozenset(((r.first.rank, r.first.line), (r.second.rank, r.second.line)))
                     for r in ei.value.races}
            assert frozenset({(0, line_of("hand-store")), (1, line_of("hand-read"))}) in pairs, \
                str(ei.value)
        # a blocking call is in flight with nothing: clean, whatever the guard
        x3, y3 = _data(n, 9)
        rt(x3, y3, 5, guarded, config=checked)
        np.testing.assert_array_equal(y3[1], x3[0])
