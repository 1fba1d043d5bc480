"""Prepared workers: start the rank processes once, run many times.

``compiled.prepare()`` returns a ``DistributedWorker``; calling it runs the
HOST orchestrator on ranks that stay alive between calls, so a call costs the
dispatches, not process start-up.  Windows are still fresh (zero-filled) on
every call.  A failed call (a rank raising, a deadlock, Ctrl-C) stops those
ranks; the next call starts new ones.  ``close()`` (or leaving a ``with``
block, or interpreter exit) shuts them down and removes every segment.
"""
from __future__ import annotations

import atexit
import weakref

from .launch import Ranks, execute

_OPEN: "weakref.WeakSet[DistributedWorker]" = weakref.WeakSet()


class DistributedWorker:
    def __init__(self, compiled, config=None):
        self._compiled = compiled
        self._config = config or compiled.config
        self._ranks: Ranks | None = None
        self._closed = False
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
        self._check_open("__call__")
        exe = self._compiled.specialise(args)
        if self._ranks is None:
            self._start()
        try:
            return execute(self._ranks, exe, list(args), config or self._config)
        except BaseException:
            self._ranks.close()             # already killed by execute: drop the husk
            self._ranks = None
            raise

    run = __call__

    def close(self):
        """Shut the ranks down; idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._ranks is not None:
            ranks, self._ranks = self._ranks, None
            ranks.close(graceful=True)

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
        w.close()
