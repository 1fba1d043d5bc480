"""The self-clearing credit barrier of every collective, and what a
collective needs from the rank that runs it.

One collective call synchronises in generations 1..G, counted within the
call only:

    barrier(g):  +1 (AtomicAdd) into my cell of every peer's signal
                 wait until every peer's cell of my signal is >= g   (Ge)
    epilogue:    -G (AtomicAdd) into every peer's cell of my own signal

Why the signal is back to 0 afterwards, and why back-to-back calls on one
signal are safe: my cell on rank p receives only my arrivals, so once I have
passed generation G every peer has counted exactly G arrivals from me, and
its epilogue removes exactly G.  A peer that finishes first may already have
entered its next call and arrived at generation 1 there -- that credit stays
(cells read 1 instead of 0) and is exactly the first arrival my next call
waits for; it cannot arrive twice, because its generation-1 wait needs my
arrival in that next call.  So a fast rank pre-credits a slow one by at most
one, ``Ge`` (not ``Eq``) is what lets the early credit count, and a ``Set``
on such a cell would destroy the count.

The ring signal (``[2(NR-1) (+1), NR]``) gives each generation a row of its
own: generation g arrives in cell ``[g-1, my_rank]`` with threshold 1 and the
epilogue subtracts 1 per row used.

Clean signals: a cell left nonzero by a hand-rolled notify, or by a call that
was aborted half way, would let a wait pass before the peer arrived and give
silently wrong data.  A call therefore checks its cells when it starts: each
must read 0, or 1 when the peer has already entered this same call (the
entry counters of the control plane say so); and a blocked wait checks that
a value is within what the protocol can produce.  Anything else stops the
rank with the cell, its value and whatever the program says could have
written it.
"""
from __future__ import annotations

from abc import ABC, abstractmethod

from ..errors import RuntimeFault
from ..transport.base import CMP_GE, NOTIFY_ADD

__all__ = ["CreditBarrier", "RankLink", "mesh_offsets"]


class RankLink(ABC):
    """What a collective uses of the rank that runs it (the rank runtime
    implements it; this package imports nothing from the runtime)."""

    transport: object      # the rank's transport Endpoint
    spin: int              # spin iterations before a wait yields

    @abstractmethod
    def cell_of(self, view, member: int, offsets: tuple, op: str):
        """The transport's handle of ``view[offsets]`` in member ``member``'s
        copy (bounds-checked, cached on the view)."""

    @abstractmethod
    def block(self, cell, expected: int, view, offsets: tuple, src: int, loc: int,
              collective: int, generation: int) -> None:
        """Wait for ``cell >= expected`` (domain rank ``src``'s arrival), published
        for the deadlock monitor as a wait inside ``collective`` at barrier
        ``generation``."""

    @abstractmethod
    def enter_collective(self, buffer_id: int) -> int:
        """Count one more collective call on signal buffer ``buffer_id`` by this
        rank; returns the new count."""

    @abstractmethod
    def collective_count(self, device: int, buffer_id: int) -> int:
        """How many collective calls rank ``device`` has entered on that buffer."""

    @abstractmethod
    def notify_sources(self, buffer_id: int) -> str:
        """Which functions of the program hand-roll notifies into the buffer
        (for the message about a dirty signal); '' if none."""


def mesh_offsets(signal_rank: int, src: int, lane: int) -> tuple:
    """The cell of a mesh signal where ``src``'s arrivals land."""
    return (src,) if signal_rank == 1 else (src, lane)


