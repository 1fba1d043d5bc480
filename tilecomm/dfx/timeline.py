"""A run's timeline as a picture: one lane per rank and track, each
instant coloured by what the lane was doing (the pieces of
``trace_summary``), arrows from the notifies to the waits they released, and
the critical path underlined.  PNG through matplotlib, or SVG inside one
self-contained HTML page with the summary beside it.

matplotlib is optional (``pip install 'tilecomm[plot]'``): it is imported by
the functions that draw, never by ``import tilecomm``."""
from __future__ import annotations

import html
import io

from .trace_summary import IDLE, Summary

# colour-blind-safe (Okabe-Ito), one per kind of self time
COLOURS = {"compute": "#0072B2", "task": "#56B4E9", "comm": "#009E73", "wait": "#E69F00",
           "blocked": "#D55E00", "collective": "#CC79A7", "other": "#999999"}
LEGEND = {"compute": "compute (dispatch)", "task": "task body", "comm": "notify / put / get",
          "wait": "wait", "blocked": "wait never released", "collective": "collective",
          "other": "orchestrator"}
ARROWS = 40                 # at most this many notify -> wait arrows: the longest waits'
MIN_WIDTH = 1 / 1500        # of the run: a slice narrower is drawn this wide, to be seen
COLUMNS = 1500              # a lane with more pieces is drawn a column of time at a time
LABELLED_WAITS = 3          # the longest waits get their source line written beside them
INSTALL = "pip install 'tilecomm[plot]'"


def available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def time_unit(span_us: float):
    """(divisor, name) that makes a run of ``span_us`` read in 1..2000."""
    if span_us < 2e3:
        return 1.0, "µs"
    if span_us < 2e6:
        return 1e3, "ms"
    return 1e6, "s"


def _piece_kind(s) -> str:
    if s.cat == "task":
        return "task"
    if s.cat == "blocked":
        return "blocked"
    return s.kind


def _short(line) -> str:
    """``file.py:38`` of a ``/path/file.py:38:9`` source line."""
    if not line:
        return "?"
    parts = str(line).rsplit(":", 2)
    base = parts[0].rsplit("/", 1)[-1]
    return f"{base}:{parts[1]}" if len(parts) == 3 else base


