"""The control block: a small shared segment through which the controller sees
what every rank is doing (running, blocked in which wait, finished) and ranks
see each other's dispatch progress.

Each rank owns one 128-byte record of int64 slots (the int32 cells used with
futexes sit in the low half of their slot).  A rank writes its wait record
*before* it publishes state BLOCKED, and re-checks its condition after, so a
controller that sees every live rank BLOCKED with unchanged generations, and
every condition still false, has observed a real deadlock -- nothing is left
that could write any awaited cell.
"""
from __future__ import annotations

from .. import _native_core as native

# rank states
IDLE, RUNNING, BLOCKED, FINISHED, FAILED = 0, 1, 2, 3, 4
STATE_NAMES = {IDLE: "idle", RUNNING: "running", BLOCKED: "blocked", FINISHED: "finished",
               FAILED: "failed"}

# slots of a rank record
(STATE, GEN, W_BUF, W_INDEX, W_CMP, W_EXPECTED, W_LOC, W_PEER, DONE_SEQ, SLEEPERS, W_FUNC,
 W_COLS, W_NDIM) = range(13)
RECORD_SLOTS = 16
HEADER_SLOTS = 16
ABORT = 0
SLOT = 8

DEP_WAIT = -1          # W_BUF value of a wait on another rank's dispatch progress


def control_size(world: int) -> int:
    return (HEADER_SLOTS + RECORD_SLOTS * world) * SLOT


class ControlBlock:
    def __init__(self, segment, world: int):
        self.segment = segment
        self.base = segment.addr
        self.world = world

    def slot_addr(self, rank: int, slot: int) -> int:
        return self.base + (HEADER_SLOTS + RECORD_SLOTS * rank + slot) * SLOT

    def get(self, rank: int, slot: int) -> int:
        return native.load_i64(self.slot_addr(rank, slot))

    def set(self, rank: int, slot: int, value: int) -> None:
        native.store_i64(self.slot_addr(rank, slot), value)

    def done_seq_addr(self, rank: int) -> int:
        return self.slot_addr(rank, DONE_SEQ)

    def sleepers_addr(self, rank: int) -> int:
        return self.slot_addr(rank, SLEEPERS)

    def done_seq(self, rank: int) -> int:
        return native.load_i32(self.done_seq_addr(rank))

    @property
    def abort_addr(self) -> int:
        return self.base + ABORT * SLOT

    def aborted(self) -> bool:
        return native.load_i64(self.abort_addr) != 0
