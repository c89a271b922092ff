"""Inline SVG pictures for the HTML reports (pure: data in, an ``<svg>`` string out).

The e2e distribution (a histogram with P50/P90/P99 and the budget lines), e2e over the run
(turn index on x, failed turns marked), every combination of a comparison side by side
(stacked P50 segment bars in rank order) and the per-fixture table. No script and no font from
anywhere: the page opens offline. Segment colours come from :mod:`voicelat.core.base.palette`, the
TUI's too. Every mark carries ``data-*`` attributes (its ns, its segment, its turn) so a test
reads the picture back with an XML parser rather than trusting its looks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from voicelat.core.base.display import NS_PER_MS, fmt_ms
from voicelat.core.base.palette import (
    BUDGET_COLOUR,
    FAILED_COLOUR,
    MARKER_COLOUR,
    POINT_COLOUR,
    ordered_segments,
    segment_colour,
)
from voicelat.core.base.stats import percentile
from voicelat.report.chartdata import Accuracy, Bin, FixtureRow, TurnPoint, nice_step_ns

SVG_NS = "http://www.w3.org/2000/svg"


@dataclass(frozen=True, slots=True)
class Frame:
    """A plot area inside an SVG of ``width`` x ``height`` (pixels), margins included."""

    width: float = 560.0
    height: float = 210.0
    left: float = 52.0
    right: float = 16.0
    top: float = 22.0
    bottom: float = 34.0

    @property
    def plot_w(self) -> float:
        return self.width - self.left - self.right

    @property
    def plot_h(self) -> float:
        return self.height - self.top - self.bottom

    @property
    def base_y(self) -> float:
        return self.top + self.plot_h


def _open(frame: Frame, cls: str, label: str, **data: object) -> str:
    attrs = "".join(f' data-{k.replace("_", "-")}="{escape(str(v))}"' for k, v in data.items())
    return (
        f'<svg xmlns="{SVG_NS}" class="{cls}" width="{frame.width:.0f}" height="{frame.height:.0f}" '
        f'viewBox="0 0 {frame.width:.0f} {frame.height:.0f}" role="img" '
        f'aria-label="{escape(label)}"{attrs}><title>{escape(label)}</title>'
    )


def _ms_ticks(frame: Frame, lo_ns: float, hi_ns: float, x: Any, *, along: str = "x") -> str:
    """Round-ms ticks and labels on the x axis (``along="x"``) or the y axis."""
    step = nice_step_ns(hi_ns - lo_ns, 6)
    t = (int(lo_ns) // step + (int(lo_ns) % step > 0)) * step
    parts = []
    while t <= hi_ns + 1:
        p = x(t)
        if along == "x":
            parts.append(
                f'<line x1="{p:.2f}" x2="{p:.2f}" y1="{frame.base_y:.1f}" '
                f'y2="{frame.base_y + 4:.1f}" stroke="#888"/><text class="tick" x="{p:.2f}" '
                f'y="{frame.base_y + 15:.1f}" text-anchor="middle">{fmt_ms(t)}</text>'
            )
        else:
            parts.append(
                f'<line x1="{frame.left - 4:.1f}" x2="{frame.left + frame.plot_w:.1f}" '
                f'y1="{p:.2f}" y2="{p:.2f}" stroke="#eee"/><text class="tick" '
                f'x="{frame.left - 6:.1f}" y="{p + 4:.2f}" text-anchor="end">{fmt_ms(t)}</text>'
            )
        t += step
    return "".join(parts)


def _vline(
    cls: str, at: float, frame: Frame, colour: str, label: str, row: int, **data: object
) -> str:
    attrs = "".join(f' data-{k}="{escape(str(v))}"' for k, v in data.items())
    dash = "4 2" if cls == "pctl" else "6 3"
    y_text = frame.top - 6 + 10 * row
    # Near the right edge the label goes left of its line, so it is not cut off.
    right = at + 3 + 6.5 * len(label) > frame.width - 2
    tx, anchor = (at - 3, "end") if right else (at + 3, "start")
    return (
        f'<line class="{cls}"{attrs} x1="{at:.2f}" x2="{at:.2f}" y1="{frame.top - 2:.1f}" '
        f'y2="{frame.base_y:.1f}" stroke="{colour}" stroke-dasharray="{dash}" '
        f'stroke-width="1.5"/><text class="mark" x="{tx:.2f}" y="{y_text:.1f}" '
        f'text-anchor="{anchor}" fill="{colour}">{escape(label)}</text>'
    )


def histogram_svg(
    bins: Sequence[Bin],
    marks: Mapping[int, float],
    budget: Mapping[int, float] | None = None,
    *,
    title: str = "e2e distribution",
    frame: Frame = Frame(),
) -> str:
    """Bars of turns per e2e bin; dashed P50/P90/P99 lines; the budget's e2e limits in red."""
    budget = budget or {}
    if not bins:
        return _open(frame, "histogram", title) + (
            f'<text x="{frame.left}" y="{frame.top + 20}">no headline turn to draw</text></svg>'
        )
    lo = float(bins[0].lo_ns)
    hi = max([float(bins[-1].hi_ns), *marks.values(), *budget.values()])
    top = max(b.count for b in bins)

    def x(ns: float) -> float:
        return frame.left + (ns - lo) / max(hi - lo, 1.0) * frame.plot_w

    def y(count: float) -> float:
        return frame.base_y - count / top * frame.plot_h

    n = sum(b.count for b in bins)
    parts = [_open(frame, "histogram", title, n=n)]
    for b in bins:
        x0, x1 = x(b.lo_ns), x(b.hi_ns)
        parts.append(
            f'<rect class="bin" data-lo-ns="{b.lo_ns}" data-hi-ns="{b.hi_ns}" '
            f'data-count="{b.count}" x="{x0 + 0.5:.2f}" y="{y(b.count):.2f}" '
            f'width="{max(x1 - x0 - 1, 0.5):.2f}" height="{frame.base_y - y(b.count):.2f}" '
            f'fill="{POINT_COLOUR}" fill-opacity="0.75"><title>{fmt_ms(b.lo_ns)}-'
            f"{fmt_ms(b.hi_ns)} ms: {b.count} turn(s)</title></rect>"
        )
    parts.append(_axes(frame, lo, hi, x, f"{top} turn(s)"))
    for row, (p, ns) in enumerate(sorted(marks.items())):
        parts.append(
            _vline(
                "pctl", x(ns), frame, MARKER_COLOUR, f"P{p} {fmt_ms(ns)}", row, p=p, ns=round(ns)
            )
        )
    for row, (p, ns) in enumerate(sorted(budget.items()), start=len(marks)):
        parts.append(
            _vline(
                "budget",
                x(ns),
                frame,
                BUDGET_COLOUR,
                f"budget P{p} {fmt_ms(ns)}",
                row,
                p=p,
                ns=round(ns),
            )
        )
    parts.append("</svg>")
    return "".join(parts)


