"""The recording rank context against the plain one: the plain one carries
no recording code (checkers off cost nothing), the recording one takes
exactly the arguments of each op it wraps, and the tracing sink records what
it is asked to.

Which ops are recorded is read from the op registry, not kept here: every
rank-side implementation of an op that talks to other ranks (a remote read or
write, a signal, a wait) must be overridden by ``RecordingRankContext``, so a
new communication op without recording fails these tests
(``test_recorder.py`` holds every memory access to the same)."""
import inspect

import pytest

import tilecomm.ops  # noqa: F401  (declares every record)
from tilecomm.ir.effects import Effect
from tilecomm.ir.kinds import HOST
from tilecomm.ops.registry import records
from tilecomm.runtime.rank.context import RankContext
from tilecomm.runtime.rank.scheduler import Agent
from tilecomm.runtime.rank.recorder import RecordingRankContext
from tilecomm.runtime.rank.tracing import CORE_TID, MAIN_TID, WATCHER_TID, Recorder

# what the trace shows: every exchange with another rank
COMMUNICATION = {Effect.REMOTE_READ, Effect.REMOTE_WRITE, Effect.SIGNAL, Effect.WAIT}


def _recorded_ops() -> dict:
    """RankContext method name -> the records it implements, for every op a
    rank runs (any kind but HOST: the HOST orchestrator is not traced per op)
    whose effects reach another rank.  The lowering calls an implementation
    by its name on the rank's context, so the name is the method a traced run
    dispatches to."""
    out: dict = {}
    for rec in records():
        if not rec.effects & COMMUNICATION:
            continue
        for kind, impl in rec.impls.items():
            if kind != HOST:
                out.setdefault(impl.__name__, set()).add(rec.name)
    return out


RECORDED_OPS = _recorded_ops()
# not ops: the scheduler's hooks the trace needs (task slices come from the
# task scope; a deferred condition's release from wait_cell)
RECORDED_HOOKS = ["task_scope", "wait_cell"]
RECORDED = sorted(RECORDED_OPS) + RECORDED_HOOKS


def test_the_registry_names_the_communication_ops():
    # the derivation itself must find the ops the reference documents as
    # traced (a registry that lost its effects would otherwise pass vacuously)
    assert {"notify", "wait", "defer_wait", "remote_load", "remote_store", "put", "get",
            "allreduce", "barrier"} <= set(RECORDED_OPS)


@pytest.mark.parametrize("name", sorted(RECORDED_OPS))
def test_the_rank_context_runs_the_registered_implementation(name):
    impls = {impl for rec in records() for kind, impl in rec.impls.items()
             if kind != HOST and impl.__name__ == name}
    assert impls == {getattr(RankContext, name)}, (name, RECORDED_OPS[name])


@pytest.mark.parametrize("name", RECORDED)
def test_every_recorded_op_is_overridden(name):
    assert getattr(RecordingRankContext, name) is not getattr(RankContext, name), \
        f"{name} ({', '.join(sorted(RECORDED_OPS.get(name, ())))}) is not recorded"


@pytest.mark.parametrize("name", RECORDED)
def test_the_plain_context_has_no_tracing_code(name):
    code = inspect.unwrap(getattr(RankContext, name)).__code__
    assert "_rec" not in code.co_names and "now" not in code.co_names


@pytest.mark.parametrize("name", RECORDED)
def test_recording_ops_take_the_plain_ops_arguments(name):
    """An override either declares exactly the plain op's parameters or
    forwards whatever it is given (a wrapper made from an op record)."""
    got = inspect.signature(getattr(RecordingRankContext, name), follow_wrapped=False)
    kinds = [p.kind for p in got.parameters.values()]
    forwards = kinds == [inspect.Parameter.POSITIONAL_OR_KEYWORD,
                         inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD]
    assert forwards or got == inspect.signature(getattr(RankContext, name)), got


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
