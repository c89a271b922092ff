"""The endpointing trade-off as a Markdown table, a JSON document and an HTML page with an SVG.

Pure functions of the scored grid (:class:`voicelat.core.endpointing.ConfigScore`). The curve
puts every configuration at (false cut-off rate, P50 latency after the true speech end), one
colour per endpointer, and draws the Pareto front through the ones nothing beats on both. The page
needs nothing from anywhere: it opens offline.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from voicelat.core.display import fmt_ms
from voicelat.core.endpointing import ConfigScore, pareto_front, pick_for_budget

#: Okabe-Ito colours, one per endpointer (colour-blind safe).
COLOURS = {"energy": "#0072B2", "silero": "#D55E00", "webrtc": "#009E73"}
_OTHER = "#777777"


@dataclass(frozen=True)
class TradeOff:
    """What the reports show: the grid's scores, its front and the picks for a budget."""

    scores: tuple[ConfigScore, ...]
    budget: float  # the largest acceptable false cut-off rate (0..1)
    fixtures: int
    with_pauses: int
    pauses: int
    audio_s: float
    wall_s: float

    @property
    def front(self) -> list[ConfigScore]:
        """The Pareto front, fastest first."""
        return pareto_front(self.scores)

    @property
    def pick(self) -> ConfigScore | None:
        """The fastest configuration of any endpointer within the budget."""
        return pick_for_budget(self.scores, self.budget)

    @property
    def pipeline_pick(self) -> ConfigScore | None:
        """The fastest energy-VAD configuration within the budget: what a pipeline file can set."""
        return pick_for_budget(
            [s for s in self.scores if s.config.endpointer == "energy"], self.budget
        )


def pipeline_setting(score: ConfigScore) -> str:
    """The ``[endpointing]`` lines of a pipeline file for an energy-VAD configuration."""
    c = score.config
    return f'mode = "vad", hangover_ms = {c.hangover_ms}, threshold_dbfs = {c.threshold:g}'


def _pct(s: ConfigScore) -> str:
    return f"{100 * s.cutoff_rate:.0f}% ({s.cut_fixtures}/{s.n})"


def markdown(t: TradeOff) -> str:
    """The grid as one Markdown table (front rows marked), then the front and the budget's pick."""
    front = {id(s) for s in t.front}
    lines = [
        f"Endpointing on {t.fixtures} fixtures ({t.with_pauses} with {t.pauses} annotated "
        f"pauses), {t.audio_s:.1f} s of audio replayed in {t.wall_s:.1f} s "
        f"({t.audio_s / max(t.wall_s, 1e-9):.0f}x real time). Latency is after the true speech "
        "end; a cut-off is an endpoint before it (in a pause: inside an annotated pause).",
        "",
        "| endpointer | threshold | hangover ms | P50 ms | P90 ms | false cut-off rate "
        "| cut-offs (in pause) | missed | front |",
        "|---|---:|---:|---:|---:|---:|---:|---:|:---:|",
    ]
    for s in t.scores:
        c = s.config
        lines.append(
            f"| {c.endpointer} | {c.threshold:g} | {c.hangover_ms} | {fmt_ms(s.p50_ns)} "
            f"| {fmt_ms(s.p90_ns)} | {_pct(s)} | {s.cutoffs} ({s.cutoffs_in_pause}) "
            f"| {s.missed} | {'*' if id(s) in front else ''} |"
        )
    lines += ["", "Pareto front (nothing is both faster and cuts off less), fastest first:", ""]
    lines += ["| configuration | P50 ms | P90 ms | false cut-off rate |", "|---|---:|---:|---:|"]
    lines += [
        f"| {s.config.label} | {fmt_ms(s.p50_ns)} | {fmt_ms(s.p90_ns)} | {_pct(s)} |"
        for s in t.front
    ]
    lines += ["", _picks(t)]
    return "\n".join(lines) + "\n"


