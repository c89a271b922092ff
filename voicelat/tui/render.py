"""Pure renderables: the waterfalls, the live timeline, the tables, the turn detail, the status line.

Every function here takes plain data (turns, bands, the model) and returns a rich renderable;
none touches Textual, so each is unit-tested by printing it to a rich ``Console`` of a known
width. Widths adapt at render time (``__rich_console__`` gets the space the widget has).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.table import Table
from rich.text import Text

from voicelat.core.base.contract import SEGMENTS, milestone_names
from voicelat.core.base.display import fmt_ms as core_fmt_ms
from voicelat.core.base.palette import SEGMENT_COLOURS, ordered_segments, segment_colour
from voicelat.core.base.stats import Band, Distribution
from voicelat.core.base.turn import Turn
from voicelat.report.text import provider_clock
from voicelat.tui.model import (
    LIVE_MILESTONES,
    NS_PER_MS,
    SPAN_LABELS,
    SPAN_ORDER,
    BudgetVerdict,
    LiveTurn,
    RunModel,
    e2e_budget_ns,
    fmt_ms,
    judge,
    round_to_total,
)

#: One colour per segment, the HTML reports' too (voicelat.core.base.palette), so a segment keeps its
#: colour in every picture; unknown names get the palette's fallback colour.
SEGMENT_STYLES: dict[str, str] = dict(SEGMENT_COLOURS)
OVER_STYLE = "bold red"
BUDGET_STYLE = "bold bright_red"
MARKER_STYLE = "bold bright_white"
DIM = "grey50"

#: Width of the label column of a waterfall row: flag (2) + name (16) + value (6) + " ms ".
LABEL_WIDTH = 28


def nice_ceiling(value: float) -> float:
    """The smallest "round" number (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8 x 10^k) >= value.

    Axis ends on round numbers so tick labels are readable and the axis does not jump on
    every new turn.
    """
    if value <= 0:
        return 1.0
    mag = 10 ** int(f"{value:e}".split("e")[1])
    for step in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if step * mag >= value:
            return float(step * mag)
    return float(10 * mag)


def _cell(ns: float, scale: float, width: int) -> int:
    return max(0, min(width - 1, round(ns * scale)))


def _axis(width: int, axis_ns: float, budget_ns: float | None, budget_label: str) -> list[Text]:
    """A ruler under the bars and its labels: 0, the middle, the end, and the budget."""
    scale = width / axis_ns
    ruler = Text("─" * width, style=DIM)
    labels = Text(" " * width)
    if budget_ns is not None:
        # The budget label goes first: the round-number labels give way to it, not the reverse.
        b = _cell(budget_ns, scale, width)
        ruler = _overwrite(ruler, b, "┻", BUDGET_STYLE)
        labels = _place(labels, b - len(budget_label) // 2, budget_label, BUDGET_STYLE, force=True)
    left = "0"
    mid = f"{core_fmt_ms(axis_ns / 2)}"
    right = f"{core_fmt_ms(axis_ns)} ms"
    labels = _place(labels, 0, left, DIM)
    labels = _place(labels, width // 2 - len(mid) // 2, mid, DIM)
    labels = _place(labels, width - len(right), right, DIM)
    return [ruler, labels]


def _place(line: Text, at: int, text: str, style: str, *, force: bool = False) -> Text:
    """``line`` with ``text`` written at ``at`` if those cells are blank (or ``force``)."""
    plain = line.plain
    at = max(0, min(len(plain) - len(text), at))
    if not force and plain[at : at + len(text)].strip():
        return line
    return _overwrite(line, at, text, style)


def _overwrite(line: Text, at: int, text: str, style: str) -> Text:
    out = line[:at]
    out.append(text, style=style)
    out.append_text(line[at + len(text) :])
    return out


@dataclass
class Waterfall:
    """Contiguous segments drawn one per row, each starting where the one before ended.

    The rows sum to ``total_ns`` (the segments are the critical path, DESIGN §2); the label
    numbers are rounded so that they add up exactly to the total printed on the last row.
    A ``marker`` (an exact percentile) and a ``budget_ns`` line share the same axis.
    """

    segments: Mapping[str, float]
    total_ns: float
    total_label: str = "e2e"
    marker: tuple[str, float] | None = None
    budget_ns: float | None = None
    budget_label: str = "budget"
    crossing: str | None = None
    own_limit: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    order: Sequence[str] = SEGMENTS

    def label_ms(self) -> tuple[dict[str, int], int]:
        """Per-segment ms as printed, and the printed total they sum to."""
        total_ms = round(self.total_ns / NS_PER_MS)
        values = {s: max(0.0, float(self.segments.get(s, 0.0))) / NS_PER_MS for s in self.order}
        return round_to_total(values, total_ms), total_ms

    def axis_ns(self) -> float:
        """The axis end: a round number past the total, the marker and the budget line."""
        far = max(
            self.total_ns,
            self.marker[1] if self.marker else 0.0,
            self.budget_ns or 0.0,
            NS_PER_MS,
        )
        return nice_ceiling(far * 1.04)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = max(10, options.max_width - LABEL_WIDTH)
        axis_ns = self.axis_ns()
        scale = width / axis_ns
        budget_cell = None if self.budget_ns is None else _cell(self.budget_ns, scale, width)
        ms, total_ms = self.label_ms()
        pad = " " * LABEL_WIDTH

        if self.marker is not None:
            label, at_ns = self.marker
            m = _cell(at_ns, scale, width)
            text = f"{label} {core_fmt_ms(at_ns)} ms"
            line = Text(" " * width)
            line = _overwrite(line, m, "▼", MARKER_STYLE)
            # The label sits left of the marker when it would run off the right edge.
            start = m + 2 if m + 2 + len(text) <= width else max(0, m - 1 - len(text))
            line = _place(line, start, text, MARKER_STYLE, force=True)
            yield Text(pad) + line

        cum = 0.0
        for name in self.order:
            dur = max(0.0, float(self.segments.get(name, 0.0)))
            a, b = round(cum * scale), round((cum + dur) * scale)
            cum += dur
            bar = Text(" " * width)
            style = segment_colour(name)
            if name == self.crossing:
                style = OVER_STYLE
            if b > a:
                bar = _overwrite(
                    bar, min(a, width - 1), "█" * (min(b, width) - min(a, width)), style
                )
            elif dur > 0:
                # Shorter than one cell: a hairline, so a tiny segment is not mistaken for none.
                bar = _overwrite(bar, min(a, width - 1), "▏", style)
            if budget_cell is not None:
                under = bar.plain[budget_cell]
                bar = _overwrite(bar, budget_cell, "┃" if under == " " else "╋", BUDGET_STYLE)
            flag, name_style = "  ", ""
            if name == self.crossing:
                flag, name_style = "▶ ", OVER_STYLE
            elif name in self.own_limit:
                flag, name_style = "! ", "bold yellow"
            head = Text(flag, style=OVER_STYLE if flag.strip() else "")
            head.append(f"{name:<16}", style=name_style)
            head.append(f"{ms[name]:>6} ms ")
            yield head + bar

        stacked = Text(" " * width)
        cum = 0.0
        for name in self.order:
            dur = max(0.0, float(self.segments.get(name, 0.0)))
            a, b = round(cum * scale), round((cum + dur) * scale)
            cum += dur
            if b > a:
                style = OVER_STYLE if name == self.crossing else segment_colour(name)
                stacked = _overwrite(
                    stacked, min(a, width - 1), "█" * (min(b, width) - min(a, width)), style
                )
        if budget_cell is not None:
            under = stacked.plain[budget_cell]
            stacked = _overwrite(stacked, budget_cell, "┃" if under == " " else "╋", BUDGET_STYLE)
        head = Text("  ")
        head.append(f"{self.total_label:<16}", style="bold")
        head.append(f"{total_ms:>6} ms ", style="bold")
        yield head + stacked
        for line in _axis(width, axis_ns, self.budget_ns, self.budget_label):
            yield Text(pad) + line


def turn_waterfall(turn: Turn, budget: Mapping[str, object], p: int) -> Waterfall:
    """The settled waterfall of one finished turn, against the e2e budget at ``p``."""
    limit = e2e_budget_ns(dict(budget), p)
    # A speech-to-speech turn's bars are the S2S path's (endpointing, model, ...).
    order = ordered_segments(turn.segments)
    segments = {s: float(turn.segments.get(s, 0)) for s in order}
    total = float(turn.e2e_ns if turn.e2e_ns is not None else sum(segments.values()))
    verdict = judge(p, total, segments, dict(budget))
    return Waterfall(
        segments=segments,
        total_ns=total,
        total_label="e2e",
        budget_ns=limit,
        budget_label=f"P{p} budget {core_fmt_ms(limit)}" if limit else "budget",
        crossing=verdict.crossing if verdict.over else None,
        order=order,
    )


def band_waterfall(band: Band, verdict: BudgetVerdict) -> Waterfall:
    """The waterfall at a percentile: the band's mean composition, its exact percentile marked."""
    return Waterfall(
        segments=band.segments,
        order=ordered_segments(k for k, v in band.segments.items() if v),
        total_ns=band.mean_e2e,
        total_label="band mean e2e",
        marker=(f"P{band.p} e2e", band.e2e_percentile),
        budget_ns=verdict.limit_ns,
        budget_label=(
            f"P{band.p} budget {core_fmt_ms(verdict.limit_ns)}" if verdict.limit_ns else ""
        ),
        crossing=verdict.crossing if verdict.over else None,
        own_limit=verdict.own_limit,
    )