def _axes(frame: Frame, lo: float, hi: float, x: Any, y_label: str) -> str:
    return (
        f'<line x1="{frame.left:.1f}" x2="{frame.left + frame.plot_w:.1f}" y1="{frame.base_y:.1f}" '
        f'y2="{frame.base_y:.1f}" stroke="#888"/>'
        + _ms_ticks(frame, lo, hi, x)
        + f'<text class="tick" x="{frame.left + frame.plot_w:.1f}" y="{frame.height - 2:.1f}" '
        f'text-anchor="end">e2e ms</text><text class="tick" x="4" y="{frame.top + 4:.1f}">'
        f"{escape(y_label)}</text>"
    )


def timeline_svg(
    points: Sequence[TurnPoint],
    marks: Mapping[int, float] | None = None,
    budget: Mapping[int, float] | None = None,
    *,
    title: str = "e2e over the run",
    frame: Frame = Frame(),
) -> str:
    """e2e of every turn by turn index: headline turns filled, excluded ones hollow, failed
    turns a red cross on the top edge; the P50 and budget lines across."""
    marks, budget = marks or {}, budget or {}
    values = [p.e2e_ns for p in points if p.e2e_ns is not None]
    parts = [_open(frame, "timeline", title, n=len(points))]
    if not points:
        return parts[0] + f'<text x="{frame.left}" y="{frame.top + 20}">no turn</text></svg>'
    first, last = points[0].index, points[-1].index
    hi = max([*values, *(v for p, v in marks.items() if p == 50), *budget.values(), NS_PER_MS])
    hi *= 1.05

    def x(index: float) -> float:
        return frame.left + (index - first + 0.5) / (last - first + 1) * frame.plot_w

    def y(ns: float) -> float:
        return frame.base_y - ns / hi * frame.plot_h

    parts.append(_ms_ticks(frame, 0, hi, y, along="y"))
    for p in points:
        cx = x(p.index)
        tip = f"turn {p.index} {p.fixture}: "
        if p.e2e_ns is None:
            cy = frame.top + 4
            parts.append(
                f'<path class="failed" data-index="{p.index}" d="M{cx - 4:.2f},{cy - 4:.2f} '
                f'L{cx + 4:.2f},{cy + 4:.2f} M{cx - 4:.2f},{cy + 4:.2f} L{cx + 4:.2f},{cy - 4:.2f}" '
                f'stroke="{FAILED_COLOUR}" stroke-width="2"><title>{escape(tip + "FAILED " + p.reason)}'
                "</title></path>"
            )
            continue
        fill = POINT_COLOUR if p.kind == "ok" else "none"
        parts.append(
            f'<circle class="turn" data-index="{p.index}" data-ns="{p.e2e_ns}" '
            f'data-kind="{p.kind}" cx="{cx:.2f}" cy="{y(p.e2e_ns):.2f}" r="3.2" fill="{fill}" '
            f'stroke="{POINT_COLOUR}"><title>{escape(tip + fmt_ms(p.e2e_ns) + " ms")}'
            f"{escape(' (' + p.reason + ')' if p.reason else '')}</title></circle>"
        )
    lines = (
        [("pctl", marks[50], MARKER_COLOUR, f"P50 {fmt_ms(marks[50])}", 50)] if 50 in marks else []
    )
    lines += [
        ("budget", v, BUDGET_COLOUR, f"budget P{q} {fmt_ms(v)}", q)
        for q, v in sorted(budget.items())
    ]
    for cls, ns, colour, label, q in lines:
        parts.append(
            f'<line class="{cls}" data-p="{q}" data-ns="{round(ns)}" x1="{frame.left:.1f}" '
            f'x2="{frame.left + frame.plot_w:.1f}" y1="{y(ns):.2f}" y2="{y(ns):.2f}" '
            f'stroke="{colour}" stroke-dasharray="4 2"/><text class="mark" fill="{colour}" '
            f'x="{frame.left + frame.plot_w - 2:.1f}" y="{y(ns) - 3:.2f}" text-anchor="end">'
            f"{escape(label)}</text>"
        )
    parts.append(
        f'<line x1="{frame.left:.1f}" x2="{frame.left + frame.plot_w:.1f}" y1="{frame.base_y:.1f}" '
        f'y2="{frame.base_y:.1f}" stroke="#888"/><text class="tick" x="{frame.left:.1f}" '
        f'y="{frame.base_y + 15:.1f}">turn {first}</text><text class="tick" '
        f'x="{frame.left + frame.plot_w:.1f}" y="{frame.base_y + 15:.1f}" text-anchor="end">'
        f'turn {last}</text><text class="tick" x="4" y="12">e2e ms</text></svg>'
    )
    return "".join(parts)


