"""The deadlock report says who could release each blocked wait: the ranks
whose dispatches notify that window, or that nobody ever does."""
import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.errors import DeadlockError
from conftest import config_for

NR = pl.dynamic("NR")


@pl.jit.incore
def signal_one_wait_other(out: pl.Out[pl.Tensor[[1, 1], pl.INT32]],
                          ping: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
                          pong: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
                          target: pl.Scalar[pl.INT32]) -> pl.Tensor[[1, 1], pl.INT32]:
    me = pld.rank(pld.get_comm_ctx(ping))
    n = pld.nranks(pld.get_comm_ctx(ping))
    pld.system.notify(ping, (me + 1) % n, [me, 0], 1, op=pld.NotifyOp.AtomicAdd)
    pld.system.wait(pong, [0, 0], target, cmp=pld.WaitCmp.Ge)   # nobody notifies pong
    pl.write(out, [0, 0], pl.read(pong, [0, 0]))
    return out


@pl.jit.incore
def wait_on_ping(out: pl.Out[pl.Tensor[[1, 1], pl.INT32]],
                 ping: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
                 pong: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
                 target: pl.Scalar[pl.INT32]) -> pl.Tensor[[1, 1], pl.INT32]:
    pld.system.wait(ping, [0, 0], target, cmp=pld.WaitCmp.Ge)
    pl.write(out, [0, 0], pl.read(ping, [0, 0]))
    return out


@pl.jit
def chip_signal(out: pl.Out[pl.Tensor[[1, 1], pl.INT32]],
                ping: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
                pong: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
                target: pl.Scalar[pl.INT32]):
    return signal_one_wait_other(out, ping, pong, target)


@pl.jit
def chip_wait(out: pl.Out[pl.Tensor[[1, 1], pl.INT32]],
              ping: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
              pong: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
              target: pl.Scalar[pl.INT32]):
    return wait_on_ping(out, ping, pong, target)


@pl.jit.host
def unreleasable(outs: pl.Out[pl.Tensor[[NR, 1, 1], pl.INT32]]):
    ping_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    pong_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        chip_signal(outs[r], pld.window(ping_buf, [NR, 1], dtype=pl.INT32),
                    pld.window(pong_buf, [NR, 1], dtype=pl.INT32), 1, device=r)


@pl.jit.host
def too_high(outs: pl.Out[pl.Tensor[[NR, 1, 1], pl.INT32]]):
    ping_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    pong_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        chip_wait(outs[r], pld.window(ping_buf, [NR, 1], dtype=pl.INT32),
                  pld.window(pong_buf, [NR, 1], dtype=pl.INT32), 5, device=r)
    for r in pl.range(pld.world_size()):
        chip_signal(outs[r], pld.window(ping_buf, [NR, 1], dtype=pl.INT32),
                    pld.window(pong_buf, [NR, 1], dtype=pl.INT32), 0, device=r)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_wait_on_a_window_nobody_notifies(n):
    outs = np.zeros((n, 1, 1), np.int32)
    with pytest.raises(DeadlockError) as ei:
        unreleasable(outs, config=config_for(n))
    text = str(ei.value)
    assert text.count("no dispatch of this program notifies window 'pong_buf'") == n
    assert len(ei.value.blocked) == n
    for b in ei.value.blocked:
        assert (b["buffer"], b["notifiers"]) == ("pong_buf", {})


@pytest.mark.parametrize("n", [2, 3])
def test_report_names_the_dispatches_that_notify_the_window(n):
    outs = np.zeros((n, 1, 1), np.int32)
    with pytest.raises(DeadlockError) as ei:
        too_high(outs, config=config_for(n))
    # every rank waits for ping >= 5 in its first dispatch; only the second
    # dispatch (chip_signal, never reached) notifies ping
    assert sorted(b["rank"] for b in ei.value.blocked) == list(range(n))
    for b in ei.value.blocked:
        assert b["buffer"] == "ping_buf" and b["expected"] == 5
        assert b["notifiers"] == {d: ["chip_signal"] for d in range(n)}
    assert "notifies into 'ping_buf' come from: rank 0 (chip_signal, blocked)" in str(ei.value)


@pl.jit.host
def signal_only_on_rank_one(outs: pl.Out[pl.Tensor[[NR, 1, 1], pl.INT32]]):
    ping_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    pong_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        chip_wait(outs[r], pld.window(ping_buf, [NR, 1], dtype=pl.INT32),
                  pld.window(pong_buf, [NR, 1], dtype=pl.INT32), 5, device=r)
        if r == 1:         # the dispatch site covers every rank; it runs on rank 1 only
            chip_signal(outs[r], pld.window(ping_buf, [NR, 1], dtype=pl.INT32),
                        pld.window(pong_buf, [NR, 1], dtype=pl.INT32), 0, device=r)


@pytest.mark.parametrize("n", [2, 3])
def test_report_names_only_the_devices_a_notifying_dispatch_was_sent_to(n):
    outs = np.zeros((n, 1, 1), np.int32)
    with pytest.raises(DeadlockError) as ei:
        signal_only_on_rank_one(outs, config=config_for(n))
    for b in ei.value.blocked:
        assert b["buffer"] == "ping_buf" and b["notifiers"] == {1: ["chip_signal"]}
    text = str(ei.value)
    assert "notifies into 'ping_buf' come from: rank 1 (chip_signal, blocked)" in text
    assert "rank 0 (chip_signal" not in text