def band_caption(band: Band, *, short: bool = False) -> str:
    """What the bars are made of, with n: ``n=14 warm · bars: mean of 1 turn around P90``.

    ``short`` leaves out what a title already says (the percentile, "warm").
    """
    turns = "turn" if band.band_n == 1 else "turns"
    if short:
        return f"n={band.n} · bars: mean of {band.band_n} {turns}"
    return f"n={band.n} warm · bars: mean of {band.band_n} {turns} around P{band.p}"


def verdict_text(band: Band, verdict: BudgetVerdict) -> Text:
    """The exact percentile against the budget in words, and segments over their own limits."""
    p = band.p
    out = Text()
    if verdict.limit_ns is None:
        out.append(f"no P{p} e2e budget set ([budget.e2e] p{p}_ms)", style=DIM)
    elif verdict.over:
        over = band.e2e_percentile - verdict.limit_ns
        out.append(
            f"✗ P{p} over budget {core_fmt_ms(verdict.limit_ns)} ms by {core_fmt_ms(over)} ms",
            style=OVER_STYLE,
        )
        if verdict.crossing:
            out.append(" ▶ ", style=OVER_STYLE)
            out.append(verdict.crossing, style=OVER_STYLE + " reverse")
    else:
        room = verdict.limit_ns - band.e2e_percentile
        out.append(
            f"✓ P{p} within budget {core_fmt_ms(verdict.limit_ns)} ms "
            f"({core_fmt_ms(room)} ms headroom)",
            style="green",
        )
    if verdict.own_limit:
        # One line for all of them: the pane has room for two lines of verdict.
        out.append("\n! over own limit: ", style="bold yellow")
        out.append(
            ", ".join(
                f"{name} {core_fmt_ms(value)} > {core_fmt_ms(limit)} ms"
                for name, (value, limit) in verdict.own_limit.items()
            ),
            style="bold yellow",
        )
    return out


