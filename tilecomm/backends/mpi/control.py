"""The control plane of an MPI job whose processes do not share memory (they
span nodes, or ``TILECOMM_MPI_DIRECT=0`` asks to run as if they did): the
shared-memory control plane's block, in an ordinary MPI window, reached by
MPI RMA calls only.

Memory.  One ``MPI_Win_allocate`` window on the job's communicator; process
0 holds the whole block (the other processes contribute nothing), laid out
as ``ShmControlPlane``'s: a header (the abort flag), one record of int64
slots per rank (state, generation, the published wait, dispatch progress),
the per-rank counts of collective calls, then each rank's task-snapshot
area.  Every process opens one passive-target epoch (``MPI_Win_lock_all``)
when the plane is created and keeps it until it is closed, as the window
pool of ``backends/mpi/transport.py`` does.  Process 0 -- the controller, whose
monitor reads the block most -- reaches its own memory through the same
calls, so every access to a slot is an MPI atomic and none races a plain
load or store.

Operations.  A slot is read with ``MPI_Fetch_and_op(MPI_NO_OP)`` and written
with ``MPI_Fetch_and_op(MPI_REPLACE)``; a count is bumped with ``MPI_SUM``;
a rank's wait record is one ``MPI_Accumulate(MPI_REPLACE)`` over its record
slots (an indexed datatype: the progress slot in between is not touched),
read back with one ``MPI_Get_accumulate(MPI_NO_OP)``.  All of them are
accumulate operations on ``MPI_INT64_T``, atomic per slot with respect to
one another.  Each call is flushed (``MPI_Win_flush``) before the next is
issued, so one process's operations reach the block in program order.  The
task-snapshot areas are bytes: ``MPI_Put`` / ``MPI_Get`` + flush.

Ordering.  The shared-memory plane's argument holds with "flushed" for
"seq_cst": a rank flushes its wait record (and, running tasks, its
snapshot) BEFORE it bumps its generation, and that BEFORE it publishes
state BLOCKED.  The monitor reads state, then generation, then the record,
each complete before the next is issued, and later reads state and
generation again; a record that changed in between was written after the
rank left BLOCKED (state RUNNING, flushed first) and is published with a
new generation, so the second reading differs and the monitor discards
what it read.  A deadlock is reported only from records read whole.

Waiting.  No MPI call sleeps until a word changes: ``wait_done`` polls the
peer's progress slot -- a few reads, then sleeps in slices growing to
``transport.mpi.MAX_SLICE_NS``, calling ``hooks.check`` (the abort flag,
one RMA read, and the wait's time-out) after each.

Progress.  Where the MPI library carries RMA atomics as messages (no
hardware or shared-memory path between two processes), an access completes
when the target -- process 0 -- next enters MPI.  During a call process 0
does so often: while it waits for the ranks its launcher probes their
channels in slices of at most 1 ms and its monitor reads the block, and
rank 0's worker makes RMA calls of its own; between calls the other
processes touch the block only once they reached the next call, which
process 0 reaches too.  So a rank's access may wait that long, never for
ever.

Run completion.  A rank bumps its own run count (``MPI_SUM``), then reads
every other rank's; the one that finds them all at its count bumps the
completion word of the header.  The controller's ``wait_runs`` cannot
sleep on that word (no futex reaches another node): it polls the counts
and the word, sleeping ``WAIT_RUNS_PAUSE_S`` between reads and probing
the job's communicator each time, so that process 0 keeps entering MPI
while it waits (see Progress: the ranks' accesses to process 0's memory --
this block, host tensors -- advance on those calls).

Threads.  A rank's cores are threads sharing the plane (MPI is initialised
``MPI_THREAD_MULTIPLE``): every call uses buffers of its own.
"""
from __future__ import annotations

import time

import numpy as np

from ...transport.base import WaitHooks
from .transport import FIRST_SLICE_NS, MAX_SLICE_NS
from .comm import require_mpi
from ...runtime import control as C

__all__ = ["RmaControlPlane"]

HOLDER = 0                     # the process whose memory holds the block
SPIN_READS = 16                # reads of a progress slot before a wait sleeps
WAIT_RUNS_PAUSE_S = 50e-6      # the controller's pause between reads of the run counts
_NO_TAG = 0x7ff0                # a tag no message carries: probed only for progress
_RECORD_SLOTS = sorted(slot for slot, _ in C._RECORD)


def _slot_runs(slots) -> tuple:
    """Block lengths and displacements of the runs of consecutive ``slots``
    (for an indexed datatype)."""
    lengths, starts = [], []
    for s in slots:
        if starts and starts[-1] + lengths[-1] == s:
            lengths[-1] += 1
        else:
            starts.append(s)
            lengths.append(1)
    return lengths, starts