def _picks(t: TradeOff) -> str:
    budget = f"{100 * t.budget:g}%"
    out = []
    pick, pp = t.pick, t.pipeline_pick
    if pick is None:
        out.append(f"No configuration keeps false cut-offs within {budget}: try longer hangovers.")
    else:
        out.append(
            f"Fastest within a {budget} cut-off budget: **{pick.config.label}** "
            f"(P50 {fmt_ms(pick.p50_ns)} ms, P90 {fmt_ms(pick.p90_ns)} ms, cut-offs {_pct(pick)})."
        )
    if pp is None:
        out.append(
            f"No energy-VAD setting (what a pipeline file sets) keeps cut-offs within {budget}: "
            "add longer hangovers to the grid."
        )
    else:
        out.append(
            f"Pipeline setting (energy VAD) within {budget}: `[endpointing] {pipeline_setting(pp)}` "
            f"(P50 {fmt_ms(pp.p50_ns)} ms, cut-offs {_pct(pp)})."
        )
    return "\n\n".join(out)


def document(t: TradeOff) -> dict[str, Any]:
    """``endpointing.json``: every configuration's numbers (ns), the front and the picks."""

    def row(s: ConfigScore) -> dict[str, Any]:
        c = s.config
        return {
            "endpointer": c.endpointer,
            "threshold": c.threshold,
            "hangover_ms": c.hangover_ms,
            "n": s.n,
            "p50_ns": s.p50_ns,
            "p90_ns": s.p90_ns,
            "cutoff_rate": s.cutoff_rate,
            "cut_fixtures": s.cut_fixtures,
            "cutoffs": s.cutoffs,
            "cutoffs_in_pause": s.cutoffs_in_pause,
            "missed": s.missed,
        }

    return {
        "schema_version": 1,
        "fixtures": t.fixtures,
        "with_pauses": t.with_pauses,
        "pauses": t.pauses,
        "audio_s": t.audio_s,
        "wall_s": t.wall_s,
        "budget_cutoff_rate": t.budget,
        "configs": [row(s) for s in t.scores],
        "front": [row(s) for s in t.front],
        "pick": row(t.pick) if t.pick else None,
        "pipeline_pick": row(t.pipeline_pick) if t.pipeline_pick else None,
    }


_W, _H, _L, _B, _T, _R = 640.0, 360.0, 60.0, 40.0, 20.0, 150.0


def curve_svg(scores: Sequence[ConfigScore], budget: float) -> str:
    """Every configuration at (cut-off rate, P50 latency); the Pareto front as a line."""
    pts = [s for s in scores if s.p50_ns is not None]
    y_max = max([s.p50_ns or 0 for s in pts] + [1]) / 1e6
    y_top = (int(y_max / 200) + 1) * 200
    pw, ph = _W - _L - _R, _H - _T - _B

    def xy(s: ConfigScore) -> tuple[float, float]:
        return _L + s.cutoff_rate * pw, _T + ph - (s.p50_ns or 0) / 1e6 / y_top * ph

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_W:g} {_H:g}" '
        f'width="{_W:g}" height="{_H:g}" font-family="sans-serif" font-size="11">',
        f'<rect x="{_L}" y="{_T}" width="{pw}" height="{ph}" fill="none" stroke="#ccc"/>',
    ]
    for k in range(0, 11, 2):
        x = _L + k / 10 * pw
        parts.append(f'<text x="{x:.1f}" y="{_T + ph + 14}" text-anchor="middle">{k * 10}%</text>')
    for ms in range(0, y_top + 1, 200):
        y = _T + ph - ms / y_top * ph
        parts.append(f'<text x="{_L - 6}" y="{y + 4:.1f}" text-anchor="end">{ms}</text>')
        parts.append(f'<line x1="{_L}" x2="{_L + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>')
    parts.append(
        f'<text x="{_L + pw / 2}" y="{_H - 6}" text-anchor="middle">false cut-off rate '
        f"(fixtures cut at least once)</text>"
        f'<text x="14" y="{_T + ph / 2}" text-anchor="middle" '
        f'transform="rotate(-90 14 {_T + ph / 2})">P50 endpointing latency (ms)</text>'
    )
    bx = _L + min(budget, 1.0) * pw
    parts.append(
        f'<line x1="{bx:.1f}" x2="{bx:.1f}" y1="{_T}" y2="{_T + ph}" stroke="#c00" '
        f'stroke-dasharray="4 3"><title>budget {100 * budget:g}%</title></line>'
    )
    front = pareto_front(scores)
    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in map(xy, front))
    parts.append(f'<polyline points="{line}" fill="none" stroke="#333" stroke-width="1.5"/>')
    for s in pts:
        x, y = xy(s)
        colour = COLOURS.get(s.config.endpointer, _OTHER)
        tip = escape(f"{s.config.label}: P50 {fmt_ms(s.p50_ns)} ms, cut-offs {_pct(s)}")
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{colour}" fill-opacity="0.75">'
            f"<title>{tip}</title></circle>"
        )
    for i, name in enumerate(sorted({s.config.endpointer for s in pts})):
        y = _T + 10 + 16 * i
        colour = COLOURS.get(name, _OTHER)
        parts.append(
            f'<circle cx="{_W - _R + 16}" cy="{y}" r="4" fill="{colour}"/>'
            f'<text x="{_W - _R + 26}" y="{y + 4}">{escape(name)}</text>'
        )
    parts.append(
        f'<text x="{_W - _R + 12}" y="{_T + 70}">line: Pareto front</text>'
        f'<text x="{_W - _R + 12}" y="{_T + 86}" fill="#c00">dashed: budget</text></svg>'
    )
    return "".join(parts)


