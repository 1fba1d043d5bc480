"""Run-time failures: deadlocks explain themselves, a crashed or killed rank stops
every rank, Ctrl-C stops everything, and nothing leaks whatever happens.

Each test proves which path ended the call by what it left behind -- the
error's type and report, the ranks' exit codes -- not by how long it took:
on a shared machine a wall-clock bound measures the load, and the design's
latency targets are benchmark figures.  Where a path leaves no other trace
(Ctrl-C), the bound kept is an order of magnitude below the alternative.
"""
import os
import re
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import failure_programs as F
from conftest import children, my_segments, process_alive, signal_a_rank_during
from tilecomm.errors import DeadlockError, RankFailure
from tilecomm.runtime.messages import EXIT_ABORTED, EXIT_FAILED
from tilecomm.transport.shm import ShmHost

FILE = os.path.abspath(F.__file__)


# ------------------------------------------------------------------ helpers
def marker_line(tag: str) -> int:
    with open(FILE) as f:
        hits = [i + 1 for i, text in enumerate(f) if re.search(rf"#\s*F:{tag}\s*$", text)]
    assert len(hits) == 1, f"marker F:{tag} must occur exactly once"
    return hits[0]


def assert_clean():
    """Right after a failure: no worker process and no segment of ours is left."""
    assert children(os.getpid()) == set(), "worker processes outlived the call"
    assert my_segments() == [], "shared-memory segments outlived the call"


@pytest.fixture(autouse=True)
def no_thread_leaks():
    before = threading.active_count()
    yield
    assert threading.active_count() == before, "threads leaked"


def failed_call(main, *args, cfg, expect):
    """Run ``main``, which must raise ``expect``; return what it raised."""
    with pytest.raises(expect) as ei:
        main(*args, config=cfg)
    return ei.value


def assert_aborted_by(e, failed: int, n: int, code: int = EXIT_FAILED):
    """The call ended through the failure path: rank ``failed`` exited with
    ``code`` and every other rank left its wait through the abort flag and
    exited on its own (EXIT_ABORTED) -- none was still blocked and had to be
    killed, and no deadlock report ended the call (its time-out is 60 s
    here, and it would raise DeadlockError)."""
    assert isinstance(e, RankFailure) and not isinstance(e, DeadlockError), repr(e)
    assert e.exit_codes == {r: code if r == failed else EXIT_ABORTED for r in range(n)}, \
        e.exit_codes


def rank_block(text: str, rank: int) -> str:
    """The lines of a deadlock report that describe ``rank``."""
    lines = text.splitlines()
    starts = [i for i, l in enumerate(lines) if re.match(rf"\s*rank {rank}\b", l)]
    assert len(starts) == 1, f"rank {rank} must be listed exactly once:\n{text}"
    i = starts[0] + 1
    while i < len(lines) and not re.match(r"\s*(rank \d+\b|hint:)", lines[i]):
        i += 1
    return "\n".join(lines[starts[0]:i])


def check_deadlock(e, *, blocked, tag, value, expected, world):
    text = str(e)
    line = marker_line(tag)
    assert sorted(b["rank"] for b in e.blocked) == blocked, text
    for b in e.blocked:
        assert b["span"] is not None and os.path.abspath(b["span"].file) == FILE
        assert b["span"].line == line
        assert (b["value"], b["expected"], b["cmp"]) == (value, expected, "Ge")
    for r in range(world):
        if r in blocked:
            block = rank_block(text, r)
            assert f"{FILE}:{line}:" in block, block               # where it waits
            assert "buf" in block and "[0, 0]" in block, block     # which cell
            assert re.search(rf"=\s*{value}\b", block), block      # its current value
            assert f">= {expected}" in block, block                 # what it waits for
        else:
            assert not re.search(rf"^\s*rank {r}\b", text, re.M), f"rank {r} finished:\n{text}"
    assert f"{len(blocked)} blocked" in text and f"{world - len(blocked)} finished" in text


# ------------------------------------------------------------------ deadlocks
def test_seed_handshake_with_tag_0_deadlocks():
    """The seed's handshake sends tag 0 but waits for >= 1: both ranks hang."""
    e = failed_call(F.seed_tag0_main, F.outputs(2), cfg=F.config(2), expect=DeadlockError)
    check_deadlock(e, blocked=[0, 1], tag="seed", value=0, expected=1, world=2)
    assert_clean()


@pytest.mark.parametrize("n", [2, 3, 4])
def test_ring_handshake_with_tag_0_deadlocks(n):
    e = failed_call(F.ring_main, F.outputs(n), 0, cfg=F.config(n), expect=DeadlockError)
    check_deadlock(e, blocked=list(range(n)), tag="ring", value=0, expected=1, world=n)
    assert_clean()


