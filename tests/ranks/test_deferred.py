"""Deferred completion (pld.system.defer_wait): waiters give their core back,
their TaskIds complete when the counters reach the expected values, consumers
then see the payload; the saturation case both ways; the per-scheduler cap of
64 deferred TaskIds; task-aware deadlock reports; prepared workers."""
import inspect
import re

import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.errors import DeadlockError, RankFailure
from conftest import children, config_for

NR = pl.dynamic("NR")
WAITERS = pl.dynamic("WAITERS")
N = 8
GE, SET, ADD = pld.WaitCmp.Ge, pld.NotifyOp.Set, pld.NotifyOp.AtomicAdd
INP = pl.Tensor[[1, N], pl.INT32]
OUT = pl.Out[pl.Tensor[[WAITERS, N], pl.INT32]]
PAY = pl.InOut[pld.DistributedTensor[[1, N], pl.INT32]]
SIG = pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]


@pl.jit
def deferred(inp: INP, out: OUT, payload: PAY, signal: SIG, peer: pl.Scalar[pl.INT32],
             n: pl.Scalar[pl.INT32]):
    """The seed's pattern: waiters, consumers with deps=[wait_tid], and the
    publisher submitted last."""
    with pl.manual_scope():
        for slot in pl.range(n):
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="deferred_wait",
                       allow_early_resolve=False) as wait_tid:
                epoch: pl.Scalar[pl.INT32] = pl.read(inp, [0, 0])
                pld.system.defer_wait(signal=signal, offsets=[0, 0], expected=epoch, cmp=GE)
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="completion_consumer",
                       deps=[wait_tid]):
                received = pl.load(payload, [0, 0], [1, N])
                out = pl.store(received, [slot, 0], out)
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="delayed_publisher"):
            local_payload = pl.load(inp, [0, 0], [1, N])
            pld.tile.remote_store(local_payload, target=payload, peer=peer, offsets=[0, 0])
            epoch: pl.Scalar[pl.INT32] = pl.read(inp, [0, 0])
            pld.system.notify(target=signal, peer=peer, offsets=[0, 0], value=epoch, op=SET)
    return out


@pl.jit
def blocking(inp: INP, out: OUT, payload: PAY, signal: SIG, peer: pl.Scalar[pl.INT32],
             n: pl.Scalar[pl.INT32]):
    """The same with blocking waits: every core spins, the publisher starves."""
    with pl.manual_scope():
        for slot in pl.range(n):
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="blocking_wait") as wait_tid:
                epoch: pl.Scalar[pl.INT32] = pl.read(inp, [0, 0])
                pld.system.wait(signal, [0, 0], epoch, cmp=GE)
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="completion_consumer",
                       deps=[wait_tid]):
                out = pl.store(pl.load(payload, [0, 0], [1, N]), [slot, 0], out)
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="delayed_publisher"):
            pld.tile.remote_store(pl.load(inp, [0, 0], [1, N]), target=payload, peer=peer,
                                  offsets=[0, 0])
            pld.system.notify(signal, peer, [0, 0], pl.read(inp, [0, 0]), op=SET)
    return out


def host(chip):
    @pl.jit.host
    def main(inps: pl.Tensor[[NR, 1, N], pl.INT32],
             outs: pl.Out[pl.Tensor[[NR, WAITERS, N], pl.INT32]], n: pl.Scalar[pl.INT32]):
        pbuf = pld.alloc_window_buffer([1, N], dtype=pl.INT32)
        sbuf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            chip(inps[r], outs[r], pld.window(pbuf, [1, N], dtype=pl.INT32),
                 pld.window(sbuf, [1, 1], dtype=pl.INT32), (r + 1) % pld.world_size(), n,
                 device=r)
        return outs
    return main


def line_of(func, text):
    lines, first = inspect.getsourcelines(func.fn)
    hits = [first + i for i, ln in enumerate(lines) if text in ln]
    assert len(hits) == 1
    return hits[0]


