"""The protocol lint's rules (``TC701``-``TC708``; ``signal_rules.py`` has the rest), one
small rule per pattern.

They read ``ProtocolFacts``: per rank, in program order, every notify, wait,
remote write and read, local window access and collective, with what is known of its
peer, cell and value.  A cell is (the rank whose copy it is, buffer, byte
offset); a notify reaches its peer's cell, a wait watches its own rank's."""
from __future__ import annotations

import itertools

from ..analysis.protocol import (COLLECTIVE, NOTIFY, READ, REMOTE_READ, REMOTE_WRITE, WAIT,
                                 WRITE, overlap)
from ..errors import TilecommWarning
from ..ir.enums import NotifyOp, WaitCmp
from .lint import lint_rule

# subset sums are enumerated for at most this many adds into one cell
MAX_SUBSET_ADDS = 12


def _cell(e):
    return e.region.cell() if e.region is not None else None


def _known_notifies(pf):
    """(rank, buffer, cell byte) -> notifies into it, for notifies whose peer and
    cell are known."""
    out: dict = {}
    for e in pf.events:
        if e.kind == NOTIFY and e.peer is not None and _cell(e) is not None:
            out.setdefault((e.peer, e.buf, _cell(e)), []).append(e)
    return out


def _waits(pf):
    for e in pf.events:
        if e.kind == WAIT and _cell(e) is not None and e.value is not None and \
                isinstance(e.op, WaitCmp):
            yield (e.rank, e.buf, _cell(e)), e


def _cell_name(e) -> str:
    offs = ", ".join(str(o) for o in e.region.offsets)
    return f"'{e.buf.name}'[{offs}]"


def _lines(events) -> str:
    lines = sorted({e.span.line for e in events})
    return ", ".join(map(str, lines))


def _moved_otherwise(pf) -> set:
    """Buffers something besides a notify writes: a window write, a remote
    store or a collective."""
    return {e.buf for e in pf.events if e.kind in (WRITE, REMOTE_WRITE, COLLECTIVE)}


def _exact_writers(pf, key, notifies, moved) -> list | None:
    """The notifies into cell ``key`` when nothing else can change it: every
    event on its buffer known exactly, nothing in ``moved`` (see
    ``_moved_otherwise``).  None when that cannot be told."""
    rank, buf, cell = key
    if pf.partial or buf in pf.inexact or buf in moved:
        return None
    found = notifies.get(key, [])
    if any(not e.certain or e.value is None or not isinstance(e.op, NotifyOp) for e in found):
        return None
    return found


@lint_rule("notify-set-and-add", "TC701")
def set_and_add(pf, prog):
    """A cell written by both Set and AtomicAdd notifies: a Set overwrites
    whatever adds arrived before it (lost credits), and an add after a Set
    moves the cell past the value the Set announced.  Use one op per cell."""
    for (rank, buf, cell), found in _known_notifies(pf).items():
        ops = {e.op for e in found}
        if NotifyOp.Set in ops and NotifyOp.AtomicAdd in ops:
            sets = [e for e in found if e.op is NotifyOp.Set]
            adds = [e for e in found if e.op is NotifyOp.AtomicAdd]
            first = min(found, key=lambda e: (e.span.line, e.span.col))
            yield TilecommWarning(
                f"signal cell {_cell_name(first)} of rank {rank} is written by NotifyOp.Set "
                f"(line {_lines(sets)}) and NotifyOp.AtomicAdd (line {_lines(adds)}): a Set "
                f"discards the adds that arrived before it", code="TC701", span=first.span,
                hint="give the cell one op: AtomicAdd for counters several notifies "
                     "build up, Set for a flag or tag one writer deposits")


