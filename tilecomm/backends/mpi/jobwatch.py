"""How the processes of an MPI job learn that one of them is gone, so that a
job whose script fails on one process ends at once instead of hanging.

Why it is needed.  MPICH's ``MPI_Finalize`` blocks until every process of
the job reaches it, and a process inside a blocking MPI collective spins a
core until its peers join.  So an uncaught exception on one process (its
script is over: it waits in ``MPI_Finalize``) left the others waiting for it
in their next call, spinning, until the launcher's time-out killed the job.

Three pieces, all in this module:

* **Uncaught exceptions end the job.**  ``install`` (on the backend's first
  use of MPI in a process) chains a ``sys.excepthook``: it prints the
  traceback through the hook that was there, tells the other processes (a
  *failed* notice, below) and waits up to ``ACK_WAIT_S`` for each to answer
  -- so each prints why it stops before it is killed -- then calls
  ``MPI_Abort``, as ``python -m mpi4py`` does.  If every other process
  answers that it failed too (a check of the results that fails on every
  process), nobody waits for anybody: no abort, each process ends with its
  traceback as it would without MPI.  An error every process raised from
  the same call (a failed call: process 0 broadcast it, ``spmd.py``) is no
  reason to abort either: every process ends with it on its own.
* **Notices.**  A communicator of this module's own (a duplicate of
  ``MPI_COMM_WORLD``, made at the first gate) carries one-message notices:
  *failed* (the uncaught exception's first line) from the hook; *left* from
  an ``atexit`` handler -- this process's script ended (also by ``sys.exit``
  or under a hook of the user's own), so it makes no further call; and
  *unwound*, from a process that closes its ranks because an exception the
  others do not know of left a call (``call``: a failure of the backend
  itself, or of a process r > 0 while it served): the others may still wait
  in that call, where no gate shows them it is closing.  Each notice carries
  the sender's count of gates, the same on every process (``_fatal``).  A
  process that waits for its peers inside the backend (``check``, ``gate``)
  looks for notices; on one it prints one line naming the process that went
  away, confirms, and lets that process abort the job once every waiting
  process has said why it stops (aborting it itself after ``ABORT_WAIT_S``
  if nothing happened).  At exit a process reads, before ``MPI_Finalize``,
  either every other process's *left* notice (all are leaving: the job ends
  normally, and no notice stays unread in MPI) or confirmations (then it
  aborts the job).
* **Gates.**  Every collective step of the backend -- setting up a set of
  ranks, a call, closing a set of ranks -- begins with a non-blocking
  exchange of what each process is entering (``MPI_Iallgather`` of a code),
  polled with sleeps while looking for notices.  The blocking MPI
  collectives that follow start only once every process is there, so no
  process spins in them waiting for a peer that will never come; and
  processes at different steps (one closes a prepared worker, left by an
  exception, while another starts its next call on it) are told so, and the
  job is aborted, instead of waiting for each other for ever.

Why a *left* notice stops only a process that would wait for ever: a gate
completes only once every process entered it, so a process leaves only
after every gate it entered completed; a gate still pending when the
notice arrives is one the leaver never entered and never will.  Except a
close step, which the ``atexit`` hooks of prepared workers still make after
this module's own ran (``atexit`` runs the latest registered first): a close
gate therefore does not stop on a *left* notice.

What cannot be seen: a process that fails before its first use of the MPI
backend (no hook yet); a peer inside a blocking MPI call of the user's own;
a process past its part of a call, receiving the call's outcome in MPI's
broadcast, when a process other than 0 leaves the call with an exception
(the abort ends it, without its line).  The launcher's time-out, or the
abort, still ends those jobs.
"""
from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
import time
import traceback

import numpy as np

from . import lifeline

__all__ = ["call", "check", "gate", "install", "SET_UP", "CALL", "CLOSE"]

