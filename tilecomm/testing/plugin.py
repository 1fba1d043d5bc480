"""pytest plugin for testing tile programs: loaded in every pytest session of
an environment where tilecomm is installed (entry point ``pytest11``), it
gives

* the marker ``@pytest.mark.tilecomm(world_sizes=[1, 2, 4], transports="all",
  leaks=True)``: the test runs once per transport and world size (ids
  ``test_x[shm-2]``), and takes what it needs of its case as fixtures --
  ``tilecomm_world`` (the world size), ``tilecomm_transport`` (its name) and
  ``tilecomm_config`` (a ``RunConfig`` of ranks 0..world_size-1 on that
  transport).  While the test runs, ``TILECOMM_TRANSPORT`` names its
  transport too, so configs the test builds itself and scripts it starts
  use it alike.  ``leaks=True`` (the default) runs the leak check around
  every case.  Bad arguments are a usage error at collection naming the
  test's file and line; "all" and the transport names are those of
  ``cases.py`` (the ``mpi`` cases run in an MPI job of their size --
  ``mpiexec -n N python -m pytest`` -- which then initialises MPI before
  its first test, so the descriptors MPI keeps are no leak);
* the fixture ``tilecomm_no_leaks``: the test errors at teardown, naming
  what it left behind, if it leaves a child process, a thread, a tilecomm
  /dev/shm segment of this process or a file descriptor (``leaks.py``).
  Ask for it first among a test's fixtures, so it wraps the others (a
  fixture holding ranks is torn down before it is checked);
* ``--tilecomm-detect-races``: every call of the session checks for data
  races (``TILECOMM_DETECT_RACES=1``; a racy call raises DataRaceError);
* ``--tilecomm-explore[=FACTOR]``: ``tilecomm.testing.explore`` gets FACTOR
  times its time budget (10 if no FACTOR; ``TILECOMM_EXPLORE_BUDGET``).
  Write ``--tilecomm-explore=FACTOR``: a value after a space could be read
  as a path.

The options set their variables for the session and restore them after.
"""
from __future__ import annotations

import os

import pytest

from .. import runtime
from ..errors import ConfigError
from ..runtime.config import MPI_TRANSPORT, RunConfig, from_env
from . import leaks
from .cases import ALL, Case, transports_of, why_not_here, world_sizes_of

MARKER = "tilecomm"
MARKER_ARGS = ("world_sizes", "transports", "leaks")
# the fixtures of a marked test's case: asking for one without the marker
# is a usage error
CASE_FIXTURES = ("tilecomm_world", "tilecomm_transport", "tilecomm_config")
EXPLORE_DEFAULT = "10"
_SAVED_ENV = pytest.StashKey[dict]()
_CALL_FAILED = pytest.StashKey[bool]()


def pytest_addoption(parser):
    group = parser.getgroup("tilecomm", "tilecomm: distributed tile programs")
    group.addoption("--tilecomm-detect-races", action="store_true", default=False,
                    help="check every call of the session for data races "
                         "(TILECOMM_DETECT_RACES=1): a racy call raises DataRaceError")
    group.addoption("--tilecomm-explore", nargs="?", const=EXPLORE_DEFAULT, default=None,
                    metavar="FACTOR",
                    help="give tilecomm.testing.explore FACTOR times its time budget "
                         f"(default {EXPLORE_DEFAULT}; write --tilecomm-explore=FACTOR)")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", f"{MARKER}(world_sizes, transports='{ALL}', leaks=True): run the test once "
                   f"per transport and world size; its case is in the fixtures "
                   f"{', '.join(CASE_FIXTURES)}; leaks=True checks that it leaves no process, "
                   f"thread, segment or fd")
    env = {}
    if config.getoption("tilecomm_detect_races"):
        env["TILECOMM_DETECT_RACES"] = "1"
    if config.getoption("tilecomm_explore") is not None:
        env["TILECOMM_EXPLORE_BUDGET"] = config.getoption("tilecomm_explore")
    if not env:
        return
    config.stash[_SAVED_ENV] = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        from_env()              # the variables' one reader checks them
    except ConfigError as err:
        _restore_env(config)
        raise pytest.UsageError(f"--tilecomm-explore: {err.message}") from None


def pytest_unconfigure(config):
    _restore_env(config)


def _restore_env(config):
    for name, value in config.stash.get(_SAVED_ENV, {}).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    config.stash[_SAVED_ENV] = {}


