"""Failure paths under mpiexec: a rank that raises, a deadlock, a killed
process, a rank that never stops, a job of the wrong size -- each explained,
and none leaving a process or a /dev/shm entry behind (``run_mpi`` checks)."""
import os
import signal
import subprocess
import sys
import time

import pytest

from mpi_jobs import ROOT, rank_pid, requires_mpi, run_mpi, script

pytestmark = requires_mpi
FAILURES = script("failures.py")


def _line(marker: str) -> int:
    path = os.path.join(ROOT, "tests", "ranks", "failure_programs.py")
    with open(path) as f:
        hits = [i for i, text in enumerate(f, 1) if text.rstrip().endswith(f"# {marker}")]
    assert len(hits) == 1
    return hits[0]


@pytest.mark.parametrize("n", [2, 3])
def test_a_raising_rank_stops_every_process_with_its_traceback(n):
    run = run_mpi(n, [FAILURES, "raise", str(n)], timeout=120)
    assert run.returncode != 0
    # process 0 prints the rank's report in user lines
    report = run.rank_err[0]
    assert "RankFailure: rank 0 failed in crash_chip" in report, run.stderr
    assert f'failure_programs.py", line {_line("F:crash")}, in crash_step' in report
    assert "Traceback (program frames" in report and "[TC501]" in report
    # every other process names the same error in one line
    for r in range(1, n):
        lines = run.rank_err[r].strip().splitlines()
        assert len(lines) == 1, run.rank_err[r]
        assert lines[0].startswith(f"tilecomm.errors.RankFailure on process {r} (process 0 "
                                   f"prints the report): rank 0 failed in crash_chip")


@pytest.mark.parametrize("n", [2, 4])
def test_a_deadlock_is_reported_exactly_as_on_shared_memory(n):
    run = run_mpi(n, [FAILURES, "deadlock", str(n)], timeout=120)
    assert run.returncode == 0, run.output
    for r in range(n):
        assert run.rank_out[r].endswith(f"deadlock reported on process {r}\n")
    report = run.rank_out[0].split("<<<\n")[1].split("\n>>>")[0]
    # the same program on the shared-memory backend, in this process's terms
    env = dict(os.environ, TILECOMM_TRANSPORT="shm")
    ref = subprocess.run([sys.executable, FAILURES, "deadlock", str(n)], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert ref.returncode == 0, ref.stdout + ref.stderr
    assert report == ref.stdout.split("<<<\n")[1].split("\n>>>")[0]
    assert f"failure_programs.py:{_line('F:block')}" in report
    assert "(%d blocked, 0 finished)" % n in report


# "nodes": MPICH runs every process as if on a node of its own, so the
# backend picks its layout for jobs across nodes (RMA control plane)
@pytest.mark.parametrize("n,victim,env", [(2, 1, {}), (3, 0, {}),
                                          (2, 1, {"MPIR_CVAR_NOLOCAL": "1"}),
                                          (3, 0, {"MPIR_CVAR_NOLOCAL": "1"})],
                         ids=["one-node-2", "one-node-3", "nodes-2", "nodes-3"])
def test_a_killed_process_ends_the_job_and_leaves_nothing(n, victim, env):
    started = []

    def kill_victim(pids):
        # once every rank process is up and had time to block in its wait
        if [rank_pid(pids, r) for r in range(n)].count(None):
            return False
        if not started:
            started.append(time.monotonic())
        if time.monotonic() - started[0] < 3.0:
            return False
        os.kill(rank_pid(pids, victim), signal.SIGKILL)
        return True

    run = run_mpi(n, [FAILURES, "block", str(n)], timeout=120, env=env, on_start=kill_victim)
    assert run.returncode != 0
    assert run.stdout.count("blocking") == n
    assert "signal 9" in run.output          # mpiexec says which process was killed


def test_a_rank_that_never_stops_gets_the_job_aborted_after_the_report():
    run = run_mpi(2, [FAILURES, "stuck", "2"], timeout=120)
    assert run.returncode != 0
    assert "rank 0 failed in stuck_chip" in run.stderr
    assert "rank(s) [1] did not stop after the call ended; aborting the MPI job" in run.stderr


def test_a_job_of_another_size_is_refused_naming_both():
    run = run_mpi(3, [os.path.join(ROOT, "examples", "hello_rank.py"), "--ranks", "2"],
                  timeout=120)
    assert run.returncode != 0
    assert "error[TC450]" in run.stderr
    assert "runs on 2 rank(s)" in run.stderr and "has 3 process(es)" in run.stderr


def test_an_aborted_job_leaves_no_topology_file_of_the_launcher():
    """MPICH's launcher removes its node's hardware-topology file in /tmp only
    when it exits normally; the backend removes it on its first use of MPI."""
    run = run_mpi(2, [script("topology_file.py")], timeout=120)
    assert run.returncode != 0
    named = {line.split()[1] for out in run.rank_out for line in out.splitlines()
             if line.startswith("NAMED ")}
    assert len(named) == 1 and next(iter(named)).startswith("/tmp/hydra_hwloc_xmlfile_"), \
        run.output
    assert not os.path.exists(next(iter(named))), run.output
