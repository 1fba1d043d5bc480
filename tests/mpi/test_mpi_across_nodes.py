"""Host tensors and run artefacts when the processes of an MPI job share no
memory with process 0 -- as on several nodes: ``TILECOMM_MPI_DIRECT=0`` on
this machine, and ``MPIR_CVAR_NOLOCAL=1`` (MPICH: every process believes it
is alone on its node).  Host tensors then travel by RMA (``backends/mpi/hosts.py``),
a rank's artefacts as messages; the scripts check every result against
numpy on every process, and that processes r > 0 map none of process 0's
segments and write nothing into its output directory themselves."""
import re

import pytest

from mpi_jobs import requires_mpi, run_mpi, script
from tilecomm.errors import CODES

pytestmark = requires_mpi

# a job whose processes believe they are on separate nodes is refused while
# the control plane lives in node-shared memory (TC452); these variants run
# once it does not
NOLOCAL = pytest.param("nolocal", marks=pytest.mark.skipif(
    "TC452" in CODES, reason="the control plane still needs one node (TC452)"))
MODES = {"direct0": {"TILECOMM_MPI_DIRECT": "0"}, "nolocal": {"MPIR_CVAR_NOLOCAL": "1"}}


def _per_process(run, n, pattern):
    """The one value ``pattern`` captures in each process's output, in rank order."""
    got = [re.findall(pattern, out) for out in run.rank_out]
    assert all(len(g) == 1 for g in got), run.output[-8000:]
    assert len(got) == n
    return [int(g[0]) for g in got]


@pytest.mark.parametrize("mode", ["direct0", NOLOCAL])
@pytest.mark.parametrize("n", [2, 3])
def test_host_tensors_travel_by_rma(n, mode):
    run = run_mpi(n, [script("host_tensors.py"), str(n)], timeout=300, env=MODES[mode])
    assert run.returncode == 0, run.output[-8000:]
    mapped = _per_process(run, n, r"OK \d+ mapped=(\d+)")
    assert mapped[0] > 0                       # process 0's own segments
    assert mapped[1:] == [0] * (n - 1), mapped


def test_on_shared_memory_the_ranks_map_process_0s_segments():
    # the same script where processes share a node's memory: the count above
    # is what tells the two paths apart
    run = run_mpi(2, [script("host_tensors.py"), "2"], timeout=300)
    assert run.returncode == 0, run.output[-8000:]
    mapped = _per_process(run, 2, r"OK \d+ mapped=(\d+)")
    assert mapped[1] > 0, mapped


@pytest.mark.parametrize("mode", ["direct0", NOLOCAL])
@pytest.mark.parametrize("n", [2, 3])
def test_run_artefacts_reach_process_0(tmp_path, n, mode):
    run = run_mpi(n, [script("artefacts_remote.py"), str(n), str(tmp_path)], timeout=300,
                  env=MODES[mode])
    assert run.returncode == 0, run.output[-8000:]
    roots = _per_process(run, n, r"OK \d+ roots=(\d+)")
    # process 0 writes in place; each other process used a private directory
    # per call (a traced one and a failed one), removed since
    assert roots == [0] + [2] * (n - 1), roots
