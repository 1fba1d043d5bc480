"""What in a program says it is written for more ranks than it was compiled
for.  A call without a ``DistributedConfig`` runs on one rank; a program
written for several then fails (or, worse, answers) far from the missing
config -- a peer "out of range" in a kernel, half of a HOST tensor never
dispatched.  The compiler asks this module before any rank starts and names
the missing config instead."""
from __future__ import annotations

from ..analysis.protocol import protocol_facts
from ..ir import nodes as N
from ..ir import walk


def rank_rows(prog) -> list:
    """``(param, rows, span, var)`` for each HOST parameter indexed by the rank a
    dispatch runs on (``xs[r]`` with ``device=r``): its leading dimension
    holds one row per rank, ``rows`` of them (None when not static)."""
    entry = prog.entry
    found = {}
    for s in _loops(entry.body):
        for e in walk.exprs(s.body):
            if not (isinstance(e, N.FuncCall) and isinstance(e.device, N.Var) and
                    e.device.name == s.var):
                continue
            for a in e.args:
                if not (isinstance(a, N.Index) and a.items and isinstance(a.items[0], N.Var)
                        and a.items[0].name == s.var):
                    continue
                i = walk.param_index(a.value)
                if i is not None and i not in found and i < len(entry.params):
                    shape = entry.params[i].type.shape or (None,)
                    rows = shape[0] if isinstance(shape[0], int) else None
                    found[i] = (entry.params[i].name, rows, a.span, s.var)
    return list(found.values())


def _loops(body):
    for s in body:
        if isinstance(s, N.For):
            yield s
            yield from _loops(s.body)
        elif isinstance(s, N.If):
            yield from _loops(s.body + s.orelse)


def more_ranks_evidence(prog, facts) -> list:
    """Sentences saying why ``prog``, compiled for ``prog.world`` ranks, is
    written for more: HOST tensors with a row per rank beyond the world, and
    peer indexes outside the comm domain.  Empty when nothing says so."""
    out = []
    for name, rows, span, var in rank_rows(prog):
        if rows is not None and rows > prog.world:
            out.append((rows, f"'{name}' has {rows} rows, one per rank ({name}[{var}] goes to "
                              f"device={var} at {span})"))
            break                     # one tensor says it; the others would repeat it
    for span, peer, n in protocol_facts(prog, facts).stray_peers[:1]:
        out.append((peer + 1, f"peer {peer} is named at {span}, outside a comm domain of "
                              f"{n} rank(s)"))
    return out


__all__ = ["more_ranks_evidence", "rank_rows"]
