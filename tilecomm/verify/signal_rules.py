"""Protocol-lint rules about what a signal cell can tell its waiter
(``TC709``-``TC711``): a wait the initial value already satisfies, a cell
two ranks Set, and a threshold that some of the producers the waiter then
reads from can miss.  Same facts and the same caution as
``protocol_rules.py``: a rule speaks only where every event it needs is
known exactly."""
from __future__ import annotations

import itertools

from ..analysis.protocol import COLLECTIVE, READ, REMOTE_WRITE, WAIT, overlap
from ..errors import TilecommWarning
from ..ir.enums import NotifyOp, WaitCmp
from .lint import lint_rule
from .protocol_rules import _cell_name, _exact_writers, _known_notifies, _moved_otherwise, _waits


@lint_rule("wait-satisfied-at-start", "TC709")
def wait_satisfied_at_start(pf, prog):
    """A ``Ge 0`` wait on a cell nothing can take below 0: windows start
    zeroed, so the wait returns at once and orders nothing after the notifies
    it was meant to wait for.  Wait for the value they produce."""
    notifies, moved = _known_notifies(pf), _moved_otherwise(pf)
    sites: dict = {}
    for key, w in _waits(pf):
        sites.setdefault(w.site, []).append((key, w))
    for waits in sites.values():
        # a loop's first round may wait for 0 (for k in pl.range(n): expected=k): only a
        # site whose every execution waits for 0 waits for nothing
        if any(w.op is not WaitCmp.Ge or w.value != 0 or not w.certain for _, w in waits):
            continue
        found = [_exact_writers(pf, key, notifies, moved) for key, _ in waits]
        if any(f is None or any(e.value < 0 for e in f) for f in found):
            continue
        w = waits[0][1]
        yield TilecommWarning(
            f"wait for signal cell {_cell_name(w)} >= 0 on rank {w.rank} is satisfied by the "
            f"cell's initial value 0: it returns at once, before any notify arrives",
            code="TC709", span=w.span,
            hint="wait for the value the notifies produce (>= 1 for one Set of 1, >= n for "
                 "n AtomicAdds of 1)")


def _synced_before(pf) -> dict:
    """rank -> program-order position of its first wait or collective: what a
    rank does before it is ordered after nothing any peer did."""
    first: dict = {}
    for e in pf.events:
        if e.kind in (WAIT, COLLECTIVE):
            first[e.rank] = min(first.get(e.rank, e.seq), e.seq)
    return first


@lint_rule("two-setters", "TC710")
def two_setters(pf, prog):
    """One cell Set by two ranks with nothing ordering the Sets: the second
    overwrites the first, so the owner's wait cannot tell whether both
    arrived (and a different value from each loses one).  Give each writer a
    cell, or count arrivals with AtomicAdd."""
    moved = _moved_otherwise(pf)
    synced = _synced_before(pf)
    for key, found in _known_notifies(pf).items():
        if _exact_writers(pf, key, {key: found}, moved) is None:
            continue
        # Sets a rank issues before its first wait or collective: nothing a peer did
        # (a peer's Set included) is ordered before them
        free = [e for e in found if e.op is NotifyOp.Set and
                e.seq < synced.get(e.rank, float("inf"))]
        ranks = sorted({e.rank for e in free})
        if len(ranks) < 2:
            continue
        second = min((e for e in free if e.rank == ranks[1]),
                     key=lambda e: (e.span.line, e.span.col))
        yield TilecommWarning(
            f"signal cell {_cell_name(second)} of rank {key[0]} is Set by ranks "
            f"{', '.join(map(str, ranks))} with nothing ordering the Sets: the later one "
            f"overwrites the earlier, and a wait on the cell cannot tell both arrived",
            code="TC710", span=second.span,
            hint="give each writer its own cell (offsets=[writer_rank, 0]), or count "
                 "arrivals with NotifyOp.AtomicAdd and wait >= their number")


@lint_rule("wait-before-all-producers", "TC711")
def wait_before_all_producers(pf, prog):
    """A ``Ge t`` wait on a cell several producers add into, whose threshold
    fewer of them than all can reach, followed (before any other wait) by a
    read of the data every producer stores: the wait may end with one
    producer's data still on its way."""
    notifies, moved = _known_notifies(pf), _moved_otherwise(pf)
    by_rank: dict = {}
    for e in pf.events:
        by_rank.setdefault(e.rank, []).append(e)
    for evs in by_rank.values():
        evs.sort(key=lambda e: e.seq)
    for key, w in _waits(pf):
        if w.op is not WaitCmp.Ge or not w.certain:
            continue
        found = _exact_writers(pf, key, notifies, moved)
        if not found or any(e.op is not NotifyOp.AtomicAdd or e.value <= 0 for e in found):
            continue
        producers = sorted({e.rank for e in found})
        if len(producers) < 2:
            continue
        reads = _reads_until_next_wait(by_rank[w.rank], w)
        for p in producers:
            if p == w.rank:
                continue                  # its own stores precede its wait in program order
            others = sum(e.value for e in found if e.rank != p)
            if others < w.value:
                continue                  # p's notify is needed: its data is ordered
            hit = _read_of(reads, by_rank.get(p, ()), p, w.rank)
            if hit is None:
                continue
            read, store = hit
            n = len(producers)
            yield TilecommWarning(
                f"wait for signal cell {_cell_name(w)} >= {w.value} on rank {w.rank} ends once "
                f"adds worth {w.value} land, without rank {p}'s (the cell's {n} producers add "
                f"{sum(e.value for e in found)}), but the read at line {read.span.line} takes "
                f"what rank {p} stores at line {store.span.line}: it may not have landed",
                code="TC711", span=w.span,
                hint=f"wait for >= {sum(e.value for e in found)}, every producer's add, "
                     f"before reading what they all store")
            break


def _reads_until_next_wait(evs, w) -> list:
    out = []
    for e in itertools.dropwhile(lambda e: e.seq <= w.seq, evs):
        if e.kind in (WAIT, COLLECTIVE):
            break
        if e.kind == READ and e.region is not None:
            out.append(e)
    return out


def _read_of(reads, producer_events, p, owner):
    """(read, store): a read overlapping what producer ``p`` stores into
    ``owner``'s copy, or None."""
    for s in producer_events:
        if s.kind != REMOTE_WRITE or s.peer != owner or s.region is None or not s.certain:
            continue
        for r in reads:
            if r.buf is s.buf and overlap(s.region, r.region):
                return r, s
    return None


__all__ = ["two_setters", "wait_before_all_producers", "wait_satisfied_at_start"]
