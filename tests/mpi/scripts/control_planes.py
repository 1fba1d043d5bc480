"""The MPI backend's two control-plane layouts, one per command-line mode;
run under ``mpiexec -n N`` by test_rma_control.py (and, for the reference
report, as a plain process on the shared-memory backend).

  layout  a prepared worker runs a ring handshake twice; every process
          checks the outputs against numpy and prints which control plane
          and which window pool its ranks use
  tasks   every rank fills its cores with tasks blocked in waits nobody
          releases, a publisher task queued behind them: every process
          catches the DeadlockError and process 0 prints its report (built
          from each rank's task snapshot) between markers
"""
import os
import sys

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.errors import DeadlockError
from tilecomm.runtime import DistributedConfig, RunConfig

NR = pl.dynamic("NR")
CORES = 2
N = 4
OUT = pl.Out[pl.Tensor[[1, 1], pl.INT32]]
CELL = pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]
GE, SET = pld.WaitCmp.Ge, pld.NotifyOp.Set


def config(n: int) -> RunConfig:
    return RunConfig(distributed_config=DistributedConfig(device_ids=list(range(n))),
                     cores=CORES, deadlock_timeout_s=1.0)


# ---------------------------------------------------------------- layout
@pl.jit.incore
def ring_step(out: OUT, signal: CELL, tag: pl.Scalar[pl.INT32]) -> pl.Tensor[[1, 1], pl.INT32]:
    ctx = pld.get_comm_ctx(signal)
    me = pld.rank(ctx)
    pld.system.notify(signal, (me + 1) % pld.nranks(ctx), [0, 0], tag + me, op=SET)
    pld.system.wait(signal, [0, 0], tag, cmp=GE)
    pl.write(out, [0, 0], pl.read(signal, [0, 0]))
    return out


@pl.jit
def ring_chip(out: OUT, signal: CELL, tag: pl.Scalar[pl.INT32]):
    return ring_step(out, signal, tag)


@pl.jit.host
def ring_main(outs: pl.Out[pl.Tensor[[NR, 1, 1], pl.INT32]], tag: pl.Scalar[pl.INT32]):
    buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        ring_chip(outs[r], pld.window(buf, [1, 1], dtype=pl.INT32), tag, device=r)
    return outs


def layout(n: int) -> None:
    outs = np.zeros((n, 1, 1), np.int32)
    with ring_main.compile(outs, 1, config=config(n)).prepare() as worker:
        for tag in (3, 7):
            outs[...] = -1
            worker(outs, tag)
            # rank r's cell was set by rank r - 1 to tag + (r - 1)
            want = (tag + np.roll(np.arange(n), 1)).reshape(n, 1, 1).astype(np.int32)
            np.testing.assert_array_equal(outs, want)
        ranks = worker._ranks
        print(f"{type(ranks.control).__name__} shared={ranks.transport.pool.shared}", flush=True)


# ---------------------------------------------------------------- tasks
@pl.jit
def blocking(out: pl.Out[pl.Tensor[[CORES, N], pl.INT32]], signal: CELL,
             peer: pl.Scalar[pl.INT32]):
    with pl.manual_scope():
        for slot in pl.range(CORES):
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="blocking_wait"):
                pld.system.wait(signal, [0, 0], 1, cmp=GE)              # T:wait
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="publisher"):
            pld.system.notify(signal, peer, [0, 0], 1, op=SET)
    return out


@pl.jit.host
def tasks_main(outs: pl.Out[pl.Tensor[[NR, CORES, N], pl.INT32]]):
    sbuf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        blocking(outs[r], pld.window(sbuf, [1, 1], dtype=pl.INT32), (r + 1) % pld.world_size(),
                 device=r)
    return outs


def tasks(n: int) -> None:
    me = os.environ.get("PMI_RANK", "0")
    try:
        tasks_main(np.zeros((n, CORES, N), np.int32), config=config(n))
    except DeadlockError as e:
        if me == "0":
            print(f"<<<\n{e}\n>>>", flush=True)
        print(f"deadlock reported on process {me}", flush=True)
        return
    raise AssertionError("no deadlock reported")


if __name__ == "__main__":
    {"layout": layout, "tasks": tasks}[sys.argv[1]](int(sys.argv[2]))