def band_view(model: RunModel, p: int, *, with_caption: bool = True) -> RenderableType:
    """The budget waterfall at percentile ``p`` with its verdict, or why there is none.

    ``with_caption=False`` leaves out the line that says what the bars are made of (n and
    the band), for a caller that shows :func:`band_caption` elsewhere (the pane's title).
    """
    band = model.bands().get(p)
    if band is None:
        waiting = "no warm, complete turn yet" if model.running else "no warm, complete turn"
        return Text(
            f"{waiting}: the waterfall needs at least one turn that is not cold, warm-up or failed",
            style=DIM,
        )
    verdict = judge(p, band.e2e_percentile, band.segments, model.budget, model.segment_dists())
    parts: list[RenderableType] = [band_waterfall(band, verdict), verdict_text(band, verdict)]
    if with_caption:
        parts.insert(0, Text(band_caption(band), style=DIM))
    return Group(*parts)


# -- the live turn ----------------------------------------------------------------------------
@dataclass
class LiveTimeline:
    """The turn being measured on a timeline from ``speech_end``; milestones appear as seen.

    ``now_ns`` (time since speech_end) draws a cursor so a slow stage shows as a growing gap.
    """

    live: LiveTurn
    now_ns: int | None = None
    budget_ns: float | None = None

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        live = self.live
        seen = {n: v for n in LIVE_MILESTONES if (v := live.since_speech_end(n)) is not None}
        head = Text(f"turn {live.index}", style="bold")
        head.append(f"  {live.fixture}")
        if live.warmup:
            head.append("  (warm-up)", style=DIM)
        yield head
        if live.speech_end_ns is None:
            yield Text(
                "fixture has no annotated speech_end: times are from the audio start", style=DIM
            )
        far = max([*seen.values(), self.now_ns or 0, self.budget_ns or 0, NS_PER_MS * 1000])
        axis_ns = nice_ceiling(far * 1.04)
        width = max(10, options.max_width - LABEL_WIDTH)
        scale = width / axis_ns
        for name in LIVE_MILESTONES:
            line = Text("  ")
            value = seen.get(name)
            if value is None:
                line.append(f"{name:<22}", style=DIM)
                line.append("     …", style=DIM)
                yield line
                continue
            line.append(f"{name:<22}")
            line.append(f"{core_fmt_ms(value, width=6, sign=True)}")
            cell = max(0, min(width - 1, round(value * scale)))
            line.append("  ")
            line.append("─" * cell, style=DIM)
            line.append("●", style="bold green")
            yield line
        ruler = Text(" " * width)
        if self.now_ns is not None and self.now_ns >= 0:
            c = max(0, min(width - 1, round(self.now_ns * scale)))
            ruler = _overwrite(ruler, c, "▲", "bold cyan")
            label = f"now +{core_fmt_ms(self.now_ns)} ms"
            ruler = _place(
                ruler,
                c + 2 if c + 2 + len(label) <= width else c - 1 - len(label),
                label,
                "cyan",
                force=True,
            )
        elif self.now_ns is None:
            ruler = Text("audio playing in real time …"[:width], style=DIM)
        yield Text(" " * LABEL_WIDTH) + ruler
        label = "" if self.budget_ns is None else f"budget {core_fmt_ms(self.budget_ns)}"
        for line in _axis(width, axis_ns, self.budget_ns, label):
            yield Text(" " * LABEL_WIDTH) + line


