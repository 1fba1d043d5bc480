"""Race detection: a producer that signals before its data lands, reported by line.

Rank 0 pushes a row into rank 1's window with remote_store and tells it so
with a notify; rank 1 waits for the notify and reads its window.  The racy
producer notifies *first*: the wait then says nothing about the store, so
rank 1 may read the row before, while or after it lands.  On shared memory
the store takes a microsecond and the read usually sees it anyway, so the
bug passes -- and on the chip it returns stale data.
  * RunConfig(detect_races=True) (or TILECOMM_DETECT_RACES=1) records every
    window access of the call and raises DataRaceError (TC601) afterwards,
    naming the two unordered accesses by source line and the missing edge.
  * the fix is the order "data, then notify": the notify is then released
    after the store, and the wait that sees it orders rank 1's read after it.
    The fixed producer runs clean with detection on.
Ranks after 1 have nothing to do.
Run: python examples/race_report.py --ranks 2
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.errors import DataRaceError
from tilecomm.runtime import DistributedConfig, RunConfig

SIZE = 64
NR = pl.dynamic("NR")
Row = pl.Tensor[[1, SIZE], pl.FP32]
Box = pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]]
Flag = pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]


@pl.jit.incore
def racy(x: Row, y: pl.Out[Row], box: Box, flag: Flag):
    me = pld.rank(pld.get_comm_ctx(box))
    if me == 0:
        row = pl.load(x, [0, 0], [1, SIZE])
        pld.system.notify(flag, peer=1, offsets=[0, 0], value=1, op=pld.NotifyOp.Set)
        pld.tile.remote_store(row, box, peer=1, offsets=[0, 0])      # BUG: data after notify
    if me == 1:
        pld.system.wait(flag, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
        y = pl.store(pl.load(box, [0, 0], [1, SIZE]), [0, 0], y)    # read
    return y


@pl.jit.incore
def fixed(x: Row, y: pl.Out[Row], box: Box, flag: Flag):
    me = pld.rank(pld.get_comm_ctx(box))
    if me == 0:
        row = pl.load(x, [0, 0], [1, SIZE])
        pld.tile.remote_store(row, box, peer=1, offsets=[0, 0])      # data first,
        pld.system.notify(flag, peer=1, offsets=[0, 0], value=1, op=pld.NotifyOp.Set)  # then notify
    if me == 1:
        pld.system.wait(flag, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
        y = pl.store(pl.load(box, [0, 0], [1, SIZE]), [0, 0], y)
    return y


def build(kernel):
    @pl.jit
    def chip(x: Row, y: pl.Out[Row], box: Box, flag: Flag):
        return kernel(x, y, box, flag)

    @pl.jit.host
    def main(xs: pl.Tensor[[NR, 1, SIZE], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]]):
        box_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
        flag_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            chip(xs[r], ys[r], pld.window(box_buf, [1, SIZE], dtype=pl.FP32),
                 pld.window(flag_buf, [1, 1], dtype=pl.INT32), device=r)
        return ys

    return main


# both programs bound at module level, so `tilecomm check race_report.py`
# reports the racy one's TC704 as the lint of a call does
racy_main = build(racy)
fixed_main = build(fixed)


def marked_line(marker: str) -> str:
    """race_report.py:LINE of the line of this file that ends in `# marker`."""
    with open(__file__) as f:
        n = next(n for n, text in enumerate(f, 1) if text.rstrip().endswith(f"# {marker}"))
    return f"race_report.py:{n}"


def run(nr: int) -> str:
    cfg = RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr))),
                    detect_races=True)
    xs = np.arange(nr * SIZE, dtype=np.float32).reshape(nr, 1, SIZE)
    ys = np.zeros_like(xs)
    try:
        racy_main(xs, ys, config=cfg)
        raise AssertionError("the racy producer was not reported")
    except DataRaceError as err:
        assert err.code == "TC601"
        report = str(err)
    print(report)
    # the report names both unordered accesses by line
    for marker in ("BUG: data after notify", "read"):
        assert marked_line(marker) in report, (marked_line(marker), report)

    ys = np.zeros_like(xs)
    fixed_main(xs, ys, config=cfg)                   # runs clean: no DataRaceError
    np.testing.assert_array_equal(ys[1], xs[0])      # rank 1 got rank 0's row
    return report


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    args = ap.parse_args()
    run(max(args.ranks, 2))
    print("fixed producer (store, then notify): no race, rank 1 holds rank 0's row")
    print("OK")
