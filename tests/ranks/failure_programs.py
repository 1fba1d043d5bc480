"""Programs that fail at run time: deadlocks, crashing ranks, ranks that block
forever.  Lines the failure reports must point at carry a ``# F:<tag>`` marker.

Run as a script (``python failure_programs.py N``) it starts N ranks that all
block forever (with a long deadlock timeout), for the Ctrl-C test.
"""
import faulthandler
import signal
import sys

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

NR = pl.dynamic("NR")
OUT = pl.Out[pl.Tensor[[1, 1], pl.INT32]]
OUTS = pl.Out[pl.Tensor[[NR, 1, 1], pl.INT32]]
CELL = pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]
CELLS = pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]


# ---------------------------------------------------------------- the seed's handshake, tag 0
# Each rank Sets its peer's cell to ``tag`` and waits for its own cell to reach
# 1.  With tag 0 no cell ever reaches 1: both ranks block forever.
@pl.jit.incore
def handshake_step(out: OUT, signal: CELL, peer: pl.Scalar[pl.INT32],
                   tag: pl.Scalar[pl.INT32]) -> pl.Tensor[[1, 1], pl.INT32]:
    pld.system.notify(signal, peer=peer, offsets=[0, 0], value=tag, op=pld.NotifyOp.Set)
    pld.system.wait(signal=signal, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)  # F:seed
    received = pl.read(signal, [0, 0])
    pl.write(out, [0, 0], received)
    return out


@pl.jit
def handshake_chip(out: OUT, signal: CELL, peer: pl.Scalar[pl.INT32], tag: pl.Scalar[pl.INT32]):
    return handshake_step(out, signal, peer, tag)


@pl.jit.host
def seed_tag0_main(outputs: pl.Out[pl.Tensor[[2, 1, 1], pl.INT32]]):
    buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        handshake_chip(outputs[r], pld.window(buf, [1, 1], dtype=pl.INT32), 1 - r, 0,
                       device=r)
    return outputs


# ---------------------------------------------------------------- the same mistake on a ring
@pl.jit.incore
def ring_step(out: OUT, signal: CELL, tag: pl.Scalar[pl.INT32]) -> pl.Tensor[[1, 1], pl.INT32]:
    ctx = pld.get_comm_ctx(signal)
    me = pld.rank(ctx)
    pld.system.notify(signal, (me + 1) % pld.nranks(ctx), [0, 0], tag, op=pld.NotifyOp.Set)
    pld.system.wait(signal, [0, 0], 1, cmp=pld.WaitCmp.Ge)  # F:ring
    pl.write(out, [0, 0], pl.read(signal, [0, 0]))
    return out


@pl.jit
def ring_chip(out: OUT, signal: CELL, tag: pl.Scalar[pl.INT32]):
    return ring_step(out, signal, tag)


@pl.jit.host
def ring_main(outputs: OUTS, tag: pl.Scalar[pl.INT32]):
    buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        ring_chip(outputs[r], pld.window(buf, [1, 1], dtype=pl.INT32), tag, device=r)
    return outputs


# ---------------------------------------------------------------- only some ranks block
@pl.jit.incore
def partial_step(out: OUT, signal: CELL, waits: pl.Scalar[pl.INT32]) -> pl.Tensor[[1, 1], pl.INT32]:
    if waits == 1:
        pld.system.wait(signal, [0, 0], 1, cmp=pld.WaitCmp.Ge)  # F:partial
    pl.write(out, [0, 0], pl.read(signal, [0, 0]))
    return out


@pl.jit
def partial_chip(out: OUT, signal: CELL, waits: pl.Scalar[pl.INT32]):
    return partial_step(out, signal, waits)


@pl.jit.host
def partial_main(outputs: OUTS):
    """Odd ranks wait for a signal nobody sends; even ranks finish."""
    buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        partial_chip(outputs[r], pld.window(buf, [1, 1], dtype=pl.INT32), r % 2, device=r)
    return outputs


# ---------------------------------------------------------------- a rank crashes
@pl.jit.incore
def crash_step(out: OUT, cells: CELLS) -> pl.Tensor[[1, 1], pl.INT32]:
    ctx = pld.get_comm_ctx(cells)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    if me == 0:
        # once every other rank has arrived (and is about to block forever) ...
        pld.system.wait(cells, [0, 0], n - 1, cmp=pld.WaitCmp.Ge)
        # ... rank 0 names a peer outside the comm domain
        pld.system.notify(cells, n + 5, [0, 0], 1, op=pld.NotifyOp.Set)  # F:crash
    else:
        pld.system.notify(cells, 0, [0, 0], 1, op=pld.NotifyOp.AtomicAdd)
        pld.system.wait(cells, [me, 0], 1, cmp=pld.WaitCmp.Ge)  # F:forever
    pl.write(out, [0, 0], me)
    return out


@pl.jit
def crash_chip(out: OUT, cells: CELLS):
    return crash_step(out, cells)


@pl.jit.host
def crash_main(outputs: OUTS):
    buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        crash_chip(outputs[r], pld.window(buf, [NR, 1], dtype=pl.INT32), device=r)
    return outputs


# ---------------------------------------------------------------- every rank blocks forever
@pl.jit.incore
def block_step(out: OUT, cells: CELLS) -> pl.Tensor[[1, 1], pl.INT32]:
    me = pld.rank(pld.get_comm_ctx(cells))
    pld.system.wait(cells, [me, 0], 1, cmp=pld.WaitCmp.Ge)  # F:block
    pl.write(out, [0, 0], me)
    return out


@pl.jit
def block_chip(out: OUT, cells: CELLS):
    return block_step(out, cells)


@pl.jit.host
def block_main(outputs: OUTS):
    buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        block_chip(outputs[r], pld.window(buf, [NR, 1], dtype=pl.INT32), device=r)
    return outputs


def outputs(n: int) -> np.ndarray:
    return np.zeros((n, 1, 1), np.int32)


def config(n: int, **kw) -> RunConfig:
    return RunConfig(distributed_config=DistributedConfig(device_ids=list(range(n))), **kw)


if __name__ == "__main__":
    # every rank blocks forever; only Ctrl-C (or a kill) ends this.  SIGUSR1 dumps the
    # controller's stacks, so a test can show where it hangs if it does not stop.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    # behave like a terminal's foreground program even when the test runner was started in
    # the background (non-interactive shells start background jobs with SIGINT ignored)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    n = int(sys.argv[1])
    block_main(outputs(n), config=config(n, deadlock_timeout_s=600))
    print("finished")     # never reached
