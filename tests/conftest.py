"""Shared fixtures (world sizes, run configs, a leak check around every
test) and the test tiers.

Tiers: ``pytest -q`` runs every test (the README's test command, and CI's).
``pytest -q --quick`` -- the same as ``-m "not slow"`` -- runs the fast tier
for the edit-test loop: every test module, in under 3 minutes on a 2-core
machine.  ``slow`` is given here, by the rules of ``tier_marks``, not by hand
in the test files.  Further markers: ``mpi`` (every test of tests/mpi) and
one per transport (``shm``, ``copy``) on every case parametrised by
transport, so ``-m copy`` selects a transport (``-k shm`` would also match
test_shm_resources.py).
"""
import inspect
import os
import threading
import time

import pytest

from tilecomm.runtime import DistributedConfig, RunConfig
from tilecomm.runtime.config import MPI_LAUNCHER_VARS, TRANSPORT_NAMES
# the leak check's probes, used by the test modules (``from conftest import children``)
from tilecomm.testing.leaks import children, my_segments, process_alive  # noqa: F401

WORLD_SIZES = [1, 2, 3, 4]
TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
RANKS_DIR = os.path.join(TESTS_DIR, "ranks")
MPI_DIR = os.path.join(TESTS_DIR, "mpi")


def config_for(n: int, **kw) -> RunConfig:
    return RunConfig(distributed_config=DistributedConfig(device_ids=list(range(n))), **kw)


def pytest_generate_tests(metafunc):
    """Every multi-rank test (tests/ranks) runs on every transport: ids
    ``shm`` / ``copy``, each case marked with its transport's name."""
    if os.path.dirname(os.path.abspath(str(metafunc.definition.path))) == RANKS_DIR:
        metafunc.parametrize("transport", [pytest.param(t, marks=getattr(pytest.mark, t))
                                           for t in TRANSPORT_NAMES], indirect=True)


# ------------------------------------------------------------------ test tiers
# The fast tier keeps, of the multi-rank tests (tests/ranks):
#   * one world size per test function (the parameter ``n`` or ``nr``): 2,
#     the smallest world that communicates, or 1 where the test has no 2; a
#     test of larger worlds only is slow;
#   * the first transport (``shm``); of the others (``copy``), one case a
#     file: the first case of the file's first test function that
#     QUICK_CASES does not list, so every file runs both transports (but
#     for a file whose every function is listed there);
#   * of the functions in ``QUICK_CASES``, only the cases named there (none:
#     another test shows the same path).  Each of their cases costs seconds:
#     it waits out a failure path (a rank's abort, a deadlock report), starts
#     a new Python process, soaks (a thousand calls), or is one of a matrix.
# Of the MPI tests (tests/mpi, each an mpiexec job), only ``MPI_SMOKE``.
# The tests of tests/unit are fast, but for one marked in its file (it
# collects the whole suite in a new process): tests/unit/test_tiers.py,
# which checks that every test module keeps a fast test, every ranks module
# a fast ``copy`` case, and that the lists here name collected cases.
WORLD_SIZE_PARAMS = ("n", "nr")
FAST_TRANSPORT = TRANSPORT_NAMES[0]
SLOW, MPI = pytest.mark.slow, pytest.mark.mpi
COPY_CANDIDATE = "copy candidate"     # fast if it is its file's first

