"""The pytest plugin users test their programs with (tilecomm/testing): its
marker's cases, ids and fixtures, its usage errors, its leak check failing
a test that leaks, its options, and its entry point.  Each runs a small
test file in a pytest session of its own (``pytester``: in this process,
or a new one where the session runs a program)."""
import importlib
import os
import re
import signal
import subprocess
import sys
import threading
from importlib.metadata import entry_points

import pytest

from tilecomm.errors import ConfigError
from tilecomm.runtime.config import from_env
from tilecomm.testing import leaks
from tilecomm.testing.cases import Case, cases, transports_of, why_not_here

pytest_plugins = ["pytester"]

RACY = '''
import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld

SIZE = 16
NR = pl.dynamic("NR")
Row = pl.Tensor[[1, SIZE], pl.FP32]
Box = pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]]
Flag = pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]


@pl.jit.incore
def racy(x: Row, y: pl.Out[Row], box: Box, flag: Flag):
    me = pld.rank(pld.get_comm_ctx(box))
    if me == 0:
        pld.system.notify(flag, peer=1, offsets=[0, 0], value=1, op=pld.NotifyOp.Set)
        pld.tile.remote_store(pl.load(x, [0, 0], [1, SIZE]), box, peer=1, offsets=[0, 0])
    if me == 1:
        pld.system.wait(flag, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
        y = pl.store(pl.load(box, [0, 0], [1, SIZE]), [0, 0], y)
    return y


@pl.jit
def chip(x: Row, y: pl.Out[Row], box: Box, flag: Flag):
    return racy(x, y, box, flag)


@pl.jit.host
def main(xs: pl.Tensor[[NR, 1, SIZE], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]]):
    box = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
    flag = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        chip(xs[r], ys[r], pld.window(box, [1, SIZE], dtype=pl.FP32),
             pld.window(flag, [1, 1], dtype=pl.INT32), device=r)
    return ys


@pytest.mark.tilecomm(world_sizes=[2], transports="shm")
def test_racy(tilecomm_world, tilecomm_config):
    xs = np.ones((tilecomm_world, 1, SIZE), np.float32)
    main(xs, np.zeros_like(xs), config=tilecomm_config)
'''


@pytest.fixture
def clean_env(monkeypatch):
    """No transport, race or MPI-job variable from the environment of this run."""
    for name in ("TILECOMM_TRANSPORT", "TILECOMM_DETECT_RACES", "TILECOMM_EXPLORE_BUDGET",
                 "PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK",
                 "MPI_LOCALRANKID"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def fnmatch_escape(text: str) -> str:
    return "".join(f"[{c}]" if c in "[]*?" else c for c in text)


def _collected(result) -> list:
    return [line.split("::", 1)[1] for line in result.stdout.lines if "::" in line]


# ------------------------------------------------------------------ the marker
def test_the_marker_runs_one_case_per_transport_and_world_size(pytester, clean_env):
    pytester.makepyfile(test_cases='''
        import os
        import pytest

        @pytest.mark.tilecomm(world_sizes=[1, 3], transports="all")
        def test_case(tilecomm_world, tilecomm_transport, tilecomm_config):
            assert tilecomm_config.dist.device_ids == tuple(range(tilecomm_world))
            assert tilecomm_config.transport == tilecomm_transport
            assert os.environ["TILECOMM_TRANSPORT"] == tilecomm_transport

        @pytest.mark.tilecomm(world_sizes=2, transports=["copy"])
        def test_one(tilecomm_world, tilecomm_case):
            assert (tilecomm_case.transport, tilecomm_world) == ("copy", 2)

        pytestmark = pytest.mark.tilecomm(world_sizes=[4], transports="shm")

        def test_module_marked(tilecomm_world):
            assert tilecomm_world == 4
    ''')
    collected = pytester.runpytest("--collect-only", "-q")
    assert _collected(collected) == [
        "test_case[shm-1]", "test_case[shm-3]", "test_case[copy-1]", "test_case[copy-3]",
        "test_one[copy-2]", "test_module_marked[shm-4]"]
    result = pytester.runpytest()
    result.assert_outcomes(passed=6)
    assert "TILECOMM_TRANSPORT" not in os.environ


def test_a_marker_without_a_module_marker_leaves_other_tests_alone(pytester, clean_env):
    pytester.makepyfile(test_plain='''
        import os
        import pytest

        def test_plain(tilecomm_case):
            assert tilecomm_case is None and "TILECOMM_TRANSPORT" not in os.environ

        @pytest.mark.parametrize("x", [1, 2])
        @pytest.mark.tilecomm(world_sizes=[2], transports="shm")
        def test_both(x, tilecomm_world):
            assert tilecomm_world == 2
    ''')
    result = pytester.runpytest("-v")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*::test_plain PASSED*", "*::test_both[[]shm-2-1[]] PASSED*",
                                  "*::test_both[[]shm-2-2[]] PASSED*"])