class CreditBarrier:
    """The barrier generations of one collective call on one signal lane.

    Built once per (call site, signal view, lane) and reused by every call
    there: the cell handles are resolved once."""

    __slots__ = ("link", "signal", "me", "peers", "ring", "out", "inc", "coll", "loc", "op",
                 "_add", "_try", "_read", "spin", "offsets_in")

    def __init__(self, link: RankLink, signal, op: str, coll: int, loc: int, *,
                 lane: int = 0, ring_rows: int = 0):
        self.link = link
        self.signal = signal
        self.op = op
        self.coll = coll
        self.loc = loc
        me, n = signal.rank, signal.nranks
        self.me = me
        self.peers = [p for p in range(n) if p != me]
        self.ring = ring_rows
        t = link.transport
        self._add, self._try, self._read = t.signal, t.try_wait, t.read_cell
        self.spin = link.spin
        nd = len(signal.shape)
        if ring_rows:
            # generation g (1-based) uses row g-1: per row, my cell in each peer's
            # copy and each peer's cell in mine
            rows = range(ring_rows)
            self.out = [[link.cell_of(signal, p, (g, me), op) for p in self.peers] for g in rows]
            self.offsets_in = [[(g, s) for s in self.peers] for g in rows]
            self.inc = [[link.cell_of(signal, me, o, op) for o in row] for row in self.offsets_in]
        else:
            self.out = [link.cell_of(signal, p, mesh_offsets(nd, me, lane), op)
                        for p in self.peers]
            self.offsets_in = [mesh_offsets(nd, s, lane) for s in self.peers]
            self.inc = [link.cell_of(signal, me, o, op) for o in self.offsets_in]

    # ------------------------------------------------------------ a call
    def enter(self) -> None:
        """Count this call and check the signal is clean (see the module doc)."""
        link, sig = self.link, self.signal
        mine = link.enter_collective(sig.buffer.id)
        first = self.inc[0] if self.ring else self.inc
        for i, c in enumerate(first):
            v = self._read(c)
            if v == 0:
                continue
            src = self.peers[i]
            # 1 is a peer's first arrival if that peer has entered this call
            # (its counter is read after the cell, so a 1 read before it entered
            # cannot be mistaken for its credit)
            if v == 1 and link.collective_count(sig.buffer.devices[src], sig.buffer.id) >= mine:
                continue
            self._dirty(first_offsets(self, i), v, "when the collective starts")
        if self.ring:
            for row, offs in zip(self.inc[1:], self.offsets_in[1:]):
                for c, o in zip(row, offs):
                    v = self._read(c)
                    if v != 0:
                        self._dirty(o, v, "when the collective starts")

    def sync(self, g: int) -> None:
        """Barrier generation ``g`` (1-based) of this call."""
        add, try_wait, spin = self._add, self._try, self.spin
        if self.ring:
            out, inc, need = self.out[g - 1], self.inc[g - 1], 1
        else:
            out, inc, need = self.out, self.inc, g
        for c in out:
            add(c, NOTIFY_ADD, 1)
        for i, c in enumerate(inc):
            if not try_wait(c, CMP_GE, need, spin):
                self._block(i, c, need, g)

    def finish(self, generations: int) -> None:
        """The epilogue: take this call's credits back out of my own cells."""
        add = self._add
        if self.ring:
            for row in self.inc[:generations]:
                for c in row:
                    add(c, NOTIFY_ADD, -1)
        else:
            for c in self.inc:
                add(c, NOTIFY_ADD, -generations)

    # ------------------------------------------------------------ slow paths
    def _block(self, i, cell, need, g):
        offs = self.offsets_in[g - 1][i] if self.ring else self.offsets_in[i]
        v = self._read(cell)
        # a peer is at most one generation ahead of me (or one call ahead, at
        # its first generation), so at most need + 1 of its credits can be here
        if v < 0 or v > need + 1:
            self._dirty(offs, v, f"at barrier generation {g}")
        self.link.block(cell, need, self.signal, offs, self.peers[i], self.loc, self.coll, g)

    def _dirty(self, offsets, value, when):
        sig = self.signal
        cell = ", ".join(map(str, offsets))
        src = self.link.notify_sources(sig.buffer.id)
        if src:
            cause = (f"hand-rolled pld.system.notify into window '{sig.buffer.name}' comes from "
                     f"{src}; those counters are monotonic and never cleared")
            hint = "give the collective a signal window of its own (a fresh alloc_window_buffer)"
        else:
            cause = ("only collectives write this window in this program, so a collective on it "
                     "stopped half way (or a rank made calls the others did not)")
            hint = "reset the window (a fresh buffer) before reusing it for collectives"
        raise RuntimeFault(
            f"{self.op}: signal cell {sig.buffer.name}[{cell}] on rank {self.me} holds {value} "
            f"{when}; a collective's signal must be all zero when a call starts (collectives "
            f"leave it so) -- {cause}", code="TC507", hint=hint)


def first_offsets(bar: CreditBarrier, i: int) -> tuple:
    return bar.offsets_in[0][i] if bar.ring else bar.offsets_in[i]
