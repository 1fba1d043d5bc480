"""Ranks under threads and signals: a prepared worker shared by threads, ranks
started by concurrent calls, workers prepared in short-lived threads, idle
ranks that die between calls, and a controller terminated by a signal.
(The leak check of conftest sees ranks forked by any thread.)"""
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from conftest import children, config_for, my_segments, process_alive

NR = pl.dynamic("NR")
W = 8


@pl.jit.incore
def gather_step(x: pl.Tensor[[1, W], pl.FP32], y: pl.Out[pl.Tensor[[1, W], pl.FP32]],
                acc: pl.InOut[pld.DistributedTensor[[1, W], pl.FP32]],
                sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]) -> pl.Tensor[[1, W], pl.FP32]:
    me = pld.rank(pld.get_comm_ctx(acc))
    n = pld.nranks(pld.get_comm_ctx(acc))
    pld.tile.remote_store(pl.load(x, [0, 0], [1, W]), acc, 0, [0, 0], atomic=pld.AtomicType.Add)
    pld.system.notify(sig, 0, [me, 0], 1, op=pld.NotifyOp.Set)
    if me == 0:
        for src in pl.range(n):
            pld.system.wait(sig, [src, 0], 1, cmp=pld.WaitCmp.Ge)
    y = pl.store(pl.load(acc, [0, 0], [1, W]), [0, 0], y)
    return y


