"""The ``pld.tensor.*`` collectives as the runtimes call them.

* In a kernel (``RankCollectives``, a mixin of ``RankContext``) the call runs
  the algorithm right there, inside the caller's kernel: the InCore composite.
* In a HOST orchestrator (``HostCollectives``, a mixin of ``HostRuntime``) the
  call sends one builtin dispatch to every member of the operands' comm
  domain; each rank runs it in its dispatch order (``BUILTINS``), so later
  dispatches on those windows see the result, and the ranks synchronise with
  each other inside the builtin.

A ``defer=True`` call (only in a pl.at task) runs the algorithm up to this
rank's barrier arrivals and leaves the rest -- the waits, any work after
them, the epilogue -- to the completion of the running task (``_deferred``).

The algorithms live in ``tilecomm.collectives``; ``RankCollectives`` is also
the ``RankLink`` they use to reach the rank (cells, blocking waits published
for the monitor, entry counters).
"""
from __future__ import annotations

import numpy as np

from ...collectives import algorithms as A
from ...collectives.names import NAMES
from ...collectives.protocol import RankLink
from ...errors import RuntimeFault
from ...transport.base import CMP_GE
from ...waits import CMP_GE_U
from .. import control as C
from ..messages import Dispatch
from ..values import WindowRef

BUILTIN_PREFIX = "builtin.tensor."
# the function a rank runs for each HOST builtin dispatch:
# fn(rank, *operands, loc, host=True)
BUILTINS = {BUILTIN_PREFIX + name: getattr(A, name) for name in NAMES}


class RankCollectives(RankLink):
    """Mixin of ``RankContext`` (which provides ``_cell``, ``_block_on``,
    ``control``, ``device``, ``image``, ``func_id``)."""

    # ------------------------------------------------------------ RankLink
    def cell_of(self, view, member, offsets, op):
        cell = view.cells.get((member, offsets))
        if cell is None:
            cell = self._cell(view, member, offsets, op)
        return cell

    def block(self, cell, expected, view, offsets, src, loc, collective, generation):
        flat = int(np.ravel_multi_index(offsets, view.shape))
        record = C.WaitRecord(view.buffer.id, flat, CMP_GE, int(expected), loc, src,
                              self.func_id, view.shape[-1], len(view.shape), collective,
                              generation)
        self._block_on(cell, CMP_GE, int(expected), record)

    def enter_collective(self, buffer_id):
        return self.control.enter_collective(self.device, buffer_id)

    def collective_count(self, device, buffer_id):
        return self.control.collective_count(device, buffer_id)

    def notify_sources(self, buffer_id):
        image = self.image
        return image.notify_sources.get(buffer_id, "") if image is not None else ""

    # ------------------------------------------------------------ InCore composites
    def allreduce(self, target, signal, op, mode, core_num, _loc=-1):
        return A.allreduce(self, target, signal, op, mode, core_num, _loc, False)

    def barrier(self, signal, defer=False, _loc=-1):
        if defer:
            self._deferred(A.issue_barrier(self, signal, _loc), signal, A.BARRIER, _loc)
            return signal
        return A.barrier(self, signal, _loc, False)

    def broadcast(self, target, signal, root, defer=False, _loc=-1):
        if defer:
            self._deferred(A.issue_broadcast(self, target, signal, root, _loc), signal,
                           A.BROADCAST, _loc)
            return target
        return A.broadcast(self, target, signal, root, _loc, False)

    def allgather(self, local_data, target, signal, defer=False, _loc=-1):
        if defer:
            self._deferred(A.issue_allgather(self, local_data, target, signal, _loc), signal,
                           A.ALLGATHER, _loc)
            return target
        return A.allgather(self, local_data, target, signal, _loc, False)

    def reduce_scatter(self, target, signal, op, _loc=-1):
        return A.reduce_scatter(self, target, signal, op, _loc, False)

    def all_to_all(self, input, target, signal, defer=False, _loc=-1):
        if defer:
            self._deferred(A.issue_all_to_all(self, input, target, signal, _loc), signal,
                           A.ALL_TO_ALL, _loc)
            return target
        return A.all_to_all(self, input, target, signal, _loc, False)

    def all_to_all_v(self, input, target, signal, send_counts, recv_counts, core_num,
                     defer=False, _loc=-1):
        if defer:
            self._deferred(A.issue_all_to_all_v(self, input, target, signal, send_counts,
                                                recv_counts, _loc),
                           signal, A.ALL_TO_ALL_V, _loc)
            return target
        return A.all_to_all_v(self, input, target, signal, send_counts, recv_counts, core_num,
                              _loc, False)

    def _deferred(self, issued, signal, coll, loc):
        """A ``defer=True`` call has sent its data and arrivals: the rest of its
        barrier becomes deferred conditions of the running task (its TaskId
        completes once every peer has arrived, watched without holding the
        core), and the epilogue runs at that completion, before any task
        ordered after it starts.  Each condition is published as a wait inside
        the collective, so a hang report names the call, its generation and
        the rank that never arrived."""
        t = self.task
        if t is None or not t.waiter:
            # the compiler admits defer=True only in a pl.at task body
            raise RuntimeFault("a defer=True collective ran outside a pl.at task",
                               code="TC503")
        bar, conds, *later = issued
        func = self.func_id

        def records(conds, gen):
            out = []
            for cell, need, offs, src in conds:
                flat = int(np.ravel_multi_index(offs, signal.shape))
                out.append((cell, int(need), C.WaitRecord(
                    signal.buffer.id, flat, CMP_GE_U, int(need), loc, src, func,
                    signal.shape[-1], len(signal.shape), coll, gen)))
            return out

        def stage(work, gen):
            # the work between generations gen - 1 and gen, then this rank's
            # arrivals at gen: what the watcher waits for next
            def run():
                if work is not None:
                    work()
                return records(bar.arrive(gen - 1), gen)
            return run

        t.conds.extend(records(conds, 1))
        t.after = (*t.after, *(stage(w, g) for g, w in enumerate(later, 2)),
                   bar.finish_deferred)


