"""The ``pld.tensor.*`` collectives, built from the transport's primitives.

A collective runs inside one rank, on that rank's window views.  The InCore
composite (a kernel calls it) and the HOST builtin (the host orchestrator
sends one builtin dispatch to every member of the comm domain) run the same
algorithms; they differ only in which signal shapes they accept and in the
HOST allreduce's ``core_num`` lanes.

* ``protocol``: the self-clearing credit barrier every collective
  synchronises with, and the checks that a signal is clean when a call starts;
* ``data``: every member's copy of a window as a flat element stream --
  direct array views where the transport maps peer memory, its get / put
  otherwise;
* ``algorithms``: the collectives themselves.

This package knows the rank runtime only through the small interface
documented in ``protocol.RankLink``; it imports nothing from ``runtime``.
"""
