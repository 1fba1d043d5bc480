"""The multi-rank test suite (tests/ranks), run on the MPI backend under
``mpiexec -n N`` for N = 1..4: the same programs and the same numpy
references as on the shared-memory backend, every case of world size N
(``mpi_plugin.py`` selects them and says which fork-only cases it leaves
out), on one node and as a job across nodes.  Each MPI process runs the pytest session, so every process checks
the results it holds."""
import re

import pytest

from mpi_jobs import requires_mpi, run_mpi

pytestmark = requires_mpi


# how the job's processes see each other:
#   shared  one node: shared-memory windows (pool and control plane)
#   rma     one node, TILECOMM_MPI_DIRECT=0: ordinary MPI windows, every access
#           to a peer (and to the control plane) an RMA call, as between nodes
#   nodes   MPICH told that every process is on a node of its own
#           (MPIR_CVAR_NOLOCAL=1): the backend detects a job across nodes
LAYOUTS = {"shared": {}, "rma": {"TILECOMM_MPI_DIRECT": "0"}, "nodes": {"MPIR_CVAR_NOLOCAL": "1"}}


def passed_on_every_process(n: int, env: dict, tests: str) -> int:
    """Run the multi-rank tests ``tests`` under ``mpiexec -n n`` (the plugin
    keeps the cases of world size n); return how many passed, the same on
    every process, or fail."""
    # a case that hangs one process (its peers wait for it in a collective
    # step) is stopped by its own time-out, which ends the whole job
    run = run_mpi(n, ["-m", "pytest", "-q", "-p", "mpi_plugin", "-p", "no:cacheprovider",
                      "--timeout", "120", "--timeout-method", "thread", tests],
                  timeout=900, env=env)
    assert run.returncode == 0, run.output[-20000:]
    # every process ran the same cases and each passed
    summaries = [re.findall(r"(\d+) passed", out) for out in run.rank_out]
    assert all(len(s) == 1 for s in summaries), run.output[-5000:]
    assert len({s[0] for s in summaries}) == 1, summaries
    assert " failed" not in run.stdout and " error" not in run.stdout
    return int(summaries[0][0])


@pytest.mark.parametrize("n,windows", [(1, "shared"), (2, "shared"), (3, "shared"),
                                       (4, "shared"), (2, "rma"), (2, "nodes"), (3, "nodes")])
def test_rank_suite_passes_under_mpiexec(n, windows):
    assert passed_on_every_process(n, LAYOUTS[windows], "tests/ranks") >= 90


def test_one_rank_test_module_passes_under_mpiexec():
    """The plugin's path in a minute: one module's cases of world size 2 (the
    fast tier's stand-in for the whole suite above)."""
    assert passed_on_every_process(2, {}, "tests/ranks/test_notify_wait.py") >= 9


@pytest.mark.parametrize("n,windows", [(2, "shared"), (3, "rma")])
def test_deferred_collectives_pass_under_mpiexec(n, windows):
    """Split-phase (defer=True) collectives on the MPI backend: the deferred
    conditions are watched through MPI windows, the epilogue runs at the
    TaskId's completion, results against numpy (test_collectives_deferred:
    numpy checks and a prepared worker, both kinds of persistent windows)."""
    assert passed_on_every_process(n, LAYOUTS[windows],
                                   "tests/ranks/test_collectives_deferred.py") >= 4


def test_deferred_collective_races_are_found_under_mpiexec():
    """The race check of deferred allgather (racy consumer and overwrite, and
    their clean twins) on the MPI backend, 2 ranks."""
    assert passed_on_every_process(2, {}, "tests/ranks/test_races_deferred.py") >= 3