@pytest.mark.parametrize("n", [2, 3, 4])
def test_ring_handshake_with_tag_1_completes(n):
    """Positive control for the program above: with a non-zero tag it runs."""
    outs = F.outputs(n)
    F.ring_main(outs, 1, config=F.config(n))
    np.testing.assert_array_equal(outs, np.full((n, 1, 1), 1, np.int32))


@pytest.mark.parametrize("n", [2, 3, 4])
def test_deadlock_of_some_ranks_while_others_finish(n):
    odd = [r for r in range(n) if r % 2 == 1]
    e = failed_call(F.partial_main, F.outputs(n), cfg=F.config(n), expect=DeadlockError)
    check_deadlock(e, blocked=odd, tag="partial", value=0, expected=1, world=n)
    assert_clean()


def test_wait_timeout_reports_the_wait():
    """With deadlock detection out of the way, wait_timeout_s bounds a single wait."""
    cfg = F.config(3, deadlock_timeout_s=60, wait_timeout_s=0.3)
    e = failed_call(F.partial_main, F.outputs(3), cfg=cfg, expect=RankFailure)
    # the wait's own time-out ended it (TC504), not the 60 s deadlock report
    assert e.rank == 1 and e.error_code == "TC504"
    assert e.span.line == marker_line("partial")
    assert "timed out" in str(e) and f'File "{FILE}", line {marker_line("partial")}' in str(e)
    assert_clean()


def test_a_per_call_wait_timeout_applies_on_a_prepared_worker():
    """The worker's ranks start with its config (no wait time-out); a call's
    own config brings its rank-side knobs to the ranks for that call, and
    the next call without one runs with the worker's again."""
    started = F.config(3, deadlock_timeout_s=60)
    prog = F.partial_main.compile(F.outputs(3), config=started)
    with prog.prepare(started) as rt:
        e = failed_call(rt, F.outputs(3), cfg=F.config(3, deadlock_timeout_s=60,
                                                        wait_timeout_s=0.3),
                        expect=RankFailure)
        assert e.rank == 1 and e.error_code == "TC504"
        assert e.span.line == marker_line("partial")
        # back to the worker's knobs: no time-out, so the deadlock report
        e = failed_call(rt, F.outputs(3), cfg=F.config(3, deadlock_timeout_s=0.3),
                        expect=DeadlockError)
        check_deadlock(e, blocked=[1], tag="partial", value=0, expected=1, world=3)
    assert_clean()


# ------------------------------------------------------------------ a rank raises
@pytest.mark.parametrize("n", [2, 3, 4])
def test_crashing_rank_stops_ranks_blocked_forever(n):
    # a 60 s deadlock time-out: were the crash path broken, the call would end
    # only then, and as a DeadlockError
    cfg = F.config(n, deadlock_timeout_s=60)
    e = failed_call(F.crash_main, F.outputs(n), cfg=cfg, expect=RankFailure)
    assert_aborted_by(e, 0, n)
    line = marker_line("crash")
    text = str(e)
    assert e.rank == 0 and text.startswith("rank 0 ")
    assert e.error_type == "RuntimeFault" and e.error_code == "TC501"
    assert os.path.abspath(e.span.file) == FILE and e.span.line == line
    assert f'File "{FILE}", line {line}' in text
    assert "pld.system.notify(cells, n + 5" in text                # the kernel source line
    assert f"peer {n + 5} is out of range" in text and f"{n} rank(s)" in text
    assert_clean()


@pytest.mark.parametrize("n", [2, 3, 4])
def test_peers_blocked_in_waits_are_aborted_not_killed(n):
    """A rank's failure raises the abort flag: every peer blocked in its wait
    returns from it (RankAborted) and exits on its own, promptly."""
    cfg = F.config(n, deadlock_timeout_s=60)
    e = failed_call(F.crash_main, F.outputs(n), cfg=cfg, expect=RankFailure)
    assert_aborted_by(e, 0, n)
    assert_clean()


def test_a_killed_rank_aborts_the_others_too():
    """A rank that dies (no error message at all) aborts its blocked peers."""
    n = 3
    cfg = F.config(n, deadlock_timeout_s=60)
    F.block_main.compile(F.outputs(n), config=cfg)
    err = signal_a_rank_during(lambda: F.block_main(F.outputs(n), config=cfg), n,
                               signal.SIGKILL)
    assert_aborted_by(err, 0, n, -signal.SIGKILL)
    assert_clean()


