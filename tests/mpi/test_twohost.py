"""Jobs across two hosts: two simulated hosts on this machine (twohost_jobs:
namespaces of their own, no shared /dev/shm or /tmp, another hostname, MPICH
talking TCP over a veth pair), ``mpiexec`` started on the first.  Every
example, and the multi-rank suite (tests/ranks: collectives, put / get,
remote_load / remote_store, tasks, deferred waits, ...) with its own numpy
references, run with their processes split over the hosts; every job must
leave nothing on either host (``run_twohost`` checks)."""
import os
import re
import subprocess
import sys
import tempfile

import pytest

from mpi_jobs import requires_mpi
from mpi_plugin import SHARED_TMP
from test_mpi_examples import EXAMPLES
from twohost_jobs import OUT_ROOT, TOOL, example, rank_script, run_twohost, two_hosts  # noqa: F401

pytestmark = [requires_mpi, pytest.mark.twohost]


def test_without_root_the_hosts_are_refused_in_one_line():
    """What a skip says where namespaces cannot be made: run as an ordinary
    user (dropped to ``nobody`` when this is root)."""
    drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] \
        if os.geteuid() == 0 else []
    got = subprocess.run([*drop, sys.executable, TOOL, "--name", f"t{os.getpid()}", "up"],
                         capture_output=True, text=True, timeout=60, cwd="/")
    assert got.returncode == 2, got
    assert got.stderr == "twohosts: two hosts need root (network and mount namespaces)\n"
    assert got.stdout == ""


def test_the_processes_run_on_two_hosts_that_share_no_memory(two_hosts):
    """The fixture itself: each process sees its own hostname, MPI counts
    two nodes, and the backend picks the layout across nodes -- process 1
    maps none of process 0's segments (its /dev/shm is another one)."""
    run = run_twohost(two_hosts, 2, [rank_script("host_tensors.py"), "2"])
    assert run.returncode == 0, run.output[-8000:]
    hosts = [re.findall(r"HOST (\S+) nodes=(\d+)", out) for out in run.rank_out]
    assert hosts == [[("node-a", "2")], [("node-b", "2")]], run.output[-4000:]
    mapped = [int(m) for out in run.rank_out for m in re.findall(r"OK \d+ mapped=(\d+)", out)]
    assert mapped[0] > 0 and mapped[1] == 0, run.output[-4000:]



def _checks_races(name: str) -> bool:
    with open(example(name)) as f:
        return "detect_races" in f.read()


# the examples that turn the race check on: refused across hosts (the last test)
RACE_EXAMPLES = [e for e in EXAMPLES if _checks_races(e)]


@pytest.mark.parametrize("example_name", [e for e in EXAMPLES if e not in RACE_EXAMPLES])
def test_example_across_two_hosts(two_hosts, example_name):
    run = run_twohost(two_hosts, 2, [example(example_name), "--ranks", "2"], timeout=180)
    assert run.returncode == 0, run.output[-8000:]
    for out in run.rank_out:
        assert out.strip().splitlines()[-1] == "OK", run.output[-8000:]


# collectives, put / get, remote_load / remote_store, notify / wait, tasks,
# deferred waits, prepared workers
MAIN_MODULES = {"test_collectives_basic.py", "test_collectives_incore.py",
                "test_collectives_host.py", "test_put.py", "test_get.py",
                "test_remote_load.py", "test_remote_store.py", "test_notify_wait.py",
                "test_tasks.py", "test_deferred.py", "test_worker_api.py"}


@pytest.mark.parametrize("n,per_host", [(2, 1), (4, 2)], ids=["1-per-host", "2-per-host"])
def test_rank_suite_across_two_hosts(two_hosts, n, per_host):
    """tests/ranks under the plugin of test_ranks_under_mpi.py; with two
    processes a host, each host's pair shares a node window and reaches the
    other pair over RMA.  Output directories live on a directory every host
    sees, as a cluster's shared file system (a host's /tmp is its own)."""
    with tempfile.TemporaryDirectory(prefix="tilecomm-shared-", dir=OUT_ROOT) as shared:
        run = run_twohost(two_hosts, n,
                          ["-m", "pytest", "-q", "-rA", "-p", "mpi_plugin", "-p",
                           "no:cacheprovider", "--timeout", "120", "--timeout-method", "thread",
                           "tests/ranks"],
                          per_host=per_host, timeout=900, env={SHARED_TMP: shared})
    assert run.returncode == 0, run.output[-20000:]
    summaries = [re.findall(r"(\d+) passed", out) for out in run.rank_out]
    assert all(len(s) == 1 for s in summaries), run.output[-5000:]
    assert len({s[0] for s in summaries}) == 1, summaries
    assert " failed" not in run.stdout and " error" not in run.stdout
    assert int(summaries[0][0]) >= 120, summaries
    # the main cases ran, on every process: none of them left out by the plugin
    for out in run.rank_out:
        ran = set(re.findall(r"^PASSED tests/ranks/(test_\w+\.py)::", out, re.M))
        assert MAIN_MODULES <= ran, sorted(MAIN_MODULES - ran)


def test_run_artefacts_of_the_far_host_reach_process_0(two_hosts):
    with tempfile.TemporaryDirectory(prefix="tilecomm-shared-", dir=OUT_ROOT) as out:
        run = run_twohost(two_hosts, 2, [rank_script("artefacts_remote.py"), "2", out])
    assert run.returncode == 0, run.output[-8000:]
    roots = [int(r) for o in run.rank_out for r in re.findall(r"OK \d+ roots=(\d+)", o)]
    assert roots == [0, 2], run.output[-4000:]


def test_the_race_check_across_hosts_is_refused_saying_why_and_what_instead(two_hosts):
    run = run_twohost(two_hosts, 2, [rank_script("races.py"), "nodes", "2"])
    assert run.returncode == 0, run.output[-8000:]
    assert run.rank_out == [f"REFUSED {r}\n" for r in range(2)], run.output[-8000:]


@pytest.mark.parametrize("example_name", RACE_EXAMPLES)
def test_an_example_with_the_race_check_is_refused_on_every_process(two_hosts, example_name):
    run = run_twohost(two_hosts, 2, [example(example_name), "--ranks", "2"])
    assert run.returncode != 0
    assert "error[TC402]: RunConfig.detect_races cannot check a job whose control block is " \
           "reached over MPI RMA" in run.rank_err[0], run.output[-8000:]
    assert "tilecomm.errors.ConfigError on process 1 (process 0 prints the report): " \
           "error[TC402]" in run.rank_err[1], run.output[-8000:]
