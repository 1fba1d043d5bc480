"""The controller: start the ranks, run the HOST orchestrator, watch the ranks,
and clean up whatever happens.

Guarantees: the first failure on any rank stops every rank and is raised with
that rank's traceback; peers blocked in waits are aborted (they return from
the wait with RankAborted and exit) rather than left to be killed; a killed
rank is noticed through its channel and exit status; a deadlock (every live
rank blocked, nothing able to release any of them) is reported with each
blocked wait; Ctrl-C stops everything.  No worker process or /dev/shm segment
outlives the call.

Who does what: ``launcher`` starts processes and carries messages,
``control`` holds rank states and the abort flag, the transport host
allocates windows, ``arguments`` moves host tensors, ``monitor`` watches a
run.  ``Ranks`` ties one of each together for the lifetime of a set of rank
processes; ``Run`` is one execution of the HOST orchestrator on them.
"""
from __future__ import annotations

import importlib
import itertools
import os

from ...errors import TilecommError, UserError
from ...transport import make_host
from ...transport import segments as S
from .. import control as C
from .. import taskplane
from . import forking
from ...dfx import hostfaults
from .arguments import ArgumentPool, check_arguments, copy_back, map_result, share_arguments
from .artefacts import RunArtefacts
from .orchestrator import HostRuntime
from .launcher import ForkLauncher
from ..messages import Batch, EndRun, LoadImage, Shutdown
from .monitor import monitor, wake_blocked
from .persistent import PersistentDomains
from ..rank.loop import worker_main

_CALL_IDS = itertools.count(1)
# RunConfig.transport names whose ranks are an MPI job's processes -> the
# module that sets up their launcher, control plane and transport
SPMD_BACKENDS = {"mpi": "tilecomm.backends.mpi.spmd"}


def runs_host_code(config=None) -> bool:
    """Whether this process runs the HOST code of calls made with ``config``
    (the HOST orchestrator, SubWorker bodies, callbacks): the caller does,
    and under mpiexec that is process 0, once for the whole job."""
    from ..config import RunConfig
    if (config or RunConfig()).resolved_transport() not in SPMD_BACKENDS:
        return True
    from ...backends.mpi.comm import require_mpi
    return require_mpi().COMM_WORLD.Get_rank() == 0
ABORT_GRACE_S = 0.5      # after an abort, how long ranks may take to exit on their own
# dispatches to one rank are sent together once this many are queued (and at
# the end of the HOST orchestrator): one pickle and one write per batch
# instead of per message, while a long host loop still lets ranks start early
BATCH_MESSAGES = 32


def next_id() -> int:
    """A fresh id for segment names (unique within this process)."""
    return next(_CALL_IDS)