@pl.jit
def gather_chip(x: pl.Tensor[[1, W], pl.FP32], y: pl.Out[pl.Tensor[[1, W], pl.FP32]],
                acc: pl.InOut[pld.DistributedTensor[[1, W], pl.FP32]],
                sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    return gather_step(x, y, acc, sig)


@pl.jit.host
def gather(xs: pl.Tensor[[NR, 1, W], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, W], pl.FP32]]):
    """ys[0] = sum of every rank's row (through rank 0's window)."""
    acc_buf = pld.alloc_window_buffer([1, W], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        gather_chip(xs[r], ys[r], pld.window(acc_buf, [1, W], dtype=pl.FP32),
                    pld.window(sig_buf, [NR, 1], dtype=pl.INT32), device=r)
    return ys


def _data(n, seed):
    xs = np.random.default_rng(seed).integers(-9, 9, size=(n, 1, W)).astype(np.float32)
    return xs, np.full_like(xs, np.nan)


# ------------------------------------------------------------------ processes, threads, segments


def process_exited(pid: int) -> bool:
    """True once every thread of ``pid`` has exited (so its descriptors are closed):
    a process shows as a zombie while its other threads are still exiting."""
    try:
        return not process_alive(pid) and os.listdir(f"/proc/{pid}/task") == [str(pid)]
    except OSError:
        return True


def wait_until(cond, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def run_in_thread(fn):
    """Run ``fn`` in a fresh thread that exits afterwards; return its result or raise."""
    out = {}

    def body():
        try:
            out["value"] = fn()
        except BaseException as e:        # handed to the caller
            out["error"] = e

    th = threading.Thread(target=body)
    th.start()
    th.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


# ------------------------------------------------------------------ one worker, two threads
@pytest.mark.timeout(120)
def test_prepared_worker_called_from_two_threads_serialises_calls():
    n, calls = 3, 15
    xs, ys = _data(n, 0)
    worker = gather.compile(xs, ys, config=config_for(n)).prepare(xs, ys)
    errors, finished = [], []

    def caller(tid):
        try:
            for i in range(calls):
                xs, ys = _data(n, 100 * tid + i)
                worker(xs, ys)
                np.testing.assert_array_equal(ys[0], xs.sum(axis=0))
            finished.append(tid)
        except BaseException as e:        # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=caller, args=(t,)) for t in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    hung = any(th.is_alive() for th in threads)
    if hung:                              # unblock the callers so the test can fail cleanly
        for pid in children():
            os.kill(pid, signal.SIGKILL)
        for th in threads:
            th.join(30)
    worker.close()
    assert not hung, "concurrent calls of one prepared worker hung"
    assert errors == []
    assert sorted(finished) == [0, 1]


# ------------------------------------------------------------------ descriptors of ranks
def _links(pid) -> dict:
    out = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            out[int(fd)] = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            pass                          # closed while listing
    return out


def _prepare_concurrently(compiled, xs, ys, count):
    """``count`` prepared workers, started at the same moment by as many threads."""
    barrier = threading.Barrier(count)
    workers, errors = [None] * count, []

    def body(i):
        try:
            barrier.wait()
            workers[i] = compiled.prepare(xs, ys)
        except BaseException as e:        # reported by the caller
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        for w in workers:
            if w is not None:
                w.close()
        raise errors[0]
    return workers


def test_ranks_inherit_no_pipe_end_of_other_ranks_nor_the_callers_descriptors(transport):
    """A rank's death is seen as EOF on the controller's end of its pipe, which
    only comes when no other process holds a copy of the rank's end: ranks
    started by a later or a concurrent call must not hold any, nor hold on to
    the caller's unrelated files."""
    n = 3
    xs, ys = _data(n, 1)
    compiled = gather.compile(xs, ys, config=config_for(n))
    unrelated_r, unrelated_w = os.pipe()
    workers = []
    try:
        pipe_links = {os.readlink(f"/proc/self/fd/{fd}") for fd in (unrelated_r, unrelated_w)}
        workers.append(compiled.prepare(xs, ys))
        # started from two other threads at once, while the first one's pipes are open
        workers += _prepare_concurrently(compiled, xs, ys, 2)
        for w in workers:                 # a completed call: every rank is past its start-up
            xs, ys = _data(n, 2)
            w(xs, ys)
            np.testing.assert_array_equal(ys[0], xs.sum(axis=0))
        caller = _links(os.getpid())
        caller_sockets = {v for v in caller.values() if v.startswith("socket:")}
        ranks = children()
        assert len(ranks) == 3 * n
        # its channel to the controller, and on the copy transport its link to
        # the transport's service
        own = 2 if transport == "copy" else 1
        seen = set()
        for pid in ranks:
            held = _links(pid)
            sockets = {v for v in held.values() if v.startswith("socket:")}
            assert len(sockets) == own, f"rank {pid} holds {sorted(sockets)}"
            assert not sockets & caller_sockets, f"rank {pid} holds a controller end"
            assert not sockets & seen, f"rank {pid} holds another rank's end"
            seen |= sockets
            assert not pipe_links & set(held.values()), \
                f"rank {pid} holds the caller's unrelated pipe"
    finally:
        for w in workers:
            w.close()
        os.close(unrelated_r)
        os.close(unrelated_w)


def _mapped_segments(pid) -> list:
    """Names of the segments mapped (readable or writable) in ``pid``, once per mapping."""
    names = []
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            fields = line.split(None, 5)
            if len(fields) == 6 and "/dev/shm/tilecomm-" in fields[5] and fields[1][:2] != "--":
                names.append(os.path.basename(fields[5].split()[0]))
    return names


def test_ranks_keep_no_mapping_of_segments_they_did_not_map_themselves():
    """A rank forked while other calls' segments are mapped in the caller must
    not keep them mapped (their memory could not be freed until it exits)."""
    n = 2
    xs, ys = _data(n, 8)
    compiled = gather.compile(xs, ys, config=config_for(n))
    with compiled.prepare(xs, ys) as first:
        first(xs, ys)
        first_ranks = children()
        mapped_by_first = {s for pid in first_ranks for s in _mapped_segments(pid)}
        assert mapped_by_first, "the first worker's ranks map their control segment"
        with compiled.prepare(xs, ys) as second:
            second(xs, ys)
            for pid in children() - first_ranks:
                mapped = _mapped_segments(pid)
                assert not set(mapped) & mapped_by_first, \
                    f"rank {pid} keeps another worker's segments mapped: {sorted(mapped)}"
                assert len(mapped) == len(set(mapped)), \
                    f"rank {pid} maps a segment twice (inherited and its own): {sorted(mapped)}"


# ------------------------------------------------------------------ workers of short-lived threads
def test_worker_prepared_in_a_thread_outlives_that_thread():
    n = 2
    xs, ys = _data(n, 3)
    compiled = gather.compile(xs, ys, config=config_for(n))

    def prepare_and_call():
        w = compiled.prepare(xs, ys)
        w(xs, ys)                 # the ranks are serving: their death signal is armed
        return w

    worker = run_in_thread(prepare_and_call)                      # that thread has exited
    try:
        ranks = children()
        assert len(ranks) == n
        # a rank tied to the exited thread is killed at once; give it time to go
        assert not wait_until(lambda: not all(map(process_alive, ranks)), 0.5), \
            "ranks died with the thread that prepared them"
        worker(xs, ys)
        np.testing.assert_array_equal(ys[0], xs.sum(axis=0))
        assert children() == ranks
    finally:
        worker.close()


def test_calls_from_threads_leave_no_thread_behind():
    n = 2
    xs, ys = _data(n, 7)
    compiled = gather.compile(xs, ys, config=config_for(n))
    before = set(threading.enumerate())
    run_in_thread(lambda: gather(xs, ys, config=config_for(n)))          # one-shot
    np.testing.assert_array_equal(ys[0], xs.sum(axis=0))
    assert set(threading.enumerate()) == before
    worker = run_in_thread(lambda: compiled.prepare(xs, ys))             # prepared
    worker(xs, ys)
    worker.close()
    assert set(threading.enumerate()) == before


# ------------------------------------------------------------------ idle ranks that die
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_rank_killed_between_calls_is_replaced_by_the_next_call(sig):
    n = 3
    xs, ys = _data(n, 4)
    with gather.compile(xs, ys, config=config_for(n)).prepare(xs, ys) as worker:
        worker(xs, ys)
        ranks = children()
        victim = sorted(ranks)[1]
        os.kill(victim, sig)
        assert wait_until(lambda: process_exited(victim))
        xs, ys = _data(n, 5)
        worker(xs, ys)
        np.testing.assert_array_equal(ys[0], xs.sum(axis=0))
        assert victim not in children() and len(children()) == n


# ------------------------------------------------------------------ the controller is terminated
BLOCKING_SCRIPT = os.path.join(os.path.dirname(__file__), "failure_programs.py")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_terminating_the_caller_mid_call_leaves_no_segment_and_no_process(sig):
    n = 3
    # every rank blocks forever (and the deadlock timeout is long): only the signal ends it.
    # The caller starts with the signal at its default action: a test run under
    # nohup ignores SIGHUP, and tilecomm (rightly) leaves an ignored signal ignored
    start = (f"import runpy, signal, sys; signal.signal({int(sig)}, signal.SIG_DFL); "
             f"sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")
    proc = subprocess.Popen([sys.executable, "-c", start, BLOCKING_SCRIPT, str(n)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    workers = set()
    try:
        assert wait_until(lambda: len(children(proc.pid)) >= n or proc.poll() is not None,
                          60), "workers did not start"
        workers = children(proc.pid)
        assert len(workers) == n, proc.communicate()
        assert wait_until(lambda: my_segments(proc.pid) != [])
        os.kill(proc.pid, sig)                           # the controller only, not its group
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("the caller did not die of the signal")
        assert proc.returncode == -sig, err               # the signal's own default action
        assert "finished" not in out
        assert my_segments(proc.pid) == [], "segments of the terminated call remain"
        assert wait_until(lambda: not any(process_alive(p) for p in workers)), \
            "workers outlived the caller"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
        for name in my_segments(proc.pid):              # whatever the outcome, leave none
            os.unlink(os.path.join("/dev/shm", name))


def test_a_handler_the_program_installed_is_kept():
    def mine(signum, frame):
        pass

    previous = signal.signal(signal.SIGHUP, mine)
    try:
        n = 2
        xs, ys = _data(n, 6)
        gather(xs, ys, config=config_for(n))
        np.testing.assert_array_equal(ys[0], xs.sum(axis=0))
        assert signal.getsignal(signal.SIGHUP) is mine
    finally:
        signal.signal(signal.SIGHUP, previous)
