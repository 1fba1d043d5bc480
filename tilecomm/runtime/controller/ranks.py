"""A set of rank processes and what they share: the launcher, the control
plane and the transport host of one backend (``backend.py``), the images the
ranks know, the segments that live as long as the ranks.  Lives for one call
(one-shot) or across calls (``DistributedWorker``)."""
from __future__ import annotations

import itertools
import os

from ...transport import segments as S
from ..rank.loop import RankSetup, rank_main
from ..messages import LoadImage, Shutdown
from .arguments import ArgumentPool
from . import forking
from .backend import backend_class
from .monitor import wake_blocked
from .persistent import PersistentDomains
from .plans import CallPlans

__all__ = ["ABORT_GRACE_S", "Ranks", "next_id"]

_IDS = itertools.count(1)
ABORT_GRACE_S = 0.5      # after an abort, how long ranks may take to exit on their own


def next_id() -> int:
    """A fresh id for segment names (unique within this process)."""
    return next(_IDS)


class Ranks:
    """One worker process per rank, the control plane and the transport they
    share."""

    def __init__(self, world: int, config, persistent_reset: bool | None = None,
                 pool_arguments: bool = False):
        # segments of controllers that were SIGKILLed: swept whenever ranks start
        # (one listdir), so a long-lived process also cleans up after peers
        # that died after its first call
        S.sweep_stale()
        self.world = world
        self.config = config
        # the rank-side knobs the ranks run with (a run with others sends
        # them: Run.start)
        self.knobs = config.rank_knobs()
        self.knobs_of = config              # the config ``knobs`` were read from
        self.owner = os.getpid()
        self.id = next_id()
        self.images: dict = {}             # specialisations the workers know
        self._own_segments = 0
        self.transport_name = config.resolved_transport()
        self.backend = None
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
        self.arguments = ArgumentPool(self.new_segment) if pool_arguments else None
        # what repeated calls on kept windows send again (plans.py)
        self.plans = CallPlans()
        # segments named so live as long as these ranks (ranks may keep them mapped)
        self.own_prefix = f"{S.segment_name(self.owner, self.id, 0)[:-1]}"
        try:
            # the backend gives these ranks their launcher, control plane and transport
            self.backend = backend_class(self.transport_name)(self)
            if persistent_reset is not None:
                self.persistent = PersistentDomains(self.new_segment, self.transport,
                                                    persistent_reset)
        except BaseException:
            self.close()
            raise

    def new_segment(self, nbytes: int):
        """A segment that lives as long as the ranks (not one run)."""
        name = S.segment_name(self.owner, self.id, self._own_segments)
        self._own_segments += 1
        return S.Segment.create(name, nbytes)

    def setup(self) -> RankSetup:
        """What a rank's process needs of these ranks, as one record."""
        return RankSetup(
            world=self.world, owner=self.owner, forked=self.launcher.forks,
            images=self.images, control=self.control, transport=self.transport,
            config=self.config,
            keep_prefix=self.own_prefix if self.arguments is not None else None,
            persistent=self.persistent is not None,
            host_tensors=self.backend.rank_host_tensors, serving=self.launcher.serving)

    @property
    def started(self) -> bool:
        return self.launcher.started

    def start(self):
        # element types whose numpy type loads lazily (BF16): imported once
        # here, not once per rank after the fork
        forking.preload(self.images.values())
        setup = self.setup()
        self.launcher.start(lambda rank, channel: rank_main(rank, setup, channel),
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
            if self.backend is not None:
                self.backend.close()
            if self.arguments is not None:
                self.arguments.close()
            S.sweep(self.owner, self.id)