QUICK_CASES = {
    # a rank failure per kind of bad region / peer (the same abort path)
    "test_window_buffer.py::test_dynamic_out_of_bounds_region_is_a_rank_failure":
        {"shm-store-2"},
    "test_window_buffer.py::test_peer_out_of_range_is_a_rank_failure": {"shm-remote_store-2"},
    # the deadlock report of an unsatisfiable wait, one comparison
    "test_notify_wait.py::test_unsatisfiable_wait_is_reported": {"shm-ge_above_value-2"},
    # scripts run in a new Python process: the README's main job; a build
    # reloaded without its source; tilecomm imported without ml_dtypes
    "test_examples.py::test_example_prints_ok": {"shm-allreduce_quickstart.py"},
    "test_examples.py::test_example_is_race_free": {"shm-moe_dispatch_combine.py"},
    "test_worker_builds.py::test_a_build_reloads_in_a_new_process_without_its_source":
        {"shm-1"},
    "test_bf16_preload.py::test_bf16_element_type_is_imported_before_the_ranks_are_forked":
        {"shm-1"},
    # soaks: the full suite runs them
    "test_worker_persistent.py::test_a_thousand_prepared_calls_grow_no_process_fd_or_segment":
        set(),
    "test_trace_worker.py::test_many_traced_calls_on_one_worker_grow_nothing": set(),
    # a matrix: each dtype and each algorithm once
    "test_collectives_incore.py::test_allreduce_matrix": {"shm-FP32-mesh-2", "shm-FP16-ring-2"},
    # failure paths of the multi-rank runtime, one case of each kind
    "test_failures.py::test_ring_handshake_with_tag_0_deadlocks": {"shm-2"},
    "test_failures.py::test_deadlock_of_some_ranks_while_others_finish": set(),
    "test_failures.py::test_peers_blocked_in_waits_are_aborted_not_killed": set(),
    "test_failures.py::test_a_killed_rank_aborts_the_others_too": set(),
    "test_failures.py::test_killed_rank_is_reported": {"shm-2-1"},
    "test_failures.py::test_a_rank_that_cannot_start_reports_its_traceback": {"shm"},
    "test_shm_resources.py::test_running_out_of_descriptors_anywhere_in_a_call_is_a_typed_error":
        {"shm-2"},
    "test_trace.py::test_a_deadlocked_run_still_leaves_a_trace_of_what_happened": {"shm-2"},
    "test_trace.py::test_a_rank_failure_still_leaves_a_trace": {"shm-1"},
    "test_pl_ops_control.py::test_a_spinning_while_loop_stops_when_another_rank_fails":
        {"shm-2"},
    "test_prepared_worker.py::test_a_failed_call_is_reported_and_the_next_call_starts_fresh_ranks":
        {"shm-2"},
    "test_worker_pipeline.py::test_the_second_submitted_call_runs_before_the_first_finished":
        {"shm-first_then_second-2"},
    # deadlock reports, one case of each kind
    "test_deadlock_report.py::test_wait_on_a_window_nobody_notifies": {"shm-2"},
    "test_deferred.py::test_blocking_waits_saturate_the_cores_and_the_report_says_so": {"shm-2"},
    "test_deferred.py::test_a_counter_never_published_is_reported_as_deferred": {"shm-2"},
    "test_deferred.py::test_the_65th_deferred_task_waits_for_a_slot": {"shm-1"},
    "test_deferred.py::test_a_negative_runtime_expected_fails_naming_the_task": {"shm-1"},
    "test_collective_deadlocks.py::test_a_rank_that_skips_the_collective": {"shm-2"},
    # rank failures located in the user's source
    "test_moe.py::test_expert_id_outside_the_world_is_a_located_rank_failure":
        {"shm-past-the-end"},
    "test_device_arith.py::test_negative_dividend_names_peer_minus_one_on_rank_0": {"shm-2"},
    # race detection, a matrix of program pairs: one pair (a safe form and its
    # racy twin) of it; the tests of the default and of the variable are fast
    "test_races.py::test_safe_form_raises_nothing_and_computes": {"shm-collective_rounds-2"},
    "test_races.py::test_racy_form_names_both_accesses": {"shm-collective_rounds-2"},
    # the caller killed mid-call: SIGTERM (SIGHUP takes the same path)
    "test_threads_signals.py::"
    "test_terminating_the_caller_mid_call_leaves_no_segment_and_no_process": {"shm-15"},
}

# tests/mpi: the cases that stay in the fast tier (file::test[id]), a second
# or two each: one call, one example, a raising rank, one job across nodes,
# the rank suite's plugin on one module, and the checks that start no job
MPI_SMOKE = {
    "test_mpi_races.py::test_every_process_raises_the_race_and_holds_the_outputs[2]",
    "test_mpi_calls.py::test_inputs_are_process_0s_and_every_process_gets_the_outputs[2]",
    "test_mpi_examples.py::test_example_prints_ok_on_every_process[allreduce_quickstart.py]",
    "test_mpi_failures.py::test_a_raising_rank_stops_every_process_with_its_traceback[2]",
    "test_mpi_across_nodes.py::test_host_tensors_travel_by_rma[2-direct0]",
    "test_rma_control.py::test_the_rma_plane_reads_back_what_the_shared_memory_plane_does"
    "[nodes-2]",
    "test_ranks_under_mpi.py::test_one_rank_test_module_passes_under_mpiexec",
    # the defect this guards: an uncaught exception on process 0 hung the job
    "test_mpi_departures.py::test_an_uncaught_exception_on_one_process_ends_the_job_with_its_traceback"
    "[2-0-shared]",
    "test_open_mpi.py::test_example_runs_under_open_mpi[allreduce_quickstart.py]",
    "test_twohost.py::test_example_across_two_hosts[allreduce_quickstart.py]",
    "test_twohost_faults.py::test_a_process_of_the_far_host_that_raises_ends_the_job_naming_it"
    "[uncaught]",
    "test_mpi_selection.py::test_mpi_is_a_transport_name_and_others_are_refused",
    "test_mpi_selection.py::test_tilecomm_never_loads_mpi_unless_the_mpi_backend_runs",
    "test_mpi_put_async.py::test_put_async_under_mpiexec[2]",
} | {f"test_mpi_selection.py::test_a_process_started_by_an_mpi_launcher_selects_the_mpi_backend"
     f"[{var}]" for var in MPI_LAUNCHER_VARS}


