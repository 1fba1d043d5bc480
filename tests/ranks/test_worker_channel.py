"""The channel to a rank never stalls the controller: a run whose dispatches
reach a rank in many messages, while that rank is blocked in its first one,
still gets every dispatch to every rank (the rank drains its channel while it
is busy mid-run; see ``runtime/rank/inbox.py``).

Rank 0's first dispatch waits for a signal that only the run's *last*
dispatch, to rank 1, sends; in between the HOST orchestrator sends rank
0 enough dispatches to fill a pipe several times over.  Were rank 0 to stop
reading while it waits, the controller would block writing to it and never
send the last dispatch.  World size 1 has no other rank to open the gate."""
import os
import socket

import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from conftest import WORLD_SIZES, config_for
from tilecomm.runtime.controller.launcher import ForkLauncher

NR = pl.dynamic("NR")
TICKS = 1000            # ~40 bytes each on the wire: ~40 KB, several times a
                        # channel's buffer once the fixture below shrank it
SEND_BUFFER = 4096      # bytes the controller may have unread in a rank's channel


@pl.jit.incore
def gate_kernel(sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
    pld.system.wait(sig, [0, 0], 1, cmp=pld.WaitCmp.Ge)


@pl.jit.incore
def tick_kernel(y: pl.InOut[pl.Tensor[[1, 1], pl.INT32]]) -> pl.Tensor[[1, 1], pl.INT32]:
    v = pl.read(y, [0, 0])
    pl.write(y, [0, 0], v + 1)
    return y


@pl.jit.incore
def open_kernel(sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
    pld.system.notify(sig, 0, [0, 0], 1, op=pld.NotifyOp.AtomicAdd)


@pl.jit
def gate_chip(sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
    gate_kernel(sig)


@pl.jit
def tick_chip(y: pl.InOut[pl.Tensor[[1, 1], pl.INT32]]):
    return tick_kernel(y)


@pl.jit
def open_chip(sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
    open_kernel(sig)


@pl.jit.host
def gated_main(ys: pl.InOut[pl.Tensor[[NR, 1, 1], pl.INT32]], m: pl.Scalar[pl.INT32]):
    sig = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    gate_chip(pld.window(sig, [1, 1], dtype=pl.INT32), device=0)
    for j in pl.range(m):
        tick_chip(ys[0], device=0)
    open_chip(pld.window(sig, [1, 1], dtype=pl.INT32), device=1)
    return ys


@pytest.fixture(autouse=True)
def small_channels(monkeypatch):
    """Every rank's channel holds only ``SEND_BUFFER`` unread bytes (a Unix
    socket charges what is in flight to the sender's buffer), so a run of
    ``TICKS`` dispatches overflows it without a HOST loop long enough to be
    slow."""
    start = ForkLauncher.start

    def start_small(self, rank_main, keep=None):
        start(self, rank_main, keep)
        for _, conn in self.workers:
            with socket.socket(fileno=os.dup(conn.fileno())) as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)

    monkeypatch.setattr(ForkLauncher, "start", start_small)


def _expect(ys_before, m):
    want = ys_before.copy()
    want[0] += m
    return want


MULTI = [n for n in WORLD_SIZES if n > 1]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("n", MULTI)
def test_one_shot_run_larger_than_a_pipe_reaches_every_rank(n):
    ys = np.arange(n, dtype=np.int32).reshape(n, 1, 1) * 10
    want = _expect(ys, TICKS)
    gated_main(ys, TICKS, config=config_for(n))
    np.testing.assert_array_equal(ys, want)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("n", MULTI)
@pytest.mark.parametrize("persistent", [False, True], ids=["fresh", "kept"])
def test_prepared_runs_larger_than_a_pipe_blocking_and_submitted(n, persistent):
    ys = np.zeros((n, 1, 1), np.int32)
    compiled = gated_main.compile(ys, TICKS, config=config_for(n))
    opts = {"persistent": True, "reset_persistent_windows": True} if persistent else {}
    with compiled.prepare(**opts) as rt:
        for call in range(1):
            ys = np.full((n, 1, 1), call, np.int32)
            want = _expect(ys, TICKS)
            rt(ys, TICKS)
            np.testing.assert_array_equal(ys, want)
        # two in flight, each larger than a pipe, then a small one after them
        a, b = np.zeros((n, 1, 1), np.int32), np.ones((n, 1, 1), np.int32)
        wa, wb = _expect(a, TICKS), _expect(b, 7)
        ha = rt.submit(compiled, a, TICKS)
        hb = rt.submit(compiled, b, 7)
        hb.result(timeout=60)
        ha.result(timeout=60)
        np.testing.assert_array_equal(a, wa)
        np.testing.assert_array_equal(b, wb)