@lint_rule("eq-wait-overshoot", "TC702")
def eq_wait_overshoot(pf, prog):
    """A ``WaitCmp.Eq`` wait on a cell several AtomicAdd notifies build up,
    for a value below their total: the adds may all land before the waiter
    looks, the cell passes the value and the wait never ends.  Wait Ge."""
    notifies, moved = _known_notifies(pf), _moved_otherwise(pf)
    for key, w in _waits(pf):
        if w.op is not WaitCmp.Eq:
            continue
        found = _exact_writers(pf, key, notifies, moved)
        if not found or any(e.op is not NotifyOp.AtomicAdd for e in found) or len(found) < 2:
            continue
        total = sum(e.value for e in found)
        if all(e.value > 0 for e in found) and w.value < total:
            senders = sorted({e.rank for e in found})
            yield TilecommWarning(
                f"WaitCmp.Eq {w.value} on signal cell {_cell_name(w)} of rank {w.rank}, which "
                f"{len(found)} AtomicAdd notifies (from rank{'s' if len(senders) > 1 else ''} "
                f"{', '.join(map(str, senders))}) raise to {total}: if they land before the "
                f"wait looks, the cell is past {w.value} and the wait never ends",
                code="TC702", span=w.span,
                hint=f"wait with cmp=pld.WaitCmp.Ge (>= {w.value} holds once the "
                     f"value is reached, whatever arrives after)")


def _reachable(found, cmp):
    """The values a cell notified only by ``found`` (from 0) can hold, or None
    when too many to list (for a Ge wait only the largest matters)."""
    if all(e.op is NotifyOp.Set for e in found):
        return {0} | {e.value for e in found}
    adds = all(e.op is NotifyOp.AtomicAdd for e in found)
    if adds and cmp is WaitCmp.Ge:
        return {0, sum(e.value for e in found if e.value > 0)}
    if adds and len(found) <= MAX_SUBSET_ADDS:
        # adds land in any order: every subset of them is a value the cell passes
        return {sum(c) for n in range(len(found) + 1)
                for c in itertools.combinations([e.value for e in found], n)}
    return None


@lint_rule("unreachable-wait", "TC703")
def unreachable_wait(pf, prog):
    """A wait for a value the notifies into its cell can never produce (``Ge 3``
    on a cell only ever Set to 1; ``Ge 3`` on a cell two ranks each add 1
    into): the wait blocks forever on every schedule."""
    notifies, moved = _known_notifies(pf), _moved_otherwise(pf)
    for key, w in _waits(pf):
        found = _exact_writers(pf, key, notifies, moved)
        if found is None:
            continue
        values = _reachable(found, w.op)
        if values is None:
            continue
        ok = max(values) >= w.value if w.op is WaitCmp.Ge else w.value in values
        if ok:
            continue
        if not found:
            what = "no notify ever reaches it"
        else:
            ops = {e.op.name for e in found}
            what = (f"its {len(found)} notif{'ies' if len(found) > 1 else 'y'} "
                    f"({'/'.join(sorted(ops))}, line {_lines(found)}) can only make it "
                    f"{_values(values, w.op)}")
        cmp = ">=" if w.op is WaitCmp.Ge else "=="
        yield TilecommWarning(
            f"wait for signal cell {_cell_name(w)} {cmp} {w.value} on rank {w.rank} can never "
            f"finish: {what} (world size {pf.world})", code="TC703", span=w.span,
            hint="make the threshold the value the notifiers produce, or add the missing "
                 "notifies")


def _values(values, cmp) -> str:
    if cmp is WaitCmp.Ge:
        return f"at most {max(values)}"
    vs = sorted(values)
    return "one of " + ", ".join(map(str, vs[:8])) + (", ..." if len(vs) > 8 else "")