def combos_svg(
    combos: Sequence[Mapping[str, Any]],
    accuracy: Mapping[str, Accuracy] | None = None,
    *,
    title: str = "every combination at P50",
) -> str:
    """One stacked bar per combination, in rank order: the P50 band's segments (they sum to
    its mean e2e), the exact P50 a tick on the bar; WER after the figures when known."""
    accuracy = accuracy or {}
    rows = sorted(combos, key=lambda c: (c.get("rank") is None, c.get("rank") or 0))
    label_w, chart_w, value_w, row_h = 170.0, 380.0, 210.0, 22.0
    bands = [(c, (c.get("waterfall") or {}).get("p50")) for c in rows]
    scale = max(
        [1.0, *(float(max(b["mean_e2e_ns"], b["e2e_percentile_ns"])) for _, b in bands if b)]
    )
    frame = Frame(width=label_w + chart_w + value_w, height=row_h * len(rows) + 40, top=8)
    parts = [_open(frame, "combos", title, n=len(rows))]
    for i, (c, band) in enumerate(bands):
        y = frame.top + i * row_h
        name = f"{c.get('rank') or '-'}. {c.get('name', '?')}"
        parts.append(f'<text class="lbl" x="4" y="{y + 15:.1f}">{escape(name[:28])}</text>')
        if c.get("status") != "ok" or not band:
            why = str(c.get("failure") or c.get("status") or "no P50 band")
            parts.append(
                f'<text class="failed-combo" data-combo="{escape(str(c.get("name")))}" '
                f'x="{label_w:.1f}" y="{y + 15:.1f}" fill="{FAILED_COLOUR}">'
                f"{escape(str(c.get('status', '')).upper())}: {escape(why[:70])}</text>"
            )
            continue
        parts.append(_stacked_bar(c, band, y, label_w, chart_w / scale, row_h))
        acc = accuracy.get(str(c.get("name")))
        wer = "" if acc is None or acc.wer is None else f" · WER {acc.wer:.1%}"
        parts.append(
            f'<text class="val" x="{label_w + chart_w + 6:.1f}" y="{y + 15:.1f}">'
            f"{fmt_ms(band['mean_e2e_ns'])} ms · P50 {fmt_ms(band['e2e_percentile_ns'])}{wer}"
            "</text>"
        )
    axis = Frame(
        width=frame.width, height=frame.height, left=label_w, right=value_w, top=8, bottom=32
    )
    parts.append(_axes(axis, 0.0, scale, lambda ns: label_w + ns / scale * chart_w, ""))
    parts.append("</svg>")
    return "".join(parts)