def figure(summary: Summary, *, arrows: int = ARROWS, progress=None):
    """The timeline as a matplotlib ``Figure`` (no GUI backend involved)."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    lanes = summary.lanes
    n = max(len(lanes), 1)
    fig = Figure(figsize=(13, 1.6 + 0.5 * n), dpi=110, layout="constrained")
    ax = fig.add_subplot()
    span = max(summary.duration, 1e-3)
    div, unit = time_unit(span)
    t0 = summary.start

    def x(t):
        return (t - t0) / div

    y_of = {ln.key: n - 1 - j for j, ln in enumerate(lanes)}     # rank 0 on top
    minw = span * MIN_WIDTH / div
    used = set()
    many = sum(len(p) for p in summary.pieces.values()) > 5000
    # ranks on alternating backgrounds: lanes of one rank read as one group
    for ln in lanes:
        if ln.rank % 2 == 1:
            ax.axhspan(y_of[ln.key] - 0.5, y_of[ln.key] + 0.5, color="#f2f2f2", zorder=0)
    items = lanes if progress is None else progress(lanes, "drawing lanes", len(lanes))
    for ln in items:
        bars: dict = {}
        for a, b, kind in _bars(summary, summary.pieces[ln.key]):
            bars.setdefault(kind, []).append((x(a), max((b - a) / div, minw)))
        y = y_of[ln.key]
        for kind, xs in bars.items():
            used.add(kind)
            ax.broken_barh(xs, (y - 0.32, 0.64), facecolors=COLOURS[kind],
                           edgecolors="white", linewidth=0.3, zorder=2, rasterized=many)
    _label_waits(ax, summary, x, y_of, span / div)
    drawn = _arrows(ax, summary, x, y_of, arrows)
    on_path = _critical_path(ax, summary, x, y_of)
    ax.set_yticks([y_of[ln.key] for ln in lanes],
                  [f"rank {ln.rank} · {ln.name}" for ln in lanes])
    ax.set_ylim(-0.6, n - 0.4)
    ax.set_xlim(-span * 0.005 / div, span * 1.005 / div)
    ax.set_xlabel(f"time since the first event ({unit})")
    ax.grid(axis="x", color="#dddddd", linewidth=0.6, zorder=0)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    handles = [Patch(facecolor=COLOURS[k], label=LEGEND[k]) for k in COLOURS if k in used]
    waits = sum(1 for w in summary.waits if w.notify is not None)
    if drawn:
        label = "notify → wait it released" if drawn == waits else \
            f"notify → wait ({drawn} longest of {waits})"
        handles.append(Line2D([], [], color="#333333", lw=1, marker=">", markersize=4,
                              label=label))
    if on_path:
        handles.append(Line2D([], [], color="black", lw=2.5, label="critical path"))
    ax.legend(handles=handles, loc="lower left", bbox_to_anchor=(0, 1.01), ncol=len(handles),
              frameon=False, fontsize=8, handlelength=1.6)
    ranks = len({ln.rank for ln in lanes})
    title = f"{summary.title}: " if summary.title else ""
    fig.suptitle(f"{title}{ranks} rank{'s' if ranks != 1 else ''}, "
                 f"{span / div:.3g} {unit}", x=0.01, ha="left", fontsize=11)
    return fig


def _bars(summary, pieces):
    """(start, end, kind) to draw for a lane's pieces.  A lane with more
    pieces than the picture has pixels is drawn a column at a time, each
    column in the kind that took most of its time (thousands of rectangles
    under one pixel each show nothing and take minutes to draw)."""
    busy = [(a, b, _piece_kind(summary.slices[i])) for a, b, i in pieces if i != IDLE]
    if len(busy) <= COLUMNS:
        return busy
    t0, width = summary.start, max(summary.duration, 1e-3) / COLUMNS
    cols = [dict() for _ in range(COLUMNS)]
    for a, b, kind in busy:
        c = min(int((a - t0) / width), COLUMNS - 1)
        while True:                     # split the piece over the columns it spans
            edge = t0 + (c + 1) * width
            part = min(b, edge) - a
            cols[c][kind] = cols[c].get(kind, 0.0) + max(part, 0.0)
            if b <= edge or c == COLUMNS - 1:
                break
            a, c = edge, c + 1
    out = []
    for c, spent in enumerate(cols):
        if not spent or sum(spent.values()) < width / 8:
            continue
        kind = max(spent, key=spent.get)
        a = t0 + c * width
        if out and out[-1][2] == kind and abs(out[-1][1] - a) < width / 2:
            out[-1] = (out[-1][0], a + width, kind)
        else:
            out.append((a, a + width, kind))
    return out


def _label_waits(ax, summary, x, y_of, width):
    """The longest waits' source lines, written inside their bars when they
    are wide enough to hold the text."""
    for w in summary.waits[:LABELLED_WAITS]:
        s = w.slice
        if x(s.end) - x(s.ts) < 0.08 * width:
            continue
        ax.text(x(s.ts) + (x(s.end) - x(s.ts)) / 2, y_of[s.lane], f"wait {_short(s.line)}",
                ha="center", va="center", fontsize=7, color="black", zorder=4, clip_on=True)


def _arrows(ax, summary, x, y_of, limit) -> int:
    """Arrows notify -> released wait for the ``limit`` longest waits (all
    of them would be a hairball on a long run)."""
    drawn = 0
    for w in summary.waits:
        if drawn >= limit:
            break
        n, s = w.notify, w.slice
        if n is None or n.lane not in y_of:
            continue
        y0, y1 = y_of[n.lane], y_of[s.lane]
        if y0 == y1:
            y0, y1 = y0 + 0.3, y1 + 0.3
        else:                       # from the notify's bar edge to the wait's
            d = 0.32 if y1 < y0 else -0.32
            y0, y1 = y0 - d, y1 + d
        ax.annotate("", xy=(x(s.end), y1), xytext=(x((n.ts + n.end) / 2), y0), zorder=5,
                    arrowprops=dict(arrowstyle="-|>", color="#333333", lw=0.9, alpha=0.8,
                                    shrinkA=0, shrinkB=0, mutation_scale=8))
        drawn += 1
    return drawn


def _critical_path(ax, summary, x, y_of) -> int:
    """A black rule under each segment of the critical path, joined where
    the path goes from one lane to another (two collections: a long path
    has thousands of segments, one artist each would take minutes)."""
    from matplotlib.collections import LineCollection

    rules, joins, prev = [], [], None
    for seg in summary.path:
        y = y_of[seg.lane.key] - 0.37     # just under its bar (bars span ±0.32)
        rules.append([(x(seg.start), y), (x(seg.end), y)])
        if prev is not None and prev != y:
            joins.append([(x(seg.start), prev), (x(seg.start), y)])
        prev = y
    ax.add_collection(LineCollection(rules, colors="black", linewidths=2.5, zorder=6,
                                     capstyle="butt"))
    ax.add_collection(LineCollection(joins, colors="black", linewidths=0.8, linestyles=":",
                                     zorder=6))
    return len(summary.path)


def write_png(summary: Summary, path: str, **kw) -> str:
    figure(summary, **kw).savefig(path, format="png")
    return path


def svg(summary: Summary, **kw) -> str:
    """The timeline as an ``<svg>`` element, its text kept as text (to be
    searched and selected in a page, not drawn as outlines)."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        figure(summary, **kw).savefig(buf, format="svg")
    text = buf.getvalue()
    return text[text.index("<svg"):]        # no XML prolog inside HTML


PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }}
svg {{ max-width: 100%; height: auto; }}
pre {{ background: #f6f6f6; padding: 1em; overflow-x: auto; font-size: 13px; }}
</style></head>
<body>
<h1>{title}</h1>
<p>One lane per rank and track; colours say what the lane was doing, arrows go from a
notify to the wait it released, the black rule is the critical path.
The trace itself opens at <a href="https://ui.perfetto.dev">ui.perfetto.dev</a>.</p>
{svg}
<h2>Summary</h2>
<pre>{text}</pre>
</body></html>
"""


def write_html(summary: Summary, path: str, text: str, **kw) -> str:
    """One self-contained page: the timeline (inline SVG) and ``text``."""
    page = PAGE.format(title=html.escape(f"tilecomm trace: {summary.title or 'run'}"),
                       svg=svg(summary, **kw), text=html.escape(text))
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)
    return path


__all__ = ["ARROWS", "COLOURS", "INSTALL", "available", "figure", "svg", "time_unit",
           "write_html", "write_png"]
