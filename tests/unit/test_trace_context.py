"""The recording rank context against the plain one: the plain one carries
no tracing code (tracing off costs nothing), the recording one takes exactly
the arguments of each op it wraps, and it records what it is asked to."""
import inspect

import pytest

from tilecomm.runtime.rank.context import RankContext
from tilecomm.runtime.rank.scheduler import Agent
from tilecomm.runtime.rank.tracing import (CORE_TID, MAIN_TID, WATCHER_TID, Recorder,
                                      TracingRankContext)

RECORDED = ["notify", "wait", "defer_wait", "wait_cell", "task_scope", "remote_load",
            "remote_store", "put", "get", "allreduce", "barrier", "broadcast", "allgather",
            "reduce_scatter", "all_to_all", "all_to_all_v"]


def test_every_recorded_op_is_overridden():
    for name in RECORDED:
        assert getattr(TracingRankContext, name) is not getattr(RankContext, name), name


@pytest.mark.parametrize("name", RECORDED)
def test_the_plain_context_has_no_tracing_code(name):
    code = inspect.unwrap(getattr(RankContext, name)).__code__
    assert "_trace" not in code.co_names and "now" not in code.co_names


@pytest.mark.parametrize("name", ["notify", "wait", "defer_wait", "wait_cell", "task_scope"])
def test_recording_ops_take_the_plain_ops_arguments(name):
    assert inspect.signature(getattr(TracingRankContext, name)) == \
        inspect.signature(getattr(RankContext, name))


def test_recorder_tracks_name_each_thread_once():
    rec = Recorder(0, 4, True, True)

    class Ctx:
        agent = None
    ctx = Ctx()
    assert rec.tid(ctx) == MAIN_TID
    ctx.agent = Agent(2, "core")
    assert rec.tid(ctx) == CORE_TID + 2
    ctx.agent = Agent(0, "watcher")
    assert rec.tid(ctx) == WATCHER_TID
    assert rec.threads == {MAIN_TID: "dispatch", CORE_TID + 2: "core 2",
                           WATCHER_TID: "watcher 0"}


@pytest.mark.parametrize("lane,want", [(0, (False, False, False, False)),
                                       (1, (True, False, False, False)),
                                       (2, (True, True, False, False)),
                                       (3, (True, True, True, False)),
                                       (4, (True, True, True, True))])
def test_swimlane_levels(lane, want):
    rec = Recorder(0, lane, False, False)
    assert (rec.tasks, rec.comm, rec.deps, rec.orchestrator) == want
