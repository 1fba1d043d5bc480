"""Recorded call plans: a prepared worker's repeated call sends the
dispatches its HOST orchestrator sent the last time, without running it.

A HOST orchestrator is a function of what it is given: the program, the
world, the call's checks, and its arguments -- the shared host tensors
(which segment, where in it, shape, strides, element type) and the scalars'
values.  It cannot read a tensor's elements (TC503), and on kept persistent
windows every ``alloc_window_buffer`` returns the same window of the same
program.  So when a call of a prepared worker on kept windows sees the same
arguments as an earlier one, it would send the same dispatches again, with
one difference: dispatch numbers continue across runs, so every number (its
own and those of the dispatches it depends on) is shifted by how many
dispatches that rank ran since.  Each rank is sent its recorded dispatches
as the same bytes every time, with the shifts beside them
(``messages.Renumbered``): the rank decodes them once.

The first such call runs the orchestrator and records what it sent
(``CallPlan``); a later call whose key matches sends the recorded dispatches
renumbered (``CallPlan.replay``).  The orchestrator then costs a few
microseconds, not one Python call per host op, on the path of every small
call.

A run records nothing when its orchestrator could do more than send
dispatches or its key cannot say everything it depends on: fresh windows
(new segments every run), host intermediates (``pl.create_tensor``: new
segments), SubWorkers (the caller's code runs in the middle), run
artefacts, race checks, poisoned windows or an explored schedule (each
needs the orchestrator's own events), hosts reached over RMA (segments are
exposed as dispatches first name them), and arguments other than shared
host tensors and plain scalars.
"""
from __future__ import annotations

import numpy as np

from ..messages import Batch, Renumbered, encode
from ..values import address
from .arguments import at_positions, result_positions
from .orchestrator import HostTensor, PlacedTensor

__all__ = ["CallPlan", "CallPlans"]

_SCALARS = (int, float, bool, np.integer, np.floating, np.bool_)


class CallPlan:
    """What one orchestrator run sent, numbered from ``base`` (each rank's
    last dispatch number before it): per rank, the encoded ``Batch`` of its
    dispatches and the ranks whose dispatches they depend on."""

    __slots__ = ("executable", "base", "bodies", "counts", "buffers", "dispatched", "result")

    def __init__(self, executable, base, sends, after, buffers, dispatched, result):
        self.executable = executable        # kept: the key names it by identity
        self.base = base
        per_rank: dict = {}
        for rank, msg in sends:
            per_rank.setdefault(rank, []).append(msg)
        # encoded once: a rank keeps what it decoded of the same bytes
        self.bodies = tuple((rank, encode(Batch(tuple(msgs))),
                             tuple(sorted({r for m in msgs for r, _ in m.deps})))
                            for rank, msgs in per_rank.items())
        self.counts = [a - b for a, b in zip(after, base)]
        self.buffers = buffers
        self.dispatched = dispatched
        # the result as positions in the host values: all ``arguments.map_result``
        # makes of it is the caller's argument at that position, or None
        self.result = result

    def replay(self, run, host_vals):
        """Send the recorded dispatches renumbered for ``run``; the
        orchestrator's result in ``host_vals``."""
        seq = run.ranks.seq
        shift = [now - then for now, then in zip(seq, self.base)]
        send = run.send
        for rank, body, dep_ranks in self.bodies:
            send(rank, Renumbered(body, shift[rank], tuple([(r, shift[r]) for r in dep_ranks])))
        run.ranks.seq = [s + c for s, c in zip(seq, self.counts)]
        # shared, not copied: only an orchestrator that runs adds to them
        run.buffers = self.buffers
        run.dispatched = self.dispatched
        return at_positions(self.result, host_vals)


class CallPlans:
    """The plans of one set of ranks, by key.  Kept as long as the ranks
    (their persistent windows and argument segments are what the plans
    name); a few keys at most, since each differs only in argument values."""

    LIMIT = 16

    def __init__(self):
        self._plans: dict = {}
        self.replays = 0                    # calls that sent a recorded plan

    def key(self, run, host_vals):
        """The key of ``run``'s orchestrator inputs, or None if it cannot be
        replayed (see the module doc)."""
        ranks = run.ranks
        if ranks.persistent is None or run.artefacts is not None or run.explore is not None \
                or run.race_history is not None or run.callbacks or run.checks.poison \
                or run.executable.sub_workers or ranks.backend.host_window is not None:
            return None
        parts = [id(run.executable), run.checks]
        for v in host_vals:
            t = type(v)
            if t is HostTensor or t is PlacedTensor:
                a = v.array
                parts.append((v.segment.name, address(a) - v.base_addr, a.shape, a.strides,
                              a.dtype.str, getattr(v, "worker_id", None)))
            elif isinstance(v, _SCALARS):
                parts.append((t, v))
            else:
                return None
        return tuple(parts)

    def find(self, key, executable):
        plan = self._plans.get(key)
        return plan if plan is not None and plan.executable is executable else None

    def record(self, key, run, base, sends, result, host_vals) -> None:
        """Keep what ``run``'s orchestrator sent under ``key``, unless the run
        made segments of its own (host intermediates, or arguments beyond
        the pool): their names are the run's."""
        if run.segments:
            return
        if len(self._plans) >= self.LIMIT:
            self._plans.clear()
        self._plans[key] = CallPlan(run.executable, list(base), tuple(sends), run.ranks.seq,
                                    dict(run.buffers),
                                    {d: set(f) for d, f in run.dispatched.items()},
                                    result_positions(result, host_vals))
