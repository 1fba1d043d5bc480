"""A job across nodes: a host that goes silent ends the job, named.

Within one node a dead process is seen at once (its sockets close, the
launcher reaps it and ends the job).  Between nodes a host that loses power
or its network closes nothing: MPI's transfers to it simply never complete,
so a process blocked in one -- a wait polling the RMA control plane, a
collective step -- would stay blocked for ever, and so would the launcher.

So in a job whose processes are on more than one host, every process keeps
a lifeline with process 0's host (``watched``: the processes of process
0's host hear every other process, every other process hears those of
process 0's host): a thread of its own sends a one-byte beat every
``BEAT_S`` on a communicator of this module's own, and drains the beats it
receives.  Nothing here waits on a peer: sends are non-blocking (a new beat
is sent only once the last one completed), receives are probed.  A host
whose every watched process has been silent for ``LOST_S`` is lost (one
silent process beside live ones is only busy: a Python held by a long C
call or starved on a loaded machine): this process prints one line naming
the host and its processes; on process 0's host it aborts the job
(``MPI_Abort`` reaches the launcher, which runs beside process 0, through
this node's own proxy; if that too is gone, the process exits after
``ABORT_GRACE_S``), elsewhere it just exits (cut off from process 0's host,
it is cut off from the launcher too).  A process that ends its script
normally says *bye* first (at exit, after ``jobwatch`` saw every process
leave), so its silence afterwards is not taken for a loss.

Costs: a thread that wakes every ``BEAT_S``, and per period one small
message from each process of process 0's host to each other process and
back; nothing on one host.
"""
from __future__ import annotations

import os
import sys
import threading
import time

from ...errors import ConfigError
from ...runtime.config import from_env

BEAT_S = 0.25          # a beat every quarter second ...
LOST_S = 5.0           # ... and twenty missed ones make a host lost (a loaded
                       # machine may starve the thread for a second or two);
                       # TILECOMM_MPI_LOST_S sets another
ABORT_GRACE_S = 2.0    # MPI_Abort that does not end this process in this long: exit
TAG_BEAT, TAG_BYE = 1, 2

# process-wide, like the process itself: the lifeline of this process's job
_state: dict = {}


def lost_after() -> float:
    """Seconds of silence that make a host lost: ``TILECOMM_MPI_LOST_S``, or
    LOST_S (a job whose processes may hold Python for longer -- a C call
    that keeps the GIL, a debugger -- needs more)."""
    raw = from_env().get("mpi_lost_s")
    if raw is None:
        return LOST_S
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not value >= 4 * BEAT_S:
        raise ConfigError(f"TILECOMM_MPI_LOST_S must be a number of seconds of at least "
                          f"{4 * BEAT_S:g}, got {raw!r}", code="TC402")
    return value


def start(MPI) -> None:
    """Collective on the job's first set-up of ranks (every process calls it
    at the same step): start the lifeline if the job spans several hosts."""
    if "started" in _state:
        return
    _state["started"] = True
    lost_s = lost_after()
    world = MPI.COMM_WORLD
    if world.Get_size() == 1:
        return
    # hosts by name: processes of one name share a machine, where a link
    # cannot go down and a dead process is seen by the launcher beside it
    # (MPICH's NOLOCAL makes each process a node of its own there: no lifeline)
    names = world.allgather(MPI.Get_processor_name())
    if len(set(names)) == 1:
        return
    comm = world.Dup()
    line = Lifeline(MPI, comm, names, lost_s)
    _state["line"] = line
    line.thread.start()


def halt() -> None:
    """Stop the lifeline's thread, sending nothing more (MPI is ending, or
    the job is being aborted)."""
    line = _state.get("line")
    if line is not None and not line.stopping.is_set():
        line.stopping.set()
        line.thread.join()


def stop() -> None:
    """At exit, once every process said it leaves (``jobwatch``: a process
    still making calls keeps this one waiting there, and watched): end the
    lifeline, if this process has one."""
    line = _state.get("line")
    if line is not None:
        line.stop()


def watched(hosts: list, me: int) -> list:
    """The processes ``me`` exchanges beats with: on process 0's host, every
    process of the other hosts; elsewhere, every process of process 0's host
    (so either side judges a host by all its processes, and the beats grow
    with process 0's host's share of the job, not with its square)."""
    home = hosts[0]
    if hosts[me] == home:
        return [p for p, h in enumerate(hosts) if h != home]
    return [p for p, h in enumerate(hosts) if h == home]


