"""Turning the race check on: RunConfig.detect_races and its checks, the
refusal where notifies cannot be numbered, a reloaded build's
``detect_races=``, and a
run that checks races while it traces and dumps arguments (three sinks of
one recorder: every sink sees every op)."""
import glob
import json
import os

import numpy as np
import pytest

from conftest import config_for
from programs_races import reported_lines, ring_inputs, ring_main, ring_race_lines
from tilecomm.compiler import CompiledProgram
from tilecomm.errors import ConfigError, DataRaceError
from tilecomm.runtime import RunConfig
from tilecomm.runtime.controller.artefacts import RunArtefacts
from tilecomm.runtime.rank.argdumps import TaskDumps
from tilecomm.runtime.rank.exploring import Explorer
from tilecomm.runtime.rank.racing import RaceLog
from tilecomm.runtime.rank.recorder import (PlainSitesRecordingRankContext, Recording,
                                            RecordingRankContext)
from tilecomm.runtime.rank.tracing import Recorder

EARLY = 1                               # ring_main's notify before its data


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
def test_sinks_take_the_stream_in_one_order():
    """Exploration first (a rank takes its turn before anything records),
    then dumps, tracing, and the race check last (it runs the signal in its
    sequencer): whatever order a run lists them in."""
    sinks = [RaceLog.__new__(RaceLog), Recorder(0, 2, False, False), TaskDumps(),
             Explorer.__new__(Explorer)]
    rec = Recording(sinks, signal=None)
    assert [type(s) for s in rec.sinks] == [Explorer, TaskDumps, Recorder, RaceLog]
    # the one sink that sequences a notify's signal is the race check's
    assert rec.sequencer.__self__ is sinks[0]
    assert [h.__self__ for h in rec.before_notify] == [sinks[3], sinks[1]]
    assert rec.context_class() is PlainSitesRecordingRankContext      # exploration copies
    assert Recording(sinks[:3], None).context_class() is RecordingRankContext


@pytest.mark.parametrize("n", [2, 3])
def test_a_traced_and_dumped_run_also_checks_races(n, tmp_path):
    xs, ys, gots = ring_inputs(n)
    cfg = config_for(n, cache_dir=str(tmp_path / "cache"), detect_races=True,
                     enable_chip_swimlane=2, enable_dump_args=2)
    cp = ring_main.compile(xs, ys, gots, EARLY, config=cfg)
    with pytest.raises(DataRaceError) as ei:
        cp(xs, ys, gots, EARLY, config=cfg)
    assert reported_lines(ei.value) == ring_race_lines(n)
    # the trace saw the same ops: every rank's notify, remote store and wait
    with open(os.path.join(cp.output_dir, "dfx_outputs", "merged_swimlane.json")) as f:
        names = [e["name"] for e in json.load(f)["traceEvents"]]
    for op in ("pld.system.notify", "pld.tile.remote_store", "pld.system.wait"):
        assert names.count(op) == n, op
    # and the dumps every array argument (x, y, got, both windows) of each rank
    assert len(glob.glob(os.path.join(cp.output_dir, "dfx_outputs", "rank*", "d0", "args_dump",
                                      "after", "*.npy"))) == 5 * n
    # with detection off the same build runs, traced
    cp(xs, ys, gots, EARLY,
       config=config_for(n, cache_dir=str(tmp_path / "cache"), enable_chip_swimlane=2))


def test_a_reloaded_build_takes_detect_races(tmp_path):
    n = 2
    xs, ys, gots = ring_inputs(n)
    cp = ring_main.compile(xs, ys, gots, EARLY,
                           config=config_for(n, cache_dir=str(tmp_path / "cache")))
    cp(xs, ys, gots, EARLY)                     # kept on disk by its first call
    program = CompiledProgram.from_dir(cp.output_dir, detect_races=True)
    assert program.config.detect_races is True
    with pytest.raises(DataRaceError):
        program(xs, ys, gots, EARLY)
    CompiledProgram.from_dir(cp.output_dir)(xs, ys, gots, EARLY)


@pytest.mark.parametrize("n", [2, 3])
def test_a_prepared_worker_checks_the_calls_asked_to(n):
    """Per call, on kept windows: a checked call raises, the next unchecked
    or fixed one runs, a submitted call raises from its handle."""
    xs, ys, gots = ring_inputs(n)
    cp = ring_main.compile(xs, ys, gots, EARLY, config=config_for(n))
    checked = config_for(n, detect_races=True)
    with cp.prepare(persistent=True) as rt:
        rt(xs, ys, gots, EARLY)                              # not checked: runs
        with pytest.raises(DataRaceError) as ei:
            rt(xs, ys, gots, EARLY, config=checked)
        assert reported_lines(ei.value) == ring_race_lines(n)
        rt(xs, ys, gots, 0, config=checked)                  # the fixed order is clean
        handle = rt.submit(cp, xs, ys, gots, EARLY, config=checked)
        with pytest.raises(DataRaceError):
            handle.result()
        gots[...] = 0
        rt(xs, ys, gots, 0)
    assert (gots == np.roll(xs, 1, axis=0)).all()
