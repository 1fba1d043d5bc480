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

from ..errors import TilecommError, UserError
from ..transport import make_host
from ..transport import segments as S
from . import control as C
from . import taskplane
from . import forking, hostfaults
from .arguments import check_arguments, copy_back, map_result, share_arguments
from .host import HostRuntime
from .launcher import ForkLauncher
from .messages import EndRun, LoadImage, Shutdown
from .monitor import monitor, wake_blocked
from .worker import worker_main

_CALL_IDS = itertools.count(1)
# RunConfig.transport names whose ranks are an MPI job's processes -> the
# module that sets up their launcher, control plane and transport
SPMD_BACKENDS = {"mpi": "tilecomm.runtime.mpi_spmd"}
ABORT_GRACE_S = 0.5      # after an abort, how long ranks may take to exit on their own


class Ranks:
    """One worker process per rank, the control plane and the transport they
    share.  Lives for one call (one-shot) or across calls
    (``DistributedWorker``)."""

    def __init__(self, world: int, config):
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
        try:
            if self.transport_name in SPMD_BACKENDS:
                # imported only when chosen: it loads an MPI library
                importlib.import_module(SPMD_BACKENDS[self.transport_name]).set_up(self)
            else:
                self.launcher = ForkLauncher(world)
                self.control = C.ShmControlPlane(
                    self._new_segment(C.control_size(world) + taskplane.area_size(world)), world)
                self.transport = make_host(self.transport_name, world, self._new_segment)
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
            S.sweep(self.owner, self.id)


class Run:
    """One execution of the HOST orchestrator on a set of ranks."""

    def __init__(self, ranks: Ranks, executable, config):
        self.ranks = ranks
        self.executable = executable
        self.config = config
        self.world = executable.world
        self.owner = ranks.owner
        self.call_id = next(_CALL_IDS)
        self.segments: list = []
        self.buffers: dict = {}
        self.done: set = set()

    def new_segment(self, nbytes: int):
        name = S.segment_name(self.owner, self.call_id, len(self.segments))
        seg = S.Segment.create(name, max(int(nbytes), 1))
        self.segments.append(seg)
        return seg

    def allocate_window(self, nbytes: int, members: tuple) -> tuple:
        return self.ranks.transport.allocate(self, nbytes, members)

    def send(self, rank: int, msg) -> None:
        self.ranks.send(rank, msg)

    def release(self):
        self.ranks.transport.end_run(self)
        for seg in self.segments:
            seg.close()
            seg.unlink()
        self.segments = []
        S.sweep(self.owner, self.call_id)


def launch(executable, args: list, config):
    """One-shot call: start ranks, run once, tear everything down."""
    check_arguments(executable, args)      # bad outputs, no room: refused before anything
    ranks = Ranks(executable.world, config)
    try:
        return execute(ranks, executable, args, config, last=True)
    finally:
        ranks.close()


def execute(ranks: Ranks, executable, args: list, config, last: bool = False):
    """Run the HOST orchestrator once on ``ranks`` (started here if needed).
    On any failure the ranks are stopped: the caller decides whether to restart.
    ``last``: no run follows, so workers exit on their own once finished (their
    teardown then overlaps the controller's copy-back instead of following it).
    Under an SPMD backend every process of the job calls this: its glue runs
    ``control`` on the controlling process and serves a rank on the others."""
    if ranks.spmd is not None:
        return ranks.spmd.execute(ranks, executable, args, config, control)
    return control(ranks, executable, args, config, last)


def control(ranks: Ranks, executable, args: list, config, last: bool = False):
    """``execute`` as the controlling process runs it."""
    run = Run(ranks, executable, config)
    try:
        ranks.know(executable.image)
        ranks.control.reset()
        host_vals, copies = share_arguments(run, args, executable)   # outputs copied back
        if not ranks.started:
            ranks.start()
        # after the fork: a transport's service threads must not be forked
        ranks.transport.start_run(run)
        hr = HostRuntime(run)
        try:
            result = executable.entry(hr, *host_vals)
        except UserError as e:             # a fault in the HOST orchestrator itself
            hostfaults.attach_span(e, executable.lowered)
            raise
        except Exception as e:             # the user's own host code raised: point at it
            hostfaults.locate(e, executable.lowered)
            raise
        for r in range(run.world):
            run.send(r, EndRun())
            if last:
                run.send(r, Shutdown())
        monitor(run)
        copy_back(copies)
        return map_result(result, args, host_vals)
    except BaseException as e:
        codes = ranks.abort(run)           # stop every rank before its segments go
        if isinstance(e, TilecommError):
            e.exit_codes = codes           # how each rank ended (messages.EXIT_*, -signal)
        raise
    finally:
        run.release()


__all__ = ["Ranks", "Run", "execute", "launch"]
