"""What a call must not leave behind, checked around a test: no child process,
no thread, no tilecomm shared-memory segment of this process, no file
descriptor that was not there before.

``no_leaks()`` is the check as a context manager (any test framework);
the pytest plugin's ``tilecomm_no_leaks`` fixture wraps it.  Everything here
reads ``/proc`` and ``/dev/shm`` (Linux), and imports nothing of tilecomm: a
leak check must not change what it checks.
"""
from __future__ import annotations

import contextlib
import gc
import os
import threading
from typing import NamedTuple

# /dev/shm names of the segments tilecomm creates: tilecomm-<creator pid>-...
SEGMENT_PREFIX = "tilecomm-"


def my_segments(pid: int | None = None) -> list:
    """Names of the /dev/shm segments of ``pid`` (this process by default)."""
    prefix = f"{SEGMENT_PREFIX}{pid or os.getpid()}-"
    try:
        return [n for n in os.listdir("/dev/shm") if n.startswith(prefix)]
    except FileNotFoundError:
        return []


def process_alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def children(pid: int | None = None) -> set:
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


def open_fds() -> set:
    """This process's open file descriptors (as the names under /proc/self/fd).
    Listing the directory opens one of its own, closed again before the
    list is read: only descriptors still open when read are kept."""
    try:
        listed = os.listdir("/proc/self/fd")
    except OSError:
        return set()
    return {fd for fd in listed if _fd_target(fd) is not None}


def _fd_target(fd: str) -> str | None:
    """What ``fd`` refers to (a path, ``socket:[...]``, ...), or None if closed."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


class Snapshot(NamedTuple):
    """What this process holds at one moment, of what a call could leak."""

    segments: set
    children: set
    threads: set
    fds: set


def snapshot() -> Snapshot:
    return Snapshot(set(my_segments()), children(), set(threading.enumerate()), open_fds())


def leaks_since(before: Snapshot, fds: bool = True) -> list:
    """One line per kind of thing held now that ``before`` did not hold:
    shared-memory segments, worker processes, threads, file descriptors
    (``fds=False``: not those -- after a failure whose traceback is kept, its
    frames keep their mappings, and so their descriptors, open)."""
    found = []
    segments = sorted(set(my_segments()) - before.segments)
    if segments:
        found.append(f"shared-memory segments leaked: {segments}")
    kids = sorted(children() - before.children)
    if kids:
        found.append(f"worker processes leaked: pids {kids}")
    threads = sorted(t.name for t in set(threading.enumerate()) - before.threads)
    if threads:
        found.append(f"threads leaked: {threads}")
    if not fds:
        return found
    if open_fds() - before.fds:
        # a mapping still referenced from a traceback cycle keeps its fd until
        # the cycle is collected (Python < 3.13 duplicates the fd per mapping)
        gc.collect()
    fds = open_fds() - before.fds
    if fds:
        found.append(f"file descriptors leaked: {_describe_fds(fds)}")
    return found


def _describe_fds(fds) -> str:
    return ", ".join(f"{fd} -> {_fd_target(fd)}" for fd in sorted(fds, key=int))


@contextlib.contextmanager
def no_leaks():
    """Fail (AssertionError) if the body leaves a child process, a thread, a
    tilecomm /dev/shm segment of this process or a file descriptor behind.
    Nothing is checked when the body raises: its own error is the report."""
    before = snapshot()
    yield
    found = leaks_since(before)
    assert not found, "; ".join(found)
