"""Prepared workers: start the rank processes once, run many times.

``compiled.prepare()`` returns a ``DistributedWorker``; calling it runs the
HOST orchestrator on ranks that stay alive between calls, so a call costs the
dispatches, not process start-up.  Windows are still fresh (zero-filled) on
every call.  A failed call (a rank raising, a deadlock, Ctrl-C) stops those
ranks; the next call starts new ones, as does a call that finds a rank died
while idle.  ``close()`` (or leaving a ``with`` block, or interpreter exit)
shuts them down and removes every segment.  Calls from several threads run
one after another: the ranks serve one run of the HOST orchestrator at a time.
"""
from __future__ import annotations

import atexit
import threading
import weakref

from .arguments import check_arguments
from .launch import Ranks, execute

_OPEN: "weakref.WeakSet[DistributedWorker]" = weakref.WeakSet()


class DistributedWorker:
    def __init__(self, compiled, config=None):
        self._compiled = compiled
        self._config = config or compiled.config
        self._ranks: Ranks | None = None
        self._closed = False
        # one run at a time: the ranks, their control block and the run's
        # segments belong to a single caller until that call has returned
        self._lock = threading.Lock()
        _OPEN.add(self)
        self._start()

    @property
    def closed(self) -> bool:
        return self._closed

    def _start(self):
        self._ranks = Ranks(self._compiled.world, self._config)
        # specialisations compiled so far are inherited by the fork; later
        # ones are sent to the workers when first used
        for exe in self._compiled.executables():
            self._ranks.know(exe.image)
        self._ranks.start()

    def _check_open(self, op):
        if self._closed:
            raise RuntimeError(f"DistributedWorker.{op}() called after close()")

    def __call__(self, *args, config=None):
        """Run the program once on the prepared ranks; outputs land in place."""
        with self._lock:
            self._check_open("__call__")
            exe = self._compiled.specialise(args)
            check_arguments(exe, args)      # refused before the ranks are touched: they stay
            if self._ranks is not None and not self._ranks.alive():
                self._ranks.close()         # a rank died while idle: start afresh
                self._ranks = None
            if self._ranks is None:
                self._start()
            ranks = self._ranks
            try:
                return execute(ranks, exe, list(args), config or self._config)
            except BaseException:
                ranks.close()               # already killed by execute: drop the husk
                if self._ranks is ranks:
                    self._ranks = None
                raise

    run = __call__

    def close(self):
        """Shut the ranks down once the call in progress (if any) has returned;
        idempotent."""
        self._close(None)

    def _close(self, timeout):
        # at interpreter exit a daemon thread's call may never return: after
        # ``timeout`` the ranks are stopped under it
        locked = self._lock.acquire(timeout=-1 if timeout is None else timeout)
        try:
            if self._closed:
                return
            self._closed = True
            if self._ranks is not None:
                ranks, self._ranks = self._ranks, None
                ranks.close(graceful=locked)
        finally:
            if locked:
                self._lock.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


@atexit.register
def _close_all():
    for w in list(_OPEN):
        w._close(timeout=5.0)