class Ranks:
    """One worker process per rank, the control plane and the transport they
    share.  Lives for one call (one-shot) or across calls
    (``DistributedWorker``)."""

    def __init__(self, world: int, config, persistent_reset: bool | None = None,
                 pool_arguments: bool = False):
        # segments of controllers that were SIGKILLed: swept whenever ranks start
        # (one listdir), so a long-lived process also cleans up after peers
        # that died after its first call
        S.sweep_stale()
        self.world = world
        self.config = config
        self.owner = os.getpid()
        self.id = next(_CALL_IDS)
        self.images: dict = {}             # specialisations the workers know
        self._own_segments = 0
        self.transport_name = config.resolved_transport()
        # a backend whose ranks are the processes of a job every one of which
        # runs the caller's program (MPI) sets ``spmd``: see ``execute``
        self.spmd = None
        self.launcher = self.control = self.transport = None
        # each rank's last dispatch number: runs continue the count, so a
        # published progress value of an earlier run never satisfies a later wait
        self.seq = [0] * world
        # runs begun since the control block was last reset: a run is complete
        # once every rank finished this many (``ControlPlane.runs_finished``)
        self.runs = 0
        # (rank, message) read by a run's monitor that belongs to a later run
        self.held: list = []
        self.failed = False                 # a run failed: these ranks were stopped
        self._closed = False
        # persistent comm domains (prepare(persistent=True)): None = fresh per run
        self.persistent: PersistentDomains | None = None
        # a prepared worker's argument segments, reused across runs
        self.arguments = ArgumentPool(self._new_segment) if pool_arguments else None
        # segments named so live as long as these ranks (ranks may keep them mapped)
        self.own_prefix = f"{S.segment_name(self.owner, self.id, 0)[:-1]}"
        try:
            if self.transport_name in SPMD_BACKENDS:
                # imported only when chosen: it loads an MPI library
                importlib.import_module(SPMD_BACKENDS[self.transport_name]).set_up(self)
            else:
                self.launcher = ForkLauncher(world)
                self.control = C.ShmControlPlane(
                    self._new_segment(C.control_size(world) + taskplane.area_size(world)), world)
                self.transport = make_host(self.transport_name, world, self._new_segment)
            if persistent_reset is not None:
                self.persistent = PersistentDomains(self._new_segment, self.transport,
                                                    persistent_reset)
        except BaseException:
            self.close()
            raise

    def _new_segment(self, nbytes: int):
        """A segment that lives as long as the ranks (not one run)."""
        name = S.segment_name(self.owner, self.id, self._own_segments)
        self._own_segments += 1
        return S.Segment.create(name, nbytes)

    @property
    def started(self) -> bool:
        return self.launcher.started

    def start(self):
        # element types whose numpy type loads lazily (BF16): imported once
        # here, not once per rank after the fork
        forking.preload(self.images.values())
        self.launcher.start(lambda rank, channel: worker_main(rank, self, channel),
                            keep=[self.transport.child_fds(r) for r in range(self.world)])
        self.transport.started()

    def alive(self) -> bool:
        """Whether idle ranks can all serve the next run (none died meanwhile)."""
        return self.launcher.alive()

    def know(self, image):
        """Make sure every worker has ``image`` (forked ones inherit it)."""
        if image.key in self.images:
            return
        self.images[image.key] = image
        if self.started:
            for r in range(self.world):
                self.send(r, LoadImage(image))

    def send(self, rank: int, msg) -> None:
        self.launcher.send(rank, msg)

    def abort(self, run=None) -> dict:
        """Stop every rank: raise the abort flag (blocked waits end with
        RankAborted), wake sleepers, let idle workers exit, kill stragglers.
        Returns {rank: exit code}."""
        if not self.started:
            return {}
        self.control.abort()
        if run is not None:
            try:
                wake_blocked(run)
            except Exception:
                pass                       # waits notice the flag within a sleep slice anyway
        for r in range(self.world):
            self.send(r, Shutdown())
        return self.launcher.stop(ABORT_GRACE_S)

    def kill(self) -> dict:
        return self.launcher.stop(0.0) if self.launcher is not None else {}

    def close(self, graceful: bool = False):
        if self._closed:                    # a failure may reach it from two threads
            return
        self._closed = True
        try:
            if graceful and self.started:
                for r in range(self.world):
                    self.send(r, Shutdown())
                self.launcher.stop(1.0)
            else:
                self.kill()
        finally:
            if self.transport is not None:
                self.transport.close()
            if self.control is not None:
                self.control.close()
            if self.arguments is not None:
                self.arguments.close()
            S.sweep(self.owner, self.id)


class Run:
    """One execution of the HOST orchestrator on a set of ranks."""

    def __init__(self, ranks: Ranks, executable, config, callbacks=None):
        self.ranks = ranks
        self.callbacks = callbacks or {}     # SubWorker name -> bound callback
        self.executable = executable
        self.config = config
        self.world = executable.world
        self.owner = ranks.owner
        self.call_id = next(_CALL_IDS)
        self.segments: list = []
        self.buffers: dict = {}
        self.done: set = set()
        self._outbox: list = [[] for _ in range(ranks.world)]
        self._pooled: list = []
        self.outcome = None                 # what finish() needs, once begin() succeeded
        self.index = 0                      # which run of the ranks this is (Ranks.runs)
        self.artefacts = None               # run artefacts (artefacts.RunArtefacts), if asked

    def argument_segment(self, nbytes: int):
        """A segment for a host tensor argument: from the ranks' pool if they
        have one."""
        pool = self.ranks.arguments
        if pool is not None:
            seg = pool.take(nbytes)
            if seg is not None:
                self._pooled.append(seg)
                return seg
        return self.new_segment(nbytes)

    def new_segment(self, nbytes: int):
        name = S.segment_name(self.owner, self.call_id, len(self.segments))
        seg = S.Segment.create(name, max(int(nbytes), 1))
        self.segments.append(seg)
        return seg

    def allocate_window(self, nbytes: int, members: tuple, name: str = "") -> tuple:
        persistent = self.ranks.persistent
        if persistent is not None:
            return persistent.allocate(self.executable.program_key, name, nbytes, members)
        return self.ranks.transport.allocate(self, nbytes, members)

    def send(self, rank: int, msg) -> None:
        box = self._outbox[rank]
        box.append(msg)
        if len(box) >= BATCH_MESSAGES:
            self.flush(rank)

    def flush(self, rank: int | None = None) -> None:
        """Send what is queued (for one rank, or all)."""
        ready = []
        for r in range(self.world) if rank is None else (rank,):
            box = self._outbox[r]
            if box:
                self._outbox[r] = []
                ready.append((r, box[0] if len(box) == 1 else Batch(tuple(box))))
        for r, msg in ready:
            self.ranks.send(r, msg)

    def release(self):
        if self.ranks.persistent is None:   # persistent windows stay registered
            self.ranks.transport.end_run(self)
        if self._pooled:
            self.ranks.arguments.give_back(self._pooled)
            self._pooled = []
        for seg in self.segments:
            seg.close()
            seg.unlink()
        if self.segments:                   # catches one created but not yet recorded
            S.sweep(self.owner, self.call_id)
        self.segments = []


