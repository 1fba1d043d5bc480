"""The launcher of an MPI job: rank r is MPI process r, started by mpiexec
before the program ran, so this launcher starts no process.  It carries the
controller's messages (``messages.py``, unchanged) over MPI point-to-point.

Process 0 is the controller: it runs the HOST orchestrator and the monitor,
and rank 0's worker on a thread of its own, linked to it by two in-process
queues.  Processes r > 0 serve rank r's dispatches for the length of one
call (``spmd.MpiBackend``), reading their channel with a matched probe on a
communicator of the launcher's own.

No MPI call here blocks in MPI: a blocking receive in MPICH spins a core
until a message arrives, and ranks may outnumber cores.  Every wait for a
message probes, then sleeps in slices growing to ``MAX_POLL_S``.

Run artefacts: a worker in another process whose files process 0 cannot
read (``artefacts.RankArtefacts`` with ``ship``) sends them as a
``messages.Files`` with a synchronous send (``send_bytes_received``) before
it reports its run finished or exits; the launcher writes them as it
receives them and passes nothing on, so the monitor never sees one.

Exit codes: a worker's return value (``messages.EXIT_*``) travels back on
its own tag once the worker has ended; a process that dies takes the job
with it (mpiexec ends every process), so no "channel closed" is reported.
"""
from __future__ import annotations

import queue
import threading
import time

import numpy as np

from ...runtime.controller import cleanup
from ...runtime import messages as M
from ...runtime.controller.artefacts import write_files
from ...runtime.controller.launcher import Launcher
from . import jobwatch

__all__ = ["MpiLauncher", "ProcessEnd", "TAG_DOWN", "TAG_EXIT", "TAG_UP"]

TAG_DOWN, TAG_UP, TAG_EXIT = 11, 12, 13       # to a worker, from a worker, a worker's exit code
MAX_POLL_S = 0.001
STOP_GRACE_S = 10.0      # a rank finishes its current dispatch before it sees an abort


class _Capture:
    def send_bytes(self, data):
        self.data = data


def _bytes_of(msg) -> bytes:
    c = _Capture()
    M.send(c, msg)
    return c.data


SHUTDOWN = _bytes_of(M.Shutdown())


def poll(probe, deadline: float | None = None, max_pause: float = MAX_POLL_S):
    """Call ``probe()`` until it returns something, backing off from a few
    quick probes to sleeps of ``max_pause``; None once ``deadline`` passed."""
    pause = 0.0
    while True:
        got = probe()
        if got is not None:
            return got
        if deadline is not None and time.monotonic() >= deadline:
            return None
        if pause:
            time.sleep(pause)
            pause = min(pause * 2, max_pause)
        else:
            pause = 1e-5


def _receive(MPI, comm, source: int, tag: int, status):
    """The next message of ``tag`` from ``source`` as bytes (its envelope in
    ``status``), or None if none has arrived.  A matched probe: two threads
    probing one channel can never both take the same message."""
    msg = comm.Improbe(source, tag, status)
    if msg is None:
        return None
    buf = bytearray(status.Get_count(MPI.BYTE))
    msg.Recv([buf, MPI.BYTE])
    return bytes(buf)


class ProcessEnd:
    """A worker's end of its channel in MPI process r > 0 (what
    ``messages.send`` / ``receive`` use)."""

    def __init__(self, MPI, comm):
        self.MPI = MPI
        self.comm = comm
        self.shut = threading.Event()     # this call's Shutdown was read

    def send_bytes(self, data: bytes) -> None:
        self.comm.Send([data, self.MPI.BYTE], 0, TAG_UP)

    def send_bytes_received(self, data: bytes) -> None:
        """Send, and return once process 0 has taken the message off its
        channel (a synchronous send, polled: a blocking one would spin a
        core).  Process 0 handles what it takes (``_take_up``) in the thread
        that also watches this rank's state, before it looks again: whatever
        this worker does after this returns is seen after the message was
        handled."""
        req = self.comm.Issend([data, self.MPI.BYTE], 0, TAG_UP)

        def sent():
            jobwatch.check()
            return True if req.Test() else None
        poll(sent)

    def recv_bytes(self) -> bytes:
        status = self.MPI.Status()

        def probe():
            jobwatch.check()         # process 0 went away: stop, do not wait for ever
            return _receive(self.MPI, self.comm, 0, TAG_DOWN, status)
        data = poll(probe)
        if data == SHUTDOWN:
            self.shut.set()
        return data

    def close(self):
        pass


