"""pld.system.notify / pld.system.wait across ranks: Set handshakes, AtomicAdd
counters with many writers, negative adds, self-notify, Eq vs Ge, and
multi-round monotonic counters."""
import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.errors import DeadlockError

from programs_prims import WORLD_SIZES, config_for, line_of

NR = pl.dynamic("NR")
ROUNDS = 3


# --------------------------------------------------------------- seed handshake
@pl.jit.incore
def handshake_step(out: pl.Out[pl.Tensor[[1, 1], pl.INT32]],
                   signal: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
                   peer: pl.Scalar[pl.INT32],
                   tag: pl.Scalar[pl.INT32]) -> pl.Tensor[[1, 1], pl.INT32]:
    pld.system.notify(signal, peer=peer, offsets=[0, 0], value=tag, op=pld.NotifyOp.Set)
    pld.system.wait(signal=signal, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
    received = pl.read(signal, [0, 0])
    pl.write(out, [0, 0], received)
    return out


@pl.jit
def handshake_chip(out: pl.Out[pl.Tensor[[1, 1], pl.INT32]],
                   signal: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
                   peer: pl.Scalar[pl.INT32], tag: pl.Scalar[pl.INT32]):
    return handshake_step(out, signal, peer, tag)


@pl.jit.host
def handshake_main(outputs: pl.Out[pl.Tensor[[NR, 1, 1], pl.INT32]]):
    # the seed's 2-rank handshake (peer 1 - r, tag 2 - r, both computed by the
    # host) generalised to a ring: peer r + 1, tag world - r (always >= 1)
    buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        handshake_chip(outputs[r], pld.window(buf, [1, 1], dtype=pl.INT32),
                       (r + 1) % pld.world_size(), pld.world_size() - r, device=r)
    return outputs


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_seed_set_handshake(n):
    outs = np.zeros((n, 1, 1), np.int32)
    handshake_main(outs, config=config_for(n))
    # rank r deposits tag n - r into rank r + 1's cell; each reads what it
    # received (at 2 ranks: the seed's [1, 2]; at 1 rank its own tag)
    expected = np.zeros_like(outs)
    for r in range(n):
        expected[(r + 1) % n, 0, 0] = n - r
    np.testing.assert_array_equal(outs, expected)


# --------------------------------------------------------------- ring Set handshake
@pl.jit.incore
def ring_set_kernel(out: pl.Out[pl.Tensor[[1, 1], pl.INT32]],
                    signal: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
                    tag: pl.Scalar[pl.INT32]) -> pl.Tensor[[1, 1], pl.INT32]:
    ctx = pld.get_comm_ctx(signal)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    pld.system.notify(signal, (me + 1) % n, [0, 0], tag, op=pld.NotifyOp.Set)
    pld.system.wait(signal, [0, 0], 1, cmp=pld.WaitCmp.Ge)
    pl.write(out, [0, 0], pl.read(signal, [0, 0]))
    return out


@pl.jit
def ring_set_chip(out: pl.Out[pl.Tensor[[1, 1], pl.INT32]],
                  signal: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
                  tag: pl.Scalar[pl.INT32]):
    return ring_set_kernel(out, signal, tag)


@pl.jit.host
def ring_set_main(outputs: pl.Out[pl.Tensor[[NR, 1, 1], pl.INT32]]):
    buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        ring_set_chip(outputs[r], pld.window(buf, [1, 1], dtype=pl.INT32), 3 * r + 1, device=r)
    return outputs


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_ring_set_handshake(n):
    outs = np.full((n, 1, 1), -1, np.int32)
    ring_set_main(outs, config=config_for(n))
    tags = 3 * np.arange(n) + 1
    # rank r receives the tag of its left neighbour (itself at 1 rank)
    np.testing.assert_array_equal(outs[:, 0, 0], np.roll(tags, 1))


# --------------------------------------------------------------- shared AtomicAdd cells
@pl.jit.incore
def shared_add_kernel(out: pl.Out[pl.Tensor[[1, 3], pl.INT32]],
                      signal: pl.InOut[pld.DistributedTensor[[1, 3], pl.INT32]]
                      ) -> pl.Tensor[[1, 3], pl.INT32]:
    ctx = pld.get_comm_ctx(signal)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    # every rank adds into the same cells of every rank (itself included)
    for p in pl.range(n):
        pld.system.notify(signal, p, [0, 0], 1, op=pld.NotifyOp.AtomicAdd)
        pld.system.notify(signal, p, [0, 1], me + 1, op=pld.NotifyOp.AtomicAdd)
    # and every rank adds into rank 0's cell [0, 2] only
    pld.system.notify(signal, 0, [0, 2], 1, op=pld.NotifyOp.AtomicAdd)
    pld.system.wait(signal, [0, 0], n, cmp=pld.WaitCmp.Ge)
    pld.system.wait(signal, [0, 1], n * (n + 1) // 2, cmp=pld.WaitCmp.Eq)
    if me == 0:
        pld.system.wait(signal, [0, 2], n, cmp=pld.WaitCmp.Ge)
    for j in pl.range(3):
        pl.write(out, [0, j], pl.read(signal, [0, j]))
    return out


@pl.jit
def shared_add_chip(out: pl.Out[pl.Tensor[[1, 3], pl.INT32]],
                    signal: pl.InOut[pld.DistributedTensor[[1, 3], pl.INT32]]):
    return shared_add_kernel(out, signal)


@pl.jit.host
def shared_add_main(outputs: pl.Out[pl.Tensor[[NR, 1, 3], pl.INT32]]):
    buf = pld.alloc_window_buffer([1, 3], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        shared_add_chip(outputs[r], pld.window(buf, [1, 3], dtype=pl.INT32), device=r)
    return outputs


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_atomic_add_many_writers_one_cell(n):
    outs = np.full((n, 1, 3), -1, np.int32)
    shared_add_main(outs, config=config_for(n))
    writers = np.arange(n)
    expected = np.zeros((n, 1, 3), np.int32)
    expected[:, 0, 0] = len(writers)                    # +1 from each writer
    expected[:, 0, 1] = np.sum(writers + 1)             # +(rank + 1) from each writer
    expected[0, 0, 2] = len(writers)                    # only rank 0's copy is targeted
    np.testing.assert_array_equal(outs, expected)


# --------------------------------------------------------------- negative AtomicAdd values
@pl.jit.incore
def negative_add_kernel(out: pl.Out[pl.Tensor[[1, 3], pl.INT32]],
                        signal: pl.InOut[pld.DistributedTensor[[1, 2], pl.INT32]]
                        ) -> pl.Tensor[[1, 3], pl.INT32]:
    ctx = pld.get_comm_ctx(signal)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    step = pl.const(-4, pl.INT32)
    for p in pl.range(n):
        pld.system.notify(signal, p, [0, 0], step * (me + 1), op=pld.NotifyOp.AtomicAdd)
        pld.system.notify(signal, p, [0, 1], 1, op=pld.NotifyOp.AtomicAdd)
    pld.system.wait(signal, [0, 0], step * (n * (n + 1) // 2), cmp=pld.WaitCmp.Eq)
    pld.system.wait(signal, [0, 1], n, cmp=pld.WaitCmp.Ge)
    pl.write(out, [0, 0], pl.read(signal, [0, 0]))
    pl.write(out, [0, 1], pl.read(signal, [0, 1]))
    # credit reset: hand the n arrivals back with one negative self-notify
    pld.system.notify(signal, me, [0, 1], 0 - n, op=pld.NotifyOp.AtomicAdd)
    pld.system.wait(signal, [0, 1], 0, cmp=pld.WaitCmp.Eq)
    pl.write(out, [0, 2], pl.read(signal, [0, 1]))
    return out


@pl.jit
def negative_add_chip(out: pl.Out[pl.Tensor[[1, 3], pl.INT32]],
                      signal: pl.InOut[pld.DistributedTensor[[1, 2], pl.INT32]]):
    return negative_add_kernel(out, signal)


@pl.jit.host
def negative_add_main(outputs: pl.Out[pl.Tensor[[NR, 1, 3], pl.INT32]]):
    buf = pld.alloc_window_buffer([1, 2], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        negative_add_chip(outputs[r], pld.window(buf, [1, 2], dtype=pl.INT32), device=r)
    return outputs


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_negative_atomic_add(n):
    outs = np.full((n, 1, 3), 99, np.int32)
    negative_add_main(outs, config=config_for(n))
    ranks = np.arange(n)
    expected = np.empty((n, 1, 3), np.int32)
    expected[:, 0, 0] = np.sum(-4 * (ranks + 1))
    expected[:, 0, 1] = n
    expected[:, 0, 2] = n - n
    np.testing.assert_array_equal(outs, expected)


# --------------------------------------------------------------- self-notify
@pl.jit.incore
def self_notify_kernel(out: pl.Out[pl.Tensor[[1, 2], pl.INT32]],
                       signal: pl.InOut[pld.DistributedTensor[[1, 2], pl.INT32]]
                       ) -> pl.Tensor[[1, 2], pl.INT32]:
    me = pld.rank(pld.get_comm_ctx(signal))
    pld.system.notify(signal, me, [0, 0], me + 7, op=pld.NotifyOp.Set)
    pld.system.wait(signal, [0, 0], me + 7, cmp=pld.WaitCmp.Eq)
    for i in pl.range(2):
        pld.system.notify(signal, peer=me, offsets=[0, 1], value=3, op=pld.NotifyOp.AtomicAdd)
    pld.system.wait(signal, [0, 1], 6, cmp=pld.WaitCmp.Eq)
    pl.write(out, [0, 0], pl.read(signal, [0, 0]))
    pl.write(out, [0, 1], pl.read(signal, [0, 1]))
    return out


@pl.jit
def self_notify_chip(out: pl.Out[pl.Tensor[[1, 2], pl.INT32]],
                     signal: pl.InOut[pld.DistributedTensor[[1, 2], pl.INT32]]):
    return self_notify_kernel(out, signal)


@pl.jit.host
def self_notify_main(outputs: pl.Out[pl.Tensor[[NR, 1, 2], pl.INT32]]):
    buf = pld.alloc_window_buffer([1, 2], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        self_notify_chip(outputs[r], pld.window(buf, [1, 2], dtype=pl.INT32), device=r)
    return outputs


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_self_notify(n):
    outs = np.zeros((n, 1, 2), np.int32)
    self_notify_main(outs, config=config_for(n))
    ranks = np.arange(n)
    # a self-notify hits the local cell only: no rank sees another rank's values
    np.testing.assert_array_equal(outs[:, 0, 0], ranks + 7)
    np.testing.assert_array_equal(outs[:, 0, 1], np.full(n, 2 * 3))


# --------------------------------------------------------------- Eq vs Ge
@pl.jit.incore
def cmp_kernel(out: pl.Out[pl.Tensor[[1, 2], pl.INT32]],
               signal: pl.InOut[pld.DistributedTensor[[1, 2], pl.INT32]],
               ge_expected: pl.Scalar[pl.INT32],
               eq_offset: pl.Scalar[pl.INT32]) -> pl.Tensor[[1, 2], pl.INT32]:
    ctx = pld.get_comm_ctx(signal)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    nxt = (me + 1) % n
    prev = (me + n - 1) % n
    pld.system.notify(signal, nxt, [0, 0], 10 + me, op=pld.NotifyOp.Set)
    pld.system.notify(signal, nxt, [0, 1], 10 + me, op=pld.NotifyOp.Set)
    pld.system.wait(signal, [0, 0], ge_expected, cmp=pld.WaitCmp.Ge)  # GE-WAIT
    pld.system.wait(signal, [0, 1], 10 + prev + eq_offset, cmp=pld.WaitCmp.Eq)  # EQ-WAIT
    pl.write(out, [0, 0], pl.read(signal, [0, 0]))
    pl.write(out, [0, 1], pl.read(signal, [0, 1]))
    return out


@pl.jit
def cmp_chip(out: pl.Out[pl.Tensor[[1, 2], pl.INT32]],
             signal: pl.InOut[pld.DistributedTensor[[1, 2], pl.INT32]],
             ge_expected: pl.Scalar[pl.INT32], eq_offset: pl.Scalar[pl.INT32]):
    return cmp_kernel(out, signal, ge_expected, eq_offset)


@pl.jit.host
def cmp_main(outputs: pl.Out[pl.Tensor[[NR, 1, 2], pl.INT32]],
             ge_expected: pl.Scalar[pl.INT32], eq_offset: pl.Scalar[pl.INT32]):
    buf = pld.alloc_window_buffer([1, 2], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        cmp_chip(outputs[r], pld.window(buf, [1, 2], dtype=pl.INT32), ge_expected, eq_offset,
                 device=r)
    return outputs


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_ge_released_by_larger_value_eq_by_exact_value(n):
    outs = np.zeros((n, 1, 2), np.int32)
    cmp_main(outs, 1, 0, config=config_for(n))
    deposited = np.roll(10 + np.arange(n), 1)       # what rank r's left neighbour wrote
    np.testing.assert_array_equal(outs[:, 0, 0], deposited)
    np.testing.assert_array_equal(outs[:, 0, 1], deposited)


@pytest.mark.parametrize("n", WORLD_SIZES)
@pytest.mark.parametrize("variant", ["eq_below_value", "ge_above_value"])
def test_unsatisfiable_wait_is_reported(n, variant):
    # Eq is not Ge: a cell holding more than `expected` never releases an Eq wait;
    # a Ge wait above the deposited value never releases either
    ge_expected, eq_offset = (1, -1) if variant == "eq_below_value" else (1000, 0)
    marker = "EQ-WAIT" if variant == "eq_below_value" else "GE-WAIT"
    outs = np.zeros((n, 1, 2), np.int32)
    with pytest.raises(DeadlockError) as ei:
        cmp_main(outs, ge_expected, eq_offset, config=config_for(n, deadlock_timeout_s=0.2))
    deposited = np.roll(10 + np.arange(n), 1)
    blocked = sorted(ei.value.blocked, key=lambda b: b["rank"])
    assert [b["rank"] for b in blocked] == list(range(n))
    for b in blocked:
        assert b["cmp"] == ("Eq" if variant == "eq_below_value" else "Ge")
        assert b["value"] == deposited[b["rank"]]
        want = deposited[b["rank"]] + eq_offset if variant == "eq_below_value" else ge_expected
        assert b["expected"] == want
        assert b["span"].line == line_of(cmp_kernel, marker)
    np.testing.assert_array_equal(outs, 0)          # a failed call leaves outputs alone


# --------------------------------------------------------------- multi-round counters
@pl.jit.incore
def rounds_kernel(x: pl.Tensor[[1, ROUNDS], pl.FP32],
                  out: pl.Out[pl.Tensor[[ROUNDS, NR], pl.FP32]],
                  counts: pl.Out[pl.Tensor[[1, NR + 1], pl.INT32]],
                  data: pl.InOut[pld.DistributedTensor[[ROUNDS, NR], pl.FP32]],
                  signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
                  shared: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
    ctx = pld.get_comm_ctx(data)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    for k in pl.range(ROUNDS):
        v = pl.load(x, [0, k], [1, 1])
        for p in pl.range(n):
            pld.tile.remote_store(v, data, p, [k, me])
        # per-source rows: one writer per cell, threshold raised every round
        for p in pl.range(n):
            if p != me:
                pld.system.notify(signal, p, [me, 0], 1, op=pld.NotifyOp.AtomicAdd)
        for s in pl.range(n):
            if s != me:
                pld.system.wait(signal, [s, 0], k + 1, cmp=pld.WaitCmp.Ge)
        # one shared cell: n writers per round, threshold n * (round + 1)
        for p in pl.range(n):
            pld.system.notify(shared, p, [0, 0], 1, op=pld.NotifyOp.AtomicAdd)
        pld.system.wait(shared, [0, 0], n * (k + 1), cmp=pld.WaitCmp.Ge)
        row = pl.load(data, [k, 0], [1, NR])
        pl.store(row, [k, 0], out)
    for s in pl.range(n):
        pl.write(counts, [0, s], pl.read(signal, [s, 0]))
    pl.write(counts, [0, n], pl.read(shared, [0, 0]))
    return out


@pl.jit
def rounds_chip(x: pl.Tensor[[1, ROUNDS], pl.FP32],
                out: pl.Out[pl.Tensor[[ROUNDS, NR], pl.FP32]],
                counts: pl.Out[pl.Tensor[[1, NR + 1], pl.INT32]],
                data: pl.InOut[pld.DistributedTensor[[ROUNDS, NR], pl.FP32]],
                signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
                shared: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
    rounds_kernel(x, out, counts, data, signal, shared)
    return out


@pl.jit.host
def rounds_main(xs: pl.Tensor[[NR, 1, ROUNDS], pl.FP32],
                outs: pl.Out[pl.Tensor[[NR, ROUNDS, NR], pl.FP32]],
                counts: pl.Out[pl.Tensor[[NR, 1, NR + 1], pl.INT32]]):
    data_buf = pld.alloc_window_buffer([ROUNDS, NR], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    shared_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        rounds_chip(xs[r], outs[r], counts[r],
                    pld.window(data_buf, [ROUNDS, NR], dtype=pl.FP32),
                    pld.window(sig_buf, [NR, 1], dtype=pl.INT32),
                    pld.window(shared_buf, [1, 1], dtype=pl.INT32), device=r)
    return outs


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_multi_round_monotonic_counters(n):
    rng = np.random.default_rng(n)
    xs = rng.integers(1, 100, size=(n, 1, ROUNDS)).astype(np.float32)
    outs = np.zeros((n, ROUNDS, n), np.float32)
    counts = np.full((n, 1, n + 1), -1, np.int32)
    rounds_main(xs, outs, counts, config=config_for(n))
    # round k of every rank sees every source's round-k value: out[r][k, s] = x[s][k]
    expected = np.broadcast_to(xs[:, 0, :].T, (n, ROUNDS, n))
    np.testing.assert_array_equal(outs, expected)
    # per-source counters were never reset: ROUNDS from every other rank, 0 from self
    per_src = np.where(np.eye(n, dtype=bool), 0, ROUNDS)
    np.testing.assert_array_equal(counts[:, 0, :n], per_src)
    np.testing.assert_array_equal(counts[:, 0, n], np.full(n, n * ROUNDS))
