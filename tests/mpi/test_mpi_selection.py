"""Choosing the MPI backend, and its configuration errors.  Runs that would
initialise MPI run in a subprocess (MPI stays initialised for the life of a
process)."""
import os
import subprocess
import sys

import pytest

from tilecomm.errors import ConfigError
from tilecomm.runtime import RunConfig
from tilecomm.runtime.config import MPI_LAUNCHER_VARS, from_env

from mpi_jobs import ROOT, requires_mpi, script


@pytest.mark.parametrize("var", MPI_LAUNCHER_VARS)
def test_a_process_started_by_an_mpi_launcher_selects_the_mpi_backend(var, monkeypatch):
    for v in MPI_LAUNCHER_VARS:
        monkeypatch.delenv(v, raising=False)
    assert RunConfig().resolved_transport() == "shm"
    monkeypatch.setenv(var, "0")
    assert from_env()["transport"] == "mpi"
    assert RunConfig().resolved_transport() == "mpi"
    # the explicit choices win
    monkeypatch.setenv("TILECOMM_TRANSPORT", "copy")
    assert RunConfig().resolved_transport() == "copy"
    assert RunConfig(transport="shm").resolved_transport() == "shm"


def test_mpi_is_a_transport_name_and_others_are_refused():
    assert RunConfig(transport="mpi").resolved_transport() == "mpi"
    with pytest.raises(ConfigError) as ei:
        RunConfig(transport="mpich")
    assert ei.value.code == "TC402" and "'mpi'" in str(ei.value)


def _run(argv, **env):
    e = {k: v for k, v in os.environ.items()
         if k != "TILECOMM_TRANSPORT" and k not in MPI_LAUNCHER_VARS}
    e.update(env)
    return subprocess.run([sys.executable, *argv], env=e, cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def test_tilecomm_never_loads_mpi_unless_the_mpi_backend_runs():
    code = ("import sys, runpy; sys.argv = ['x', '--ranks', '2']; "
            "runpy.run_path('examples/hello_rank.py', run_name='__main__'); "
            "print('mpi4py loaded' if 'mpi4py' in sys.modules else 'mpi4py not loaded')")
    run = _run(["-c", code])
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().splitlines()[-1] == "mpi4py not loaded"


@requires_mpi
def test_outside_mpiexec_the_mpi_backend_is_a_job_of_one_process():
    run = _run([os.path.join(ROOT, "examples", "hello_rank.py"), "--ranks", "1"],
               TILECOMM_TRANSPORT="mpi")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().splitlines()[-1] == "OK"
    run = _run([os.path.join(ROOT, "examples", "hello_rank.py"), "--ranks", "2"],
               TILECOMM_TRANSPORT="mpi")
    assert run.returncode != 0
    assert "error[TC450]" in run.stderr and "has 1 process(es)" in run.stderr


@requires_mpi
def test_a_window_pool_too_small_is_a_typed_error_and_a_bad_size_is_refused():
    run = _run([script("big_window.py")], TILECOMM_TRANSPORT="mpi")
    assert run.returncode == 0 and run.stdout.strip() == "OK", run.stderr
    run = _run([script("big_window.py")], TILECOMM_TRANSPORT="mpi", TILECOMM_MPI_POOL_MB="1")
    assert run.returncode != 0
    assert "error[TC510]" in run.stderr and "TILECOMM_MPI_POOL_MB" in run.stderr
    with open(script("big_window.py")) as f:        # at the allocation in the program
        line = next(i for i, t in enumerate(f, 1) if t.rstrip().endswith("# BIG"))
    assert f"big_window.py:{line}:" in run.stderr
    run = _run([script("big_window.py")], TILECOMM_TRANSPORT="mpi", TILECOMM_MPI_POOL_MB="0")
    assert run.returncode != 0 and "error[TC402]" in run.stderr