BAD_MARKERS = {
    "world_sizes=[0, 2]": "world_sizes must be a non-empty list of ints >= 1, got [0, 2]",
    "world_sizes=[]": "world_sizes must be a non-empty list of ints >= 1, got []",
    "world_sizes='2'": "world_sizes must be a non-empty list of ints >= 1, got '2'",
    "world_sizes=[True]": "world_sizes must be a non-empty list of ints >= 1, got [True]",
    "world_sizes=[2, 2]": "world_sizes must be distinct, got [2, 2]",
    "world_sizes=[2], transports='tcp'": "transports: unknown ['tcp']; must be 'all', one of "
                                         "['shm', 'copy', 'mpi'] or a list of them",
    "world_sizes=[2], transports=[]": "transports must be 'all', one of",
    "world_sizes=[2], transports=['shm', 'shm']": "transports must be distinct",
    "transports='shm'": "@pytest.mark.tilecomm needs world_sizes=[...]",
    "[2]": "@pytest.mark.tilecomm takes keyword arguments only",
    "world_sizes=[2], leak=True": "@pytest.mark.tilecomm: unknown argument(s) ['leak']; it "
                                  "takes world_sizes, transports, leaks",
    "world_sizes=[2], leaks='yes'": "@pytest.mark.tilecomm: leaks must be True or False, got 'yes'",
}


@pytest.mark.parametrize("args", BAD_MARKERS)
def test_bad_marker_arguments_are_a_usage_error_at_the_tests_line(pytester, clean_env, args):
    pytester.makepyfile(test_bad=f'''
        import pytest


        def test_fine():
            pass


        @pytest.mark.tilecomm({args})
        def test_bad(tilecomm_world):
            pass
    ''')
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"usage error: test_bad.py:8: test_bad: "
                                 f"{fnmatch_escape(BAD_MARKERS[args])}*"])


def test_a_case_fixture_without_the_marker_is_a_usage_error(pytester, clean_env):
    pytester.makepyfile(test_unmarked='''
        def test_unmarked(tilecomm_config):
            pass
    ''')
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["usage error: test_unmarked.py:1: test_unmarked: fixture "
                                 "tilecomm_config needs the test marked "
                                 "@pytest.mark.tilecomm(world_sizes=[...])"])


# ------------------------------------------------------------------ mpi cases
def test_mpi_cases_run_only_in_an_mpi_job_of_their_size(pytester, clean_env):
    assert transports_of("all") == ("shm", "copy")
    assert "mpiexec -n 2 python -m pytest" in why_not_here(Case("mpi", 2))
    assert why_not_here(Case("copy", 2)) is None
    pytester.makepyfile(test_mpi='''
        import pytest

        @pytest.mark.tilecomm(world_sizes=[1, 2], transports=["shm", "mpi"])
        def test_case(tilecomm_world):
            pass
    ''')
    result = pytester.runpytest("-rs")
    result.assert_outcomes(passed=2, skipped=2)
    result.stdout.fnmatch_lines(["*the mpi transport runs in an MPI job of 2 processes: "
                                 "mpiexec -n 2 python -m pytest*"])
    # a process of an MPI job of 2 (as mpiexec starts it): "all" has mpi, of size 2 only
    clean_env.setenv("PMI_RANK", "0")
    clean_env.setenv("PMI_SIZE", "2")
    assert transports_of("all") == ("shm", "copy", "mpi")
    assert why_not_here(Case("mpi", 2)) is None
    assert "MPI job of 2 processes; world size 4" in why_not_here(Case("mpi", 4))
    clean_env.delenv("PMI_SIZE")
    assert "MPI job of unknown size" in why_not_here(Case("mpi", 2))
    # without mpi4py, every mpi case is skipped and says what to install
    clean_env.setitem(sys.modules, "mpi4py", None)
    assert why_not_here(Case("mpi", 2)) == ("the mpi transport needs mpi4py: "
                                            "pip install 'tilecomm[mpi]'")


