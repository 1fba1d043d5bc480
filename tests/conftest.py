"""Shared fixtures: world sizes, run configs, and a leak check around every test."""
import gc
import os
import threading
import time

import pytest

from tilecomm.runtime import DistributedConfig, RunConfig
from tilecomm.runtime.config import TRANSPORT_NAMES

WORLD_SIZES = [1, 2, 3, 4]
RANKS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ranks")


def config_for(n: int, **kw) -> RunConfig:
    return RunConfig(distributed_config=DistributedConfig(device_ids=list(range(n))), **kw)


def pytest_generate_tests(metafunc):
    """Every multi-rank test (tests/ranks) runs on every transport: ids
    ``shm`` / ``copy``."""
    if os.path.dirname(os.path.abspath(str(metafunc.definition.path))) == RANKS_DIR:
        metafunc.parametrize("transport", TRANSPORT_NAMES, indirect=True)


@pytest.fixture(autouse=True)
def transport(request, monkeypatch):
    """The transport of a multi-rank test, through ``TILECOMM_TRANSPORT`` (read
    by ``RunConfig.resolved_transport`` when ranks start), so programs started
    in this process and example scripts run as subprocesses use it alike."""
    name = getattr(request, "param", None)
    if name is not None:
        monkeypatch.setenv("TILECOMM_TRANSPORT", name)
    else:
        monkeypatch.delenv("TILECOMM_TRANSPORT", raising=False)
    return name


def _shm_names():
    try:
        return {f for f in os.listdir("/dev/shm") if f.startswith(f"tilecomm-{os.getpid()}-")}
    except FileNotFoundError:
        return set()


def files_of(root) -> set:
    """Every file under ``root``, as paths relative to it."""
    out = set()
    for dp, _, fs in os.walk(root):
        for f in fs:
            out.add(os.path.relpath(os.path.join(dp, f), root))
    return out


def my_segments(pid=None) -> list:
    """Names of the /dev/shm segments of ``pid`` (this process by default)."""
    prefix = f"tilecomm-{pid or os.getpid()}-"
    return [n for n in os.listdir("/dev/shm") if n.startswith(prefix)]


def process_alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def children(pid=None) -> set:
    """Pids of the children of every thread of ``pid`` (this process by
    default): a child is listed under the thread that forked it, and ranks
    requested by a thread other than the main one are forked by a launcher
    thread."""
    pid = pid or os.getpid()
    kids = set()
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return kids
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids |= {int(p) for p in f.read().split()}
        except OSError:
            pass                        # that thread exited while listing
    return kids


def signal_a_rank_during(call, n: int, sig, pick=min):
    """Run ``call()`` while a thread waits for its ``n`` rank processes to
    appear, lets them settle into their waits, and sends ``sig`` to the rank
    ``pick`` chooses among their pids.  Returns what ``call`` raised."""
    before = children()

    def sender():
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(children() - before) < n:
            time.sleep(0.005)
        time.sleep(0.2)
        ranks = children() - before
        if ranks:
            os.kill(pick(ranks), sig)

    th = threading.Thread(target=sender)
    th.start()
    try:
        with pytest.raises(BaseException) as ei:
            call()
    finally:
        th.join()
    return ei.value





def _fds():
    try:
        return set(os.listdir("/proc/self/fd"))
    except OSError:
        return set()


@pytest.fixture(autouse=True)
def no_leaks():
    """Every test must leave no worker process, thread, shared segment or file
    descriptor behind."""
    before_shm, before_kids = _shm_names(), children()
    before_threads, before_fds = set(threading.enumerate()), _fds()
    yield
    assert _shm_names() - before_shm == set(), "shared-memory segments leaked"
    assert children() - before_kids == set(), "worker processes leaked"
    threads = [t.name for t in set(threading.enumerate()) - before_threads]
    assert threads == [], f"threads leaked: {threads}"
    if _fds() - before_fds:
        # a mapping still referenced from a traceback cycle keeps its fd until
        # the cycle is collected (Python < 3.13 duplicates the fd per mapping)
        gc.collect()
    assert _fds() - before_fds == set(), "file descriptors leaked"