def data(nranks, waiters, epoch=5, seed=0):
    inps = np.random.default_rng(seed).integers(0, 1000, (nranks, 1, N)).astype(np.int32)
    inps[:, 0, 0] = epoch
    return inps, np.zeros((nranks, waiters, N), np.int32)


def expected(inps, waiters):
    """Rank r's consumers see the payload of rank r - 1 (it publishes to r)."""
    return np.repeat(np.roll(inps, 1, axis=0), waiters, axis=1)


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_waiters_beyond_the_core_count_release_their_cores(n):
    cores = 2
    waiters = 3 * cores              # saturation: more waiters than cores, publisher last
    inps, outs = data(n, waiters)
    host(deferred)(inps, outs, waiters, config=config_for(n, cores=cores))
    np.testing.assert_array_equal(outs, expected(inps, waiters))


@pytest.mark.parametrize("n", [1, 2])
def test_blocking_waits_saturate_the_cores_and_the_report_says_so(n):
    cores = 2
    inps, outs = data(n, cores)
    with pytest.raises(DeadlockError) as ei:
        host(blocking)(inps, outs, cores, config=config_for(n, cores=cores))
    text = str(ei.value)
    for r in range(n):
        assert f"every core of rank {r} is held by a blocking pld.system.wait" in text
    assert "task 'delayed_publisher'" in text and "is queued behind them" in text
    assert "pld.system.defer_wait" in text
    held = [b for b in ei.value.blocked if not b["deferred"]]
    assert len(held) == n * cores
    assert {b["task"] for b in held} == {"blocking_wait"}
    assert all(b["span"].line == line_of(blocking, "pld.system.wait(") for b in held)
    assert sorted({b["core"] for b in held}) == list(range(cores))


@pytest.mark.parametrize("n", [1, 2])
def test_a_counter_never_published_is_reported_as_deferred(n):
    inps, outs = data(n, 3)
    inps[:, 0, 0] = 7

    @pl.jit
    def never(inp: INP, out: OUT, payload: PAY, signal: SIG, peer: pl.Scalar[pl.INT32],
              k: pl.Scalar[pl.INT32]):
        with pl.manual_scope():
            for slot in pl.range(k):
                with pl.at(level=pl.Level.CORE_GROUP, name_hint="deferred_wait") as wait_tid:
                    pld.system.defer_wait(signal, [0, 0], pl.read(inp, [0, 0]), cmp=GE)
                with pl.at(level=pl.Level.CORE_GROUP, name_hint="consumer", deps=[wait_tid]):
                    out = pl.store(pl.load(payload, [0, 0], [1, N]), [slot, 0], out)
        return out

    with pytest.raises(DeadlockError) as ei:
        host(never)(inps, outs, 3, config=config_for(n, cores=2))
    text = str(ei.value)
    assert len(re.findall(r"deferred TaskId \d+: task 'deferred_wait'", text)) == 3 * n
    assert "cell sbuf[0, 0] = 0" in text and "waiting for >= 7" in text
    assert "queued: task 'consumer'" in text and "deferred)" in text
    assert all(b["deferred"] and b["expected"] == 7 and b["value"] == 0
               for b in ei.value.blocked)


@pl.jit
def many_waiters(inp: INP, out: OUT, payload: PAY, signal: SIG, peer: pl.Scalar[pl.INT32],
                 n: pl.Scalar[pl.INT32]):
    with pl.manual_scope():
        for slot in pl.range(n):
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="waiter") as wait_tid:
                pld.system.defer_wait(signal, [0, 0], slot + 1, cmp=GE)
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="counter", deps=[wait_tid]):
                # each completion lets the next waiter's condition hold
                pld.system.notify(signal, pld.rank(pld.get_comm_ctx(signal)), [0, 0], 1,
                                  op=ADD)
                out = pl.store(pl.load(inp, [0, 0], [1, N]), [slot, 0], out)
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="starter"):
            pld.system.notify(signal, pld.rank(pld.get_comm_ctx(signal)), [0, 0], 1, op=ADD)
    return out