@lint_rule("notify-before-data", "TC704")
def notify_before_data(pf, prog):
    """A kernel that notifies a peer and only afterwards stores or puts the data
    into that peer's window, with no notify to it after the store: the peer's
    wait can end before the data lands.  Notify after the data."""
    if pf.partial:          # a cut-short execution lacks the notifies that come later
        return
    signal_bufs = {e.buf for e in pf.events if e.kind in (NOTIFY, WAIT)}
    by_rank: dict = {}
    for e in pf.events:
        by_rank.setdefault(e.rank, []).append(e)
    for rank, evs in by_rank.items():
        evs.sort(key=lambda e: e.seq)
        # the last notify of the rank to each peer (None: to a peer not known);
        # a collective publishes to every peer (a barrier orders all before it)
        last = {e.peer: e.seq for e in evs if e.kind == NOTIFY}
        last_coll = max((e.seq for e in evs if e.kind == COLLECTIVE), default=-1)
        before: dict = {}       # (activation, peer) -> the latest notify so far
        for s in evs:
            if s.kind == NOTIFY and s.peer is not None:
                before[(s.activation, s.peer)] = s
            if s.kind != REMOTE_WRITE or s.peer is None or s.buf in signal_bufs:
                continue
            if max(last.get(s.peer, -1), last.get(None, -1), last_coll) > s.seq:
                continue                  # a later notify or collective can announce it
            n = before.get((s.activation, s.peer))
            if n is not None and s.landed is not None:
                yield TilecommWarning(
                    f"notify to rank {s.peer} (signal {_cell_name(n)}) comes before the wait "
                    f"at line {s.landed.line} of the event of the asynchronous put into its "
                    f"window '{s.buf.name}' at line {s.span.line}, and no notify follows that "
                    f"wait: the transfer may land after rank {s.peer} stopped waiting and read",
                    code="TC704", span=n.span,
                    hint="wait the event (pld.system.wait_async_event) before the notify that "
                         "announces the data")
            elif n is not None:
                yield TilecommWarning(
                    f"notify to rank {s.peer} (signal {_cell_name(n)}) comes before the "
                    f"remote store / put into its window '{s.buf.name}' at line "
                    f"{s.span.line}, and no notify follows that store: rank {s.peer} may stop "
                    f"waiting and read before the data lands", code="TC704", span=n.span,
                    hint="issue the notify after the remote store / put it announces")


@lint_rule("collective-signal-shared", "TC705")
def collective_signal_shared(pf, prog):
    """A window a collective uses (its signal runs the self-clearing credit
    protocol) whose cells hand-rolled notifies or waits also use: a stray
    credit makes the collective fail (TC507) or finish early."""
    coll = [e for e in pf.events if e.kind == COLLECTIVE and e.region is not None]
    for e in pf.events:
        if e.kind not in (NOTIFY, WAIT) or _cell(e) is None:
            continue
        for c in coll:
            if c.buf is e.buf and overlap(c.region, e.region):
                verb = "notify into" if e.kind == NOTIFY else "wait on"
                yield TilecommWarning(
                    f"{verb} cell {_cell_name(e)}, which {c.op} (line {c.span.line}) also "
                    f"uses: a collective's signal counts credits of its own protocol",
                    code="TC705", span=e.span,
                    hint="give the hand-rolled protocol a window buffer of its own")
                break


@lint_rule("split-aiv-double-notify", "TC706")
def split_aiv_double_notify(pf, prog):
    """A notify inside a ``pl.split_aiv`` body that both lanes issue to the same
    cell: it fires twice (an AtomicAdd counts double).  Guard it with
    ``if aiv_id == 0`` or shard the cell by ``aiv_id``."""
    lanes_of: dict = {}
    first: dict = {}
    for e in pf.events:
        if e.kind == NOTIFY and e.lane is not None and e.peer is not None and \
                _cell(e) is not None:
            region, lane = e.lane
            key = (e.site, e.rank, region[0], e.peer, _cell(e))
            lanes_of.setdefault(key, set()).add(lane)
            first.setdefault(key, e)
    for key, lanes in lanes_of.items():
        if len(lanes) < 2:
            continue
        e = first[key]
        yield TilecommWarning(
            f"this notify in a pl.split_aiv region runs on every lane ({len(lanes)}) and "
            f"reaches the same cell {_cell_name(e)} of rank {e.peer} each time",
            code="TC706", span=e.span,
            hint="guard it with `if aiv_id == 0:` or make the cell depend on aiv_id")