def shows_live(model: RunModel, selected: Turn | None) -> bool:
    """The turn pane draws the live timeline (else a finished turn's settled waterfall).

    Until the running turn's first milestone (its audio is still being paced in) there is
    nothing live to draw, so the last finished turn's waterfall stays on screen meanwhile.
    """
    live = model.live
    return live is not None and (bool(live.milestones) or selected is None)


def turn_pane(
    model: RunModel, selected: Turn | None, p: int, clock_ns: int | None
) -> RenderableType:
    """The left-hand turn view: the live timeline while a turn runs, else a settled waterfall."""
    if model.live is not None and not shows_live(model, selected) and selected is not None:
        live = model.live
        note = Text(f"next: turn {live.index} {live.fixture}, audio playing …", style=DIM)
        return Group(turn_heading(selected), *_turn_body(selected, model.budget, p), note)
    if model.live is not None:
        live = model.live
        now = None if clock_ns is None else live.elapsed_ns(clock_ns)
        return LiveTimeline(live, now, e2e_budget_ns(model.budget, p))
    if selected is None:
        lines = [Text("no turn yet", style=DIM)]
        lines += [Text(line, style=DIM) for line in model.setup_log]
        return Group(*lines)
    return Group(turn_heading(selected), *_turn_body(selected, model.budget, p))


