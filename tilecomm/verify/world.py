"""What in a program says it is written for more ranks than it was compiled
for.  A call without a ``DistributedConfig`` runs on one rank; a program
written for several then fails (or, worse, answers) far from the missing
config -- a peer "out of range" in a kernel, half of a HOST tensor never
dispatched.  The compiler asks this module before any rank starts and names
the missing config instead."""
from __future__ import annotations

from ..analysis.protocol import protocol_facts
from ..errors import ConfigError, UserError, user_span
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


# errors whose cause, in a program compiled for 1 rank for want of a config,
# is most likely the missing config: device= / collective sizes beyond 1 rank
ONE_RANK_CODES = ("TC212", "TC220", "TC224", "TC226")


def on_one_rank(e: UserError) -> UserError:
    """An error of a program compiled for one rank only because no
    DistributedConfig was given says so: the missing config is the likely
    mistake, not the line the error names."""
    if e.code in ONE_RANK_CODES:
        e.hint = (e.hint + "; " if e.hint else "") + (
            "no DistributedConfig was given, so the program was compiled for 1 rank: "
            "pass config=RunConfig(distributed_config=DistributedConfig(device_ids=[0, 1, "
            "...]))")
    return e


def check_call_world(name: str, given: int, compiled: int) -> None:
    """A DistributedConfig given at the call of a program compiled without one
    would be silently ignored: the ranks are fixed when it is compiled."""
    if given == compiled:
        return
    raise ConfigError(f"{name} was compiled without a DistributedConfig, for {compiled} "
                      f"rank; the DistributedConfig given to this call names {given}, which "
                      f"a compiled program cannot change", code="TC403", span=user_span(),
                      hint=f"compile it with the config: {name}.compile(config=...) (or call "
                           f"{name}(..., config=...) itself, which compiles for it)")


def check_world(name: str, prog, facts) -> None:
    """A call without a DistributedConfig whose program is written for more
    than one rank: say so at the call, before any rank starts."""
    evidence = more_ranks_evidence(prog, facts)
    if not evidence:
        return
    n = max(k for k, _ in evidence)
    raise ConfigError(f"{name} is called without a DistributedConfig, so it runs on 1 rank, "
                      f"but it is written for more: " + "; ".join(t for _, t in evidence),
                      code="TC403", span=user_span(),
                      hint=f"give the call its ranks: config=RunConfig(distributed_config="
                           f"DistributedConfig(device_ids=list(range({n}))))")


__all__ = ["check_call_world", "check_world", "more_ranks_evidence", "on_one_rank",
           "rank_rows"]
