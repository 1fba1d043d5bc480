"""Submitted calls that were sent to the ranks before the ones ahead of them
finished (``DistributedWorker.submit`` on a worker that pipelines): the
second halves of their runs (``Run.finish``: wait until every rank
finished the run, copy outputs back), finished strictly in submission order.

Who finishes them: whichever thread needs one first.  A caller that asks for
a result (``handle.result()``), submits a third call, or makes a blocking
call finishes the runs ahead of it itself, in its own thread: handing the
work to another thread and waiting to be told would add two thread
wake-ups and GIL hand-offs to every call.  The worker's dispatcher thread
finishes a run nobody asked for once it is ``GRACE_S`` old, so a call whose
caller does other work still completes, has its failure or deadlock
detected and stops its ranks.

Order: a rank finishes its runs in the order it received them, and a
run's monitor takes a Failed message on a rank's channel for its own, so
runs must be finished one at a time, oldest first: ``_finishing`` is held
while one is, and a run leaves the queue only once finished.
"""
from __future__ import annotations

import threading
import time
from collections import deque

GRACE_S = 0.002     # a run nobody asked for is finished by the dispatcher after this


class Pipeline:
    """The runs in flight of one worker, oldest first."""

    def __init__(self, finish):
        self._finish = finish           # finish(handle, run): sets the handle, never raises
        self._runs: deque = deque()     # (handle, run, when the dispatcher takes it), oldest first
        self._guard = threading.Lock()  # _runs
        self._finishing = threading.Lock()

    def add(self, handle, run) -> bool:
        """Queue a run that was begun; True if none was queued before (the
        dispatcher is told to ``watch`` only then: waking it for every call
        would cost the caller a GIL hand-off per call)."""
        with self._guard:
            self._runs.append((handle, run, time.monotonic() + GRACE_S))
            return len(self._runs) == 1

    def __len__(self) -> int:
        return len(self._runs)

    def drive(self, handle=None, oldest_only: bool = False) -> None:
        """Finish runs in order until ``handle``'s is finished (``None``: every
        run queued now; ``oldest_only``: one at most).  A handle that is not
        in the pipeline returns at once."""
        while handle is None or not handle.done:
            with self._finishing:
                with self._guard:
                    if not self._runs:
                        return
                    head = self._runs[0]
                    if handle is not None and not any(h is handle for h, _, _ in self._runs):
                        return
                self._finish(head[0], head[1])
                with self._guard:
                    self._runs.popleft()
            if oldest_only or head[0] is handle:
                return

    def watch(self) -> None:
        """The dispatcher's part: finish each run that nobody finished within
        ``GRACE_S`` of its begin; return once none is queued."""
        while True:
            with self._guard:
                if not self._runs:
                    return
                handle, _, due = self._runs[0]
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)       # then look again: the head may have been finished
                continue
            self.drive(handle)