def turn_heading(turn: Turn) -> Text:
    """``turn 3  book_table  e2e 1066 ms  warm``, with failures and flags spelled out."""
    out = Text(f"turn {turn.index}", style="bold")
    out.append(f"  {turn.fixture}")
    if turn.e2e_ns is not None:
        out.append(f"  e2e {core_fmt_ms(turn.e2e_ns)} ms", style="bold")
    out.append(f"  {_conn(turn)}", style=DIM)
    if turn.failed:
        out.append(f"  FAILED {turn.failure_stage}: {turn.failure_reason}", style=OVER_STYLE)
    if turn.flags:
        out.append(f"  flags: {', '.join(turn.flags)}", style="yellow")
    return out


def _turn_body(turn: Turn, budget: Mapping[str, object], p: int) -> list[RenderableType]:
    if turn.segments and turn.e2e_ns is not None:
        return [turn_waterfall(turn, budget, p)]
    seen = [m for m in milestone_names(turn.extra.get("kind")) if m in turn.milestones]
    last = seen[-1] if seen else "none"
    return [Text(f"no complete critical path (last milestone: {last})", style=DIM)]


def _conn(turn: Turn) -> str:
    if turn.warmup:
        return "warm-up"
    if turn.cold:
        return "cold: " + ",".join(turn.cold_stages) if turn.cold_stages else "cold"
    return "warm"


# -- tables --------------------------------------------------------------------------------
def segment_table(dists: Mapping[str, Distribution]) -> Table:
    """P50 / P90 / P99 / max / n per segment and for e2e, labelled as not additive."""
    table = Table(
        title="Per-segment percentiles, ms: not additive",
        title_style="bold",
        box=None,
        header_style="bold",
        pad_edge=False,
        expand=False,
    )
    table.add_column("segment")
    for col in ("P50", "P90", "P99", "max", "n"):
        table.add_column(col, justify="right")
    shown = ordered_segments(k for k, d in dists.items() if d.n and k != "e2e")
    for name in (*shown, "e2e"):
        d = dists.get(name) or Distribution(n=0)
        style = "bold" if name == "e2e" else segment_colour(name)
        table.add_row(
            Text(name, style=style),
            fmt_ms(d.p50),
            fmt_ms(d.p90),
            fmt_ms(d.p99),
            fmt_ms(d.max),
            str(d.n),
            end_section=name == shown[-1],
        )
    return table


def instrument_text(section: object) -> Text | None:
    """The run's error bar under the percentiles: "± instrument error P99 x ms" (its P50 and
    reference turns after), "uncalibrated" and why, or None for a run with no ``instrument``
    section (a live run until its summary is written, a run from before calibration). The
    P99 first: it is what a difference between two figures has to exceed."""
    if not isinstance(section, Mapping):
        return None
    p50, p99 = section.get("error_p50_ns"), section.get("error_p99_ns")
    if section.get("status") != "calibrated" or not isinstance(p99, int | float):
        why = section.get("reason") or "no reason given"
        return Text(f"± instrument error: uncalibrated ({why})", style="yellow")
    out = Text("± instrument error P99 ", style="bold")
    out.append(f"{core_fmt_ms(p99, decimals=1)} ms", style="bold")
    detail = [f"P50 {core_fmt_ms(p50, decimals=1)} ms"] if isinstance(p50, int | float) else []
    if isinstance(turns := section.get("turns"), int):
        detail.append(f"{turns} reference turns")
    if detail:
        out.append(f" ({', '.join(detail)})", style=DIM)
    if warning := section.get("reason"):
        out.append(f"; WARNING: {warning}", style="yellow")
    return out


def stats_view(dists: Mapping[str, Distribution], instrument: object = None) -> RenderableType:
    """The percentiles pane's table, with the run's error bar under it when it has one."""
    table = segment_table(dists)
    line = instrument_text(instrument)
    return table if line is None else Group(table, line)


