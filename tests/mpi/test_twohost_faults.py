"""Faults between two hosts (twohost_jobs): every process of one host killed
mid-call, the link between the hosts taken down mid-call, a process of the
far host raising.  Each ends the job within seconds, on every process, with
a report naming the lost host or process, and leaves nothing behind on
either host (``run_twohost`` checks: no process, nothing in either host's
/dev/shm or /tmp)."""
import os
import re
import signal
import time

import pytest

from mpi_jobs import rank_pid, requires_mpi
from twohost_jobs import (example, host_of_rank, rank_script, run_twohost,  # noqa: F401
                          two_hosts)

pytestmark = [requires_mpi, pytest.mark.twohost]
FAILURES = rank_script("failures.py")
DEPARTURES = rank_script("departures.py")
HELLO = example("hello_rank.py")

# How long after the fault the job may take to end.  A killed host is seen
# at once (its sockets close); a silent link after the lifeline's LOST_S
# (5 s, backends/mpi/lifeline.py).  The rest is room for this shared 2-core
# machine under load; without detection the job never ends, so run_twohost's
# own time-out (TIMEOUT) is what would stop it.
KILLED_WITHIN_S = 10.0
SILENT_WITHIN_S = 15.0
TIMEOUT = 120
# once every rank is up, the time it gets to block in its wait
SETTLE_S = 3.0


def _when_blocked(n, act):
    """An ``on_start`` that calls ``act()`` once every rank process is up
    and had SETTLE_S to block in its wait; ``act``'s time is kept in the list
    it returns."""
    seen, done = [], []

    def on_start(pids):
        if [rank_pid(pids, r) for r in range(n)].count(None):
            return False
        if not seen:
            seen.append(time.monotonic())
        if time.monotonic() - seen[0] < SETTLE_S:
            return False
        act()
        done.append(time.time())
        return True
    return on_start, done


@pytest.mark.parametrize("n,per_host", [(2, 1), (4, 2)], ids=["1-per-host", "2-per-host"])
def test_killing_every_process_of_one_host_ends_the_job_naming_it(two_hosts, n, per_host):
    def kill_node_b():
        # the ranks and hydra's proxy: nothing of the job is left on node-b
        for pid in two_hosts.processes("node-b"):
            os.kill(pid, signal.SIGKILL)

    report = "twohosts: lost node-b: its side of the job was killed (signal 9)"
    # The launcher names the lost host as it sees its side killed, while
    # mpiexec, seeing the same loss, ends and may stop the launcher first: on
    # a loaded machine the line can lose that race.  The job must end in
    # time on every attempt; the line must come on one of two.
    for attempt in range(2):
        on_start, killed = _when_blocked(n, kill_node_b)
        run = run_twohost(two_hosts, n, [FAILURES, "block", str(n)], per_host=per_host,
                          timeout=TIMEOUT, on_start=on_start)
        ended = time.time()
        assert killed, run.output
        assert run.returncode != 0
        assert ended - killed[0] < KILLED_WITHIN_S, run.output
        # node-a's processes had blocked before (the kill came mid-call)
        assert run.stdout.count("blocking") >= n // 2
        if report in run.stderr:
            break
    assert report in run.stderr, run.output


# the silence that makes a peer lost: the default (5 s), and one set by
# TILECOMM_MPI_LOST_S
@pytest.mark.parametrize("n,per_host,lost_s", [(2, 1, None), (4, 2, "3")],
                         ids=["1-per-host", "2-per-host-lost-after-3s"])
def test_the_link_going_down_mid_call_ends_the_job_naming_the_lost_host(two_hosts, n,
                                                                        per_host, lost_s):
    on_start, cut = _when_blocked(n, lambda: two_hosts.set_link("node-b", False))
    env = {"TILECOMM_MPI_LOST_S": lost_s or ""}          # "": the default
    run = run_twohost(two_hosts, n, [FAILURES, "block", str(n)], per_host=per_host,
                      timeout=TIMEOUT, on_start=on_start, env=env)
    ended = time.time()
    assert cut, run.output
    assert run.returncode != 0
    assert ended - cut[0] < SILENT_WITHIN_S, run.output
    assert run.stdout.count("blocking") == n, run.output
    far = [r for r in range(n) if host_of_rank(r, per_host) == "node-b"]
    lost = f"host node-b (process(es) {', '.join(map(str, far))})"
    # a process of node-a (process 0's host, where the launcher is) saw it
    # first and aborted the job; its partner may have said so too
    reports = [(r, found) for r in range(n) if host_of_rank(r, per_host) == "node-a"
               for found in re.findall(
                   rf"tilecomm: process {r} on host node-a lost (.*): no word from any of its "
                   r"processes for (\d+\.\d) s \(that host is down, or the network to it "
                   r"is\); aborting the MPI job", run.rank_err[r])]
    assert reports, run.output
    for r, (named, silent) in reports:
        assert named == lost, run.output
        assert float(lost_s or 5.0) <= float(silent) < SILENT_WITHIN_S


@pytest.mark.parametrize("mode", ["uncaught", "in-call", "exit"])
def test_a_process_of_the_far_host_that_raises_ends_the_job_naming_it(two_hosts, mode):
    """Process 1, on node-b, raises: between calls (an uncaught exception of
    its script) or inside a call (an error that is not the call's); or its
    script ends early, no exception, while process 0 goes on (its lifeline
    must not keep it from telling process 0 it left)."""
    run = run_twohost(two_hosts, 2, [DEPARTURES, mode, "2", "1"], timeout=TIMEOUT)
    ended = time.time()
    assert run.returncode != 0
    left = re.findall(r"leaving at (\d+\.\d+)", run.rank_err[1])
    assert len(left) == 1, run.output
    assert ended - float(left[0]) < KILLED_WITHIN_S, run.output
    said = [t for t in run.rank_err[0].splitlines() if t.startswith("tilecomm:")]
    if mode == "exit":
        assert said == ["tilecomm: process 0 stops: process 1 left the job (its script ended) "
                        "while this process waited for it to set up ranks for a call"], \
            run.output
        return
    assert "ValueError: a fault of process 1's own script" in run.rank_err[1], run.output
    if mode == "uncaught":
        assert said == ["tilecomm: process 0 stops: process 1 ended with an uncaught "
                        "ValueError: a fault of process 1's own script while this process "
                        "waited for it to set up ranks for a call"], run.output
    else:
        assert len(said) == 1 and said[0].startswith(
            "tilecomm: process 0 stops: process 1 left the call, raising ValueError: a fault "
            "of process 1's own script, while this process waited for it "), run.output


def test_a_lost_peer_silence_below_four_beats_is_refused_on_every_process(two_hosts):
    run = run_twohost(two_hosts, 2, [HELLO, "--ranks", "2"], timeout=TIMEOUT,
                      env={"TILECOMM_MPI_LOST_S": "0.5"})
    assert run.returncode != 0
    for r in range(2):
        assert "error[TC402]: TILECOMM_MPI_LOST_S must be a number of seconds of at least 1, " \
               "got '0.5'" in run.rank_err[r], run.output
