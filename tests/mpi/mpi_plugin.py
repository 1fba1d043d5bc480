"""pytest plugin for running the multi-rank tests (tests/ranks) under
``mpiexec -n N``: every MPI process runs the same pytest session, so every
test makes the same calls on every process, and each call runs on the MPI
backend with rank r = process r.

Loaded with ``-p mpi_plugin`` (tests/mpi on ``PYTHONPATH``) by
``test_ranks_under_mpi.py``.  It keeps the cases whose world size ``n`` is
the job's size and that run on the first transport parameter, and runs
those on the MPI backend (``TILECOMM_TRANSPORT=mpi``, set after the
``transport`` fixture of tests/conftest.py); the numpy references are the
tests' own.  The multi-rank tests drive the ranks as forked processes in a
few places (signals to rank pids, /dev/shm accounting, rank death while
idle): those are listed in ``FORK_ONLY`` and deselected, as are the race
check's tests in a job whose control block is reached over RMA (the check
is refused there).
"""
import os
import pathlib
import tempfile

import pytest

# tests about forked rank processes (their pids, signals sent to them, what
# they inherit, /dev/shm accounting), not about what a program computes; the
# MPI failure paths have their own tests (test_mpi_failures.py)
FORK_ONLY = ("test_examples.py", "test_threads_signals.py", "test_shm_resources.py",
             "test_bf16_preload.py", "test_failures.py::test_killed_rank_is_reported",
             # patches the shared-memory transport of forked ranks
             "test_failures.py::test_a_rank_that_cannot_start_reports_its_traceback",
             "test_prepared_worker.py::test_repeated_calls_reuse_the_ranks_and_start_from_zeroed",
             # a new Python process of its own: under mpiexec it would start
             # as an MPI process outside the job
             "test_worker_builds.py::test_a_build_reloads_in_a_new_process_without_its_source",
             # a submitted call overlaps the one before it only on the
             # shared-memory backend; under MPI every call is one step of all
             # the job's processes, so this program (whose first call ends only
             # once the second runs) is a deadlock there, reported as one
             "test_worker_api.py::test_submitted_calls_on_kept_windows_are_in_flight_together",
             "test_worker_pipeline.py::test_the_second_submitted_call_runs_before_the_first",
             "test_races_in_flight.py",
             # the caller fills a window before any rank maps it: MPI's
             # windows are the processes' own (poison_windows is refused there)
             "test_poison.py")


# a directory every process of the job can read and write, where they do not
# share /tmp (processes on hosts of their own); its test directories are
# removed with it by whoever made it
SHARED_TMP = "TILECOMM_TEST_SHARED_TMP"

# programs run with the race check on: a job whose control block is reached
# over RMA refuses the check before any rank runs (test_mpi_races.py shows
# the refusal), so these are left out there
RACE_CHECKED = ("test_races.py", "test_race_config.py",
                "test_site_paths.py::test_the_race_check_sees_call_site_loads_and_stores",
                "test_collectives_ergonomic.py::test_the_race_check_sees",
                "test_collectives_gaps.py::test_all_to_all_v_rows_not_sent_are_not_a_race",
                "test_collectives_gaps.py::test_host_all_to_all_v_on_several_blocks",
                "test_races_hb.py", "test_races_collectives.py", "test_races_async.py",
                "test_races_deferred.py",
                "test_worker_persistent.py::test_a_race_report_keeps",
                "test_loop_reports.py::test_a_race", "test_loop_reports.py::test_the_filled",
                "test_loop_reports.py::test_the_loop_with")


def control_over_rma() -> bool:
    """Whether this job's control block is reached over RMA: windows forced
    to RMA (TILECOMM_MPI_DIRECT=0), every process on a node of its own
    (MPICH's NOLOCAL), or the job on several hosts (Hydra gives each
    process the number of the job's processes on its host)."""
    local = os.environ.get("MPI_LOCALNRANKS")
    return os.environ.get("TILECOMM_MPI_DIRECT") == "0" or \
        os.environ.get("MPIR_CVAR_NOLOCAL") == "1" or \
        (local is not None and int(local) < job_size())


def job_size() -> int:
    for var in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS"):
        if os.environ.get(var):
            return int(os.environ[var])
    return 1


def pytest_collection_modifyitems(config, items):
    size = job_size()
    left_out = FORK_ONLY + (RACE_CHECKED if control_over_rma() else ())
    keep, drop = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        where = f"{os.path.basename(str(item.path))}::{item.name}"
        ok = (params.get("n") == size and params.get("transport") in (None, "shm")
              and not any(where.startswith(f) for f in left_out))
        (keep if ok else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = keep


@pytest.fixture(autouse=True)
def mpi_transport(transport, monkeypatch):
    """Every program of a kept case runs on the MPI backend."""
    monkeypatch.setenv("TILECOMM_TRANSPORT", "mpi")
    return "mpi"


def pytest_configure(config):
    # MPI opens its descriptors (sockets, pipes, its own shared memory) once,
    # at initialisation: do it before the first test's leak baseline; so is
    # the lifeline of a job across hosts (a thread for the process's life),
    # started here at the same step on every process, as it must be
    from tilecomm.backends.mpi import lifeline
    from tilecomm.backends.mpi.comm import require_mpi
    lifeline.start(require_mpi())


@pytest.fixture
def tmp_path(tmp_path_factory, request):
    """One directory for the whole job, as a user's output directory is one
    path on every process: process 0 makes it, the others take its name (run
    artefacts of every rank land in it, and every process checks them)."""
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    path = None
    if comm.Get_rank() == 0:
        name = request.node.name[:30].replace("[", "-")
        # hosts of their own share no /tmp: a cluster's shared file system
        # (a directory every host mounts) is named by SHARED_TMP
        shared = os.environ.get(SHARED_TMP)
        path = tempfile.mkdtemp(prefix=name, dir=shared) if shared else \
            str(tmp_path_factory.mktemp(name))
    return pathlib.Path(comm.bcast(path, root=0))
