"""The multi-rank test suite (tests/ranks), run on the MPI backend under
``mpiexec -n N`` for N = 1..4: the same programs and the same numpy
references as on the shared-memory backend, every case of world size N
(``mpi_plugin.py`` selects them and says which fork-only cases it leaves
out).  Each MPI process runs the pytest session, so every process checks
the results it holds."""
import re

import pytest

from conftest import requires_mpi, run_mpi

pytestmark = requires_mpi


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_rank_suite_passes_under_mpiexec(n):
    run = run_mpi(n, ["-m", "pytest", "-q", "-p", "mpi_plugin", "-p", "no:cacheprovider",
                      "tests/ranks"], timeout=900)
    assert run.returncode == 0, run.output[-20000:]
    summaries = re.findall(r"(\d+) passed", run.stdout)
    # one summary per process, each with the same count of passed cases
    assert len(summaries) == n, run.output[-5000:]
    assert len(set(summaries)) == 1 and int(summaries[0]) >= 90, summaries
    assert " failed" not in run.stdout and " error" not in run.stdout