def spread_svg(
    combos: Sequence[Mapping[str, Any]],
    e2e: Mapping[str, Sequence[int]],
    *,
    title: str = "e2e of every turn, every combination",
) -> str:
    """One row per combination in rank order on one e2e axis: a tick per headline turn, the
    P50-P90 box and the P99 mark (from ``e2e``: combination name -> headline e2e ns)."""
    rows = [
        c
        for c in sorted(combos, key=lambda c: (c.get("rank") is None, c.get("rank") or 0))
        if e2e.get(str(c.get("name")))
    ]
    label_w, chart_w, row_h = 170.0, 520.0, 24.0
    every = [v for c in rows for v in e2e[str(c.get("name"))]]
    fastest, slowest = (float(min(every)), float(max(every))) if every else (0.0, 1.0)
    pad = max((slowest - fastest) * 0.05, NS_PER_MS)
    lo, hi = max(0.0, fastest - pad), slowest + pad
    frame = Frame(width=label_w + chart_w + 20, height=row_h * len(rows) + 44, top=8)
    frame = Frame(frame.width, frame.height, left=label_w, right=20, top=8, bottom=36)

    def x(ns: float) -> float:
        return label_w + (ns - lo) / (hi - lo) * chart_w

    parts = [_open(frame, "spread", title, n=len(rows))]
    for i, c in enumerate(rows):
        name = str(c.get("name"))
        values = sorted(e2e[name])
        marks = {p: percentile(values, p) for p in (50, 90, 99)}
        y = frame.top + i * row_h
        label = f"{c.get('rank') or '-'}. {name}"[:28]
        parts.append(
            f'<text class="lbl" x="4" y="{y + 15:.1f}">{escape(label)}'
            f'</text><rect class="box" data-combo="{escape(name)}" data-p50-ns="{round(marks[50])}" '
            f'data-p90-ns="{round(marks[90])}" x="{x(marks[50]):.2f}" y="{y + 4:.1f}" '
            f'width="{max(x(marks[90]) - x(marks[50]), 1.0):.2f}" height="{row_h - 8:.1f}" '
            f'fill="{POINT_COLOUR}" fill-opacity="0.2" stroke="{POINT_COLOUR}"/>'
        )
        parts.extend(
            f'<line class="tick-turn" data-combo="{escape(name)}" data-ns="{v}" x1="{x(v):.2f}" '
            f'x2="{x(v):.2f}" y1="{y + 6:.1f}" y2="{y + row_h - 6:.1f}" stroke="{POINT_COLOUR}"/>'
            for v in values
        )
        parts.append(
            f'<line class="p99" data-combo="{escape(name)}" data-ns="{round(marks[99])}" '
            f'x1="{x(marks[99]):.2f}" x2="{x(marks[99]):.2f}" y1="{y + 2:.1f}" '
            f'y2="{y + row_h - 2:.1f}" stroke="{MARKER_COLOUR}" stroke-width="2"/>'
        )
    parts.append(_axes(frame, lo, hi, x, ""))
    parts.append("</svg>")
    return "".join(parts)


