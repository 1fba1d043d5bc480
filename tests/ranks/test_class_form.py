"""Both authoring forms: the class form (@pl.program + @pl.function, compiled
with tilecomm.ir.compile) and the jit form compiled ahead with main.compile;
compiled programs are cached and not re-parsed on every call."""
import numpy as np
import pytest

import tilecomm
import tilecomm.frontend.builder as parser_mod
import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig

from programs_prims import WORLD_SIZES, config_for

NR = pl.dynamic("NR")
SIZE = 8


@pl.program
class SumProgram:
    """Every rank ends with the elementwise sum over ranks, plus its own rank."""

    @pl.function(type=pl.FunctionType.InCore)
    def kernel(self, x: pl.Tensor[[1, SIZE], pl.FP32], y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
               data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
               sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]
               ) -> pl.Tensor[[1, SIZE], pl.FP32]:
        ctx = pld.get_comm_ctx(data)
        me = pld.rank(ctx)
        n = pld.nranks(ctx)
        local = pl.load(x, [0, 0], [1, SIZE])
        pl.store(local, [0, 0], data)
        for p in pl.range(n):
            if p != me:
                pld.system.notify(sig, p, [me, 0], 1, op=pld.NotifyOp.AtomicAdd)
        for s in pl.range(n):
            if s != me:
                pld.system.wait(sig, [s, 0], 1, cmp=pld.WaitCmp.Ge)
        acc = pl.add(local, pl.cast(me, pl.FP32))
        for p in pl.range(n):
            if p != me:
                acc = pl.add(acc, pld.tile.remote_load(data, p, [0, 0], [1, SIZE]))
        y = pl.store(acc, [0, 0], y)
        return y

    @pl.function(type=pl.FunctionType.Orchestration)
    def chip(self, x: pl.Tensor[[1, SIZE], pl.FP32], y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
             data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
             sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]
             ) -> pl.Tensor[[1, SIZE], pl.FP32]:
        return self.kernel(x, y, data, sig)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def main(self, xs: pl.Tensor[[NR, 1, SIZE], pl.FP32],
             ys: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]]):
        data_buf = pld.alloc_window_buffer(SIZE * pl.FP32.get_byte())
        sig_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            # a dispatch's result may be bound to a name (it is the caller's ys[r])
            out_r = self.chip(xs[r], ys[r], pld.window(data_buf, [1, SIZE], dtype=pl.FP32),
                              pld.window(sig_buf, [NR, 1], dtype=pl.INT32), device=r)
        return ys


def sum_reference(xs):
    n = xs.shape[0]
    return np.broadcast_to(xs.sum(axis=0), xs.shape) + np.arange(n, dtype=np.float32)[:, None,
                                                                                        None]


def dist(n):
    return DistributedConfig(device_ids=list(range(n)))


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_class_form_compiled_and_called(n):
    compiled = tilecomm.ir.compile(SumProgram, distributed_config=dist(n))
    rng = np.random.default_rng(300 + n)
    for _ in range(2):                      # one compiled program, several calls
        xs = rng.integers(-20, 20, size=(n, 1, SIZE)).astype(np.float32)
        ys = np.zeros_like(xs)
        compiled(xs, ys)
        np.testing.assert_array_equal(ys, sum_reference(xs))


