"""Calls in flight together are one history to the race check.

A prepared worker with kept persistent windows may have two calls in flight
(``submit``): a rank starts call 2 as soon as it finished call 1, while a
peer may still be reading in call 1.  Nothing orders call 2's accesses
after the peer's call-1 accesses but the program's own synchronisation, so
the check must see both calls as one history: each rank's events of call 1
and then of call 2, on the same threads.

``RaceHistory`` holds the race logs of such a chain of calls.  A call
submitted while the result of the call before it was not yet taken joins
that call's history (``DistributedWorker.submit``); its check replays every
log of the chain before its own, then its own (``ChainedLog``), and reports
the races no earlier call of the chain reported.  The logs live until the
chain ends (a call submitted after its predecessor's result was taken, a
blocking call, the worker's close) and every call of it has been checked.

Task ids, and the count of collective calls on a signal, start afresh in
every call: the events of the chain's later calls are renamed so that call
2's task 1 is not call 1's.
"""
from __future__ import annotations

import os
import threading

from ...check.events import BARRIER, CLOSE, MAIN, SUBMIT


class RaceHistory:
    """The race logs of a chain of calls that may overlap (see the module
    doc).  ``prefixes``: each call's log prefix, in order."""

    def __init__(self, world: int):
        self.world = world
        self.prefixes: list = []
        self.reported: set = set()      # (buffer, owner, first, second) already raised
        self.running = 0                # calls of the chain not yet checked
        self.ended = False
        self.lock = threading.Lock()

    def join(self, prefix: str) -> tuple:
        """Add a call's logs; the prefixes of the calls before it."""
        with self.lock:
            earlier = tuple(self.prefixes)
            self.prefixes.append(prefix)
            self.running += 1
            return earlier

    def new_races(self, races) -> list:
        """The races of ``races`` no call of the chain reported yet."""
        with self.lock:
            out = [r for r in races if (r.buffer, r.owner, r.first, r.second)
                   not in self.reported]
            self.reported.update((r.buffer, r.owner, r.first, r.second) for r in out)
            return out

    def checked(self) -> None:
        """A call of the chain is done (checked, or failed)."""
        with self.lock:
            self.running -= 1
            self._sweep()

    def end(self) -> None:
        """No call joins any more."""
        with self.lock:
            self.ended = True
            self._sweep()

    def _sweep(self) -> None:
        if not self.ended or self.running > 0:
            return
        for prefix in self.prefixes:
            for r in range(self.world):
                try:
                    os.unlink(f"{prefix}-{r}")
                except FileNotFoundError:
                    pass
        self.prefixes = []


class ChainedLog:
    """One rank's events over a chain of calls' logs (each an iterable made
    anew per iteration), the later calls' task ids and collective counts
    renamed by their place in the chain."""

    def __init__(self, logs: list):
        self.logs = logs

    def __iter__(self):
        for i, log in enumerate(self.logs):
            if i == 0:
                yield from log
            else:
                for ev in log:
                    yield _renamed(ev, i)


def _thread(key, i):
    if key == MAIN or key is None:
        return key
    if key[0] == "cond":
        return ("cond", (i, key[1]))
    return ((i, key[0]), key[1])


def _renamed(ev, i):
    kind = ev[0]
    ev = (kind, _thread(ev[1], i)) + ev[2:]
    if kind == SUBMIT:
        return ev[:2] + ((i, ev[2]),) + ev[3:5] + (tuple((i, p) for p in ev[5]),) + ev[6:]
    if kind == CLOSE:
        return ev[:2] + (tuple((i, t) for t in ev[2]),) + ev[3:]
    if kind == BARRIER:
        bid, count, lane, gen = ev[2]
        return ev[:2] + ((bid, (i, count), lane, gen),) + ev[3:]
    return ev                           # COND: its thread names its task


__all__ = ["ChainedLog", "RaceHistory"]