class HostCollectives:
    """Mixin of ``HostRuntime`` (which provides ``call`` and ``_seq``)."""

    def allreduce(self, target, signal, op, mode, core_num, _loc=-1):
        return self._builtin("allreduce", target, (target, signal, int(op), mode, core_num),
                             _loc)

    # ``defer`` is False here: the compiler admits defer=True only in pl.at tasks
    def barrier(self, signal, defer=False, _loc=-1):
        return self._builtin("barrier", signal, (signal,), _loc)

    def broadcast(self, target, signal, root, defer=False, _loc=-1):
        return self._builtin("broadcast", target, (target, signal, root), _loc)

    def allgather(self, local_data, target, signal, defer=False, _loc=-1):
        return self._builtin("allgather", target, (local_data, target, signal), _loc)

    def reduce_scatter(self, target, signal, op, _loc=-1):
        return self._builtin("reduce_scatter", target, (target, signal, int(op)), _loc)

    def all_to_all(self, input, target, signal, defer=False, _loc=-1):
        return self._builtin("all_to_all", target, (input, target, signal), _loc)

    def all_to_all_v(self, input, target, signal, send_counts, recv_counts, core_num,
                     defer=False, _loc=-1):
        return self._builtin("all_to_all_v", target,
                             (input, target, signal, send_counts, recv_counts, core_num), _loc)

    def _builtin(self, name, result, args, loc):
        """One builtin dispatch of collective ``name`` to every member rank."""
        op = f"pld.tensor.{name}"
        windows = [a for a in args if isinstance(a, WindowRef)]
        domain = windows[-1].buffer.devices          # the signal's (the last window)
        seen = {}
        for w in windows:
            b = w.buffer
            if b.devices != domain:
                raise RuntimeFault(f"{op}: window '{b.name}' belongs to the comm domain "
                                   f"{list(b.devices)}, the signal to {list(domain)}; one "
                                   f"collective runs on one domain", code="TC503")
            if b.id in seen:
                raise RuntimeFault(f"{op}: operands are views of the same window buffer "
                                   f"'{b.name}'", code="TC503")
            seen[b.id] = b
        key = self.call.executable.image.key
        fname = BUILTIN_PREFIX + name
        for d in domain:
            self._seq[d] += 1
            self.call.send(d, Dispatch(key, fname, self._seq[d], args, (), loc))
        return result


__all__ = ["BUILTINS", "BUILTIN_PREFIX", "HostCollectives", "RankCollectives"]
