"""Failure paths of the MPI backend, one per command-line mode; run under
``mpiexec -n N`` by test_mpi_failures.py (the programs are the multi-rank
tests' own, tests/ranks/failure_programs.py).

  raise     rank 0 names a peer outside the comm domain while the others
            wait for it: the error propagates (uncaught) on every process
  deadlock  every rank waits on a cell nobody notifies: every process
            catches the DeadlockError and process 0 prints its report
            between markers (compared with the shared-memory backend's)
  block     every rank blocks and the deadlock time-out is long: the test
            kills one process meanwhile
  stuck     rank 0 raises while rank 1 computes for minutes without
            reaching a wait: process 0 reports and aborts the job
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "ranks"))

import numpy as np  # noqa: E402

import tilecomm.language as pl  # noqa: E402
import tilecomm.language.distributed as pld  # noqa: E402
from tilecomm.errors import DeadlockError  # noqa: E402

from failure_programs import (block_main, config, crash_main,  # noqa: E402
                              outputs)

NR = pl.dynamic("NR")
OUT = pl.Out[pl.Tensor[[1, 1], pl.INT32]]
CELLS = pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]


@pl.jit.incore
def stuck_step(out: OUT, cells: CELLS) -> pl.Tensor[[1, 1], pl.INT32]:
    me = pld.rank(pld.get_comm_ctx(cells))
    if me == 1:     # rank 1 is inside its dispatch (so it misses the abort) ...
        pld.system.notify(cells, 0, [0, 0], 1, op=pld.NotifyOp.Set)
    if me == 0:     # ... before rank 0 fails
        pld.system.wait(cells, [0, 0], 1, cmp=pld.WaitCmp.Ge)
        pld.system.notify(cells, 99, [0, 0], 1, op=pld.NotifyOp.Set)  # F:stuck-raise
    for i in pl.range(1000000000):
        pl.write(out, [0, 0], i)                                    # F:stuck-loop
    return out


@pl.jit
def stuck_chip(out: OUT, cells: CELLS):
    return stuck_step(out, cells)


@pl.jit.host
def stuck_main(outs: pl.Out[pl.Tensor[[NR, 1, 1], pl.INT32]]):
    buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        stuck_chip(outs[r], pld.window(buf, [NR, 1], dtype=pl.INT32), device=r)
    return outs


def main(mode: str, n: int) -> None:
    if mode == "raise":
        crash_main(outputs(n), config=config(n))
    elif mode == "deadlock":
        try:
            block_main(outputs(n), config=config(n))
        except DeadlockError as e:
            if os.environ.get("PMI_RANK", "0") == "0":
                print(f"<<<\n{e}\n>>>", flush=True)
            print(f"deadlock reported on process {os.environ.get('PMI_RANK', '0')}",
                  flush=True)
            return
        raise AssertionError("no deadlock reported")
    elif mode == "block":
        print("blocking", flush=True)
        block_main(outputs(n), config=config(n, deadlock_timeout_s=600))
    elif mode == "stuck":
        stuck_main(np.zeros((n, 1, 1), np.int32), config=config(n))
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