def pytest_addoption(parser):
    parser.addoption("--quick", action="store_true", default=False,
                     help='run the fast tier only, the same as -m "not slow": every test '
                          "module in under 3 minutes on 2 cores.  Plain pytest runs the "
                          "full suite (what CI runs).")


def pytest_configure(config):
    for name in TRANSPORT_NAMES:
        config.addinivalue_line("markers", f"{name}: a multi-rank test case on the {name} "
                                           f"transport")
    if config.getoption("quick"):
        expr = config.option.markexpr
        config.option.markexpr = f"({expr}) and not slow" if expr else "not slow"


def _first_test_function(module) -> str:
    """The name of the test function defined first in ``module``'s source,
    of those QUICK_CASES does not list."""
    file = os.path.basename(module.__file__)
    found = [(fn.__code__.co_firstlineno, name) for name, fn in vars(module).items()
             if name.startswith("test") and inspect.isfunction(fn)
             and fn.__module__ == module.__name__ and f"{file}::{name}" not in QUICK_CASES]
    return min(found)[1] if found else ""


def _world(item):
    params = getattr(getattr(item, "callspec", None), "params", {})
    return next((params[p] for p in WORLD_SIZE_PARAMS if p in params), None)


def fast_world(worlds) -> int | None:
    """The world size a test function keeps in the fast tier, of those its
    cases run."""
    return 2 if 2 in worlds else 1 if 1 in worlds else None


def tier_marks(item, fast_world_size) -> list:
    """The tier markers of one collected test -- ``mpi``, ``slow``, both or
    none -- or COPY_CANDIDATE.  ``fast_world_size``: its function's, if it
    has a world size parameter."""
    path = os.path.abspath(str(item.path))
    where = f"{os.path.basename(path)}::{item.originalname}"
    callspec = getattr(item, "callspec", None)
    case = callspec.id if callspec is not None else None
    if os.path.dirname(path) == MPI_DIR:
        name = where if case is None else f"{where}[{case}]"
        return [MPI] if name in MPI_SMOKE else [MPI, SLOW]
    if os.path.dirname(path) != RANKS_DIR:
        return []
    if where in QUICK_CASES:
        return [] if case in QUICK_CASES[where] else [SLOW]
    world = _world(item)
    if world is not None and world != fast_world_size:
        return [SLOW]
    if callspec.params.get("transport", FAST_TRANSPORT) != FAST_TRANSPORT:
        return [COPY_CANDIDATE] if item.originalname == _first_test_function(item.module) \
            else [SLOW]
    return []


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    # tryfirst: -m (and so --quick) deselects by these markers after this hook
    worlds: dict = {}
    for item in items:
        worlds.setdefault((item.path, item.originalname), set()).add(_world(item))
    files_with_copy = set()
    for item in items:
        for mark in tier_marks(item, fast_world(worlds[item.path, item.originalname])):
            if mark is COPY_CANDIDATE:
                if item.path in files_with_copy:
                    item.add_marker(SLOW)
                files_with_copy.add(item.path)
            else:
                item.add_marker(mark)


@pytest.fixture(autouse=True)
def transport(request, monkeypatch):
    """The transport of a multi-rank test, through ``TILECOMM_TRANSPORT`` (read
    by ``RunConfig.resolved_transport`` when ranks start), so programs started
    in this process and example scripts run as subprocesses use it alike."""
    name = getattr(request, "param", None)
    if name is not None:
        monkeypatch.setenv("TILECOMM_TRANSPORT", name)
    else:
        monkeypatch.delenv("TILECOMM_TRANSPORT", raising=False)
    return name


def files_of(root) -> set:
    """Every file under ``root``, as paths relative to it."""
    out = set()
    for dp, _, fs in os.walk(root):
        for f in fs:
            out.add(os.path.relpath(os.path.join(dp, f), root))
    return out


def signal_a_rank_during(call, n: int, sig, pick=min):
    """Run ``call()`` while a thread waits for its ``n`` rank processes to
    appear, lets them settle into their waits, and sends ``sig`` to the rank
    ``pick`` chooses among their pids.  Returns what ``call`` raised."""
    before = children()

    def sender():
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(children() - before) < n:
            time.sleep(0.005)
        time.sleep(0.2)
        ranks = children() - before
        if ranks:
            os.kill(pick(ranks), sig)

    th = threading.Thread(target=sender)
    th.start()
    try:
        with pytest.raises(BaseException) as ei:
            call()
    finally:
        th.join()
    return ei.value


@pytest.fixture(autouse=True)
def no_leaks(tilecomm_no_leaks):
    """Every test must leave no worker process, thread, shared segment or file
    descriptor behind: the packaged check (``tilecomm.testing.leaks``, the
    pytest plugin's ``tilecomm_no_leaks``) around every test here."""
