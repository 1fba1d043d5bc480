"""A process of an MPI job that goes away between calls while the others go
on; run under ``mpiexec -n N`` by test_mpi_departures.py.  Each mode makes
a call, then does its thing on one process (``victim``), then makes a
second call:

  uncaught  the victim raises a ValueError nobody catches
  exit      the victim's script ends (``sys.exit(3)``) without an exception
  caught    the victim raises and catches it: both calls run, prints OK
  every     every process raises the same error (a check of the results
            that fails everywhere): nobody waits for anybody
  worker    the same uncaught error inside a prepared worker's ``with``
            block: the victim closes the worker while the others make its
            second call
  in-call   the victim fails inside the second call, after every process
            entered it, with an error that is not the call's (injected into
            the backend: process 0's controlling step, or process r's
            serving one): the others wait in the call for its messages

Before it goes away, the victim prints ``leaving at <time.time()>`` on
stderr (the test measures how long the job takes to end after that).
"""
import os
import sys
import time

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

S = 4
NR = pl.dynamic("NR")


@pl.jit.incore
def scale_kernel(x: pl.Tensor[[1, S], pl.FP32], y: pl.Out[pl.Tensor[[1, S], pl.FP32]],
                 win: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
    me = pl.cast(pld.rank(pld.get_comm_ctx(win)), pl.FP32)
    y = pl.store(pl.add(pl.load(x, [0, 0], [1, S]), me), [0, 0], y)
    return y


@pl.jit
def scale_chip(x: pl.Tensor[[1, S], pl.FP32], y: pl.Out[pl.Tensor[[1, S], pl.FP32]],
               win: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
    return scale_kernel(x, y, win)


@pl.jit.host
def scale_main(xs: pl.Tensor[[NR, 1, S], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, S], pl.FP32]]):
    buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        scale_chip(xs[r], ys[r], pld.window(buf, [1, 1], dtype=pl.INT32), device=r)
    return ys


def call(run, n: int, k: int) -> None:
    xs = np.arange(n * S, dtype=np.float32).reshape(n, 1, S) * k
    ys = np.zeros_like(xs)
    run(xs, ys)
    np.testing.assert_array_equal(ys, xs + np.arange(n, dtype=np.float32).reshape(n, 1, 1))


def leave(mode: str, me: int) -> None:
    print(f"leaving at {time.time():.6f}", file=sys.stderr, flush=True)
    if mode == "exit":
        sys.exit(3)
    raise ValueError(f"a fault of process {me}'s own script")


def main(mode: str, n: int, victim: int) -> None:
    me = int(os.environ.get("PMI_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0")))
    cfg = RunConfig(distributed_config=DistributedConfig(device_ids=list(range(n))))

    def one_shot(xs, ys):
        scale_main(xs, ys, config=cfg)

    if mode == "worker":
        xs = np.zeros((n, 1, S), np.float32)
        with scale_main.compile(xs, np.zeros_like(xs), config=cfg).prepare() as worker:
            call(worker, n, 1)
            if me == victim:
                leave(mode, me)
            call(worker, n, 2)
        raise AssertionError("the second call ended without the victim")
    call(one_shot, n, 1)
    if mode == "in-call" and me == victim:
        from tilecomm.backends.mpi import spmd

        def fault(*args, **kwargs):
            leave(mode, me)
        if me == 0:
            spmd.MpiBackend._control = fault
        else:
            spmd.rank_main = fault
    elif mode == "every":
        leave(mode, me)
    elif me == victim:
        if mode == "caught":
            try:
                leave(mode, me)
            except ValueError:
                pass
        else:
            leave(mode, me)
    call(one_shot, n, 2)
    if mode != "caught":
        raise AssertionError("the second call ended without the victim")
    print(f"OK {me}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