def make_ring_program(nr: int):
    """Factory: closure constants (nr, rounds) are folded into the class's methods."""
    rounds = 2 * (nr - 1) + 1

    @pl.program
    class Ring:
        @pl.function(type=pl.FunctionType.InCore)
        def kernel(self, x: pl.Tensor[[1, SIZE], pl.FP32],
                   y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
                   win: pl.InOut[pld.DistributedTensor[[rounds, SIZE], pl.FP32]],
                   sig: pl.InOut[pld.DistributedTensor[[rounds, 1], pl.INT32]]):
            ctx = pld.get_comm_ctx(win)
            me = pld.rank(ctx)
            nxt = (me + 1) % nr
            cur = pl.load(x, [0, 0], [1, SIZE])
            # pass a token around the ring `rounds` times, one window row per round
            for k in pl.range(rounds):
                pld.tile.remote_store(cur, win, nxt, [k, 0])
                pld.system.notify(sig, nxt, [k, 0], 1, op=pld.NotifyOp.Set)
                pld.system.wait(sig, [k, 0], 1, cmp=pld.WaitCmp.Eq)
                cur = pl.add(pl.load(win, [k, 0], [1, SIZE]), 1.0)
            y = pl.store(cur, [0, 0], y)
            return y

        @pl.function(type=pl.FunctionType.Orchestration)
        def chip(self, x: pl.Tensor[[1, SIZE], pl.FP32], y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
                 win: pl.InOut[pld.DistributedTensor[[rounds, SIZE], pl.FP32]],
                 sig: pl.InOut[pld.DistributedTensor[[rounds, 1], pl.INT32]]):
            return self.kernel(x, y, win, sig)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def main(self, xs: pl.Tensor[[nr, 1, SIZE], pl.FP32],
                 ys: pl.Out[pl.Tensor[[nr, 1, SIZE], pl.FP32]]):
            win_buf = pld.alloc_window_buffer([rounds, SIZE], dtype=pl.FP32)
            sig_buf = pld.alloc_window_buffer([rounds, 1], dtype=pl.INT32)
            for r in pl.range(pld.world_size()):
                self.chip(xs[r], ys[r], pld.window(win_buf, [rounds, SIZE], dtype=pl.FP32),
                          pld.window(sig_buf, [rounds, 1], dtype=pl.INT32), device=r)
            return ys

    return Ring, rounds


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_class_form_factory_with_closure_constants(n):
    ring, rounds = make_ring_program(n)
    compiled = tilecomm.ir.compile(ring, distributed_config=dist(n))
    rng = np.random.default_rng(310 + n)
    xs = rng.standard_normal((n, 1, SIZE)).astype(np.float32)
    ys = np.zeros_like(xs)
    compiled(xs, ys)
    expected = np.roll(xs, rounds, axis=0)          # the token moved `rounds` hops ...
    for _ in range(rounds):
        expected = expected + np.float32(1.0)      # ... gaining 1 per hop
    np.testing.assert_array_equal(ys, expected)


# --------------------------------------------------------------- jit form, ahead of time
@pl.jit.incore
def scale_kernel(x: pl.Tensor[[1, SIZE], pl.FP32], y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
                 data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
                 sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
    ctx = pld.get_comm_ctx(data)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    nxt = (me + 1) % n
    pld.tensor.put(data, nxt, x)
    pld.system.notify(sig, nxt, [0, 0], 1, op=pld.NotifyOp.Set)
    pld.system.wait(sig, [0, 0], 1, cmp=pld.WaitCmp.Eq)
    y = pl.store(pl.mul(pl.load(data, [0, 0], [1, SIZE]), 3.0), [0, 0], y)
    return y


@pl.jit
def scale_chip(x: pl.Tensor[[1, SIZE], pl.FP32], y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
               data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
               sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
    return scale_kernel(x, y, data, sig)


@pl.jit.host
def scale_main(xs: pl.Tensor[[NR, 1, SIZE], pl.FP32],
               ys: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]]):
    data_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        scale_chip(xs[r], ys[r], pld.window(data_buf, [1, SIZE], dtype=pl.FP32),
                   pld.window(sig_buf, [1, 1], dtype=pl.INT32), device=r)
    return ys


def scale_reference(xs):
    return np.roll(xs, 1, axis=0) * np.float32(3.0)


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_jit_form_compiled_ahead(n):
    rng = np.random.default_rng(320 + n)
    xs = rng.standard_normal((n, 1, SIZE)).astype(np.float32)
    ys = np.zeros_like(xs)
    compiled = scale_main.compile(xs, ys, config=config_for(n))
    np.testing.assert_array_equal(ys, 0)            # compiling runs nothing
    result = compiled(xs, ys)
    np.testing.assert_array_equal(ys, scale_reference(xs))
    assert result is ys                              # the returned tensor is the caller's