def launch(executable, args: list, config):
    """One-shot call: start ranks, run once, tear everything down."""
    check_arguments(executable, args)      # bad outputs, no room: refused before anything
    ranks = Ranks(executable.world, config)
    try:
        return execute(ranks, executable, args, config, last=True)
    finally:
        ranks.close()


def execute(ranks: Ranks, executable, args: list, config, last: bool = False, callbacks=None,
            reset_control: bool = True):
    """Run the HOST orchestrator once on ``ranks`` (started here if needed) and
    wait for the ranks to finish.  On any failure the ranks are stopped: the
    caller decides whether to restart.  ``last``: no run follows, so workers
    exit on their own once finished (their teardown then overlaps the
    controller's copy-back instead of following it).  Under an SPMD backend
    every process of the job calls this: its glue runs both halves on the
    controlling process and serves a rank on the others."""
    def control(ranks, executable, args, config, last=False):
        return finish(begin(ranks, executable, args, config, last=last, callbacks=callbacks,
                            reset_control=reset_control))
    if ranks.spmd is not None:
        return ranks.spmd.execute(ranks, executable, args, config, control)
    return control(ranks, executable, args, config, last)


def begin(ranks: Ranks, executable, args: list, config, last: bool = False, callbacks=None,
          idle: bool = True, reset_control: bool = True) -> Run:
    """The first half of a run: the HOST orchestrator runs and every dispatch
    is sent.  ``idle``: no earlier run is still in flight on these ranks, so
    persistent windows may be zeroed and (``reset_control``) the control block
    reset; a pipelined run passes False: both need every rank idle.  A worker
    of one program needs no reset at all: dispatch numbers continue across
    runs, and every member of a domain enters the same collectives in every
    run, so the per-buffer counts stay equal among them."""
    run = Run(ranks, executable, config, callbacks)
    run.artefacts = RunArtefacts.begin(executable, config)   # None unless the config asks
    try:
        ranks.know(executable.image)
        if idle:
            if reset_control:
                ranks.control.reset()
                ranks.runs = 0
            if ranks.persistent is not None and ranks.persistent.reset:
                ranks.persistent.zero()    # every rank is idle between runs
        host_vals, copies = share_arguments(run, args, executable)   # outputs copied back
        if not ranks.started:
            ranks.start()
        # after the fork: a transport's service threads must not be forked
        ranks.transport.start_run(run)
        if run.artefacts is not None:
            run.artefacts.announce(ranks)
        hr = HostRuntime(run)
        try:
            result = executable.entry(hr, *host_vals)
        except UserError as e:             # a fault in the HOST orchestrator itself
            hostfaults.attach_span(e, executable.lowered)
            raise
        except Exception as e:             # the user's own host code raised: point at it
            hostfaults.locate(e, executable.lowered)
            raise
        ranks.seq = hr.seq                 # dispatch numbers continue in the next run
        keep = ranks.persistent is not None
        ranks.runs += 1
        run.index = ranks.runs
        for r in range(run.world):
            run.send(r, EndRun(keep))
        run.flush()
        if last:
            # a message of its own, never inside a Batch: a launcher may have
            # to recognise it (an MPI job's serving process stops reading there)
            for r in range(run.world):
                ranks.send(r, Shutdown())
        run.outcome = (result, args, host_vals, copies)
        return run
    except BaseException as e:
        _fail(ranks, run, e)
        raise


def finish(run: Run):
    """The second half: wait for every rank to finish the run, copy outputs
    back, release the run's segments; the HOST orchestrator's result in the
    caller's objects."""
    ranks = run.ranks
    try:
        monitor(run)
        if run.artefacts is not None:
            run.artefacts.end()
        result, args, host_vals, copies = run.outcome
        copy_back(copies)
        return map_result(result, args, host_vals)
    except BaseException as e:
        _fail(ranks, run, e)
        raise
    finally:
        run.release()


def _fail(ranks: Ranks, run: Run, e: BaseException) -> None:
    codes = ranks.abort(run)               # stop every rank before its segments go
    ranks.failed = True
    if isinstance(e, TilecommError):
        e.exit_codes = codes               # how each rank ended (messages.EXIT_*, -signal)
        if run.artefacts is not None:      # the ranks wrote what they recorded: merge it
            e.trace_path = run.artefacts.salvage()
    if run.outcome is None:                # begin() failed: finish() will not release it
        run.release()


__all__ = ["Ranks", "Run", "begin", "execute", "finish", "launch", "next_id"]
