"""A process of an MPI job that goes away while the others go on -- an
uncaught exception in its own script, a script that ends early, processes
at different steps, an exception that leaves a call on one process only --
ends the job promptly, each process saying why; a caught exception aborts
nothing.  And the MPI library's /dev/shm files are
gone as soon as the backend has used MPI, so a job killed before its first
call leaves none behind (``run_mpi`` checks every job for leftovers)."""
import os
import re
import signal
import tempfile
import time

import pytest

from mpi_jobs import rank_pid, requires_mpi, run_mpi, script

pytestmark = requires_mpi
DEPARTURES = script("departures.py")

# how the job's processes see each other (as in test_ranks_under_mpi.py):
# node-shared windows and control plane, or ordinary windows and the RMA
# control plane (TILECOMM_MPI_DIRECT=0: the layout of a job across nodes)
LAYOUTS = {"shared": {}, "rma": {"TILECOMM_MPI_DIRECT": "0"}}

# How long after the victim went away the job may take to end.  With the
# departure noticed, it ends within the victim's wait for its peers to
# confirm (jobwatch.ACK_WAIT_S, 2 s, and only if a peer never confirms) plus
# MPI's abort and run_mpi's wait for the last process (at most 2 s): about
# 0.1 s on an idle machine.  15 s leaves room for this 2-core machine at a
# load of 5; without the fix the job never ends, so run_mpi's own time-out
# (TIMEOUT, far above) is what stops it.
ENDS_WITHIN_S = 15.0
TIMEOUT = 120


def _left_at(run, victim: int) -> float:
    found = re.findall(r"leaving at (\d+\.\d+)", run.rank_err[victim])
    assert len(found) == 1, run.output
    return float(found[0])


def _run(mode: str, n: int, victim: int, layout: str):
    run = run_mpi(n, [DEPARTURES, mode, str(n), str(victim)], timeout=TIMEOUT,
                  env=LAYOUTS[layout])
    return run, time.time()


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("n,victim", [(2, 0), (3, 1)])
def test_an_uncaught_exception_on_one_process_ends_the_job_with_its_traceback(n, victim,
                                                                              layout):
    run, ended = _run("uncaught", n, victim, layout)
    assert run.returncode != 0
    assert ended - _left_at(run, victim) < ENDS_WITHIN_S, run.output
    err = run.rank_err[victim]
    assert "Traceback (most recent call last)" in err, run.output
    assert f"ValueError: a fault of process {victim}'s own script" in err
    assert (f"tilecomm: process {victim} ended with an uncaught ValueError: aborting the MPI "
            f"job") in err, run.output
    # every other process waited for it in its second call, and says so in one line
    for r in set(range(n)) - {victim}:
        lines = [t for t in run.rank_err[r].splitlines() if t.startswith("tilecomm:")]
        assert lines == [f"tilecomm: process {r} stops: process {victim} ended with an "
                         f"uncaught ValueError: a fault of process {victim}'s own script while "
                         f"this process waited for it to set up ranks for a call"], run.output
        assert "Traceback" not in run.rank_err[r]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("n,victim", [(3, 0), (2, 1)])
