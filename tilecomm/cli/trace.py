"""``tilecomm trace TRACE``: what a traced run did, read like a profiler's
summary -- time per rank and track by kind, the longest waits with the
notify that released each, the critical path across ranks -- and, on
request, its timeline as a PNG or a self-contained HTML page.

TRACE is a merged trace (``compiled.trace_path``,
``dfx_outputs/merged_swimlane.json``), one dispatch's part of it, or a
directory: a ``dfx_outputs`` directory (or the program's output directory
holding one) whose merged trace is read, or whose ranks' own files are
merged here when the call left none.  Progress goes to stderr, and only
when stderr is a terminal and the work is long."""
from __future__ import annotations

import glob
import json
import os
import sys

import click

from ..dfx import timeline
from ..dfx import trace as T
from ..dfx.timeline import time_unit
from ..dfx.trace_summary import (COLLECTIVE, DEPENDENCY, KINDS, PROGRAM_ORDER, SIGNAL, SUBMITTED,
                                 TASKS_DONE, rank_times, summarize, to_json)
from ..errors import UserError

MERGED = "merged_swimlane.json"          # the names rank/artefacts.py gives the files
RANK_FILE = "chip_swimlane_records.json"
DFX_DIR = "dfx_outputs"
LONG_INPUT = 4 << 20       # bytes of trace from which reading it is worth a progress note
# how the critical path goes on from a segment to the next one on another lane
HANDOFF = {SIGNAL: "its notify released the wait below",
           DEPENDENCY: "the task below waited for this",
           COLLECTIVE: "then entered the collective below, last of its members",
           SUBMITTED: "submitted the task below (its start)",
           TASKS_DONE: "the dispatch below waited for this task"}
LONG_PATH = 40             # a critical path longer than this is printed grouped by place


# ------------------------------------------------------------------ progress
def progress_for(stream, long_work: bool):
    """A ``progress(items, label, total)`` wrapper: a bar on ``stream`` when
    it is a terminal and the work is long, the items themselves otherwise
    (nothing written when piped)."""
    if not (long_work and _is_tty(stream)):
        return lambda items, label, total: items

    def bar(items, label, total):
        with click.progressbar(items, length=total, label=f"{label:<16}", file=stream,
                               width=30) as it:
            yield from it
    return bar


def _is_tty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


# ------------------------------------------------------------------ input
def read_trace(path: str, stderr=None) -> tuple:
    """(trace, the file it came from, whether it was long) for ``path``."""
    stderr = stderr or sys.stderr
    if os.path.isdir(path):
        for cand in (os.path.join(path, MERGED), os.path.join(path, DFX_DIR, MERGED)):
            if os.path.isfile(cand):
                return read_trace(cand, stderr)
        root = path if glob.glob(os.path.join(path, "rank*")) else os.path.join(path, DFX_DIR)
        parts = sorted(glob.glob(os.path.join(root, "rank*", "d*", RANK_FILE)))
        if not parts:
            raise UserError(f"{path} holds no trace: neither {MERGED} nor rank*/d*/{RANK_FILE}",
                            code="TC444", hint="pass the file a traced call printed "
                                                "(compiled.trace_path)")
        size = sum(os.path.getsize(p) for p in parts)
        show = progress_for(stderr, size >= LONG_INPUT)
        loaded = [T.load(p) for p in show(parts, "reading ranks", len(parts))]
        return T.merge(loaded, title=os.path.basename(os.path.dirname(root))), root, \
            size >= LONG_INPUT
    long = os.path.isfile(path) and os.path.getsize(path) >= LONG_INPUT
    if long and _is_tty(stderr):
        click.echo(f"reading {path} ({os.path.getsize(path) >> 20} MiB) ...", file=stderr)
    return T.load(path), path, long


# ------------------------------------------------------------------ text
def fmt_us(us: float) -> str:
    """A duration in the unit that reads best: 850 µs, 5.18 ms, 2.31 s."""
    a = abs(us)
    if a < 1000:
        return f"{us:.3g} µs" if a < 10 else f"{us:.0f} µs"
    if a < 1e6:
        return f"{us / 1e3:.3g} ms"
    return f"{us / 1e6:.3g} s"


def where(line) -> str:
    """A source line relative to the working directory when it is under it."""
    if not line:
        return "-"
    text = str(line)
    path = text.split(":", 1)[0]
    if os.path.isabs(path):
        rel = os.path.relpath(path, os.getcwd())
        if not rel.startswith(".."):
            return rel + text[len(path):]
    return text