def html(t: TradeOff) -> str:
    """The whole page: the curve, the front and picks, the full table."""
    rows = "".join(
        "<tr>"
        + "".join(
            f"<td>{escape(v)}</td>"
            for v in (
                s.config.endpointer,
                f"{s.config.threshold:g}",
                str(s.config.hangover_ms),
                fmt_ms(s.p50_ns),
                fmt_ms(s.p90_ns),
                _pct(s),
                f"{s.cutoffs} ({s.cutoffs_in_pause})",
                str(s.missed),
            )
        )
        + "</tr>"
        for s in t.scores
    )
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "endpointer",
            "threshold",
            "hangover ms",
            "P50 ms",
            "P90 ms",
            "false cut-off rate",
            "cut-offs (in pause)",
            "missed",
        )
    )
    front = "".join(
        f"<li>{escape(s.config.label)}: P50 {fmt_ms(s.p50_ns)} ms, cut-offs {_pct(s)}</li>"
        for s in t.front
    )
    picks = escape(_picks(t)).replace("**", "").replace("`", "")
    return (
        '<!doctype html><html><head><meta charset="utf-8"><title>voicelat endpointing</title>'
        "<style>body{font-family:sans-serif;margin:2em;max-width:60em}table{border-collapse:"
        "collapse}td,th{border:1px solid #ddd;padding:2px 8px;text-align:right}</style></head>"
        f"<body><h1>Endpointing trade-off</h1><p>{t.fixtures} fixtures ({t.with_pauses} with "
        f"{t.pauses} annotated pauses); latency after the true speech end; a cut-off is an "
        f"endpoint before it.</p>{curve_svg(t.scores, t.budget)}<h2>Pareto front</h2><ul>{front}"
        f"</ul><p>{picks}</p><h2>Every configuration</h2><table><tr>{head}</tr>{rows}</table>"
        "</body></html>\n"
    )


def curve_text(scores: Sequence[ConfigScore], *, width: int = 60, height: int = 14) -> str:
    """The curve in characters: ``e``/``s``/``w`` per endpointer, ``*`` on the Pareto front."""
    pts = [s for s in scores if s.p50_ns is not None]
    if not pts:
        return "(no configuration found an endpoint)"
    top = max(s.p50_ns or 0 for s in pts) / 1e6
    grid = [[" "] * (width + 1) for _ in range(height + 1)]
    front = {id(s) for s in pareto_front(scores)}
    # Front points last, so they are not hidden under another configuration's mark.
    for s in sorted(pts, key=lambda s: id(s) in front):
        col = round(s.cutoff_rate * width)
        row = height - round((s.p50_ns or 0) / 1e6 / top * height)
        grid[row][col] = "*" if id(s) in front else s.config.endpointer[:1]
    lines = []
    for r, cells in enumerate(grid):
        label = f"{top * (height - r) / height:5.0f} |" if r % 2 == 0 else "      |"
        lines.append(label + "".join(cells))
    lines.append("      +" + "-" * (width + 1))
    lines.append("       0%" + " " * (width - 8) + "100%")
    lines.append(
        "P50 ms up, false cut-off rate across; * Pareto front, e/s/w: energy/silero/webrtc"
    )
    return "\n".join(lines)