def test_cases_parametrise_without_the_marker(clean_env):
    params = cases([1, 2], "copy")
    assert [p.id for p in params] == ["copy-1", "copy-2"]
    assert [p.values[0] for p in params] == [Case("copy", 1), Case("copy", 2)]
    cfg = params[1].values[0].config(detect_races=True)
    assert cfg.dist.device_ids == (0, 1) and cfg.transport == "copy" and cfg.detect_races
    with pytest.raises(pytest.UsageError, match="unknown"):
        cases([1], "nccl")


# ------------------------------------------------------------------ leak check
def test_the_leak_check_fails_a_test_that_leaks_a_process_or_a_segment(pytester, clean_env):
    pids = pytester.path / "pids"
    segment = f"tilecomm-{os.getpid()}-leak-check-test"
    pytester.makepyfile(test_leaky=f'''
        import subprocess
        import pytest

        def leak_a_process():
            child = subprocess.Popen(["sleep", "60"])
            with open({str(pids)!r}, "a") as f:
                f.write(f"{{child.pid}}\\n")

        def test_process(tilecomm_no_leaks):
            leak_a_process()

        def test_segment(tilecomm_no_leaks):
            open("/dev/shm/{segment}", "w").close()

        def test_clean(tilecomm_no_leaks):
            pass

        @pytest.mark.tilecomm(world_sizes=[1], transports="shm")
        def test_marked():
            leak_a_process()

        @pytest.mark.tilecomm(world_sizes=[1], transports="shm", leaks=False)
        def test_marked_unchecked():
            leak_a_process()

        def test_unchecked():
            leak_a_process()
    ''')
    try:
        result = pytester.runpytest()
    finally:
        for pid in map(int, pids.read_text().split()):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        if os.path.exists(f"/dev/shm/{segment}"):
            os.unlink(f"/dev/shm/{segment}")
    result.assert_outcomes(passed=6, errors=3)
    result.stdout.fnmatch_lines_random([
        "ERROR test_leaky.py::test_process - Failed: the test left behind:",
        "ERROR test_leaky.py::test_segment - Failed: the test left behind:",
        "ERROR test_leaky.py::test_marked[[]shm-1[]] - Failed: the test left behind:",
        "*worker processes leaked: pids [[]*",
        f"*shared-memory segments leaked: [[]'{segment}'[]]*"])


def test_the_leak_check_reads_what_the_process_holds(tmp_path):
    before = leaks.snapshot()
    f = open(tmp_path / "held", "w")
    try:
        found = leaks.leaks_since(before)
        assert len(found) == 1 and found[0].startswith("file descriptors leaked: ")
        assert str(tmp_path / "held") in found[0]
        assert leaks.leaks_since(before, fds=False) == []
    finally:
        f.close()
    assert leaks.leaks_since(before) == []
    with pytest.raises(AssertionError, match="threads leaked"):
        with leaks.no_leaks():
            _start_a_thread_that_outlives_the_block()


def _start_a_thread_that_outlives_the_block():
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, name="outliver")
    thread.start()
    _start_a_thread_that_outlives_the_block.stop = (stop, thread)


@pytest.fixture(autouse=True)
def _stop_the_outliver():
    yield
    stop = getattr(_start_a_thread_that_outlives_the_block, "stop", None)
    if stop:
        stop[0].set()
        stop[1].join()
        del _start_a_thread_that_outlives_the_block.stop


# ------------------------------------------------------------------ options
def test_detect_races_turns_the_race_check_on_for_the_session(pytester, clean_env):
    pytester.makepyfile(test_racy=RACY)
    plain = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    plain.assert_outcomes(passed=1)
    checked = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--tilecomm-detect-races")
    checked.assert_outcomes(failed=1)
    checked.stdout.fnmatch_lines(["E *.DataRaceError: 1 data race(s) found*",
                                  "FAILED test_racy.py::test_racy*DataRaceError*"])


