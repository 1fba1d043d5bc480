"""Every example runs unchanged under ``mpiexec -n 2`` (the MPI backend is
picked because the processes were started by an MPI launcher) and prints OK
on every process: each process holds the full results it checks.  So do the
tutorials (examples/tutorials)."""
import os

import pytest

from mpi_jobs import ROOT, requires_mpi, run_mpi

pytestmark = requires_mpi
TUTORIALS = "tutorials"


def _scripts(folder) -> list:
    return sorted(f for f in os.listdir(os.path.join(ROOT, "examples", folder))
                  if f.endswith(".py"))


# paths under examples/, the tutorials (examples/tutorials) after the examples
EXAMPLES = _scripts("") + [f"{TUTORIALS}/{f}" for f in _scripts(TUTORIALS)]


@pytest.mark.parametrize("example", EXAMPLES)
def test_example_prints_ok_on_every_process(example):
    run = run_mpi(2, [os.path.join(ROOT, "examples", example), "--ranks", "2"], timeout=180)
    assert run.returncode == 0, run.output
    for out in run.rank_out:
        assert out.strip().splitlines()[-1] == "OK", run.output