def spans_table(spans: Mapping[str, Mapping[str, Distribution]]) -> RenderableType:
    """Network sub-spans per stage (connect, TLS, TTFB ...): P50 / P90 / max / n."""
    table = Table(
        title="Network sub-spans per stage, ms",
        title_style="bold",
        box=None,
        header_style="bold",
        pad_edge=False,
    )
    table.add_column("stage")
    table.add_column("span")
    for col in ("P50", "P90", "max", "n"):
        table.add_column(col, justify="right")
    rows = 0
    for stage in ("stt", "llm", "tts"):
        names = _span_order(spans.get(stage, {}))
        for i, name in enumerate(names):
            d = spans[stage][name]
            table.add_row(
                stage if i == 0 else "",
                SPAN_LABELS.get(name, name),
                fmt_ms(d.p50),
                fmt_ms(d.p90),
                fmt_ms(d.max),
                str(d.n),
            )
            rows += 1
    if rows == 0:
        return Text("no network sub-spans recorded", style=DIM)
    return table


def _span_order(names: Iterable[str]) -> list[str]:
    names = list(names)
    known = [n for n in SPAN_ORDER if n in names]
    return known + sorted(n for n in names if n not in SPAN_ORDER)


#: Columns of the turns table (the DataTable gets its rows from :func:`turn_cells`).
TURN_COLUMNS: tuple[str, ...] = ("#", "fixture", "e2e ms", "largest", "conn", "result")

#: Footnote under the segment table: why its rows do not sum to the e2e row.
NOT_ADDITIVE = "percentiles do not add: rows ≠ e2e"


def turn_cells(turn: Turn) -> tuple[Text, ...]:
    """One turns-table row: index, fixture, e2e, largest segment, cold/warm, result."""
    big = turn.largest_segment()
    largest = (
        Text(f"{big[0]} {core_fmt_ms(big[1])}", style=segment_colour(big[0]))
        if big is not None and not turn.failed
        else Text("-", style=DIM)
    )
    if turn.failed:
        result = Text(f"FAILED {turn.failure_stage}: {turn.failure_reason}", style=OVER_STYLE)
    elif turn.flags:
        result = Text("⚑ " + ", ".join(turn.flags), style="yellow")
    else:
        result = Text("ok", style="green")
    return (
        Text(str(turn.index), justify="right"),
        Text(turn.fixture),
        Text(fmt_ms(turn.e2e_ns), justify="right"),
        largest,
        Text(_conn(turn), style="" if _conn(turn) == "warm" else "yellow"),
        result,
    )


# -- turn detail --------------------------------------------------------------------------
_WORD = re.compile(r"[a-z0-9']+")


def _norm(word: str) -> str:
    return "".join(_WORD.findall(word.lower()))


def transcript_diff(transcript: str | None, expected: str | None) -> Text:
    """The transcript as heard, words the expected text lacks highlighted.

    Words are compared without case and punctuation (Whisper's "10" vs "ten" still counts as a
    difference: it is one).
    """
    if transcript is None:
        return Text("(no transcript)", style=DIM)
    if expected is None:
        return Text(transcript)
    got = [w for w in transcript.split() if _norm(w)]
    want = [_norm(w) for w in expected.split() if _norm(w)]
    matcher = difflib.SequenceMatcher(a=want, b=[_norm(w) for w in got], autojunk=False)
    ops = matcher.get_opcodes()
    if all(op == "equal" for op, *_ in ops):
        out = Text(transcript)
        out.append("  ✓ matches expected", style="green")
        return out
    out = Text()
    for op, _a0, _a1, b0, b1 in ops:
        for w in got[b0:b1]:
            out.append(w + " ", style="" if op == "equal" else "bold yellow")
    differ = sum(max(a1 - a0, b1 - b0) for op, a0, a1, b0, b1 in ops if op != "equal")
    out.append(f" ✗ {differ} word(s) differ", style="yellow")
    return out


def _lag(ns: object) -> str:
    return fmt_ms(ns) + " ms" if isinstance(ns, int | float) else "-"