def _cell(us: float, total: float) -> str:
    if us <= 0:
        return "-"
    return f"{fmt_us(us)} {100 * us / total:3.0f}%" if total > 0 else fmt_us(us)


def _table(rows, header) -> list:
    widths = [max(len(str(r[j])) for r in rows + [header]) for j in range(len(header))]
    out = []
    for r in [header] + rows:
        cells = [str(c).rjust(w) if j >= 2 else str(c).ljust(w)
                 for j, (c, w) in enumerate(zip(r, widths))]
        out.append("  " + "  ".join(cells).rstrip())
    return out


def render(summary, top: int) -> str:
    """The terminal summary."""
    out = []
    ranks = sorted({ln.rank for ln in summary.lanes})
    total = summary.duration
    title = summary.title or "run"
    out.append(f"{title}: {len(ranks)} rank{'s' * (len(ranks) != 1)}, "
               f"{len(summary.lanes)} lanes, {fmt_us(total)}, {len(summary.slices)} slices, "
               f"{summary.arrows} notify -> wait arrows")
    if not summary.slices:
        out.append("the trace holds no slice (a call traced with nothing to record)")
        return "\n".join(out)
    # ---- time per lane
    out += ["", f"Time per lane (share of the run's {fmt_us(total)})"]
    rows, prev = [], None
    per_rank = rank_times(summary)
    for lt in summary.times:
        rank = lt.lane.rank
        rows.append([str(rank) if rank != prev else "", lt.lane.name]
                    + [_cell(lt.by_kind[k], total) for k in KINDS] + [_cell(lt.idle, total)])
        prev = rank
    out += _table(rows, ["rank", "lane"] + list(KINDS) + ["idle"])
    lanes_of = {r: sum(1 for ln in summary.lanes if ln.rank == r) for r in ranks}
    if any(n > 1 for n in lanes_of.values()):
        out.append("")
        out.append("  per rank, all lanes: " + "; ".join(
            f"rank {r} " + ", ".join(f"{k} {fmt_us(v)}" for k, v in per_rank[r].items() if v)
            for r in ranks))
    # ---- longest waits
    waits = summary.waits[:top]
    out += ["", f"Longest waits ({len(waits)} of {len(summary.waits)})" if summary.waits
            else "No waits (level 2 of enable_chip_swimlane records them)"]
    for j, w in enumerate(waits, 1):
        s, a = w.slice, w.slice.args
        cond = f"{a.get('cell', '?')} {a.get('cmp', '')} {a.get('expected', '')}".rstrip()
        ln = next(x for x in summary.lanes if x.key == s.lane)
        out.append(f"  {j:>2}. {fmt_us(s.dur):>9}  rank {s.rank} {ln.name}  {s.name}  "
                   f"{where(s.line)}  [{cond}]")
        pad = " " * 17
        if s.cat == "blocked":
            out.append(f"{pad}never released: the run ended in it (cell held "
                       f"{a.get('observed')})")
        elif w.notify is None:
            out.append(f"{pad}no recorded notify released it (the cell held the value)")
        else:
            n = w.notify
            op = f"+{n.args['value']}" if n.args.get("op") == "AtomicAdd" else \
                f"={n.args.get('value')}"
            into = n.ts - s.ts
            when = f"it came {fmt_us(into)} into the wait, which returned " \
                f"{fmt_us(max(s.end - n.end, 0.0))} after it" if into >= 0 else \
                f"it came {fmt_us(-into)} before the wait began"
            out.append(f"{pad}released by rank {n.rank}'s notify at {where(n.line)} "
                       f"({op} -> {n.args.get('result')}): {when}")
    # ---- critical path
    path = summary.path
    if not path:
        return "\n".join(out)
    length = path[-1].end - path[0].start
    hops = sum(1 for a, b in zip(path, path[1:]) if a.lane.rank != b.lane.rank)
    out += ["", f"Critical path: {fmt_us(length)} ({100 * length / total:.0f}% of the run), "
                f"{len(path)} segments, {hops} hand-offs between ranks"]
    by_kind: dict = {}
    for seg in path:
        by_kind[seg.kind] = by_kind.get(seg.kind, 0.0) + seg.dur
    out.append("  " + ", ".join(f"{k} {fmt_us(v)} ({100 * v / length:.0f}%)" if length else k
                                for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1])))
    if len(path) <= max(LONG_PATH, top):
        div, unit = time_unit(total)
        rows = []
        for seg in path:
            rows.append([f"{(seg.start - summary.start) / div:.3f}", fmt_us(seg.dur),
                         str(seg.lane.rank), seg.lane.name, seg.kind, seg.what,
                         where(seg.line)])
            if seg.then not in (None, PROGRAM_ORDER):
                rows.append(f"↳ {HANDOFF[seg.then]}")
        out += _table_path(rows, header=(f"at ({unit})", "dur", "rank", "lane", "kind",
                                         "what", "line"))
    else:
        places: dict = {}
        for seg in path:
            k = (seg.lane.rank, seg.lane.name, seg.kind, seg.what, where(seg.line))
            places[k] = places.get(k, 0.0) + seg.dur
        worst = sorted(places.items(), key=lambda kv: -kv[1])[:top]
        out.append(f"  by place, the {len(worst)} largest (--format json lists every segment):")
        out += _table_path([[fmt_us(v), str(k[0]), k[1], k[2], k[3], k[4]] for k, v in worst],
                           header=["time", "rank", "lane", "kind", "what", "line"])
    return "\n".join(out)


