"""Backends: what starts a set of ranks and carries calls to them.

A backend gives a set of ranks (``ranks.Ranks``) its **launcher** (processes
and channels: ``launcher.Launcher``), its **control plane** (rank states,
published waits, run counts, the abort flag: ``control.ControlPlane``) and
its **transport host** (symmetric windows: ``transport.base.TransportHost``),
and decides the **policy of a call**: which process runs the HOST code, how a
call is executed, how ranks reach host tensors.  Backends are chosen by
``RunConfig.transport`` in one table (``config.BACKENDS``: name ->
"module:Class"), and a backend's module is imported only when a run selects
it -- the MPI backend loads an MPI library, which a run on shared memory
must not pay for.

Adding a backend: a package under ``tilecomm/backends/`` with a subclass of
``Backend`` (and, if its ranks are not forked, its own launcher, control
plane and transport host behind the same interfaces), one entry in
``config.BACKENDS``.
"""
from __future__ import annotations

import importlib

from ...transport import make_host
from .. import control as C
from .. import taskplane
from ..config import BACKENDS, RunConfig
from ..rank.host_tensors import HostSegments
from .launcher import ForkLauncher

__all__ = ["Backend", "ForkBackend", "backend_class", "runs_host_code"]


def backend_class(name: str) -> type:
    """The ``Backend`` subclass named ``name`` in ``config.BACKENDS``
    (imported here, on first use)."""
    module, cls = BACKENDS[name].split(":")
    return getattr(importlib.import_module(module), cls)


def runs_host_code(config=None) -> bool:
    """Whether this process runs the HOST code of calls made with ``config``
    (the HOST orchestrator, SubWorker bodies, callbacks): the caller does,
    and under mpiexec that is process 0, once for the whole job."""
    return backend_class((config or RunConfig()).resolved_transport()).runs_host_code()


class Backend:
    """The interface, and the behaviour every backend shares unless it says
    otherwise: the caller is the only process that runs the program."""

    # every process of a job runs the caller's program, each call being a
    # collective step of all of them, one call at a time (MPI): such a
    # backend's calls are never pipelined
    spmd = False
    # exposes the caller's host segments to ranks that share no memory with
    # it (``expose(segment) -> displacement``), or None: ranks map them by name
    host_window = None

    def __init__(self, ranks):
        self.name = ranks.transport_name

    @classmethod
    def runs_host_code(cls) -> bool:
        """Whether this process runs the HOST code of its calls."""
        return True

    def execute(self, ranks, executable, args, config, run_call, last: bool):
        """Carry out one call: ``run_call(last)`` begins and finishes it on
        this process (``run.execute``)."""
        return run_call(last)

    def rank_host_tensors(self, keep):
        """In a rank: how it reaches host tensors (``rank.host_tensors``)."""
        return HostSegments(keep)

    def share(self, host) -> None:
        """Make the controller's contents of ``host`` every process's: one
        process, nothing to do."""

    def close(self) -> None:
        """Release what the backend holds beyond its launcher, control plane
        and transport host (closed by ``Ranks``)."""


class ForkBackend(Backend):
    """``shm`` and ``copy``: the caller forks one process per rank; the
    control block and the host tensors are /dev/shm segments of the caller."""

    def __init__(self, ranks):
        super().__init__(ranks)
        world = ranks.world
        ranks.launcher = ForkLauncher(world)
        ranks.control = C.ShmControlPlane(
            ranks.new_segment(C.control_size(world) + taskplane.area_size(world)), world)
        ranks.transport = make_host(self.name, world, ranks.new_segment)
