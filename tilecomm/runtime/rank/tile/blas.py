"""The BLAS thread pools of a rank.

A rank is one device sharing the machine's cores with every other rank (its
scheduler's cores are threads of its own): a BLAS pool of one thread per core
in every rank oversubscribes them, and a ``pl.matmul`` then waits for pool
threads spinning against other ranks' (at 2 ranks on 2 cores a
[128, 256] @ [256, 256] took ~11 ms instead of ~0.2 ms).  So a rank runs BLAS
on one thread -- set when it first multiplies, not when it starts: limiting
the pool at start made every rank's notify->wait round trip several times
slower (2 µs -> 7 µs and worse), programs without a matmul included.

The libraries are found once, in the controller (a scan of the process's
shared objects, a few ms), so a forked rank only sets their thread count.
"""
from __future__ import annotations

from threadpoolctl import ThreadpoolController

_POOLS = ThreadpoolController().select(user_api="blas")


def single_thread() -> None:
    """Run this process's BLAS on one thread from now on (idempotent)."""
    _POOLS.limit(limits=1)