def turn_detail(turn: Turn, budget: Mapping[str, object], p: int) -> RenderableType:
    """Everything about one turn: milestones, waterfall, sub-spans, texts, lags and flags."""
    parts: list[RenderableType] = [turn_heading(turn), Text()]
    parts += _turn_body(turn, budget, p)

    ms = Table(
        title="Milestones",
        title_style="bold",
        box=None,
        header_style="bold",
        pad_edge=False,
        caption=_audible_after_done(turn),
        caption_style=DIM,
        caption_justify="left",
    )
    ms.add_column("milestone")
    ms.add_column("from speech_end ms", justify="right")
    ms.add_column("from t0 ms", justify="right")
    for name in milestone_names(turn.extra.get("kind")):
        t = turn.milestones.get(name)
        rel = turn.since_speech_end(name)
        ms.add_row(
            Text(name, style="" if t is not None else DIM),
            fmt_ms(rel) if rel is not None else "-",
            fmt_ms(t) if t is not None else "-",
        )

    spans = Table(
        title="Network sub-spans", title_style="bold", box=None, header_style="bold", pad_edge=False
    )
    spans.add_column("stage")
    spans.add_column("span")
    spans.add_column("start from t0 ms", justify="right")
    spans.add_column("duration ms", justify="right")
    for s in sorted(turn.spans, key=lambda s: (s.stage, s.start_ns)):
        spans.add_row(
            s.stage, SPAN_LABELS.get(s.name, s.name), fmt_ms(s.start_ns), fmt_ms(s.duration_ns)
        )
    if not turn.spans:
        spans.add_row("-", "none recorded", "", "")

    texts = Table.grid(padding=(0, 2))
    texts.add_column(style="bold")
    texts.add_column()
    texts.add_row("expected", Text(turn.expected or "-"))
    texts.add_row("transcript", transcript_diff(turn.transcript, turn.expected))
    texts.add_row("reply", Text(turn.reply or "-"))

    figs = Table.grid(padding=(0, 2))
    figs.add_column(style="bold")
    figs.add_column()
    f = turn.figures
    figs.add_row(
        "pacer lag",
        f"max {_lag(f.get('pacer_lag_max_ns'))}, median {_lag(f.get('pacer_lag_p50_ns'))}",
    )
    figs.add_row("event-loop lag", f"max {_lag(f.get('loop_lag_max_ns'))}")
    if "agent_response_ns" in f:
        # An agent's inside is its own: no voicelat LLM or TTS figures, the black-box total.
        figs.add_row("agent", _agent_figures(f))
    else:
        _stage_rows(figs, f)
    if clock := provider_clock(turn):  # only stages whose provider reports its own time
        figs.add_row("provider clock", clock)
    figs.add_row("connection", _conn(turn))
    figs.add_row("flags", ", ".join(turn.flags) or "none")
    if turn.failed:
        figs.add_row(
            "failure", Text(f"{turn.failure_stage}: {turn.failure_reason}", style=OVER_STYLE)
        )

    parts += [Text(), texts, Text(), figs, Text(), ms, Text(), spans]
    return Group(*parts)


def _stage_rows(figs: Table, f: Mapping[str, object]) -> None:
    """The LLM and TTS rows of a turn's figures."""
    tps = f.get("llm_tokens_per_s")
    rtf = f.get("tts_rtf")
    figs.add_row(
        "llm",
        f"TTFD {_lag(f.get('llm_ttfd_ns'))}, TTFT {_lag(f.get('llm_ttft_ns'))}, "
        + (f"{tps:.0f} tokens/s" if isinstance(tps, int | float) else "tokens/s -"),
    )
    figs.add_row(
        "tts",
        (f"RTF {rtf:.3f}" if isinstance(rtf, int | float) else "RTF -")
        + f", stalls {f.get('tts_stalls', '-')}",
    )


def _agent_figures(f: Mapping[str, object]) -> str:
    """The measured black-box total (beside a traced split) and the agent's own TTFBs."""
    reported = [
        f"{part} {v:.0f} ms"
        for part in ("stt", "llm", "tts")
        if isinstance(v := f.get(f"agent_reported_{part}_ttfb_ms"), int | float)
    ]
    line = f"response (measured, black box) {_lag(f.get('agent_response_ns'))}"
    return line + (f"; agent-reported TTFB {', '.join(reported)}" if reported else "")


