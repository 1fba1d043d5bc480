"""A rank's incoming messages, in order, read with as few thread hand-offs as
the controller's guarantee allows.

The guarantee: the controller never blocks for long sending to a rank.  A
run's dispatches may reach a rank in several messages (a long HOST loop sends
a batch every ``controller.run.BATCH_MESSAGES`` dispatches; a SubWorker flushes before
it waits), and while the rank runs the first ones -- possibly blocked in a
wait for a peer whose dispatch is not sent yet -- the controller must be able
to write the rest, whatever their size: a full pipe would stall it and the
peer would never get its dispatch.  So something must drain the channel while
the rank is busy in the middle of a run.

That something is a *pump* thread, but only when it is needed.  A message
that carries the end of a run (``EndRun`` or ``Shutdown``; a prepared call
sends its whole run to each rank as one such message) leaves nothing of that
run still to come, so the main thread reads it from the channel itself and
runs it with no thread in between.  What the controller may send meanwhile
belongs to a later run (a submitted call), which the rank reads as soon as
this one is done, whatever the earlier runs' ranks wait for has been sent
already.  Only a message that does *not* end its run (or one that is not part
of a run: a new image, a run's artefact settings) makes the main thread hand
the channel to the pump, which reads until it has queued the end of a run and
then hands it back.  Handing a message over costs a thread wake-up and a GIL
hand-off on the rank's critical path; reading directly costs neither.

Before the main thread blocks in a read of the channel it may poll it for a
short window, yielding its CPU between polls (``idle_spin_ns``): a prepared
worker called in a loop sends the next run within tens of microseconds, and
a process blocked on a CPU that went idle wakes that long again after the
write on a virtual machine (the hypervisor halted the CPU), while a polling
one sees the message at once.  The rank decides whether to poll
(``loop.idle_spin_ns``).

Only the main thread decides who owns the channel (``_pumping``), and the
pump ends every turn with a ``_HANDBACK`` marker in the queue, after every
message it read: the main thread reads the channel itself only after it
dequeued that marker, so the two never read at once and order is kept.
"""
from __future__ import annotations

import queue
import threading
from collections import deque
from multiprocessing.connection import Connection

from ... import _native_core as native
from .. import messages as M

_HANDBACK = object()        # the pump's last item of a turn: the channel is the main thread's


def _ends_run(batch) -> bool:
    return any(isinstance(m, (M.EndRun, M.Shutdown)) for m in batch)


class Inbox:
    """The rank side of its channel: ``next()`` returns the next message, a
    ``messages.Disconnected`` once the controller went away."""

    def __init__(self, conn, idle_spin_ns: int = 0):
        self._conn = conn
        self._spin_ns = idle_spin_ns         # > 0 only for a channel with a descriptor
        # a pipe is read a buffer at a time; other channels (an MPI
        # process's) through their own recv_bytes
        self._frames = M.FrameReader(conn) if isinstance(conn, Connection) else None
        self._ready: deque = deque()         # read by the main thread, not yet taken
        self._queue: queue.SimpleQueue = queue.SimpleQueue()    # read by the pump
        self._pumping = False                # the pump owns the channel (main thread only)
        self._turns: queue.SimpleQueue | None = None   # the pump's requests; None: not started
        self._pump_thread: threading.Thread | None = None
        self._windows: dict = {}             # decoded window descriptors (messages.decode)
        self._bodies: dict = {}              # decoded replayed runs (messages.Renumbered)

    def pending(self) -> bool:
        """Whether a message is ready without reading the channel."""
        return bool(self._ready) or (self._pumping and not self._queue.empty()) or \
            (not self._pumping and self._frames is not None and self._frames.complete())

    def next(self):
        while True:
            if self._ready:
                return self._ready.popleft()
            if self._pumping:
                msg = self._queue.get()
                if msg is _HANDBACK:
                    self._pumping = False
                    continue
                return msg
            if self._spin_ns and self._frames is not None and not self._frames.complete():
                native.await_readable(self._conn.fileno(), self._spin_ns)
            batch = self._read()
            if not _ends_run(batch):         # more of this run may be on its way
                self._start_pump()
            self._ready.extend(batch)

    def _read(self) -> tuple:
        try:
            if self._frames is not None:
                msg = self._frames.receive(self._windows, self._bodies)
            else:
                msg = M.receive(self._conn, self._windows, self._bodies)
        except (EOFError, OSError):
            return (M.Disconnected(),)
        return msg.messages if isinstance(msg, M.Batch) else (msg,)

    def _start_pump(self) -> None:
        if self._turns is None:
            self._turns = queue.SimpleQueue()
            self._pump_thread = threading.Thread(target=self._pump, daemon=True,
                                                 name="tilecomm-inbox")
            self._pump_thread.start()
        self._pumping = True
        self._turns.put(True)

    def close(self) -> None:
        """Stop the pump, if one was started, between its turns or once the
        channel's other end closed.  (A rank never needs to: its process
        ends with the thread; this is for a caller that outlives the inbox.)"""
        if self._pump_thread is not None:
            self._turns.put(False)
            self._pump_thread.join(5.0)

    def _pump(self) -> None:
        while self._turns.get():
            while True:
                batch = self._read()
                for one in batch:
                    self._queue.put(one)
                if isinstance(batch[-1], M.Disconnected):
                    self._queue.put(_HANDBACK)
                    return
                if _ends_run(batch):
                    break
            self._queue.put(_HANDBACK)


__all__ = ["Inbox"]
