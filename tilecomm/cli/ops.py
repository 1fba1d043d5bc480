"""``tilecomm ops [NAME]``: the op catalogue, read from the registry records
(so it cannot drift from what the compiler accepts)."""
from __future__ import annotations

import difflib

import click

from ..errors import CODES
from ..ir.kinds import KIND_NAMES
from ..ops.registry import EVERY_CALL_RAISES, records

# where an op may be used, shortest first
_WHERE = {"host": "HOST", "orchestration": "chip orchestration", "incore": "InCore"}


def catalogue() -> dict:
    """Every public spelling -> its record."""
    return {name: rec for rec in records() for name in rec.spellings}


def where(rec) -> str:
    return ", ".join(_WHERE[k] for k in _WHERE if k in rec.contexts)


COLLECTIVE_NOTE = ("a collective: its window operands form one comm domain; in a HOST "
                   "orchestrator it runs as one builtin dispatch per member rank")


def facts(rec) -> list:
    """(label, text) pairs saying what one record is, in the order ``tilecomm
    ops NAME`` prints them; the documentation site's op pages read them too."""
    out = []
    if rec.aliases:
        out.append(("also spelled", ", ".join(rec.aliases)))
    out.append(("may be used in", "; ".join(KIND_NAMES[k] for k in sorted(rec.contexts))))
    if rec.effects:
        out.append(("effects", ", ".join(sorted(e.value for e in rec.effects))))
    if rec.touches:
        out.append(("touches", ", ".join(touch_text(t) for t in rec.touches)))
    if rec.static:
        out.append(("compile-time constants", ", ".join(rec.static)))
    if rec.collective:
        out.append(("", COLLECTIVE_NOTE))
    if rec.expands is not None:
        out.append(("runs as", f"{rec.expands.name}, whose checks, effects and errors apply"))
    return out


def touch_text(t) -> str:
    """One operand's access as the race check and tracing see it:
    ``output_tensor: write (atomic with atomic=)``."""
    what = {"read": "read", "write": "write", "remote_read": "read of the peer's copy",
            "remote_write": "write of the peer's copy"}[t.effect.value]
    if t.atomic:
        what += f" (atomic with {t.atomic}=)"
    return f"{t.param}: {what}"


def raised(rec) -> list:
    """(code, meaning) of every error a call of ``rec`` can raise: the op's
    own codes, then those of any op call."""
    own = [(code, CODES[code]) for code in rec.raises]
    if rec.expands is not None:           # a form: the op it becomes raises its own too
        own += [(code, f"{CODES[code]} (as {rec.expands.name})")
                for code in rec.expands.raises if code not in rec.raises]
    return own + [(code, f"{CODES[code]} (any op)") for code in EVERY_CALL_RAISES]


def describe(rec) -> list:
    """The lines ``tilecomm ops NAME`` prints for one record."""
    lines = [f"{rec.name}{rec.signature}"]
    lines.extend(f"  {label}: {text}" if label else f"  {text}" for label, text in facts(rec))
    lines.append("  errors it can raise (codes of tilecomm.errors):")
    lines.extend(f"    {code}  {meaning}" for code, meaning in raised(rec))
    if rec.doc:
        lines.append("")
        lines.extend("  " + line if line else "" for line in rec.doc.strip().splitlines())
    return lines


@click.command()
@click.argument("name", required=False)
def ops(name):
    """List every op with where it may be used, or describe op NAME (any of
    its spellings, e.g. pld.system.notify or pl.load)."""
    table = catalogue()
    if name is None:
        recs = sorted({id(r): r for r in table.values()}.values(), key=lambda r: r.name)
        width = max(len(r.name) for r in recs)
        for rec in recs:
            click.echo(f"{rec.name:<{width}}  {where(rec)}")
        click.echo(f"\n{len(recs)} ops; `tilecomm ops NAME` describes one")
        return
    rec = table.get(name)
    if rec is None:
        close = difflib.get_close_matches(name, list(table), n=3, cutoff=0.6)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        raise click.UsageError(f"no op named {name!r}{hint}")
    click.echo("\n".join(describe(rec)))