class _ThreadEnd:
    """Rank 0's worker's end of its channel: queues inside process 0."""

    def __init__(self, down: queue.SimpleQueue, up: queue.SimpleQueue):
        self.down, self.up = down, up

    def send_bytes(self, data):
        self.up.put(data)

    def recv_bytes(self):
        return self.down.get()

    def close(self):
        pass


class MpiLauncher(Launcher):
    forks = False

    def __init__(self, world: int, MPI, comm, images: dict):
        self.world = world
        self.MPI = MPI
        self.comm = comm
        self.me = comm.Get_rank()
        self.images = images             # the Ranks' images: sent to the workers per call
        self.in_run = False              # between begin_call and end_call
        self.stuck: list = []            # ranks that did not end after an abort
        self.workers: list = []          # (pid, conn) of forked ranks: none here
        self._started = False
        self._thread = self._end = None
        self._down = self._up = None
        self._codes: dict = {}
        self._held: list = []            # messages of ranks not asked for yet
        self._shut: set = set()          # ranks told to shut down in this call
        self._contexts: dict = {}        # rank -> its worker's RankContext (this process)
        self.served: set = set()         # ranks whose worker got past its start-up
        self._status = MPI.Status()
        # how long process 0 may sleep between probes while a call runs: every
        # probe also makes MPI progress, which RMA into process 0's memory may
        # need (hosts.py shortens it where ranks reach host tensors so)
        self.max_pause = MAX_POLL_S
        cleanup.watch(self)              # SIGTERM of process 0 still removes its segments

    @property
    def started(self) -> bool:
        return self._started

    # -------------------------------------------------------------- one call
    def begin_call(self) -> None:
        """Process 0, before the controller runs a call."""
        self.in_run = True
        self._codes, self._held, self.stuck, self._shut = {}, [], [], set()
        self._down, self._up = queue.SimpleQueue(), queue.SimpleQueue()

    def end_call(self) -> None:
        """Process 0, after the call ended however: every worker is told to
        stop (if the run failed before it was) and has ended, or is listed in
        ``stuck``."""
        try:
            self.stop(STOP_GRACE_S)
            # what ranks sent after the first failure was raised (their own
            # Failed, late artefacts) must not be read as the next call's: each
            # worker sent it before its exit code, which has arrived
            try:
                self._take_up()
            except Exception:
                pass
            self._held = []
        finally:
            self.in_run = False
            self._down = self._up = None

    def start(self, rank_main, keep=None):
        # ranks serve only inside a call that every process makes
        if self.me != 0 or not self.in_run or self._started:
            return
        self._started = True
        for image in self.images.values():   # each worker serves one call with what it got
            for r in range(1, self.world):
                self.send(r, M.LoadImage(image))
        end = self._end = _ThreadEnd(self._down, self._up)

        def rank0():
            code = M.EXIT_FAILED
            try:
                code = rank_main(0, end)
            finally:
                self.end_tasks(0)
                self._codes[0] = code

        self._thread = threading.Thread(target=rank0, name="tilecomm-mpi-rank-0", daemon=True)
        self._thread.start()

    def alive(self):
        return True                      # a dead process ends the whole job

    def serving(self, rank, context, inbox):
        self._contexts[rank] = (context, inbox)
        self.served.add(rank)

    def end_tasks(self, rank: int) -> None:
        """After rank ``rank``'s worker returned in this process: stop the task
        threads of its scheduler and its inbox's pump (a forked rank's die
        with its process; this process goes on running the user's script)."""
        rc, inbox = self._contexts.pop(rank, (None, None))
        sched = rc.__dict__.get("_scheduler") if rc is not None else None
        if sched is not None:
            sched.shutdown()
        if inbox is not None:
            inbox.close()

    def send(self, rank, msg):
        if not self.in_run:
            return
        if isinstance(msg, M.Shutdown):
            # exactly one per rank and call: a worker serving the next call
            # must not find this call's second one (an abort sends another)
            if rank in self._shut:
                return
            self._shut.add(rank)
        data = _bytes_of(msg)
        if rank == 0:
            self._down.put(data)
        else:
            self.comm.Send([data, self.MPI.BYTE], rank, TAG_DOWN)

    def _take_up(self) -> None:
        """Every message from a worker that has arrived, in order: files
        written, the others held for ``receive``."""
        while True:
            data = _receive(self.MPI, self.comm, self.MPI.ANY_SOURCE, TAG_UP, self._status)
            if data is None:
                return
            msg = M.receive(_Bytes(data))
            if type(msg) is M.Files:
                write_files(msg)
            else:
                self._held.append((self._status.Get_source(), msg))

    def _collect_exits(self):
        while True:
            data = _receive(self.MPI, self.comm, self.MPI.ANY_SOURCE, TAG_EXIT, self._status)
            if data is None:
                return
            self._codes[self._status.Get_source()] = int(np.frombuffer(data, np.int64)[0])

    def receive(self, ranks, timeout):
        want = set(ranks)
        deadline = time.monotonic() + timeout

        def probe():
            jobwatch.check()         # a rank's process went away: stop, do not wait for ever
            self._take_up()
            while self._up is not None:
                try:
                    self._held.append((0, M.receive(_Bytes(self._up.get_nowait()))))
                except queue.Empty:
                    break
            out = [(r, m) for r, m in self._held if r in want]
            if out:
                self._held = [(r, m) for r, m in self._held if r not in want]
                return out
            return None

        return poll(probe, deadline, self.max_pause) or []

    def exit_code(self, rank, wait=True):
        self._collect_exits()
        return self._codes.get(rank)

    def stop(self, grace=0.0):
        """Tell every worker of the call to stop (if not yet), wait for them
        for up to ``grace`` (at least ``STOP_GRACE_S``: a rank ends its
        current dispatch before it sees an abort); those still running are
        listed in ``stuck``.  Nothing can be killed from here."""
        if not self.in_run:
            return dict(self._codes)
        for r in range(1, self.world):
            if r not in self._shut:
                self.send(r, M.Shutdown())
        if self._thread is None:
            self._codes.setdefault(0, M.EXIT_OK)     # rank 0's worker never started
        elif 0 not in self._shut:
            self.send(0, M.Shutdown())
        deadline = time.monotonic() + max(grace, STOP_GRACE_S)
        if self._thread is not None:
            self._thread.join(max(0.0, deadline - time.monotonic()))
            if not self._thread.is_alive():     # (its inbox's pump stopped with it)
                self._thread = None

        def probe():
            jobwatch.check()
            self._collect_exits()
            # a worker sends its files (a failed run's salvage) before its
            # exit code, and they are what the failed call's trace merges: read
            # after the exit codes, so every file of an exit seen is taken
            try:
                self._take_up()
            except Exception:
                pass                   # the call's own failure is what is reported
            return True if all(r in self._codes for r in range(self.world)) else None
        poll(probe, deadline)
        self.stuck = [r for r in range(self.world) if r not in self._codes]
        self._started = False
        return dict(self._codes)


class _Bytes:
    """Bytes already received, read through ``messages.receive``."""

    def __init__(self, data):
        self.data = data

    def recv_bytes(self):
        return self.data
