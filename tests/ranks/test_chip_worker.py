"""Upstream's runtime names: ChipWorker (run / register / ``with``),
benchmark, RunConfig.compile_kwargs, and the compiled-program classes
``tilecomm.ir`` offers."""
import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm import ir
from tilecomm.errors import ConfigError, RuntimeFault
from tilecomm.ir import CompiledProgram, DistributedCompiledProgram, DistributedConfig
from tilecomm.runtime import BenchmarkStats, ChipWorker, RunConfig, benchmark

from programs_prims import WORLD_SIZES, config_for

M = 8
NR = pl.dynamic("NR")


@pl.program
class Doubler:
    """A single-chip (L2) program: y = 2 x."""

    @pl.function(type=pl.FunctionType.InCore)
    def scale(self, x: pl.Tensor[[M, M], pl.FP32], y: pl.Out[pl.Tensor[[M, M], pl.FP32]]
              ) -> pl.Tensor[[M, M], pl.FP32]:
        return pl.store(pl.mul(pl.load(x, [0, 0], [M, M]), 2.0), [0, 0], y)

    @pl.function(type=pl.FunctionType.Orchestration)
    def chip_orch(self, x: pl.Tensor[[M, M], pl.FP32], y: pl.Out[pl.Tensor[[M, M], pl.FP32]]
                  ) -> pl.Tensor[[M, M], pl.FP32]:
        return self.scale(x, y)


@pl.jit.incore
def ring_kernel(x: pl.Tensor[[1, M], pl.FP32], y: pl.Out[pl.Tensor[[1, M], pl.FP32]],
                win: pl.InOut[pld.DistributedTensor[[1, M], pl.FP32]],
                sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
    ctx = pld.get_comm_ctx(win)
    nxt = (pld.rank(ctx) + 1) % pld.nranks(ctx)
    pld.tensor.put(win, nxt, x)
    pld.system.notify(sig, nxt, [0, 0], 1, op=pld.NotifyOp.Set)
    pld.system.wait(sig, [0, 0], 1, cmp=pld.WaitCmp.Eq)
    return pl.store(pl.load(win, [0, 0], [1, M]), [0, 0], y)


@pl.jit
def ring_chip(x: pl.Tensor[[1, M], pl.FP32], y: pl.Out[pl.Tensor[[1, M], pl.FP32]],
              win: pl.InOut[pld.DistributedTensor[[1, M], pl.FP32]],
              sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]):
    return ring_kernel(x, y, win, sig)


@pl.jit.host
def ring_main(xs: pl.Tensor[[NR, 1, M], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, M], pl.FP32]]):
    wbuf = pld.alloc_window_buffer([1, M], dtype=pl.FP32)
    sbuf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        ring_chip(xs[r], ys[r], pld.window(wbuf, [1, M], dtype=pl.FP32),
                  pld.window(sbuf, [1, 1], dtype=pl.INT32), device=r)
    return ys


def _x(seed=0):
    return np.random.default_rng(seed).standard_normal((M, M)).astype(np.float32)


def test_ir_offers_upstreams_program_classes_and_config():
    compiled = ir.compile(Doubler)
    assert isinstance(compiled, CompiledProgram)
    assert isinstance(compiled, DistributedCompiledProgram)
    assert DistributedConfig(device_ids=[0, 1]).world_size == 2
    assert {"CompiledProgram", "DistributedCompiledProgram", "DistributedConfig"} <= set(dir(ir))


def test_compile_kwargs_compile_for_the_config(transport):
    cfg = config_for(3, detect_races=True)
    compiled = ir.compile(ring_main, **cfg.compile_kwargs())
    assert compiled.world == 3 and compiled.config == cfg and compiled.config.races_enabled
    xs = np.arange(3 * M, dtype=np.float32).reshape(3, 1, M)
    ys = np.zeros_like(xs)
    compiled(xs, ys)
    np.testing.assert_array_equal(ys, np.roll(xs, 1, axis=0))
    assert "distributed_config" not in RunConfig().compile_kwargs()
    assert RunConfig(platform="a5").compile_kwargs()["platform"] == "a5"


