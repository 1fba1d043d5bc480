"""Turning the race check on: RunConfig.detect_races and its checks, the
refusal where notifies cannot be numbered, a reloaded build's
``detect_races=``, and a
run that checks races while it traces and dumps arguments (one recording
class composed of the three: every recorder sees every op)."""
import glob
import json
import os

import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from conftest import config_for
from programs_prims import line_of
from tilecomm.compiler import CompiledProgram
from tilecomm.errors import ConfigError, DataRaceError
from tilecomm.runtime import RunConfig
from tilecomm.runtime.controller.artefacts import RunArtefacts
from tilecomm.runtime.rank.argdumps import DumpingRankContext
from tilecomm.runtime.rank.artefacts import recording_class
from tilecomm.runtime.rank.context import RankContext
from tilecomm.runtime.rank.racing import RacingRankContext
from tilecomm.runtime.rank.tracing import TracingRankContext

NR = pl.dynamic("NR")
S = 8
W = pld.DistributedTensor[[1, S], pl.FP32]
SIG = pld.DistributedTensor[[1, 1], pl.INT32]


@pl.jit.incore
def early_notify(x: pl.Tensor[[1, S], pl.FP32], y: pl.Out[pl.Tensor[[1, S], pl.FP32]],
                 win: pl.InOut[W], sig: pl.InOut[SIG]) -> pl.Tensor[[1, S], pl.FP32]:
    ctx = pld.get_comm_ctx(win)
    nxt = (pld.rank(ctx) + 1) % pld.nranks(ctx)
    pld.system.notify(sig, nxt, [0, 0], 1, op=pld.NotifyOp.Set)
    pld.tile.remote_store(pl.load(x, [0, 0], [1, S]), win, nxt, [0, 0])  # store
    pld.system.wait(sig, [0, 0], 1, cmp=pld.WaitCmp.Ge)
    y = pl.store(pl.load(win, [0, 0], [1, S]), [0, 0], y)  # load
    return y


@pl.jit
def early_chip(x: pl.Tensor[[1, S], pl.FP32], y: pl.Out[pl.Tensor[[1, S], pl.FP32]],
               win: pl.InOut[W], sig: pl.InOut[SIG]):
    return early_notify(x, y, win, sig)


@pl.jit.host
def early_main(xs: pl.Tensor[[NR, 1, S], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, S], pl.FP32]]):
    wb = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
    sb = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        early_chip(xs[r], ys[r], pld.window(wb, [1, S], dtype=pl.FP32),
                   pld.window(sb, [1, 1], dtype=pl.INT32), device=r)
    return ys


def racing_lines(err) -> set:
    return {(a.rank, int(a.line.rsplit(":", 1)[1])) for r in err.races
            for a in (r.first, r.second)}


def inputs(n):
    xs = np.arange(n * S, dtype=np.float32).reshape(n, 1, S) + 1
    return xs, np.zeros_like(xs)


# ------------------------------------------------------------------ the switch
def test_detect_races_must_be_a_bool_or_none():
    with pytest.raises(ConfigError) as ei:
        RunConfig(detect_races="yes")
    assert ei.value.code == "TC402" and ei.value.span.file == __file__


def test_the_environment_variable_is_0_or_1_and_an_explicit_setting_wins(monkeypatch):
    monkeypatch.setenv("TILECOMM_DETECT_RACES", "1")
    assert RunConfig().races_enabled and not RunConfig(detect_races=False).races_enabled
    monkeypatch.setenv("TILECOMM_DETECT_RACES", "0")
    assert not RunConfig().races_enabled and RunConfig(detect_races=True).races_enabled
    monkeypatch.setenv("TILECOMM_DETECT_RACES", "yes")
    with pytest.raises(ConfigError, match="TILECOMM_DETECT_RACES must be 0 or 1"):
        RunConfig().races_enabled


def test_a_control_block_without_a_sequencer_refuses_the_check_before_the_run():
    """(Under MPI across nodes the control block is reached over RMA:
    tests/mpi/test_mpi_races.py runs it.)"""
    class Remote:
        sequences = False
    with pytest.raises(ConfigError, match="every rank on one machine") as ei:
        RunArtefacts.begin(None, RunConfig(detect_races=True), Remote())
    assert ei.value.code == "TC402"
    assert RunArtefacts.begin(None, RunConfig(), Remote()) is None


# ------------------------------------------------------------------ composition
def test_recording_classes_compose_in_one_order():
    assert recording_class(False, False, True) is RacingRankContext
    both = recording_class(True, True, True)
    assert both.__mro__[1:5] == (DumpingRankContext, TracingRankContext, RacingRankContext,
                                 RankContext)
    assert recording_class(True, True, True) is both          # built once


@pytest.mark.parametrize("n", [2, 3])
def test_a_traced_and_dumped_run_also_checks_races(n, tmp_path):
    xs, ys = inputs(n)
    cfg = config_for(n, cache_dir=str(tmp_path / "cache"), detect_races=True,
                     enable_chip_swimlane=2, enable_dump_args=2)
    cp = early_main.compile(xs, ys, config=cfg)
    with pytest.raises(DataRaceError) as ei:
        cp(xs, ys, config=cfg)
    want = {(r, line_of(early_notify, "store")) for r in range(n)} | \
        {(r, line_of(early_notify, "load")) for r in range(n)}
    assert racing_lines(ei.value) == want
    # the trace saw the same ops: every rank's notify, remote store and wait
    with open(os.path.join(cp.output_dir, "dfx_outputs", "merged_swimlane.json")) as f:
        names = [e["name"] for e in json.load(f)["traceEvents"]]
    for op in ("pld.system.notify", "pld.remote_store", "pld.system.wait"):
        assert names.count(op) == n, op
    assert len(glob.glob(os.path.join(cp.output_dir, "dfx_outputs", "rank*", "d0", "args_dump",
                                      "after", "*.npy"))) == 4 * n
    # and with detection off the same build runs clean, traced
    cp(xs, ys, config=config_for(n, cache_dir=str(tmp_path / "cache"), enable_chip_swimlane=2))


def test_a_reloaded_build_takes_detect_races(tmp_path):
    n = 2
    xs, ys = inputs(n)
    cp = early_main.compile(xs, ys, config=config_for(n, cache_dir=str(tmp_path / "cache")))
    cp(xs, ys)                                  # kept on disk by its first call
    program = CompiledProgram.from_dir(cp.output_dir, detect_races=True)
    assert program.config.detect_races is True
    with pytest.raises(DataRaceError):
        program(xs, ys)
    CompiledProgram.from_dir(cp.output_dir)(xs, ys)