class RmaControlPlane(C.ControlPlane):
    """The control plane on an ordinary MPI window held by process 0.
    Created collectively by every process of ``comm``; ``attach`` returns
    the same object (the window exists once per process)."""

    def __init__(self, comm, world: int, owner=None):
        MPI = require_mpi()
        self.MPI = MPI
        self.world = world
        self.owner = owner                         # closed after the window (the job)
        self.comm = comm                           # probed while the controller waits
        self.I64 = MPI.INT64_T
        self._areas = C.control_size(world)
        nbytes = self._areas + self.area_bytes * world
        me = comm.Get_rank()
        self.win = MPI.Win.Allocate(nbytes if me == HOLDER else 0, 1, comm=comm)
        self.win.Lock_all()                        # one passive-target epoch for the lifetime
        if me == HOLDER:
            np.frombuffer(self.win.tomemory(), np.uint8)[:] = 0
            self.win.Sync()                        # the zeros are the window's, for every process
        comm.Barrier()                             # nobody reads the block before it is zero
        lengths, starts = _slot_runs(_RECORD_SLOTS)
        self._record_type = self.I64.Create_indexed(lengths, starts).Commit()
        # what reset() clears, as one access: the abort flag, every rank's
        # state and progress, every count of collective calls
        reset = [C.ABORT]
        for r in range(world):
            base = C.HEADER_SLOTS + C.RECORD_SLOTS * r
            reset += [base + C.STATE, base + C.DONE_SEQ, base + C.RUNS]
        counters = C.HEADER_SLOTS + C.RECORD_SLOTS * world
        reset += range(counters, counters + C.COUNTER_SLOTS * world)
        lengths, starts = _slot_runs(sorted(reset))
        self._reset_type = self.I64.Create_indexed(lengths, starts).Commit()
        self._reset_count = len(reset)
        self._zero = np.zeros(C.RECORD_SLOTS, np.int64)   # NO_OP origin (never written)

    def attach(self):
        return self

    # ------------------------------------------------------------ slots
    @staticmethod
    def _disp(rank: int, slot: int) -> int:
        return (C.HEADER_SLOTS + C.RECORD_SLOTS * rank + slot) * C.SLOT

    def _fetch_op(self, disp: int, value: int, op) -> int:
        """One atomic read-modify-write of the int64 at ``disp``, complete at
        the holder on return; the slot's previous value."""
        out = np.empty(1, np.int64)
        self.win.Fetch_and_op([np.array([value], np.int64), self.I64], [out, self.I64],
                              HOLDER, disp, op)
        self.win.Flush(HOLDER)
        return int(out[0])

    def _load(self, disp: int) -> int:
        return self._fetch_op(disp, 0, self.MPI.NO_OP)

    def _store(self, disp: int, value: int) -> None:
        self._fetch_op(disp, value, self.MPI.REPLACE)

    def get(self, rank: int, slot: int) -> int:
        return self._load(self._disp(rank, slot))

    def set(self, rank: int, slot: int, value: int) -> None:
        self._store(self._disp(rank, slot), value)

    # ------------------------------------------------------------ rank side
    def set_state(self, rank, state):
        self.set(rank, C.STATE, state)

    def publish_wait(self, rank, record):
        values = dict(C._RECORD)
        data = np.array([getattr(record, values[s]) for s in _RECORD_SLOTS], np.int64)
        self.win.Accumulate([data, self.I64], HOLDER, [self._disp(rank, 0), 1, self._record_type],
                            self.MPI.REPLACE)
        self.win.Flush(HOLDER)                     # the record, before the generation...
        self._fetch_op(self._disp(rank, C.GEN), 1, self.MPI.SUM)
        self.set(rank, C.STATE, C.BLOCKED)         # ... before BLOCKED: see the module doc

    def _counter_disp(self, rank: int, buffer_id: int) -> int:
        return (C.HEADER_SLOTS + C.RECORD_SLOTS * self.world + C.COUNTER_SLOTS * rank
                + buffer_id) * C.SLOT

    def enter_collective(self, rank, buffer_id):
        if not 0 <= buffer_id < C.COUNTER_SLOTS:
            return 0
        return self._fetch_op(self._counter_disp(rank, buffer_id), 1, self.MPI.SUM) + 1

    def collective_count(self, rank, buffer_id):
        if not 0 <= buffer_id < C.COUNTER_SLOTS:
            return 1 << 62
        return self._load(self._counter_disp(rank, buffer_id))

    def publish_done(self, rank, seq):
        self.set(rank, C.DONE_SEQ, seq)

    def wait_done(self, rank, seq, spin, hooks: WaitHooks | None):
        disp = self._disp(rank, C.DONE_SEQ)
        if hooks is None:
            for _ in range(max(1, min(spin, SPIN_READS))):
                if self._load(disp) >= seq:
                    return True
            return False
        hooks.blocked()                            # published; the first read comes after it
        try:
            slice_ns = FIRST_SLICE_NS
            while True:
                value = self._load(disp)
                if value >= seq:
                    return True
                time.sleep(slice_ns / 1e9)
                hooks.check(value)
                slice_ns = min(slice_ns * 2, MAX_SLICE_NS)
        finally:
            hooks.unblocked()

    def aborted(self):
        return self._load(C.ABORT * C.SLOT) != 0

    def finish_run(self, rank):
        n = self._fetch_op(self._disp(rank, C.RUNS), 1, self.MPI.SUM) + 1
        # each bump is complete at the holder before the reads that follow
        # it, so of two ranks finishing at once the later one sees both
        # counts (the shared-memory plane's argument, with "flushed")
        if all(self.get(r, C.RUNS) >= n for r in range(self.world) if r != rank):
            self.wake_controller()

    def wake_controller(self):
        self._fetch_op(C.COMPLETION * C.SLOT, 1, self.MPI.SUM)

    # ------------------------------------------------------------ controller side
    def reset(self):
        zeros = np.zeros(self._reset_count, np.int64)
        self.win.Accumulate([zeros, self.I64], HOLDER, [0, 1, self._reset_type],
                            self.MPI.REPLACE)
        self.win.Flush(HOLDER)

    def abort(self):
        self._store(C.ABORT * C.SLOT, 1)

    def done_seq(self, rank):
        return self.get(rank, C.DONE_SEQ)

    def runs_finished(self, rank):
        return self.get(rank, C.RUNS)

    def wait_runs(self, count, timeout):
        deadline = time.monotonic() + timeout
        word = C.COMPLETION * C.SLOT
        seen = self._load(word)            # before the counts: see ``finish_run``
        while True:
            if all(self.get(r, C.RUNS) >= count for r in range(self.world)):
                return True
            if self._load(word) != seen or time.monotonic() >= deadline:
                return False               # a failing rank woke us, or the slice ended
            self.comm.Iprobe(self.MPI.ANY_SOURCE, _NO_TAG)   # an MPI call: progress
            time.sleep(WAIT_RUNS_PAUSE_S)

    def snapshot(self, ranks):
        out = []
        for r in ranks:
            state, gen = self.get(r, C.STATE), self.get(r, C.GEN)
            wait = None
            if state == C.BLOCKED:
                slots = np.empty(C.RECORD_SLOTS, np.int64)
                self.win.Get_accumulate([self._zero, self.I64], [slots, self.I64], HOLDER,
                                        [self._disp(r, 0), C.RECORD_SLOTS, self.I64],
                                        self.MPI.NO_OP)
                self.win.Flush(HOLDER)
                wait = C.WaitRecord(**{f: int(slots[s]) for s, f in C._RECORD})
            out.append(C.RankStatus(state, gen, wait))
        return out

    # ------------------------------------------------------------ task-snapshot areas
    def _area(self, rank: int) -> int:
        return self._areas + self.area_bytes * rank

    def write_area(self, rank, data):
        if len(data) > self.area_bytes - 8:
            raise ValueError(f"{len(data)} bytes do not fit a task-snapshot area")
        buf = np.empty(8 + len(data), np.uint8)
        buf[:8] = np.array([len(data)], np.int64).view(np.uint8)
        buf[8:] = np.frombuffer(data, np.uint8)
        self.win.Put([buf, self.MPI.BYTE], HOLDER, [self._area(rank), buf.size, self.MPI.BYTE])
        self.win.Flush(HOLDER)

    def read_area(self, rank):
        start = self._area(rank)
        head = np.empty(1, np.int64)
        self.win.Get([head, self.I64], HOLDER, [start, 1, self.I64])
        self.win.Flush(HOLDER)
        n = int(head[0])
        if not 0 < n <= self.area_bytes - 8:
            return None
        data = np.empty(n, np.uint8)
        self.win.Get([data, self.MPI.BYTE], HOLDER, [start + 8, n, self.MPI.BYTE])
        self.win.Flush(HOLDER)
        return data.tobytes()

    # ------------------------------------------------------------ end
    def close(self):
        """Collective (every process closes its plane once)."""
        if self.win is None:
            return
        win, self.win = self.win, None
        self._record_type.Free()
        self._reset_type.Free()
        win.Unlock_all()
        win.Free()
        if self.owner is not None:
            owner, self.owner = self.owner, None
            owner.close()