def _table_path(rows, header) -> list:
    """``rows``: lists of cells, or a string: a note under the "what" column."""
    header = list(header)
    table = [r for r in rows if not isinstance(r, str)] + [header]
    widths = [max(len(r[j]) for r in table) for j in range(len(header))]
    right = {header[0], "dur", "time", "rank"}
    indent = 2 + sum(w + 2 for w in widths[:header.index("what")])
    out = []
    for r in [header] + rows:
        if isinstance(r, str):
            out.append(" " * indent + r)
            continue
        out.append("  " + "  ".join(c.rjust(w) if h in right else c.ljust(w)
                                    for c, w, h in zip(r, widths, header)).rstrip())
    return out


# ------------------------------------------------------------------ the verb
@click.command()
@click.argument("trace_file", metavar="TRACE", type=click.Path(exists=True, dir_okay=True))
@click.option("--top", default=10, show_default=True, type=click.IntRange(min=1),
              help="how many of the longest waits (and critical-path places) to list")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="json: the whole summary for scripts")
@click.option("--plot", "png", type=click.Path(dir_okay=False, writable=True),
              help="write the timeline as a PNG")
@click.option("--html", "page", type=click.Path(dir_okay=False, writable=True),
              help="write the timeline and this summary as one self-contained HTML page")
@click.option("--arrows", default=timeline.ARROWS, show_default=True,
              type=click.IntRange(min=0),
              help="draw notify -> wait arrows for at most this many of the longest waits")
def trace(trace_file, top, fmt, png, page, arrows):
    """Summarise a traced run: time per rank and track (compute, comm, wait,
    collective, other, idle), the longest waits with the notify that released
    each, and the critical path across ranks.  TRACE is the merged trace a
    traced call writes (compiled.trace_path) or its dfx_outputs directory.

    \b
    Examples:
      tilecomm trace out/programs/main-*/dfx_outputs/merged_swimlane.json
      tilecomm trace TRACE --top 5 --plot timeline.png --html timeline.html
      tilecomm trace TRACE --format json | jq .critical_path.duration_us
    """
    if (png or page) and not timeline.available():
        raise click.ClickException(f"--plot and --html draw with matplotlib, which is not "
                                   f"installed: {timeline.INSTALL} (or pip install matplotlib)")
    try:
        data, path, long = read_trace(trace_file)
    except UserError as e:
        raise click.ClickException(str(e)) from None
    show = progress_for(sys.stderr, long)
    summary = summarize(data, progress=show)
    text = render(summary, top)
    if fmt == "json":
        click.echo(json.dumps(dict(to_json(summary, top), trace=path), indent=1))
    else:
        click.echo(text)
    if not summary.slices and (png or page):
        raise click.ClickException("nothing to draw: the trace holds no slice")
    if png:
        timeline.write_png(summary, png, arrows=arrows, progress=show)
        if fmt == "text":
            click.echo(f"\ntimeline: {png}")
    if page:
        timeline.write_html(summary, page, text, arrows=arrows, progress=show)
        if fmt == "text":
            click.echo(f"{'' if png else chr(10)}page: {page}")