# what a gate is the start of (the codes processes exchange)
SET_UP, CALL, CLOSE = 1, 2, 3
_STEPS = {SET_UP: "sets up ranks for a call", CALL: "starts a call",
          CLOSE: "closes a set of ranks"}
_WAITING = {SET_UP: "to set up ranks for a call", CALL: "to start a call",
            CLOSE: "to close a set of ranks"}

TAG_NOTICE, TAG_ACK = 1, 2
FAILED, LEFT, UNWOUND = b"F", b"L", b"U"
# A process that went away waits this long for the others to confirm its
# notice before it aborts the job: one waiting inside the backend confirms
# within a few ms; one busy in its own code never does, and is ended by the
# abort.  (One that left waits this long after the first confirmation.)
ACK_WAIT_S = 2.0
# A process that confirmed a notice leaves the abort to the process that went
# away (so every waiting process has said why it stops first); if no abort
# came after this long (that process stuck elsewhere), it aborts the job.
ABORT_WAIT_S = 10.0
# How often a waiting process looks for notices: a probe costs about a
# microsecond, but the waits that call ``check`` first poll every few
# microseconds (and a notice is rare: a few ms late is soon enough).
CHECK_EVERY_S = 0.002
SETTLE_S = 0.2                 # output's time to get out before an abort (``_abort``)
SPIN_S = 200e-6                # a gate tests without sleeping this long first
MAX_PAUSE_S = 0.001            # ... then sleeps between two tests, up to this long

_lock = threading.Lock()
_state = {"MPI": None, "comm": None, "next_check": 0.0, "stopping": False,
          "entered": 0, "completed": 0,  # gates of this process (the same count everywhere)
          "in_call": False,              # a call began and has not ended (``call``)
          "left": set(),                 # peers whose left notice was read
          "sends": []}


def install(MPI) -> None:
    """Once per process, on the backend's first use of MPI: the exception
    hook and the exit notice."""
    with _lock:
        if _state["MPI"] is not None:
            return
        _state["MPI"] = MPI
    previous = sys.excepthook

    def abort_on_uncaught(etype, value, tb):
        previous(etype, value, tb)
        _uncaught(etype, value)

    sys.excepthook = abort_on_uncaught
    atexit.register(_leaving)


def _after_fork_in_child():
    # a forked child is no process of the job: it must never send a notice
    _state["comm"] = None
    _state["MPI"] = None


os.register_at_fork(after_in_child=_after_fork_in_child)


def _usable(MPI) -> bool:
    return MPI is not None and MPI.Is_initialized() and not MPI.Is_finalized()


def _me() -> int:
    return _state["MPI"].COMM_WORLD.Get_rank()


def _abort(MPI) -> None:
    """``MPI_Abort`` once what this process printed had time to get out:
    MPICH's launcher forwards each process's output on its own time, and the
    abort ends every process at once (the last lines were lost so)."""
    sys.stderr.flush()
    time.sleep(SETTLE_S)
    MPI.COMM_WORLD.Abort(1)


# ------------------------------------------------------------------ notices
def _notices_comm():
    """The notice communicator, made at the first gate (collective: every
    process's first gate is the same step)."""
    comm = _state["comm"]
    if comm is None:
        MPI = _state["MPI"]
        comm, req = MPI.COMM_WORLD.Idup()
        _wait(req.Test, where=None)           # no notices can travel before it exists
        _state["comm"] = comm
    return comm


def _next_notice():
    """(source, kind, gate, text) of a notice that arrived, or None.  A
    *left* notice's sender is remembered (``_leaving`` waits for the others')."""
    comm, MPI = _state["comm"], _state["MPI"]
    if comm is None:
        return None
    status = MPI.Status()
    msg = comm.Improbe(MPI.ANY_SOURCE, TAG_NOTICE, status)
    if msg is None:
        return None
    buf = bytearray(status.Get_count(MPI.BYTE))
    msg.Recv([buf, MPI.BYTE])
    data = bytes(buf)
    kind, gate_no = data[:1], int.from_bytes(data[1:9], "little")
    if kind == LEFT:
        _state["left"].add(status.Get_source())
    return status.Get_source(), kind, gate_no, data[9:].decode(errors="replace")