def lost_hosts(hosts: list, heard: dict, now: float, lost_s: float) -> list:
    """The hosts every watched process of which has been silent for longer
    than ``lost_s``.  One silent process beside live ones is busy (or dead,
    which its host's launcher daemon reports): only a host gone silent as a
    whole is lost -- down, or cut off."""
    by_host: dict = {}
    for p, t in heard.items():
        by_host.setdefault(hosts[p], []).append(now - t > lost_s)
    return sorted(h for h, silent in by_host.items() if all(silent))


class Lifeline:
    def __init__(self, MPI, comm, hosts: list, lost_s: float = LOST_S):
        self.MPI = MPI
        self.lost_s = lost_s
        self.comm = comm
        self.me = comm.Get_rank()
        self.hosts = hosts              # each process's host name
        self.peers = watched(hosts, self.me)
        now = time.monotonic()
        self.heard = {p: now for p in self.peers}  # when each watched peer last spoke
        self.sends: dict = {}                       # the beat in flight to each peer
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="tilecomm-mpi-lifeline",
                                       daemon=True)

    def _run(self) -> None:
        while not self.stopping.wait(BEAT_S):
            if self.MPI.Is_finalized():     # the script finalised MPI itself
                return
            self._beat()
            self._drain()
            now = time.monotonic()
            lost = lost_hosts(self.hosts, self.heard, now, self.lost_s)
            if lost:
                self._lost(lost, now)
                return

    def _beat(self) -> None:
        for p in self.peers:
            req = self.sends.get(p)
            # one beat in flight per peer: to a silent peer none piles up
            if req is None or req.Test():
                self.sends[p] = self.comm.Isend([b"\0", self.MPI.BYTE], p, TAG_BEAT)

    def _drain(self) -> None:
        MPI, status = self.MPI, self.MPI.Status()
        while True:
            msg = self.comm.Improbe(MPI.ANY_SOURCE, MPI.ANY_TAG, status)
            if msg is None:
                return
            buf = bytearray(max(status.Get_count(MPI.BYTE), 1))
            msg.Recv([buf, MPI.BYTE])
            peer = status.Get_source()
            if status.Get_tag() == TAG_BYE:
                self.heard.pop(peer, None)          # it left the job on purpose
            elif peer in self.heard:
                self.heard[peer] = time.monotonic()

    def _lost(self, lost: list, now: float) -> None:
        silent = min(now - self.heard[p] for h in lost for p in self._of(h))
        names = "; ".join(f"host {h} (process(es) {', '.join(map(str, self._of(h)))})"
                          for h in lost)
        home = self.hosts[self.me] == self.hosts[0]
        ending = "aborting the MPI job" if home else "ending this process"
        print(f"tilecomm: process {self.me} on host {self.hosts[self.me]} lost {names}: no "
              f"word from any of its processes for {silent:.1f} s (that host is down, or the "
              f"network to it is); {ending}", file=sys.stderr, flush=True)
        if not home:
            # cut off from process 0's host, and so from the launcher beside
            # it: an abort would wait for it
            os._exit(70)
        # the last resort if the abort cannot reach the launcher either
        timer = threading.Timer(ABORT_GRACE_S, os._exit, (70,))
        timer.daemon = True
        timer.start()
        self.MPI.COMM_WORLD.Abort(70)

    def _of(self, host: str) -> list:
        return sorted(p for p in self.heard if self.hosts[p] == host)

    def stop(self) -> None:
        """At exit, before MPI is finalised: say bye (so this process's
        silence from now on is not taken for a loss), then read what the
        peers still send until each of them said bye too -- every beat sent
        to this process is received before MPI ends (MPI orders one
        sender's messages, so none follows a bye) -- or went silent."""
        if self.stopping.is_set():
            return
        self.stopping.set()
        self.thread.join()
        self.stopped_at = time.monotonic()
        sends = [self.comm.Isend([b"\0", self.MPI.BYTE], p, TAG_BYE) for p in self.peers]
        sends += [r for r in self.sends.values() if r is not None]
        while True:
            self._drain()
            sends = [r for r in sends if not r.Test()]
            now = time.monotonic()
            # every peer said bye (none left) or is gone; and every send
            # taken, or left to a peer that is gone
            if all(now - t > self.lost_s for t in self.heard.values()) and \
                    (not sends or now - self.stopped_at > self.lost_s):
                return
            time.sleep(0.002)
