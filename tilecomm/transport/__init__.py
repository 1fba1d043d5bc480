"""Transports: how ranks reach each other's symmetric windows (see ``base``)."""
from .base import Endpoint, TransportHost, WaitHooks, WindowKey
from .copy import CopyHost
from .shm import ShmHost

TRANSPORTS = {"shm": ShmHost, "copy": CopyHost}

__all__ = ["Endpoint", "TRANSPORTS", "TransportHost", "WaitHooks", "WindowKey", "make_host"]


def make_host(name: str, world: int, new_segment) -> TransportHost:
    """The controller side of the transport named ``name`` (``RunConfig.transport``)."""
    return TRANSPORTS[name](world, new_segment)
