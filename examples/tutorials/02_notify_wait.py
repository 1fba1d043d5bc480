"""Tutorial 2: window buffers, notify and wait.

A window buffer is memory every rank has a copy of and peers can reach.  Its
INT32 cells can be signal cells: pld.system.notify deposits a value into a
peer's copy of a cell, pld.system.wait blocks until this rank's own copy of a
cell satisfies a condition.
Each rank
  * tells its right neighbour who it is: Set (rank + 1) into the neighbour's
    `hello` cell, then waits for its own `hello` cell to be set by its left
    neighbour;
  * counts arrivals: AtomicAdd 1 into every rank's `count` cell (its own
    included), then waits until its own count reaches the rank count.
Run: python examples/tutorials/02_notify_wait.py --ranks 3
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

NR = pl.dynamic("NR")
Cells = pld.DistributedTensor[[2, 1], pl.INT32]      # row 0: hello, row 1: count
HELLO, COUNT = 0, 1


@pl.jit.incore
def greet(seen: pl.Out[pl.Tensor[[1, 2], pl.INT32]], sig: pl.InOut[Cells]):
    ctx = pld.get_comm_ctx(sig)
    me, n = pld.rank(ctx), pld.nranks(ctx)
    right = (me + 1) % n
    # a flag: Set stores the value in the right neighbour's copy of the cell
    pld.system.notify(sig, peer=right, offsets=[HELLO, 0], value=me + 1,
                      op=pld.NotifyOp.Set)
    # a counter: AtomicAdd adds to each rank's copy, however many add at once
    for peer in pl.range(n):
        pld.system.notify(sig, peer=peer, offsets=[COUNT, 0], value=1,
                          op=pld.NotifyOp.AtomicAdd)
    # waits read this rank's own copy: Ge holds once the cell is >= expected
    pld.system.wait(sig, offsets=[HELLO, 0], expected=1, cmp=pld.WaitCmp.Ge)
    pld.system.wait(sig, offsets=[COUNT, 0], expected=n, cmp=pld.WaitCmp.Ge)
    pl.write(seen, [0, 0], pl.read(sig, [HELLO, 0]))
    pl.write(seen, [0, 1], pl.read(sig, [COUNT, 0]))
    return seen


@pl.jit
def chip(seen: pl.Out[pl.Tensor[[1, 2], pl.INT32]], sig: pl.InOut[Cells]):
    return greet(seen, sig)


@pl.jit.host
def main(seen: pl.Out[pl.Tensor[[NR, 1, 2], pl.INT32]]):
    # one buffer, every rank's copy zero-filled at the start of the call
    sig_buf = pld.alloc_window_buffer([2, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        # a window view gives the raw buffer a shape and a dtype
        chip(seen[r], pld.window(sig_buf, [2, 1], dtype=pl.INT32), device=r)
    return seen


def run(nr: int) -> np.ndarray:
    seen = np.full((nr, 1, 2), -1, np.int32)
    main(seen, config=RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr)))))
    left = (np.arange(nr) - 1) % nr
    np.testing.assert_array_equal(seen[:, 0, 0], left + 1)    # set by the left neighbour
    np.testing.assert_array_equal(seen[:, 0, 1], nr)          # one add from every rank
    return seen


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    args = ap.parse_args()
    seen = run(args.ranks)
    print(f"{args.ranks} ranks; (hello, count) per rank: {[tuple(s) for s in seen[:, 0].tolist()]}")
    print("OK")
