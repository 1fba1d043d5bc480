"""Helpers of the two-host tests: a pair of simulated hosts on this machine
(``tools/twohosts.py``: network, UTS and mount namespaces, a private
/dev/shm and /tmp each, joined by a veth pair) made fresh for every test,
and ``run_twohost``, which runs a script under ``mpiexec`` started on the
first host with ranks on both, and checks afterwards that the job left no
process and nothing in either host's /dev/shm or /tmp.

Where namespaces cannot be made (not root, no ``ip``), the tests skip with
the one-line reason -- unless ``REQUIRED`` is set in the environment, as
``.ci/run`` sets it (CI runs as root): then they fail with that reason.
"""
import importlib.util
import os
import tempfile
import time

import pytest

from mpi_jobs import MPIEXEC, ROOT, HERE, MpiRun, finish_job

TOOL = os.path.join(ROOT, "tools", "twohosts.py")
_spec = importlib.util.spec_from_file_location("twohosts", TOOL)
twohosts = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(twohosts)

SKIP_REASON = "two hosts unavailable"
REQUIRED = "TILECOMM_TEST_REQUIRE_TWOHOST"
# the job's output files are written by mpiexec on the first host, whose
# /tmp is its own: they go to a directory both this process and it can see
OUT_ROOT = "/run"


@pytest.fixture
def two_hosts():
    """Two fresh hosts (``twohosts.Hosts``), removed after the test whatever
    happened (every process in them killed)."""
    hosts = twohosts.Hosts(f"t{os.getpid()}")
    try:
        hosts.up(tied=True)
    except twohosts.Unavailable as e:
        if os.environ.get(REQUIRED) == "1":
            pytest.fail(f"{SKIP_REASON} where {REQUIRED}=1: {e}")
        pytest.skip(f"{SKIP_REASON}: {e}")
    try:
        yield hosts
    finally:
        hosts.down()


def run_twohost(hosts, n: int, argv: list, per_host: int = 1, timeout: float = 300,
                env=None, on_start=None, options=()) -> MpiRun:
    """``mpiexec -n n python argv`` from the first host, ``per_host`` processes
    a host in turn (rank 0 on ``node-a``); then check nothing of it is left
    on this machine or in either host."""
    # the lifeline's default silence (5 s) is for the fault tests, which pass
    # theirs; elsewhere a longer one, as a job on a machine this loaded
    # should: twice a job of the suite had a whole host's Python stand still
    # that long here, and was aborted as cut off
    env = {"TILECOMM_MPI_LOST_S": "30", **(env or {})}
    before = {h: hosts.leftovers(h) for h in hosts.names}
    assert before == {h: [] for h in hosts.names}, before
    with tempfile.TemporaryDirectory(prefix="tilecomm-twohost-", dir=OUT_ROOT) as outdir:
        cmd = hosts.mpiexec(MPIEXEC, n, per_host, [], options)
        run = finish_job(cmd, argv, outdir, n, env, timeout, on_start)
    assert_hosts_empty(hosts)
    return run


def assert_hosts_empty(hosts) -> None:
    """No process in either host and nothing in their /dev/shm and /tmp (a
    dying job's last processes get a moment to go)."""
    deadline = time.monotonic() + 3.0
    while any(hosts.processes(h) for h in hosts.names) and time.monotonic() < deadline:
        time.sleep(0.02)
    left = {h: hosts.processes(h) for h in hosts.names}
    assert left == {h: [] for h in hosts.names}, f"processes left in the hosts: {left}"
    files = {h: hosts.leftovers(h) for h in hosts.names}
    assert files == {h: [] for h in hosts.names}, f"files left in the hosts: {files}"


def host_of_rank(rank: int, per_host: int) -> str:
    return twohosts.NAMES[(rank // per_host) % len(twohosts.NAMES)]


def example(name: str) -> str:
    return os.path.join(ROOT, "examples", name)


def rank_script(name: str) -> str:
    return os.path.join(HERE, "scripts", name)
