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

# key of a signal view's plans: defer=True calls on it still pending on this rank
PENDING = "pending deferred calls"


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
    """The ``generations`` barriers of a collective call on one signal lane.

    Built once per (call site, signal view, lane) and reused by every call
    there: cell handles and thresholds are resolved once, so a call costs one
    signal add per peer and generation, one satisfied wait per peer and
    generation, and the epilogue."""

    __slots__ = ("link", "signal", "me", "peers", "gens", "epilogue", "first", "coll", "loc",
                 "op", "_add", "_try", "_read", "_arrive", "spin", "_enter", "_count", "bid",
                 "devices", "later", "outs")

    def __init__(self, link: RankLink, signal, op: str, coll: int, loc: int, generations: int,
                 *, lane: int = 0, ring: bool = False):
        self.link = link
        self.signal = signal
        self.op = op
        self.coll = coll
        self.loc = loc
        me, n = signal.rank, signal.nranks
        self.me = me
        self.peers = [p for p in range(n) if p != me]
        t = link.transport
        self._add, self._try, self._read = t.signal, t.try_wait, t.read_cell
        self._arrive = t.arrive_wait
        self._enter, self._count = link.enter_collective, link.collective_count
        self.bid = signal.buffer.id
        self.devices = signal.buffer.devices
        self.spin = link.spin
        nd = len(signal.shape)
        # per generation: (my cell in each peer's copy, [(peer's cell in mine,
        # its offsets, the peer)], threshold)
        self.gens = []
        self.outs = []                  # per generation: my cell in each peer's copy
        for g in range(1, generations + 1):
            if ring:
                # generation g has row g-1 to itself: threshold 1 every time
                mine, theirs, need = (g - 1, me), [(g - 1, s) for s in self.peers], 1
            else:
                mine, theirs, need = mesh_offsets(nd, me, lane), \
                    [mesh_offsets(nd, s, lane) for s in self.peers], g
            out = [link.cell_of(signal, p, mine, op) for p in self.peers]
            inc = [(link.cell_of(signal, me, o, op), o, s) for o, s in zip(theirs, self.peers)]
            group = t.signal_group(out, [c for c, _, _ in inc])
            self.outs.append(out)
            self.gens.append((group, inc, need))
        self.first = self.gens[0][1] if self.gens else []
        if ring:
            self.epilogue = [(c, -1) for _, inc, _ in self.gens for c, _, _ in inc]
        else:
            self.epilogue = [(c, -generations) for c, _, _ in self.first]
        self.gens = tuple(self.gens)
        self.later = [x for _, inc, _ in self.gens[1:] for x in inc] if ring else []

    # ------------------------------------------------------------ a call
    def enter(self) -> None:
        """Count this call and check the signal is clean (see the module doc)."""
        if self.signal.plans.get(PENDING):
            self._overlapped()
        mine = self._enter(self.bid)
        read = self._read
        for c, offs, src in self.first:
            v = read(c)
            if v == 0:
                continue
            # 1 is a peer's first arrival if that peer has entered this call
            # (its counter is read after the cell, so a 1 read before it entered
            # cannot be mistaken for its credit)
            if v == 1 and self._count(self.devices[src], self.bid) >= mine:
                continue
            self._dirty(offs, v, "when the collective starts")
        for c, offs, _ in self.later:         # ring rows past the first: nobody is early
            v = read(c)
            if v != 0:
                self._dirty(offs, v, "when the collective starts")

    def sync(self, g: int) -> None:
        """Barrier generation ``g`` (0-based here) of this call."""
        group, inc, need = self.gens[g]
        i = self._arrive(group, 1, need, self.spin)
        if i >= 0:                       # a peer is late: the published, blocking path
            try_wait = self._try
            for c, offs, src in inc[i:]:
                if not try_wait(c, CMP_GE, need, 0):
                    self._block(c, offs, src, need, g + 1)

    def enter_deferred(self) -> None:
        """``enter`` for a ``defer=True`` call, which stays pending on this
        rank's signal until ``finish_deferred``: a second call on the signal
        meanwhile (tasks the program left unordered) would count the first
        call's arrivals as its own -- it is refused instead."""
        self.enter()
        plans = self.signal.plans
        plans[PENDING] = plans.get(PENDING, 0) + 1

    def finish_deferred(self) -> None:
        self.finish()
        self.signal.plans[PENDING] -= 1

    def arrive(self, g: int) -> list:
        """The split-phase form of ``sync(g)`` (a ``defer=True`` call): this
        rank's arrivals only.  Returns what the caller must still see before
        the call is complete -- ``(cell, threshold, offsets, src)`` per peer --
        which the rank registers as deferred conditions of its task instead
        of spinning; ``finish_deferred`` then runs when they all hold.  The credit
        argument above is unchanged: the arrivals and the thresholds are
        those of ``sync``, only the waiting moved out of the kernel, and the
        epilogue still runs after every arrival of this call has been seen
        (and before anything ordered after the call, such as the next call
        on this signal, can start)."""
        add = self._add
        for c in self.outs[g]:
            # the payload this call wrote is complete before this add returns
            # (each transport's signal publishes what the rank wrote before it)
            add(c, NOTIFY_ADD, 1)
        _, inc, need = self.gens[g]
        return [(c, need, offs, src) for c, offs, src in inc]

    def finish(self) -> None:
        """The epilogue: take this call's credits back out of my own cells."""
        add = self._add
        for c, v in self.epilogue:
            add(c, NOTIFY_ADD, v)

    # ------------------------------------------------------------ slow paths
    def _block(self, cell, offs, src, need, g):
        v = self._read(cell)
        # a peer is at most one generation ahead of me (or one call ahead, at
        # its first generation), so at most need + 1 of its credits can be here
        if v < 0 or v > need + 1:
            self._dirty(offs, v, f"at barrier generation {g}")
        self.link.block(cell, need, self.signal, offs, src, self.loc, self.coll, g)

    def _overlapped(self):
        sig = self.signal
        raise RuntimeFault(
            f"{self.op}: a collective on signal '{sig.buffer.name}' started on rank {self.me} "
            f"while a defer=True collective on that signal is still pending there; it would "
            f"count that call's arrivals as its own", code="TC507",
            hint="order the second call after the deferred call's TaskId (deps=[tid])")

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