def _fatal(kind: bytes, gate_no: int, step: int | None) -> bool:
    """Whether a notice means its sender will never come where this process
    waits for it: in a call (``step`` None) or in a gate of ``step``.

    *failed*: always (the sender ends the job).  *unwound* (sent on entering
    close gate ``gate_no``): not once that gate completed here -- everybody
    closed then, the notice only arrived late -- nor in that very gate (this
    process closes too).  *left*: except in a close gate, which the sender
    may still make after its notice (see the module doc)."""
    if kind == UNWOUND:
        if _state["completed"] >= gate_no:
            return False
        return not (step == CLOSE and _state["entered"] == gate_no)
    return kind == FAILED or step != CLOSE


def _send_all(kind: bytes, text: str = "") -> list:
    comm, MPI = _state["comm"], _state["MPI"]
    # the gate number: the one this process enters (unwound), or the last
    # it passed
    data = kind + _state["entered"].to_bytes(8, "little") + text.encode()
    me = comm.Get_rank()
    sends = [comm.Isend([data, MPI.BYTE], p, TAG_NOTICE) for p in range(comm.Get_size())
             if p != me]
    _state["sends"] += sends            # held until complete (tested at exit)
    return sends


def check(where: str = "in a call") -> None:
    """Called by the backend's polled waits: stop this process if a peer
    went away (returns otherwise).  Cheap; looks at most every
    ``CHECK_EVERY_S``."""
    now = time.monotonic()
    if _state["comm"] is None or now < _state["next_check"]:
        return
    _state["next_check"] = now + CHECK_EVERY_S
    notice = _next_notice()
    if notice is not None and _fatal(notice[1], notice[2], None):
        _stop(*notice, where=where)


def _stop(peer: int, kind: bytes, gate_no: int, text: str, where: str):
    """A peer went away while this process waited for it: say so, and end
    the job.  Never returns."""
    MPI = _state["MPI"]
    with _lock:
        first = not _state["stopping"]
        _state["stopping"] = True
    if first:
        what = {FAILED: f"ended with an uncaught {text}",
                LEFT: "left the job (its script ended)",
                UNWOUND: f"left the call, raising {text},"}[kind]
        print(f"tilecomm: process {_me()} stops: process {peer} {what} while this process "
              f"waited for it {where}", file=sys.stderr, flush=True)
        # said: the process that went away aborts the job once every process
        # waiting for it said why it stops (an abort kills at once)
        req = _state["comm"].Isend([b"", MPI.BYTE], peer, TAG_ACK)
        deadline = time.monotonic() + ABORT_WAIT_S
        while time.monotonic() < deadline:
            req.Test()
            time.sleep(0.01)
        _abort(MPI)
    while True:                       # another thread of this process is ending the job
        time.sleep(1.0)


# ------------------------------------------------------------------ gates
def _wait(test, where: str | None, step: int | None = None, unwinding: bool = False) -> None:
    """Poll ``test()`` until it is true, sleeping in slices growing to
    ``MAX_PAUSE_S``; looks for notices meanwhile (``where``: what this
    process waits for, None before the notice communicator exists).
    ``unwinding``: this process announced the exception it closes with;
    a peer that confirms it was waiting in the call ends the job."""
    # the last process to arrive finds the others' parts there: its request
    # completes within a test or two, so it tests without sleeping at first
    # (a sleep, however short, costs ~0.1 ms here: on every call)
    spin_until = time.monotonic() + SPIN_S
    pause = 1e-5
    while not test():
        if time.monotonic() < spin_until:
            continue
        if where is not None:
            notice = _next_notice()
            if notice is not None and _fatal(notice[1], notice[2], step):
                _stop(*notice, where=where)
        if unwinding and _acks(1, 0.0):
            _abort_unwinding()
        time.sleep(pause)
        pause = min(pause * 2, MAX_PAUSE_S)