class CountingWorker(ChipWorker):
    """Counts the calls that reach it."""

    def __init__(self, *a, **kw):
        self.calls = 0
        super().__init__(*a, **kw)

    def run(self, compiled, *args, config=None):
        self.calls += 1
        return super().run(compiled, *args, config=config)


def test_chip_worker_runs_registers_and_serves_a_with_block():
    compiled = ir.compile(Doubler)
    x = _x(1)
    with CountingWorker(config=RunConfig()) as w:
        assert ChipWorker.current() is w and w.initialized
        y = np.zeros_like(x)
        assert w.run(compiled, x, y) is y
        np.testing.assert_array_equal(y, 2 * x)
        y2 = compiled(x)                                     # found through the with block
        np.testing.assert_array_equal(y2, 2 * x)
        assert w.calls == 2
        with w.register(compiled) as h:
            np.testing.assert_array_equal(h(_x(2)), 2 * _x(2))
            assert h.cid == 0 and not h.closed
        assert h.closed
        with pytest.raises(RuntimeFault) as e:
            h(x)
        assert e.value.code == "TC413"
        # one set of ranks served every call of the program
        assert len(w._workers) == 1
        ranks = next(iter(w._workers.values()))
    assert ChipWorker.current() is None and w.closed and ranks.closed
    with pytest.raises(RuntimeFault) as e:
        w.run(compiled, x)
    assert e.value.code == "TC413"
    calls = w.calls
    np.testing.assert_array_equal(compiled(x), 2 * x)        # one-shot again
    assert w.calls == calls


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_chip_worker_runs_a_program_of_several_ranks(n, transport):
    compiled = ring_main.compile(config=config_for(n))
    w = ChipWorker(config=config_for(n))
    try:
        for k in range(3):
            xs = np.random.default_rng(k).standard_normal((n, 1, M)).astype(np.float32)
            ys = np.zeros_like(xs)
            w.run(compiled, xs, ys)
            np.testing.assert_array_equal(ys, np.roll(xs, 1, axis=0))
    finally:
        w.close()


def test_chip_worker_refuses_what_it_cannot_serve():
    compiled = ir.compile(Doubler)
    with pytest.raises(ConfigError) as e:
        ChipWorker(level=3)
    assert e.value.code == "TC427"
    with ChipWorker(config=RunConfig(platform="a2a3")) as w:
        with pytest.raises(ConfigError, match="platform='cpu'") as e:
            w.run(compiled, _x())
        assert e.value.code == "TC427"
        with pytest.raises(ConfigError) as e:
            with ChipWorker(config=RunConfig(platform="a2a3")):
                pass
        assert e.value.code == "TC427"
        # a program of another platform than the active worker's runs one-shot
        np.testing.assert_array_equal(compiled(_x(3)), 2 * _x(3))


@pytest.mark.parametrize("n", [1, 3])
def test_benchmark_times_each_round_and_computes(n, transport):
    compiled = ring_main.compile(config=config_for(n))
    xs = np.arange(n * M, dtype=np.float32).reshape(n, 1, M)
    ys = np.zeros_like(xs)
    stats = benchmark(compiled, [xs, ys], rounds=4, warmup=1)
    assert isinstance(stats, BenchmarkStats) and stats.rounds == 4 and stats.warmup == 1
    assert len(stats.device_wall_us) == 4 and stats.samples == stats.device_wall_us
    assert all(v > 0 for v in stats.device_wall_us) and not stats.all_zero_device
    assert stats.host_wall_us == stats.device_wall_us      # one clock: this machine's
    assert stats.device_us_min <= stats.device_wall_us_median <= stats.device_us_max
    assert stats.per_round("host") == stats.host_wall_us
    np.testing.assert_array_equal(ys, np.roll(xs, 1, axis=0))


def test_benchmark_refuses_what_it_cannot_measure():
    compiled = ir.compile(Doubler)
    x = _x()
    for kw in ({"rounds": 0}, {"warmup": -1}, {"platform": "a2a3"},
               {"config": RunConfig(), "platform": "cpu"}):
        with pytest.raises(ConfigError) as e:
            benchmark(compiled, [x], **kw)
        assert e.value.code == "TC427", kw
    stats = benchmark(compiled, [x], rounds=1, warmup=0)
    with pytest.raises(ConfigError) as e:
        stats.per_round("effective")
    assert e.value.code == "TC427"