# -- lines ---------------------------------------------------------------------------------
def _audible_after_done(turn: Turn) -> str | None:
    """Why ``tts_done`` can come before ``tts_first_audible`` (a TTS faster than real time)."""
    done, audible = turn.milestones.get("tts_done"), turn.milestones.get("tts_first_audible")
    if done is None or audible is None or done >= audible:
        return None
    return (
        "tts_first_audible is when its sample plays (first byte + leading silence): "
        "the TTS had sent all its audio before that"
    )


def title_line(model: RunModel) -> Text:
    """Which run this is: live or saved, pipeline, start time."""
    out = Text("voicelat ", style="bold")
    out.append("run" if model.live_mode else "view", style="bold cyan")
    out.append(f"  pipeline {model.pipeline_name}")
    if model.started:
        out.append(f"  started {model.started}", style=DIM)
    return out


#: After a value over its limit on the status line: the warning in words, not only in red
#: (NO_COLOR, a monochrome terminal, a screen reader).
OVER_MARK = " (over)"


def status_line(model: RunModel, width: int | None = None) -> Text:
    """Progress, failures, exclusions, lags (can the numbers be trusted?) and the results path.

    ``width``: the line's room in cells. When the full line does not fit (an 80-column
    terminal), the compact wording is used and the least needed parts are left out, so it
    never wraps; a warning keeps its words either way."""
    c = model.counts()
    sep = Text(" · ", style=DIM)
    planned = "?" if model.planned is None else str(model.planned)
    pacer = model.max_figure("pacer_lag_max_ns")
    loop = model.max_figure("loop_lag_max_ns")
    limit = model.pacer_lag_limit_ns
    pacer_bad = pacer is not None and limit is not None and pacer > limit
    # Event-loop lag past a frame (20 ms) means stamps may be late by that much.
    loop_bad = loop is not None and loop > 20 * NS_PER_MS
    status_style = {"complete": "green", "failed": OVER_STYLE, "interrupted": "yellow"}.get(
        model.status, "cyan"
    )
    failed = Text(f"failed {c['failed']}", style=OVER_STYLE if c["failed"] else "")
    state = Text(model.status, style=status_style)
    if model.message:
        state.append(f": {model.message}")
    pacer_t = Text.assemble(
        (_lag(pacer), OVER_STYLE if pacer_bad else ""), (OVER_MARK if pacer_bad else "")
    )
    loop_t = Text.assemble(
        (_lag(loop), OVER_STYLE if loop_bad else ""), (OVER_MARK if loop_bad else "")
    )
    skipped = (
        [Text(f"{model.skipped_lines} unreadable line(s) skipped", style="bold yellow")]
        if model.skipped_lines
        else []
    )
    results = Text(f"results {model.results_path}", style=DIM)
    full = [
        Text(f"turns {c['done']}/{planned}", style="bold"),
        failed,
        Text(f"excluded {c['warmup']} warm-up + {c['cold']} cold"),
        Text("pacer lag max ") + pacer_t,
        Text("loop lag max ") + loop_t,
        *skipped,
        state,
        results,
    ]
    if width is None:
        return sep.join(full)
    compact = [
        Text(f"{c['done']}/{planned}", style="bold"),
        failed,
        Text(f"excl {c['warmup']}+{c['cold']}"),
        Text("lag pacer ") + pacer_t + Text(", loop ") + loop_t,
        *skipped,
        state,
    ]
    # Shorter and shorter until it fits: first without the results path (it is in the title
    # of `voicelat view` and printed at the end of a run), then in the compact wording, then
    # without the exclusions; the counts, lags and state stay.
    ladder = [
        full,
        full[:-1],
        [*compact, results],
        compact,
        [p for p in compact if p is not compact[2]],
    ]
    for parts in ladder:
        line = sep.join(parts)
        if line.cell_len <= width:
            return line
    line.truncate(width, overflow="ellipsis")
    return line