def gate(step: int) -> None:
    """Collective, at the start of each collective step of the backend:
    returns once every process of the job entered a gate of the same step;
    stops this process if a peer went away, aborts the job if processes
    entered different steps."""
    MPI = _state["MPI"]
    comm = _notices_comm()
    _state["entered"] += 1
    unwinding = False
    if step == CLOSE and _state["in_call"] and comm.Get_size() > 1:
        # closing because an exception the others do not know of left a
        # call: they may still wait in it (``check``), where no gate shows
        # them that this process is closing
        exc = sys.exc_info()[1]
        _send_all(UNWOUND, _summary(exc) if exc is not None else "an exception")
        unwinding = True
    _state["in_call"] = False
    mine = np.array([step], np.int64)
    steps = np.empty(comm.Get_size(), np.int64)
    req = comm.Iallgather(mine, steps)
    _wait(req.Test, where=_WAITING[step], step=step, unwinding=unwinding)
    _state["completed"] = _state["entered"]
    if (steps == step).all():
        return
    _diverged(MPI, comm, [int(s) for s in steps])


@contextlib.contextmanager
def call():
    """One call of the job: its gate, then the call's body.  The call has
    ended unless an exception that is not the call's own (raised on every
    process) leaves it: then the others may still wait in it."""
    gate(CALL)
    _state["in_call"] = True
    try:
        yield
    except BaseException as e:
        if _every_process_raised(e):
            _state["in_call"] = False
        raise
    _state["in_call"] = False


def _abort_unwinding() -> None:
    """A peer stopped because this process left a call with an exception:
    print it (the abort comes before any hook would), wait for the other
    peers' confirmations, abort the job."""
    MPI, comm = _state["MPI"], _state["comm"]
    traceback.print_exc()
    print(f"tilecomm: process {comm.Get_rank()} left a call with an uncaught "
          f"{type(sys.exc_info()[1]).__name__} while other processes waited for it there: "
          f"aborting the MPI job", file=sys.stderr, flush=True)
    _acks(comm.Get_size() - 2, ACK_WAIT_S)
    _abort(MPI)


def _acks(count: int, within: float) -> list:
    """Read up to ``count`` confirmations, waiting up to ``within`` seconds
    for them; the processes they came from."""
    MPI, comm = _state["MPI"], _state["comm"]
    status, got = MPI.Status(), []
    deadline = time.monotonic() + within
    while len(got) < count:
        msg = comm.Improbe(MPI.ANY_SOURCE, TAG_ACK, status)
        if msg is not None:
            msg.Recv([bytearray(0), MPI.BYTE])
            got.append(status.Get_source())
        elif time.monotonic() >= deadline:
            break
        else:
            time.sleep(0.001)
    return got


def _diverged(MPI, comm, steps: list) -> None:
    """Processes entered different steps: every process saw the same
    ``steps``; each says so (with the exception it is unwinding, if any: the
    usual cause), then the job is aborted."""
    if sys.exc_info()[1] is not None:
        traceback.print_exc()
    at = ", ".join(f"process {p} {_STEPS.get(s, '?')}" for p, s in enumerate(steps))
    print(f"tilecomm: process {comm.Get_rank()}: the processes of the MPI job are at different "
          f"steps ({at}); every process must make the same calls in the same order: aborting "
          f"the MPI job", file=sys.stderr, flush=True)
    # every process prints before any of them aborts (an abort kills at once)
    req = comm.Ibarrier()
    deadline = time.monotonic() + ACK_WAIT_S
    while not req.Test() and time.monotonic() < deadline:
        time.sleep(0.001)
    _abort(MPI)