# --------------------------------------------------------------- compilation cache
@pytest.fixture
def build_counter(monkeypatch):
    calls = []
    real = parser_mod.ProgramBuilder.build

    def counting_build(self):
        calls.append(self.entry)
        return real(self)

    monkeypatch.setattr(parser_mod.ProgramBuilder, "build", counting_build)
    return calls


def test_class_form_compiled_program_parses_once(build_counter):
    n = 2
    compiled = tilecomm.ir.compile(SumProgram, distributed_config=dist(n))
    xs = np.arange(n * SIZE, dtype=np.float32).reshape(n, 1, SIZE)
    ys = np.zeros_like(xs)
    compiled(xs, ys)
    after_first = len(build_counter)
    assert after_first >= 1
    for k in range(2):
        xs2 = xs + k + 1
        ys2 = np.zeros_like(xs2)
        compiled(xs2, ys2)
        np.testing.assert_array_equal(ys2, sum_reference(xs2))
    assert len(build_counter) == after_first


def test_jit_form_parses_once_per_config(build_counter, transport):
    # the transport is part of the config: each parametrisation starts uncached

    xs = np.arange(2 * SIZE, dtype=np.float32).reshape(2, 1, SIZE)
    ys = np.zeros_like(xs)
    scale_main(xs, ys, config=config_for(2, transport=transport))
    after_first = len(build_counter)
    assert after_first >= 1
    # an equal (not identical) config, a second call and an explicit compile: cached
    scale_main(xs + 1, ys, config=config_for(2, transport=transport))
    np.testing.assert_array_equal(ys, scale_reference(xs + 1))
    compiled = scale_main.compile(xs, ys, config=config_for(2, transport=transport))
    compiled(xs, ys)
    np.testing.assert_array_equal(ys, scale_reference(xs))
    assert len(build_counter) == after_first
    # another rank count is another program
    xs3 = np.arange(3 * SIZE, dtype=np.float32).reshape(3, 1, SIZE)
    ys3 = np.zeros_like(xs3)
    scale_main(xs3, ys3, config=config_for(3, transport=transport))
    np.testing.assert_array_equal(ys3, scale_reference(xs3))
    grown = len(build_counter)
    assert grown > after_first
    scale_main(xs3, ys3, config=config_for(3, transport=transport))
    assert len(build_counter) == grown


# --------------------------------------------------------------- result written back by subscript
@pl.program
class AssignBackProgram:
    @pl.function(type=pl.FunctionType.InCore)
    def kernel(self, x: pl.Tensor[[1, SIZE], pl.FP32], y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]]
               ) -> pl.Tensor[[1, SIZE], pl.FP32]:
        y = pl.store(pl.mul(pl.load(x, [0, 0], [1, SIZE]), 2.0), [0, 0], y)
        return y

    @pl.function(type=pl.FunctionType.Orchestration)
    def chip(self, x: pl.Tensor[[1, SIZE], pl.FP32], y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]]
             ) -> pl.Tensor[[1, SIZE], pl.FP32]:
        return self.kernel(x, y)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def main(self, xs: pl.Tensor[[NR, 1, SIZE], pl.FP32],
             ys: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]]):
        for r in pl.range(pld.world_size()):
            ys[r] = self.chip(xs[r], ys[r], device=r)
        return ys


def test_dispatch_result_assigned_back_to_its_view():
    # `ys[r] = self.chip(..., ys[r], ...)` either works (the result is the caller's
    # view, already written in place) or is rejected before any rank starts -- it
    # must not fail inside the host runtime
    from tilecomm.errors import UserError
    n = 2
    compiled = tilecomm.ir.compile(AssignBackProgram, distributed_config=dist(n))
    xs = np.arange(n * SIZE, dtype=np.float32).reshape(n, 1, SIZE)
    ys = np.zeros_like(xs)
    try:
        compiled(xs, ys)
    except UserError:
        np.testing.assert_array_equal(ys, 0)
        return
    np.testing.assert_array_equal(ys, xs * np.float32(2.0))