@pytest.mark.parametrize("n", [1, 2])
def test_more_than_64_waiters_are_admitted_as_slots_free(n):
    waiters = 70
    inps, outs = data(n, waiters)
    host(many_waiters)(inps, outs, waiters, config=config_for(n, cores=2))
    np.testing.assert_array_equal(outs, np.repeat(inps, waiters, axis=1))


@pytest.mark.parametrize("n", [1, 2])
def test_the_65th_deferred_task_waits_for_a_slot(n):
    waiters = 65

    @pl.jit
    def stuck(inp: INP, out: OUT, payload: PAY, signal: SIG, peer: pl.Scalar[pl.INT32],
              k: pl.Scalar[pl.INT32]):
        with pl.manual_scope():
            for slot in pl.range(k):
                with pl.at(level=pl.Level.CORE_GROUP, name_hint="waiter"):
                    pld.system.defer_wait(signal, [0, 0], slot + 1, cmp=GE)
        return out

    inps, outs = data(n, waiters)
    with pytest.raises(DeadlockError) as ei:
        host(stuck)(inps, outs, waiters, config=config_for(n, cores=2))
    text = str(ei.value)
    assert text.count("ready, no deferred slot free") == n
    assert len(ei.value.blocked) == 64 * n
    for r in range(n):
        assert f"rank {r}: 0 of 2 core(s) held by blocking waits, 64 deferred TaskId(s)" in text


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_registration_against_a_ready_counter_completes_at_once(n):
    @pl.jit
    def ready(inp: INP, out: OUT, payload: PAY, signal: SIG, peer: pl.Scalar[pl.INT32],
              k: pl.Scalar[pl.INT32]):
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="publish_self") as pub:
            pld.system.notify(signal, pld.rank(pld.get_comm_ctx(signal)), [0, 0],
                              pl.read(inp, [0, 0]), op=SET)
        with pl.manual_scope():
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="waiter", deps=[pub]) as w:
                pld.system.defer_wait(signal, [0, 0], pl.read(inp, [0, 0]), cmp=GE)
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="consumer", deps=[w]):
                out = pl.store(pl.load(inp, [0, 0], [1, N]), [0, 0], out)
        return out

    inps, outs = data(n, 1)
    host(ready)(inps, outs, 1, config=config_for(n))
    np.testing.assert_array_equal(outs, inps)


@pytest.mark.parametrize("n", [2, 3])
def test_prepared_worker_runs_several_epochs(n):
    waiters = 4
    inps, outs = data(n, waiters)
    compiled = host(deferred).compile(inps, outs, waiters, config=config_for(n, cores=2))
    with compiled.prepare(inps, outs, waiters) as worker:
        pids = children()
        for epoch in (1, 2, 3):
            inps, outs = data(n, waiters, epoch=epoch, seed=epoch)
            worker(inps, outs, waiters)
            np.testing.assert_array_equal(outs, expected(inps, waiters))
        assert children() == pids


@pytest.mark.parametrize("n", [1, 2])
def test_a_negative_runtime_expected_fails_naming_the_task(n):
    inps, outs = data(n, 1, epoch=-3)
    with pytest.raises(RankFailure) as ei:
        host(deferred)(inps, outs, 1, config=config_for(n, cores=2))
    e = ei.value
    assert e.error_code == "TC503"
    assert "in task 'deferred_wait'" in str(e) and "[0, INT32_MAX]" in str(e)
    assert e.span.line == line_of(deferred, "pld.system.defer_wait(")


@pytest.mark.parametrize("platform", ["a2a3", "a5"])
def test_saturation_at_a_chip_profiles_core_count(platform):
    """More deferred waiters than the profile's AIV cores still complete."""
    cfg = config_for(2)
    cfg = type(cfg)(platform=platform, distributed_config=cfg.distributed_config)
    waiters = cfg.resolved_cores() + 2
    inps, outs = data(2, waiters)
    host(deferred)(inps, outs, waiters, config=cfg)
    np.testing.assert_array_equal(outs, expected(inps, waiters))
