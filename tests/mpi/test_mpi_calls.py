"""Calls under mpiexec: inputs are process 0's, outputs reach every process
(one-shot calls and a prepared worker), at every world size."""
import pytest

from mpi_jobs import requires_mpi, run_mpi, script

pytestmark = requires_mpi


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_inputs_are_process_0s_and_every_process_gets_the_outputs(n):
    run = run_mpi(n, [script("inputs.py"), str(n)], timeout=180)
    assert run.returncode == 0, run.output
    assert run.rank_out == [f"OK {r}\n" for r in range(n)], run.output