def _stacked_bar(
    c: Mapping[str, Any],
    band: Mapping[str, Any],
    y: float,
    left: float,
    px_per_ns: float,
    row_h: float,
) -> str:
    segs: Mapping[str, int] = band.get("segments_ns") or {}
    name = escape(str(c.get("name")))
    parts, start = [], 0
    for s in ordered_segments(k for k, v in segs.items() if v):
        dur = max(int(segs.get(s, 0)), 0)
        if not dur:
            continue  # the contract lists it, this band has none of it
        parts.append(
            f'<rect class="seg" data-combo="{name}" data-segment="{escape(s)}" data-ns="{dur}" '
            f'x="{left + start * px_per_ns:.2f}" y="{y + 3:.1f}" width="{dur * px_per_ns:.2f}" '
            f'height="{row_h - 6:.1f}" fill="{segment_colour(s)}"><title>{name} {escape(s)} '
            f"{fmt_ms(dur)} ms</title></rect>"
        )
        start += dur
    exact = int(band["e2e_percentile_ns"])
    mx = left + exact * px_per_ns
    parts.append(
        f'<line class="pctl" data-combo="{name}" data-ns="{exact}" x1="{mx:.2f}" x2="{mx:.2f}" '
        f'y1="{y + 1:.1f}" y2="{y + row_h - 1:.1f}" stroke="{MARKER_COLOUR}" stroke-width="2"/>'
    )
    return "".join(parts)


def legend_html(segments: Sequence[str]) -> str:
    """The colour key: one swatch per segment, from the shared palette."""
    return (
        '<p class="legend">'
        + "".join(
            f'<span data-segment="{escape(s)}"><i style="background:{segment_colour(s)}"></i>'
            f"{escape(s)}</span>"
            for s in segments
        )
        + "</p>"
    )


def fixture_table_html(rows: Sequence[FixtureRow]) -> str:
    """Per fixture: n, e2e P50 and P90, and the dominant segment with its colour."""
    body = []
    for r in rows:
        dom = (
            f'<i class="sw" style="background:{segment_colour(r.dominant)}"></i>'
            f"{escape(r.dominant)} {fmt_ms(r.dominant_ns)} ms"
            if r.dominant
            else "-"
        )
        body.append(
            f'<tr data-fixture="{escape(r.fixture)}"><td>{escape(r.fixture)}</td><td>{r.n}</td>'
            f"<td>{r.failed}</td><td>{fmt_ms(r.p50_ns)}</td><td>{fmt_ms(r.p90_ns)}</td>"
            f"<td>{dom}</td></tr>"
        )
    return (
        '<table class="fixtures"><thead><tr><th>fixture</th><th>n</th><th>failed</th>'
        "<th>e2e P50 ms</th><th>e2e P90 ms</th><th>dominant segment (median)</th></tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table>"
    )


#: Styles the pictures need, for any page that embeds them.
PICTURE_CSS = """
svg text{font-size:11px;font-family:system-ui,sans-serif}
svg .mark{font-size:10px}svg .tick{fill:#555}
.legend span{display:inline-block;margin-right:1em}.legend i,i.sw{display:inline-block;width:.9em;height:.9em;margin-right:.3em;vertical-align:middle}
"""


__all__ = [
    "PICTURE_CSS",
    "Frame",
    "combos_svg",
    "fixture_table_html",
    "histogram_svg",
    "legend_html",
    "spread_svg",
    "timeline_svg",
]