def _sync_points(pf):
    """Per rank, in program order: its first wait or collective (``synced``:
    nothing before it is ordered after a peer), its last notify to each peer
    (``permits``, key (rank, None) for an unknown peer) and its last
    collective (``released``): a read before a later permit or collective
    may be the protocol "read first, then tell the writer it may write"."""
    synced: dict = {}
    permits: dict = {}
    released: dict = {}
    for e in sorted(pf.events, key=lambda e: e.seq):
        if e.kind in (WAIT, COLLECTIVE):
            synced.setdefault(e.rank, e.seq)
        if e.kind == NOTIFY:
            permits[(e.rank, e.peer)] = e.seq
        if e.kind == COLLECTIVE:
            released[e.rank] = e.seq
    return synced, permits, released


def _unordered_reads(pf, reads, writes_into):
    """(read, write) pairs: a read before its rank's first wait or
    collective, overlapping a write into the copy it reads (``writes_into``:
    (owner rank, buffer) -> writes) by another rank that no later notify or
    collective of the reader could be holding back."""
    synced, permits, released = _sync_points(pf)
    for e, owner in reads:
        if e.region is None or e.seq > synced.get(e.rank, float("inf")):
            continue
        for s in writes_into.get((owner, e.buf), ()):
            if s.rank == e.rank:
                continue
            later = max(permits.get((e.rank, s.rank), -1), permits.get((e.rank, None), -1),
                        released.get(e.rank, -1))
            if later > e.seq or not overlap(s.region, e.region):
                continue
            yield e, s
            break


@lint_rule("unwaited-remote-data", "TC707")
def unwaited_remote_data(pf, prog):
    """A rank reads its window copy where peers store data, with no wait of any
    kind before the read and no notify or collective after it that could
    hold the writer back (reading first, then telling the writer it may
    write, is a protocol): nothing says whether the data has arrived."""
    if pf.partial:
        return
    incoming: dict = {}
    for e in pf.events:
        if e.kind == REMOTE_WRITE and e.peer is not None and e.peer != e.rank and \
                e.region is not None:
            incoming.setdefault((e.peer, e.buf), []).append(e)
    reads = [(e, e.rank) for e in pf.events if e.kind == READ]
    for e, s in _unordered_reads(pf, reads, incoming):
        yield TilecommWarning(
            f"rank {e.rank} reads window '{e.buf.name}' here, which rank {s.rank} "
            f"stores into (line {s.span.line}), without waiting for anything first",
            code="TC707", span=e.span,
            hint="wait on a signal the writer notifies after its store (or a "
                 "pld.tensor.barrier) before reading")


@lint_rule("unwaited-peer-data", "TC708")
def unwaited_peer_data(pf, prog):
    """A rank reads a peer's window copy (``remote_load``, ``get``) that the
    peer writes during the call -- or that a third rank stores into -- with
    no wait of any kind before the read and no notify or collective after it
    that could hold the writer back: nothing says whether the peer's data is
    there yet.  The mirror of TC707, seen from the reader's side."""
    if pf.partial:
        return
    writes: dict = {}          # (owner rank, buffer) -> writes into that copy
    for e in pf.events:
        if e.region is None:
            continue
        if e.kind == WRITE:
            writes.setdefault((e.rank, e.buf), []).append(e)
        elif e.kind == REMOTE_WRITE and e.peer is not None:
            writes.setdefault((e.peer, e.buf), []).append(e)
    reads = [(e, e.peer) for e in pf.events
             if e.kind == REMOTE_READ and e.peer is not None and e.peer != e.rank]
    for e, s in _unordered_reads(pf, reads, writes):
        verb = "writes" if s.rank == e.peer else "stores into"
        yield TilecommWarning(
            f"rank {e.rank} reads rank {e.peer}'s copy of window '{e.buf.name}' here, "
            f"which rank {s.rank} {verb} (line {s.span.line}) during the call, without "
            f"waiting for anything first",
            code="TC708", span=e.span,
            hint="wait on a signal the owner notifies once its data is in place (or a "
                 "pld.tensor.barrier) before the remote_load or get")
