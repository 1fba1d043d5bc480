"""Launchers: how the rank processes come to exist, how the controller talks to
them, and how they end.  ``Launcher`` is the interface the controller uses;
``ForkLauncher`` forks one worker per rank from the calling process, with a
duplex pipe per rank as its channel (``forking.py``: one fork lock, a launcher
thread for non-main callers, children that keep only their own descriptors).
"""
from __future__ import annotations

import functools
import math
import os
import select
import signal
import time
from abc import ABC, abstractmethod
from typing import Callable

from . import cleanup
from . import forking
from .. import messages

__all__ = ["ForkLauncher", "Launcher"]


class Launcher(ABC):
    world: int
    # whether each rank is a process this launcher forked (False: the ranks
    # are processes started by someone else, e.g. mpiexec, or threads of them)
    forks = True

    @property
    @abstractmethod
    def started(self) -> bool: ...

    @abstractmethod
    def start(self, rank_main: Callable[[int, object], int], keep=None) -> None:
        """Start one process per rank running ``rank_main(rank, channel)``;
        its return value is the process's exit code.  ``keep``: per rank, the
        descriptors (e.g. a transport's link) its process must keep open."""

    def serving(self, rank: int, context, inbox) -> None:
        """Called in a rank's worker with the context it runs dispatches with
        and its inbox (a launcher whose ranks outlive their worker stops its
        task threads and the inbox's pump)."""

    @abstractmethod
    def alive(self) -> bool:
        """Whether every rank of an idle set can still serve a run."""

    @abstractmethod
    def send(self, rank: int, msg) -> None:
        """Send a message to a rank; a rank that is gone is ignored here (the
        monitor reports why)."""

    @abstractmethod
    def receive(self, ranks, timeout: float) -> list:
        """(rank, message) pairs from any of ``ranks`` within ``timeout``;
        message None means that rank's channel closed."""

    @abstractmethod
    def exit_code(self, rank: int, wait: bool = True):
        """The rank's exit code (negative: killed by that signal), or None if it
        is still running and ``wait`` is False."""

    @abstractmethod
    def stop(self, grace: float = 0.0) -> dict:
        """Let ranks exit on their own for up to ``grace`` seconds, then kill
        the rest; returns {rank: exit code}.  Idempotent."""


class ForkLauncher(Launcher):
    def __init__(self, world: int):
        self.world = world
        self.workers: list = []          # (pid, conn) per rank
        self._codes: dict = {}           # rank -> exit code, once reaped
        self._idle_poller = self._polled = None     # on the pipes of ``_polled`` (alive)
        cleanup.watch(self)              # killed if SIGTERM / SIGHUP end the caller

    @property
    def started(self) -> bool:
        return bool(self.workers)

    def start(self, rank_main, keep=None):
        # workers are appended as they are forked: a failure part way leaves
        # stop() every process to kill
        forking.spawn([functools.partial(rank_main, rank) for rank in range(self.world)],
                      self.workers, keep)

    def alive(self):
        if not self.workers:
            return False
        if self._idle_poller is None or self._polled is not self.workers:
            self._idle_poller, self._polled = forking.idle_poller(self.workers), self.workers
        return forking.ranks_alive(self._idle_poller)

    def send(self, rank, msg):
        if rank >= len(self.workers):
            return                       # never started: a fork failed part way
        try:
            messages.send(self.workers[rank][1], msg)
        except (BrokenPipeError, ConnectionResetError, EOFError, OSError):
            pass

    def receive(self, ranks, timeout):
        # one poll() on the ranks' pipes: ``multiprocessing.connection.wait``
        # builds a selector per call, which costs more than a small call's
        # whole reply (this runs at least once per prepared call)
        poller = select.poll()
        by_fd = {}
        for r in ranks:
            conn = self.workers[r][1]
            by_fd[conn.fileno()] = (r, conn)
            poller.register(conn.fileno(), select.POLLIN)
        out = []
        for fd, _ in poller.poll(max(0, math.ceil(timeout * 1000))):
            rank, conn = by_fd[fd]
            try:
                out.append((rank, messages.receive(conn)))
            except (EOFError, OSError):
                out.append((rank, None))
        return out

    def _reap(self, rank: int, block: bool):
        if rank in self._codes:
            return self._codes[rank]
        pid = self.workers[rank][0]
        try:
            done, st = os.waitpid(pid, 0 if block else os.WNOHANG)
        except ChildProcessError:
            self._codes[rank] = None
            return None
        if not done:
            return None
        code = -os.WTERMSIG(st) if os.WIFSIGNALED(st) else os.WEXITSTATUS(st)
        self._codes[rank] = code
        return code

    def exit_code(self, rank, wait=True):
        return self._reap(rank, wait)

    def stop(self, grace=0.0):
        if not self.workers:
            return dict(self._codes)
        deadline = time.monotonic() + grace
        pending = [r for r in range(len(self.workers)) if r not in self._codes]
        while pending and time.monotonic() < deadline:
            pending = [r for r in pending if self._reap(r, False) is None and r not in self._codes]
            if pending:
                time.sleep(0.001)
        for r in pending:
            try:
                os.kill(self.workers[r][0], signal.SIGKILL)
            except ProcessLookupError:
                pass
        for r in range(len(self.workers)):
            self._reap(r, True)
        for _, conn in self.workers:
            conn.close()
        forking.reaped([pid for pid, _ in self.workers])    # the launcher thread may go
        self.workers = []
        codes, self._codes = dict(self._codes), {}
        return codes


def describe_exit(code) -> str:
    """``exited with status 1`` / ``was killed by SIGKILL`` (``exited`` if unknown)."""
    if code is None:
        return "exited"
    if code < 0:
        return f"was killed by {signal.Signals(-code).name}"
    return f"exited with status {code}"
