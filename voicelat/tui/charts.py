"""Pure rich renderables of the pictures the HTML reports draw, for the terminal.

The e2e distribution (a histogram on its side, P50/P90/P99 and the budget marked), e2e over
the run (one column per turn, failed turns a red cross), the per-fixture table and every
combination of a comparison as stacked P50 bars. They take the data of
:mod:`voicelat.report.chartdata`, so the terminal and the HTML show the same numbers, and the
colours of :mod:`voicelat.core.base.palette`, so a segment is one colour in both. No Textual here:
each is tested by printing it to a rich ``Console`` of a known width.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.columns import Columns
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.table import Table
from rich.text import Text

from voicelat.core.base.display import fmt_ms
from voicelat.core.base.palette import (
    BUDGET_COLOUR,
    FAILED_COLOUR,
    POINT_COLOUR,
    ordered_segments,
    segment_colour,
)
from voicelat.core.base.turn import Turn
from voicelat.report.chartdata import (
    Accuracy,
    Bin,
    FixtureRow,
    TurnPoint,
    accuracy,
    accuracy_text,
    budget_lines,
    fixture_rows,
    fixtures_repeat,
    headline_e2e,
    histogram,
    percentile_marks,
    turn_points,
)
from voicelat.tui.calls import calls_view

DIM = "grey50"
MARK_STYLE = "bold"
#: Eighth blocks, for the top cell of a column (0 = empty).
_EIGHTHS = " ▁▂▃▄▅▆▇█"


def _bar(length: float, width: int) -> str:
    """A horizontal bar of ``length`` cells (fractional), at most ``width``, in eighths."""
    length = max(0.0, min(float(width), length))
    full = int(length)
    rest = int((length - full) * 8)
    return "█" * full + ("▏▎▍▌▋▊▉"[rest - 1] if rest else "")


@dataclass
class HistogramView:
    """One row per e2e bin: its range, a bar of its count, and the marks that fall in it."""

    bins: Sequence[Bin]
    marks: Mapping[int, float]
    budget: Mapping[int, float] = field(default_factory=dict)

    def _notes(self, b: Bin, last: bool) -> Text:
        out = Text()
        marks = [(f"P{p}", ns, MARK_STYLE) for p, ns in sorted(self.marks.items())]
        marks += [
            (f"budget P{p}", ns, "bold " + BUDGET_COLOUR) for p, ns in sorted(self.budget.items())
        ]
        for label, ns, style in marks:
            if b.lo_ns <= ns < b.hi_ns or (last and ns == b.hi_ns):
                out.append(f" ◀ {label} {fmt_ms(ns)}", style=style)
            elif last and ns > b.hi_ns:
                # Past the slowest turn: said so, not drawn as if a bin held it.
                out.append(f" ▶ {label} {fmt_ms(ns)} beyond", style=style)
        return out

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if not self.bins:
            yield Text("no headline turn: nothing to draw", style=DIM)
            return
        label_w = max(len(f"{fmt_ms(b.lo_ns)}–{fmt_ms(b.hi_ns)} ms") for b in self.bins)
        count_w = len(str(max(b.count for b in self.bins)))
        notes = [self._notes(b, i == len(self.bins) - 1) for i, b in enumerate(self.bins)]
        # The bars get what the labels and the marks leave: a mark is never wrapped away.
        width = max(8, options.max_width - label_w - count_w - 3 - max(len(n) for n in notes))
        top = max(b.count for b in self.bins)
        for b, note in zip(self.bins, notes, strict=True):
            row = Text(f"{fmt_ms(b.lo_ns)}–{fmt_ms(b.hi_ns)} ms".rjust(label_w) + " ")
            row.append(_bar(b.count / top * width, width).ljust(width), style=POINT_COLOUR)
            row.append(f" {b.count:>{count_w}}")
            row.append_text(note)
            yield row


@dataclass
class TimelineView:
    """e2e of each turn by turn index: one column per turn (or per group of turns when they
    outnumber the columns: the group's largest e2e), a red ✗ on top for a failed turn."""

    points: Sequence[TurnPoint]
    marks: Mapping[int, float] = field(default_factory=dict)
    budget: Mapping[int, float] = field(default_factory=dict)
    height: int = 8

    def columns(self, width: int) -> list[list[TurnPoint]]:
        """The turns of each column, in run order."""
        n = len(self.points)
        cols = max(1, min(width, n))
        return [list(self.points[i * n // cols : (i + 1) * n // cols]) for i in range(cols)]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if not self.points:
            yield Text("no turn yet", style=DIM)
            return
        axis_w = 7
        cols = self.columns(max(4, options.max_width - axis_w - 1))
        values = [p.e2e_ns for p in self.points if p.e2e_ns is not None]
        lo, hi = self.value_range(values)
        lines = self._rows(cols, lo, hi)
        for r, line in enumerate(lines):
            at = {0: hi, len(lines) - 1: lo + (hi - lo) / len(lines)}.get(r)
            label = "" if at is None else fmt_ms(at)
            yield Text(label.rjust(axis_w - 1) + " ", style=DIM) + line
        first, last = self.points[0].index, self.points[-1].index
        left, right = f"turn {first}", f"turn {last}"
        # Run order left to right; the last index at the right edge when there is room.
        room = len(cols) - len(right)
        foot = left if first == last else (left.ljust(room) if room > len(left) else left + "  ")
        foot += "" if first == last else right
        yield Text(" " * axis_w + foot, style=DIM)
        legend = Text(" " * axis_w)
        legend.append("█ headline  ", style=POINT_COLOUR)
        legend.append("░ warm-up/cold  ", style=POINT_COLOUR)
        legend.append("✗ failed", style=FAILED_COLOUR)
        if 50 in self.marks:
            legend.append(f"  ┄ P50 {fmt_ms(self.marks[50])} ms", style=MARK_STYLE)
        for p, ns in sorted(self.budget.items()):
            where = "" if ns <= hi else " (above the chart)"
            legend.append(f"  ┄ budget P{p} {fmt_ms(ns)} ms{where}", style=BUDGET_COLOUR)
        yield legend

    def value_range(self, values: Sequence[int]) -> tuple[float, float]:
        """The e2e the rows span: from a little under the fastest turn (not from 0, so the
        turn-to-turn spread fills the rows) to a little over the slowest, P50 and budget."""
        slowest = max([*values, self.marks.get(50, 0.0), 1.0])
        # A budget far above every turn would squash the turns into the bottom rows.
        near = [b for b in self.budget.values() if b <= slowest * 1.25]
        top = max([slowest, *near])
        low = min([*values, *near, self.marks.get(50, top)], default=0.0)
        pad = max((top - low) * 0.1, 1.0)
        return max(0.0, low - pad), top + pad

    def _rows(self, cols: Sequence[Sequence[TurnPoint]], lo: float, hi: float) -> list[Text]:
        h = self.height
        lines = [Text() for _ in range(h)]
        guide = {self._row_of(ns, lo, hi): BUDGET_COLOUR for ns in self.budget.values() if ns <= hi}
        if 50 in self.marks:
            guide.setdefault(self._row_of(self.marks[50], lo, hi), MARK_STYLE)
        for col in cols:
            failed = any(p.e2e_ns is None for p in col)
            ok = [p for p in col if p.e2e_ns is not None]
            top = max((p.e2e_ns or 0 for p in ok), default=0)
            excluded = bool(ok) and all(p.kind != "ok" for p in ok)
            cells = (top - lo) / (hi - lo) * h * 8 if ok else 0.0  # in eighths of a row
            for r in range(h):
                from_bottom = h - 1 - r
                fill = max(0, min(8, int(cells - from_bottom * 8)))
                if failed and r == 0:
                    lines[r].append("✗", style="bold " + FAILED_COLOUR)
                elif fill:
                    ch = "░" if excluded else _EIGHTHS[fill]
                    lines[r].append(ch, style=POINT_COLOUR)
                elif r in guide:
                    lines[r].append("┄", style=guide[r])
                else:
                    lines[r].append(" ")
        return lines

    def _row_of(self, ns: float, lo: float, hi: float) -> int:
        frac = (ns - lo) / (hi - lo)
        return max(0, min(self.height - 1, self.height - 1 - int(frac * self.height)))


def fixture_table(rows: Sequence[FixtureRow]) -> Table:
    """Per fixture: n, failed, e2e P50 and P90, the dominant segment in its colour."""
    t = Table(box=None, header_style="bold", pad_edge=False)
    t.add_column("fixture")
    for col in ("n", "failed", "P50 ms", "P90 ms"):
        t.add_column(col, justify="right")
    t.add_column("dominant segment (median)")
    for r in rows:
        dom = (
            Text(f"█ {r.dominant} {fmt_ms(r.dominant_ns)} ms", style=segment_colour(r.dominant))
            if r.dominant
            else Text("-", style=DIM)
        )
        t.add_row(r.fixture, str(r.n), str(r.failed), fmt_ms(r.p50_ns), fmt_ms(r.p90_ns), dom)
    return t


def legend(segments: Sequence[str]) -> Columns:
    """The colour key, one swatch per segment; wraps between entries, never inside one."""
    entries = [Text.assemble(("█ ", segment_colour(s)), s) for s in segments]
    return Columns(entries, padding=(0, 2))


@dataclass
class CombosView:
    """Every combination as one stacked bar of its P50 band's segments, in rank order, on
    one axis; the exact P50 a ``│`` on the bar; WER after the figures when known."""

    combos: Sequence[Mapping[str, Any]]
    accuracy: Mapping[str, Accuracy] = field(default_factory=dict)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        rows = sorted(self.combos, key=lambda c: (c.get("rank") is None, c.get("rank") or 0))
        bands = [(c, (c.get("waterfall") or {}).get("p50")) for c in rows]
        scale = max(
            [1.0, *(float(max(b["mean_e2e_ns"], b["e2e_percentile_ns"])) for _, b in bands if b)]
        )
        name_w = min(28, max([len(str(c.get("name"))) for c in rows] + [4]) + 4)
        width = max(10, options.max_width - name_w - 34)
        for c, band in bands:
            head = Text(f"{c.get('rank') or '-'}. {c.get('name')}"[:name_w].ljust(name_w))
            if c.get("status") != "ok" or not band:
                why = c.get("failure") or c.get("status")
                yield head + Text(f"{str(c.get('status')).upper()}: {why}", style=FAILED_COLOUR)
                continue
            yield head + self._bar(band, width / scale, width) + self._figures(c, band)
        segs = [s for _, b in bands if b for s, v in (b.get("segments_ns") or {}).items() if v]
        yield legend(ordered_segments(segs))

    def _bar(self, band: Mapping[str, Any], per_ns: float, width: int) -> Text:
        segs: Mapping[str, int] = band.get("segments_ns") or {}
        bar, at = Text(), 0.0
        for s in ordered_segments(k for k, v in segs.items() if v):
            a, at = round(at), at + max(int(segs.get(s, 0)), 0) * per_ns
            if round(at) > a:
                bar.append("█" * (round(at) - a), style=segment_colour(s))
        bar.pad_right(width - len(bar))
        mark = min(width - 1, round(int(band["e2e_percentile_ns"]) * per_ns))
        bar = bar[:mark] + Text("│", style=MARK_STYLE) + bar[mark + 1 :]
        return bar

    def _figures(self, c: Mapping[str, Any], band: Mapping[str, Any]) -> Text:
        acc = self.accuracy.get(str(c.get("name")))
        wer = "" if acc is None or acc.wer is None else f" · WER {acc.wer:.1%}"
        return Text(
            f" {fmt_ms(band['mean_e2e_ns'])} ms · P50 {fmt_ms(band['e2e_percentile_ns'])}{wer}"
        )


def run_charts(turns: Sequence[Turn], budget: Mapping[str, object]) -> Group:
    """Every picture of one run, titled: distribution, e2e over the run, per fixture, WER."""
    values = headline_e2e(turns)
    marks = percentile_marks(values)
    lines = budget_lines(budget)
    rows = fixture_rows(turns)
    title = "bold"
    calls = calls_view(turns)
    call_parts: list[RenderableType] = (
        [
            Text("Calls (caller / agent at the ear; dots: each wait, its ms)", style=title),
            calls,
            Text(),
        ]
        if calls is not None
        else []
    )
    return Group(
        *call_parts,
        Text(f"e2e distribution (n={len(values)} headline turns)", style=title),
        HistogramView(histogram(values, target_bins=10), marks, lines),
        Text(),
        Text("e2e over the run", style=title),
        TimelineView(turn_points(turns), marks, lines),
        Text(),
        Text("Per fixture" + ("" if fixtures_repeat(rows) else " (each ran once)"), style=title),
        fixture_table(rows),
        Text(),
        Text(accuracy_text(accuracy(turns))),
    )


__all__ = [
    "CombosView",
    "HistogramView",
    "TimelineView",
    "fixture_table",
    "legend",
    "run_charts",
]
