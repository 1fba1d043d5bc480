"""Asynchronous puts under mpiexec (scripts/put_async.py): the transfer is
issued through the MPI transport and lands at the wait of its event; results
match numpy on every process, and the race check reports a notify made
before the event's wait on every process."""
import pytest

from mpi_jobs import requires_mpi, run_mpi, script

pytestmark = requires_mpi


@pytest.mark.parametrize("n", [2, 3])
def test_put_async_under_mpiexec(n):
    run = run_mpi(n, [script("put_async.py"), str(n)], timeout=240)
    assert run.returncode == 0, run.output
    assert run.rank_out == [f"ASYNC {r}\n" for r in range(n)], run.output