def test_the_options_set_their_variables_for_the_session_only(pytester, clean_env):
    pytester.makepyfile(test_env='''
        import os
        from tilecomm.runtime.config import from_env

        def test_env():
            print("budget", from_env().get("explore_budget"),
                  "races", os.environ.get("TILECOMM_DETECT_RACES"))
    ''')
    for args, want in ((["--tilecomm-explore"], "budget 10.0 races None"),
                       (["--tilecomm-explore=2.5", "--tilecomm-detect-races"],
                        "budget 2.5 races 1"),
                       ([], "budget None races None")):
        result = pytester.runpytest("-s", *args)
        result.assert_outcomes(passed=1)
        result.stdout.fnmatch_lines([f"*{want}*"])
        assert "TILECOMM_EXPLORE_BUDGET" not in os.environ
        assert "TILECOMM_DETECT_RACES" not in os.environ
    clean_env.setenv("TILECOMM_EXPLORE_BUDGET", "3")          # a value of the user's, kept
    pytester.runpytest("--tilecomm-explore=4").assert_outcomes(passed=1)
    assert os.environ["TILECOMM_EXPLORE_BUDGET"] == "3"


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "fast"])
def test_a_bad_explore_factor_is_a_usage_error(pytester, clean_env, value):
    result = pytester.runpytest(f"--tilecomm-explore={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--tilecomm-explore: TILECOMM_EXPLORE_BUDGET must be a "
                                 f"number > 0, got '{value}'*"])
    assert "TILECOMM_EXPLORE_BUDGET" not in os.environ


def test_the_environment_reader_checks_the_explore_budget(clean_env):
    assert "explore_budget" not in from_env()
    clean_env.setenv("TILECOMM_EXPLORE_BUDGET", "0.5")
    assert from_env()["explore_budget"] == 0.5
    clean_env.setenv("TILECOMM_EXPLORE_BUDGET", "0")
    with pytest.raises(ConfigError, match="TILECOMM_EXPLORE_BUDGET must be a number > 0") as ei:
        from_env()
    assert ei.value.code == "TC402"


MPIEXEC = os.path.join(os.path.dirname(sys.executable), "mpiexec")
EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "examples", "testing")


@pytest.mark.mpi
@pytest.mark.slow       # an mpiexec job of two pytest sessions (a few seconds)
@pytest.mark.skipif(not os.access(MPIEXEC, os.X_OK), reason="needs mpiexec (tilecomm[mpi])")
def test_under_mpiexec_the_mpi_cases_of_the_jobs_size_run_and_leave_nothing(clean_env):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILECOMM_")}
    run = subprocess.run([MPIEXEC, "-n", "2", sys.executable, "-m", "pytest", "-p",
                          "no:cacheprovider", "-rs", "-k", "mpi", "test_ring_shift.py"],
                         cwd=EXAMPLE, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    # on both processes (their lines interleave; each summary is one write):
    # the two mpi-2 cases ran, leak check included, and mpi-1, -3, -4 said why not
    # each process: the mpi-2 case runs on both of its tests, the other sizes skip
    assert len(re.findall(r" 2 passed, 3 skipped, \d+ deselected in ", run.stdout)) == 2, \
        run.stdout
    assert "this session is an MPI job of 2 processes; world size 4 runs under " \
           "mpiexec -n 4 python -m pytest" in run.stdout


# ------------------------------------------------------------------ entry point
def test_the_plugin_is_registered_by_its_entry_point(pytestconfig):
    found = {e.name: e.value for e in entry_points(group="pytest11")}
    assert found.get("tilecomm") == "tilecomm.testing.plugin"
    plugin = pytestconfig.pluginmanager.get_plugin("tilecomm")
    assert plugin is not None and plugin.__name__ == "tilecomm.testing.plugin"


def test_loading_the_plugin_leaves_the_runtime_unloaded():
    """Every pytest session of an environment with tilecomm loads the plugin:
    it must not pay for the controller, the rank side or exploration."""
    probe = ("import sys, tilecomm.testing.plugin\n"
             "print(sorted(m for m in sys.modules if m.startswith(('tilecomm.runtime.controller',"
             " 'tilecomm.runtime.rank', 'tilecomm.runtime.worker', 'tilecomm.testing.exploration'))))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]", out


@pytest.mark.parametrize("package", ["tilecomm.runtime", "tilecomm.testing"])
def test_names_loaded_on_first_use_all_resolve(package):
    mod = importlib.import_module(package)
    assert set(mod.__all__) == set(mod._HOMES)
    for name in mod.__all__:
        assert getattr(mod, name).__name__ == name
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        mod.nope