# ------------------------------------------------------------------ leaving
def _every_process_raised(value) -> bool:
    """An error of a failed call, raised by every process of the job."""
    return bool(getattr(value, "reported_by_process_0", False)
                or getattr(value, "raised_on_every_process", False))


def _summary(value) -> str:
    first = (str(value).splitlines() or [""])[0]
    return f"{type(value).__name__}: {first}" if first else type(value).__name__


def _uncaught(etype, value) -> None:
    MPI = _state["MPI"]
    if not _usable(MPI) or _every_process_raised(value) or MPI.COMM_WORLD.Get_size() == 1:
        return                         # (a job of one process waits for nobody)
    me = MPI.COMM_WORLD.Get_rank()
    if _state["comm"] is not None:
        _send_all(FAILED, _summary(value))
        # each peer answers: it was waiting for this process (it confirms and
        # stops), or it failed too -- a script that raises the same error on
        # every process (a check of the results) waits for nobody: the job
        # ends as it would without MPI, every process with its traceback
        comm, status = _state["comm"], MPI.Status()
        unanswered = set(range(comm.Get_size())) - {me}
        acked, deadline = False, time.monotonic() + ACK_WAIT_S
        while unanswered and time.monotonic() < deadline:
            msg = comm.Improbe(MPI.ANY_SOURCE, TAG_ACK, status)
            if msg is not None:
                msg.Recv([bytearray(0), MPI.BYTE])
                unanswered.discard(status.Get_source())
                acked = True
                continue
            notice = _next_notice()
            if notice is None:
                time.sleep(0.001)
            elif notice[1] == FAILED:
                unanswered.discard(notice[0])
        if not unanswered and not acked:
            return
    print(f"tilecomm: process {me} ended with an uncaught {etype.__name__}: aborting the MPI "
          f"job", file=sys.stderr, flush=True)
    _abort(MPI)


def _leaving() -> None:
    """At exit: tell the other processes this one makes no further call,
    then read theirs.  Each process leaves only once every other one said it
    leaves too (or it is stopped): ``MPI_Finalize`` would wait for them just
    the same, and no notice is left unread in MPI at the end (some of MPI's
    network modules print a warning for each).  A peer still waiting in a
    call for this process reads the notice and aborts the job."""
    MPI = _state["MPI"]
    comm = _state["comm"]
    if not _usable(MPI) or comm is None or _state["stopping"]:
        lifeline.halt()             # no MPI from its thread while MPI ends or aborts
        return
    _send_all(LEFT)
    sends = _state["sends"]
    pending = set(range(comm.Get_size())) - {comm.Get_rank()} - _state["left"]
    stopped, status, pause, deadline = [], MPI.Status(), 1e-4, None
    while pending or sends:
        sends = [r for r in sends if not r.Test()]
        msg = comm.Improbe(MPI.ANY_SOURCE, TAG_ACK, status)
        if msg is not None:                # a peer waited for this process: it stops
            msg.Recv([bytearray(0), MPI.BYTE])
            stopped.append(status.Get_source())
            pending.discard(status.Get_source())
            deadline = deadline or time.monotonic() + ACK_WAIT_S
            continue
        notice = _next_notice()
        if notice is not None:
            if notice[1] == FAILED:
                _stop(*notice, where="to leave the job")
            if notice[1] == LEFT:
                pending.discard(notice[0])
            continue
        if deadline is not None and time.monotonic() >= deadline:
            break
        time.sleep(pause)
        pause = min(pause * 2, 0.01)
    if stopped:
        print(f"tilecomm: process {comm.Get_rank()} left the job while process(es) "
              f"{sorted(stopped)} waited for it in a call: aborting the MPI job",
              file=sys.stderr, flush=True)
        _abort(MPI)
    # every process leaves: a job across nodes may end its lifeline now (it
    # watched the peers while this process waited for them above)
    lifeline.stop()