def test_a_process_that_leaves_a_call_with_an_exception_ends_the_job(n, victim, layout):
    # the victim fails inside the call after it passed the call's gate, with
    # an error that is not the call's: the others wait for its messages in
    # the call, and learn of it when the victim closes its ranks
    run, ended = _run("in-call", n, victim, layout)
    assert run.returncode != 0
    assert ended - _left_at(run, victim) < ENDS_WITHIN_S, run.output
    err = run.rank_err[victim]
    assert f"ValueError: a fault of process {victim}'s own script" in err, run.output
    assert (f"tilecomm: process {victim} left a call with an uncaught ValueError while other "
            f"processes waited for it there: aborting the MPI job") in err
    # a process may still be polling the call's gate when the victim, past
    # it, fails (the gate completes for each process when it next looks):
    # it waited "to start a call" then, else "in a call" -- one of the two
    for r in set(range(n)) - {victim}:
        said = (f"tilecomm: process {r} stops: process {victim} left the call, raising "
                f"ValueError: a fault of process {victim}'s own script, while this process "
                f"waited for it ")
        assert (said + "in a call" in run.rank_err[r]
                or said + "to start a call" in run.rank_err[r]), run.output


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_script_that_ends_early_on_one_process_ends_the_job(layout):
    # no exception reaches a hook: the script's end is what the others learn
    run, ended = _run("exit", 3, 1, layout)
    assert run.returncode != 0
    assert ended - _left_at(run, 1) < ENDS_WITHIN_S, run.output
    for r in (0, 2):
        assert (f"tilecomm: process {r} stops: process 1 left the job (its script ended) "
                f"while this process waited for it to set up ranks for a call"
                in run.rank_err[r]), run.output


@pytest.mark.parametrize("layout", LAYOUTS)
def test_processes_at_different_steps_are_told_so_and_the_job_ends(layout):
    # the victim's exception closes its prepared worker while the others
    # make the worker's next call
    run, ended = _run("worker", 2, 0, layout)
    assert run.returncode != 0
    assert ended - _left_at(run, 0) < ENDS_WITHIN_S, run.output
    assert "ValueError: a fault of process 0's own script" in run.rank_err[0], run.output
    for r in range(2):
        assert (f"tilecomm: process {r}: the processes of the MPI job are at different steps "
                f"(process 0 closes a set of ranks, process 1 starts a call); every process "
                f"must make the same calls in the same order: aborting the MPI job"
                in run.rank_err[r]), run.output


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_same_error_on_every_process_ends_the_job_without_an_abort(layout):
    # (a check of the results failing everywhere): every process ends with
    # its traceback, as without MPI; nobody waited for anybody
    run, ended = _run("every", 3, 0, layout)
    assert run.returncode != 0
    for r in range(3):
        assert ended - _left_at(run, r) < ENDS_WITHIN_S, run.output
        assert f"ValueError: a fault of process {r}'s own script" in run.rank_err[r]
    assert "tilecomm:" not in run.stderr and "Abort" not in run.output, run.output


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_caught_exception_and_a_clean_exit_abort_nothing(layout):
    run, _ = _run("caught", 2, 0, layout)
    assert run.returncode == 0, run.output
    assert run.rank_out == ["OK 0\n", "OK 1\n"], run.output
    assert "tilecomm:" not in run.stderr and "Abort" not in run.output, run.output


def _mpiexec(pids):
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if os.path.basename(f.read().split(b"\0")[0]) == b"mpiexec":
                    return pid
        except OSError:
            pass
    return None


# "nodes": MPICH runs every process as a node of its own, each with its own
# file; "shared": one file for the node
@pytest.mark.parametrize("env", [{}, {"MPIR_CVAR_NOLOCAL": "1"}], ids=["shared", "nodes"])
@pytest.mark.parametrize("how", ["term-mpiexec", "kill-process-0"])
def test_the_mpi_library_files_are_gone_before_the_first_call(env, how):
    n = 2
    with tempfile.TemporaryDirectory(prefix="tilecomm-mpi-ready-") as ready:
        def kill(pids):
            if len([f for f in os.listdir(ready) if f.startswith("ready.")]) < n:
                return False
            if how == "term-mpiexec":        # a launcher's time-out: SIGTERM to every process
                os.kill(_mpiexec(pids), signal.SIGTERM)
            else:
                os.kill(rank_pid(pids, 0), signal.SIGKILL)
            return True

        # run_mpi fails if the job left a /dev/shm file of MPICH's behind
        run = run_mpi(n, [script("library_files.py")], timeout=TIMEOUT,
                      env=dict(env, READY_DIR=ready), on_start=kill)
    assert run.returncode != 0
    # nothing of MPI's was left with a name in the processes once the backend used MPI
    assert run.rank_out == [f"named {r}: \n" for r in range(n)], run.output
