"""Transports: how ranks reach each other's symmetric windows (see ``base``).

A transport's module is imported only when a run selects it: a backend may
pull in heavy or optional dependencies (an MPI binding), and a program that
runs on shared memory should not pay for the others.  The MPI transport
(``mpi.py``) is not in ``TRANSPORTS``: its ranks are the processes of an MPI
job, so it is set up by the runtime (``backends/mpi/spmd.py``), not made for
forked ranks by ``make_host``."""
import importlib

from .base import Endpoint, TransportHost, WaitHooks, WindowKey

# RunConfig.transport name -> "module:class" of its controller side
TRANSPORTS = {"shm": "tilecomm.transport.shm:ShmHost",
              "copy": "tilecomm.transport.copy:CopyHost"}

__all__ = ["Endpoint", "TRANSPORTS", "TransportHost", "WaitHooks", "WindowKey", "host_class",
           "make_host"]


def host_class(name: str) -> type:
    """The ``TransportHost`` class of the transport named ``name``."""
    module, cls = TRANSPORTS[name].split(":")
    return getattr(importlib.import_module(module), cls)


def make_host(name: str, world: int, new_segment) -> TransportHost:
    """The controller side of the transport named ``name`` (``RunConfig.transport``)."""
    return host_class(name)(world, new_segment)