def pytest_generate_tests(metafunc):
    mark = metafunc.definition.get_closest_marker(MARKER)
    if mark is None:
        wanted = [f for f in CASE_FIXTURES if f in metafunc.fixturenames]
        if wanted:
            _usage(metafunc, f"fixture {wanted[0]} needs the test marked "
                             f"@pytest.mark.{MARKER}(world_sizes=[...])")
        return
    problem = None
    try:
        world_sizes, transports, check_leaks = _marker_args(mark)
        sizes, names = world_sizes_of(world_sizes), transports_of(transports)
    except pytest.UsageError as err:
        problem = str(err)
    if problem:                 # outside the except: no chained traceback in the report
        _usage(metafunc, problem)
    params = []
    for case in (Case(t, n) for t in names for n in sizes):
        reason = why_not_here(case)
        params.append(pytest.param((case, check_leaks), id=case.id,
                                   marks=[pytest.mark.skip(reason=reason)] if reason else []))
    metafunc.parametrize("tilecomm_case", params, indirect=True)


def _marker_args(mark) -> tuple:
    if mark.args:
        raise pytest.UsageError(f"@pytest.mark.{MARKER} takes keyword arguments only "
                                f"({', '.join(MARKER_ARGS)}), got {mark.args!r}")
    unknown = sorted(set(mark.kwargs) - set(MARKER_ARGS))
    if unknown:
        raise pytest.UsageError(f"@pytest.mark.{MARKER}: unknown argument(s) {unknown}; it "
                                f"takes {', '.join(MARKER_ARGS)}")
    if "world_sizes" not in mark.kwargs:
        raise pytest.UsageError(f"@pytest.mark.{MARKER} needs world_sizes=[...]")
    check_leaks = mark.kwargs.get("leaks", True)
    if not isinstance(check_leaks, bool):
        raise pytest.UsageError(f"@pytest.mark.{MARKER}: leaks must be True or False, got "
                                f"{check_leaks!r}")
    return mark.kwargs["world_sizes"], mark.kwargs.get("transports", ALL), check_leaks


def _usage(metafunc, message: str):
    """Fail the collection of the test's module with ``message`` at the
    test's first line (its first decorator's, if any), without a traceback
    of the plugin's own frames."""
    where = f"{metafunc.definition.location[0]}:{metafunc.function.__code__.co_firstlineno}"
    pytest.fail(f"usage error: {where}: {metafunc.definition.name}: {message}", pytrace=False)


def pytest_collection_finish(session):
    # MPI opens its descriptors (sockets, pipes, its own shared memory) once,
    # when initialised, and holds them for the life of the process: in a
    # session that will run an mpi case, initialise it before the first
    # test's leak baseline (on the job's every process, as they collect alike)
    for item in session.items:
        param = getattr(getattr(item, "callspec", None), "params", {}).get("tilecomm_case")
        if param and param[0].transport == MPI_TRANSPORT and why_not_here(param[0]) is None:
            runtime.runs_host_code(RunConfig(transport=MPI_TRANSPORT))   # loads the runtime
            return


# ------------------------------------------------------------------ fixtures
@pytest.fixture(autouse=True)
def tilecomm_case(request):
    """The Case (transport, world size) of a test under the marker; None for
    other tests.  Autouse, so a marked case is set up before the test's own
    fixtures and torn down after them: its leak check wraps them all."""
    param = getattr(request, "param", None)
    if param is None:
        yield None
        return
    case, check_leaks = param
    if check_leaks:
        request.getfixturevalue("tilecomm_no_leaks")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TILECOMM_TRANSPORT", case.transport)
        yield case


@pytest.fixture
def tilecomm_world(tilecomm_case) -> int:
    """The world size of this case (ranks 0..world_size-1)."""
    return tilecomm_case.world_size


@pytest.fixture
def tilecomm_transport(tilecomm_case) -> str:
    """The transport this case runs on."""
    return tilecomm_case.transport


@pytest.fixture
def tilecomm_config(tilecomm_case):
    """A RunConfig of this case; ``dataclasses.replace(tilecomm_config, ...)``
    changes other fields."""
    return tilecomm_case.config()


@pytest.fixture
def tilecomm_no_leaks(request):
    """Errors the test at teardown if it left a child process, a thread, a
    tilecomm /dev/shm segment of this process or a file descriptor behind.
    Descriptors are not counted after the test itself failed: pytest keeps
    the failure's traceback (``sys.last_traceback``), whose frames hold the
    call's mappings open, and the failure is the report."""
    before = leaks.snapshot()
    yield
    failed = request.node.stash.get(_CALL_FAILED, False)
    found = leaks.leaks_since(before, fds=not failed)
    if found:
        pytest.fail("the test left behind:\n  " + "\n  ".join(found), pytrace=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.when == "call":
        item.stash[_CALL_FAILED] = outcome.get_result().failed
