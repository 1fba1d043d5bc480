"""The control plane of a job across nodes (``backends/mpi/control.py``): an
ordinary MPI window held by process 0, reached by RMA calls only.  MPICH's
``MPIR_CVAR_NOLOCAL=1`` makes every process of a job believe it is on a node
of its own, so the backend's own detection picks that layout ("nodes");
``TILECOMM_MPI_DIRECT=0`` asks for it on one node ("rma").  Reports must be
exactly those of the shared-memory backend, and failures must end the job
leaving nothing behind (``run_mpi`` checks)."""
import os
import subprocess
import sys

import pytest

from mpi_jobs import ROOT, requires_mpi, run_mpi, script
from test_mpi_failures import _line

pytestmark = requires_mpi
FAILURES = script("failures.py")
PLANES = script("control_planes.py")
NODES = {"MPIR_CVAR_NOLOCAL": "1"}
RMA = {"TILECOMM_MPI_DIRECT": "0"}


def _shm_report(argv) -> str:
    """The report of the same program on the shared-memory backend."""
    env = dict(os.environ, TILECOMM_TRANSPORT="shm")
    ref = subprocess.run([sys.executable, *argv], env=env, cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert ref.returncode == 0, ref.stdout + ref.stderr
    return ref.stdout.split("<<<\n")[1].split("\n>>>")[0]


@pytest.mark.parametrize("env,plane,shared", [({}, "MpiControlPlane", True),
                                              (RMA, "RmaControlPlane", False),
                                              (NODES, "RmaControlPlane", False)],
                         ids=["one-node", "rma", "nodes"])
def test_the_control_plane_follows_the_window_pool(env, plane, shared):
    # a prepared worker's repeated calls (reset between runs, outputs
    # checked against numpy on every process) on the layout the job gets
    run = run_mpi(3, [PLANES, "layout", "3"], timeout=120, env=env)
    assert run.returncode == 0, run.output
    assert run.rank_out == [f"{plane} shared={shared}\n"] * 3, run.output


@pytest.mark.parametrize("n", [2, 3])
def test_a_deadlock_across_nodes_is_reported_exactly_as_on_shared_memory(n):
    run = run_mpi(n, [FAILURES, "deadlock", str(n)], timeout=120, env=NODES)
    assert run.returncode == 0, run.output
    for r in range(n):
        assert run.rank_out[r].endswith(f"deadlock reported on process {r}\n"), run.output
    report = run.rank_out[0].split("<<<\n")[1].split("\n>>>")[0]
    assert report == _shm_report([FAILURES, "deadlock", str(n)])
    assert f"failure_programs.py:{_line('F:block')}" in report
    assert "(%d blocked, 0 finished)" % n in report


@pytest.mark.parametrize("n,env", [(2, NODES), (3, RMA)], ids=["nodes", "rma"])
def test_a_deadlock_inside_tasks_is_reported_from_their_snapshots(n, env):
    # each rank's scheduler snapshot travels through its task area of the
    # control window (MPI_Put by the rank, MPI_Get by the monitor)
    run = run_mpi(n, [PLANES, "tasks", str(n)], timeout=120, env=env)
    assert run.returncode == 0, run.output
    for r in range(n):
        assert run.rank_out[r].endswith(f"deadlock reported on process {r}\n"), run.output
    report = run.rank_out[0].split("<<<\n")[1].split("\n>>>")[0]
    assert report == _shm_report([PLANES, "tasks", str(n)])
    with open(PLANES) as f:
        line = next(i for i, t in enumerate(f, 1) if t.rstrip().endswith("# T:wait"))
    for r in range(n):
        assert f"rank {r}: 2 of 2 core(s) held by blocking waits" in report
    assert report.count(f"control_planes.py:{line}:") == 2 * n
    assert report.count("ready, no core free: task 'publisher'") == n


@pytest.mark.parametrize("n", [2, 3])
def test_a_raising_rank_across_nodes_stops_every_process_with_its_traceback(n):
    run = run_mpi(n, [FAILURES, "raise", str(n)], timeout=120, env=NODES)
    assert run.returncode != 0
    report = run.rank_err[0]
    assert "RankFailure: rank 0 failed in crash_chip" in report, run.stderr
    assert f'failure_programs.py", line {_line("F:crash")}, in crash_step' in report
    assert "[TC501]" in report
    for r in range(1, n):
        lines = run.rank_err[r].strip().splitlines()
        assert len(lines) == 1, run.rank_err[r]
        assert lines[0].startswith(f"tilecomm.errors.RankFailure on process {r} (process 0 "
                                   f"prints the report): rank 0 failed in crash_chip")


@pytest.mark.parametrize("n,env", [(2, NODES), (3, NODES), (3, {})],
                         ids=["nodes-2", "nodes-3", "one-node-3"])
def test_the_rma_plane_reads_back_what_the_shared_memory_plane_does(n, env):
    # every rank's operations at once (collective entries from several
    # threads), compared by process 0 with the same operations replayed on
    # a ShmControlPlane; a wait on a peer's progress released, one aborted
    run = run_mpi(n, [script("plane_ops.py")], timeout=120, env=env)
    assert run.returncode == 0, run.output
    assert run.rank_out == [f"OK {r}\n" for r in range(n)], run.output
