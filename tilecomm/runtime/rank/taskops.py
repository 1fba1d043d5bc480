"""The task-related part of a rank's context (``_rt`` in lowered code): the
scheduler an orchestration function submits to, and the ops only tasks use
(``pl.get_block_idx``, ``pl.array.create``, ``pld.system.defer_wait``).

A task runs on a copy of the rank's context that knows its core (``agent``),
its task and its block index; a wait there publishes into the scheduler's
agents instead of the rank's single wait record."""
from __future__ import annotations

import numpy as np

from ...dtypes import TASK_ID
from ...errors import RuntimeFault
from .. import control as C
from .scheduler import Scheduler

INT32_MAX = 2**31 - 1


class TaskOps:
    """Mixin of ``RankContext``."""

    agent = None            # the scheduler agent (core / watcher) running this context
    sched = None
    task = None
    block_idx = 0

    def task_scope(self):
        """The rank's scheduler, ready for one dispatch's tasks (created on
        first use: programs without tasks never start a core thread)."""
        s = self.__dict__.get("_scheduler")
        if s is None:
            s = self._scheduler = Scheduler(self, self.knobs.cores, self._aborted_exc,
                                            self.knobs.task_window)
        return s.begin()

    def get_block_idx(self):
        return self.block_idx

    def create_array(self, extent, dtype):
        # a TaskId array starts out naming no task
        return np.full(int(extent), -1 if dtype is TASK_ID else 0, dtype=dtype.np_dtype)

    def defer_wait(self, signal, offsets, expected, cmp, _loc=-1):
        t = self.task
        if t is None or not t.waiter:
            raise RuntimeFault("pld.system.defer_wait ran outside a waiter task", code="TC503")
        e = int(expected)
        if not 0 <= e <= INT32_MAX:
            raise RuntimeFault(f"pld.system.defer_wait expected must be in [0, INT32_MAX]; got "
                               f"{e}", code="TC503",
                               hint="deferred conditions compare non-negative counters")
        cell = signal.cells.get((signal.rank, offsets))
        if cell is None:
            cell = self._cell(signal, signal.rank, offsets, "pld.system.defer_wait")
        # offsets are bounds-checked by the cell lookup; a plain row-major
        # index costs a fraction of np.ravel_multi_index on this per-task path
        flat = 0
        for o, d in zip(offsets, signal.shape):
            flat = flat * int(d) + int(o)
        record = C.WaitRecord(signal.buffer.id, flat, 2, e, _loc, -1, self.func_id,
                              signal.shape[-1], len(signal.shape))
        t.conds.append((cell, e, record))

    def wait_cell(self, cell, cmp, expected, record):
        """Block on one of this rank's cells, published as ``record``."""
        if self._try_wait(cell, cmp, expected, self.spin):
            return
        self.transport.wait(cell, cmp, expected, self._hooks(record))