# ------------------------------------------------------------------ a rank is killed
@pytest.mark.parametrize("n,victim", [(2, 1), (3, 2), (4, 1)])
def test_killed_rank_is_reported(n, victim):
    before = children(os.getpid())
    state = {}

    def killer():
        deadline = time.monotonic() + 10
        workers = set()
        while time.monotonic() < deadline:
            workers = children(os.getpid()) - before
            if len(workers) >= n:
                break
            time.sleep(0.005)
        else:
            state["error"] = f"only {len(workers)} of {n} workers appeared"
            for pid in workers:                  # unblock the call; the test then fails
                os.kill(pid, signal.SIGKILL)
            return
        time.sleep(0.3)                          # let every rank reach its wait
        pid = sorted(workers)[victim]            # workers are forked in rank order
        os.kill(pid, signal.SIGKILL)

    cfg = F.config(n, deadlock_timeout_s=60)
    F.block_main.compile(F.outputs(n), config=cfg)
    th = threading.Thread(target=killer)
    th.start()
    try:
        with pytest.raises(RankFailure) as ei:
            F.block_main(F.outputs(n), config=cfg)
    finally:
        th.join()
    assert "error" not in state, state.get("error")
    e = ei.value
    assert e.rank == victim
    assert f"rank {victim}" in str(e) and "SIGKILL" in str(e)
    assert_aborted_by(e, victim, n, -signal.SIGKILL)
    assert_clean()


# ------------------------------------------------------------------ Ctrl-C
def test_ctrl_c_stops_everything():
    n = 3
    proc = subprocess.Popen([sys.executable, FILE, str(n)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        workers = set()
        while time.monotonic() < deadline and proc.poll() is None:
            workers = children(proc.pid)
            if len(workers) >= n:
                break
            time.sleep(0.01)
        assert len(workers) == n, f"workers did not start: {proc.poll()} {workers}"
        time.sleep(0.2)                                  # ranks are blocked in their waits
        os.killpg(proc.pid, signal.SIGINT)              # what Ctrl-C in a terminal does
        try:
            # nothing but the interrupt can end this program before its 600 s
            # deadlock time-out; 30 s leaves a loaded machine room and is
            # still far below that
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGUSR1)            # dump the controller's stacks
            time.sleep(0.5)
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            pytest.fail(f"the program did not stop after Ctrl-C:\n{err}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode != 0
    assert "KeyboardInterrupt" in err, err
    assert "finished" not in out
    assert my_segments(proc.pid) == [], "segments of the interrupted run remain"
    # nothing of that process tree remains (the workers were in its process group)
    deadline = time.monotonic() + 2
    while any(process_alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not any(process_alive(p) for p in workers), "workers outlived Ctrl-C"
    with pytest.raises(ProcessLookupError):
        os.killpg(proc.pid, 0)


# ------------------------------------------------------------------ stale segments
def test_next_run_sweeps_segments_of_dead_controllers():
    outs = F.outputs(2)
    F.ring_main(outs, 1, config=F.config(2))           # not the first run of this process
    child = subprocess.Popen(["true"])
    child.wait()                                       # exited and reaped: a dead owner
    dead = child.pid
    assert not process_alive(dead)
    stale = f"/dev/shm/tilecomm-{dead}-1-0"
    live = f"/dev/shm/tilecomm-{os.getpid()}-999999-0"    # owner alive: must be kept
    for path in (stale, live):
        with open(path, "wb") as f:
            f.write(b"\0" * 64)
    try:
        F.ring_main(outs, 1, config=F.config(2))
        assert not os.path.exists(stale), "segment of a dead controller survived the next run"
        assert os.path.exists(live), "segment of a live process was removed"
    finally:
        for path in (stale, live):
            if os.path.exists(path):
                os.unlink(path)


# ------------------------------------------------------------------ a rank cannot start
def _endpoint_failing_on_rank_1(original):
    def endpoint(self, device, world):
        if device == 1:
            raise RuntimeError("the transport could not open (start-up defect)")
        return original(self, device, world)
    return endpoint


def test_a_rank_that_cannot_start_reports_its_traceback(monkeypatch):
    """An unexpected exception while a rank reaches its transport is a
    defect: the call fails naming the rank, the exception and the frame that
    raised it, not only an exit status."""
    n = 2
    monkeypatch.setattr(ShmHost, "endpoint", _endpoint_failing_on_rank_1(ShmHost.endpoint))
    e = failed_call(F.ring_main, F.outputs(n), 1, cfg=F.config(n, transport="shm"),
                    expect=RankFailure)
    text = str(e)
    assert "rank 1" in text and "start-up" in text, text
    assert "RuntimeError: the transport could not open (start-up defect)" in text, text
    assert "Traceback" in text and 'test_failures.py", line' in text and "in endpoint" in text, \
        text
    assert e.exit_codes[1] == EXIT_FAILED, e.exit_codes
    assert_clean()
