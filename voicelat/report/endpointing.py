"""The endpointing trade-off as a Markdown table, a JSON document and an HTML page with an SVG.

Pure functions of the scored grid (:class:`voicelat.core.measure.endpointing.ConfigScore`). The curve
puts every configuration at (false cut-off rate, P50 latency after the true speech end), one
colour per endpointer, and draws the Pareto front through the ones nothing beats on both. Points
from recorded runs (a streaming STT provider's own end-of-turn, :mod:`voicelat.core.measure.endpointing_runs`)
sit in the same table and on the same curve, drawn as squares and marked "wire": they were
measured on the wire (network and the provider's processing included). The page needs nothing
from anywhere: it opens offline.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from voicelat.core.base.display import fmt_ms
from voicelat.core.measure.endpointing import ConfigScore, pareto_front, pick_for_budget
from voicelat.core.measure.endpointing_runs import RunPoint

#: Okabe-Ito colours, one per endpointer or provider (colour-blind safe).
COLOURS = {
    "energy": "#0072B2",
    "silero": "#D55E00",
    "webrtc": "#009E73",
    "deepgram": "#CC79A7",
    "assemblyai": "#E69F00",
}
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
    #: Points from recorded runs (their scores are in ``scores`` too), with their turns.
    runs: tuple[RunPoint, ...] = ()

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
            [s for s in self.scores if s.config.endpointer == "energy" and not _wire(s)],
            self.budget,
        )

    @property
    def provider_pick(self) -> ConfigScore | None:
        """The fastest recorded provider setting within the budget (None without runs)."""
        return pick_for_budget([s for s in self.scores if _wire(s)], self.budget)


def _wire(s: ConfigScore) -> bool:
    return s.config.measured_on_wire


def _cells(s: ConfigScore) -> tuple[str, str, str]:
    """Endpointer, threshold and hangover cells; a run's point shows its provider options."""
    c = s.config
    if _wire(s):
        return f"{c.endpointer} (wire)", "—", c.options_text
    return c.endpointer, f"{c.threshold:g}", str(c.hangover_ms)


def pipeline_setting(score: ConfigScore) -> str:
    """The ``[endpointing]`` lines of a pipeline file for an energy-VAD configuration."""
    c = score.config
    return f'mode = "vad", hangover_ms = {c.hangover_ms}, threshold_dbfs = {c.threshold:g}'


def _pct(s: ConfigScore) -> str:
    return f"{100 * s.cutoff_rate:.0f}% ({s.cut_fixtures}/{s.n})"


def markdown(t: TradeOff) -> str:
    """The grid as one Markdown table (front rows marked), then the front and the budget's pick."""
    front = {id(s) for s in t.front}
    replayed = (
        f"Endpointing on {t.fixtures} fixtures ({t.with_pauses} with {t.pauses} annotated "
        f"pauses), {t.audio_s:.1f} s of audio replayed in {t.wall_s:.1f} s "
        f"({t.audio_s / max(t.wall_s, 1e-9):.0f}x real time)."
        if t.fixtures
        else f"Endpointing from {len(t.runs)} recorded run(s), no offline replay."
    )
    lines = [
        f"{replayed} Latency is after the true speech end; a cut-off is an endpoint before it "
        "(in a pause: inside an annotated pause).",
        *_wire_note(t),
        "",
        "| endpointer | threshold | hangover ms | P50 ms | P90 ms | false cut-off rate "
        "| cut-offs (in pause) | missed | front |",
        "|---|---:|---:|---:|---:|---:|---:|---:|:---:|",
    ]
    for s in t.scores:
        name, thr, hang = _cells(s)
        lines.append(
            f"| {name} | {thr} | {hang} | {fmt_ms(s.p50_ns)} "
            f"| {fmt_ms(s.p90_ns)} | {_pct(s)} | {s.cutoffs} ({s.cutoffs_in_pause}) "
            f"| {s.missed} | {'*' if id(s) in front else ''} |"
        )
    lines += ["", "Pareto front (nothing is both faster and cuts off less), fastest first:", ""]
    lines += ["| configuration | P50 ms | P90 ms | false cut-off rate |", "|---|---:|---:|---:|"]
    lines += [
        f"| {s.config.label} | {fmt_ms(s.p50_ns)} | {fmt_ms(s.p90_ns)} | {_pct(s)} |"
        for s in t.front
    ]
    lines += ["", _picks(t), *_cut_lines(t)]
    return "\n".join(lines) + "\n"


def _wire_note(t: TradeOff) -> list[str]:
    if not t.runs:
        return []
    return [
        "",
        f"{len(t.runs)} point(s) come from recorded runs, marked (wire): the provider's "
        "end-of-turn as the pipeline received it, so their latency includes the network and "
        "the provider's processing. The pipeline stopped listening there: a cut-off turn "
        "answered mid-sentence and has no latency (P50/P90 are over the turns not cut); "
        "rates are per turn.",
    ]


def cut_turn_lines(run: RunPoint) -> list[str]:
    """One line per turn a run's provider cut off: where the endpoint fell, what was heard."""
    out = []
    for j in run.cut_turns:
        at = f"{(j.endpoint_ns or 0) / 1e9:.3f} s"
        where = (
            f"inside the pause {j.pause[0] / 1e9:.3f}-{j.pause[1] / 1e9:.3f} s"
            if j.pause
            else "between words (no annotated pause)"
        )
        heard = f', transcript "{j.transcript}"' if j.transcript else ""
        out.append(f"turn {j.index} {j.fixture}: end-of-turn at {at}, {where}{heard}")
    return out


def _cut_lines(t: TradeOff) -> list[str]:
    out: list[str] = []
    for run in t.runs:
        cut = cut_turn_lines(run)
        n = run.score.n
        head = f"{run.score.config.label} ({run.run}): "
        head += (
            f"the pipeline answered mid-sentence in {len(cut)} of {n} turns:"
            if cut
            else f"no turn cut off ({n} turns)."
        )
        out += ["", head]
        details = [f"- {line}" for line in cut]
        details += [
            f"- turn {j.index} {j.fixture}: no end-of-turn came (missed)"
            for j in run.turns
            if j.score.missed
        ]
        details += [
            f"- left out turn {i} {f}: failed before any endpoint ({w})" for i, f, w in run.left_out
        ]
        details += [
            f"- left out turn {i} {f}: stale end-of-turn at {t / 1e9:.3f} s, before this "
            "turn's speech could end one (the previous turn's audio, carried over on the socket)"
            for i, f, t in run.stale
        ]
        if details:
            out += ["", *details]
    return out


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
    if any(_wire(s) for s in t.scores):
        prov = t.provider_pick
        out.append(
            f"No recorded provider setting keeps cut-offs within {budget}."
            if prov is None
            else f"Provider setting (measured on the wire) within {budget}: "
            f"**{prov.config.label}** (P50 {fmt_ms(prov.p50_ns)} ms, cut-offs {_pct(prov)})."
        )
    return "\n\n".join(out)


def document(t: TradeOff) -> dict[str, Any]:
    """``endpointing.json``: every configuration's numbers (ns), the front and the picks."""

    def row(s: ConfigScore) -> dict[str, Any]:
        c = s.config
        return {
            "endpointer": c.endpointer,
            "source": c.source,
            "options": dict(c.options),
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
        "provider_pick": row(t.provider_pick) if t.provider_pick else None,
        "runs": [_run_doc(r, row(r.score)) for r in t.runs],
    }


def _run_doc(r: RunPoint, point: dict[str, Any]) -> dict[str, Any]:
    return {
        "run": r.run,
        "stage": r.stage,
        "point": point,
        "controls_only": r.controls_only,
        "warmup_turns": r.warmup,
        "left_out": [{"index": i, "fixture": f, "why": w} for i, f, w in r.left_out],
        "stale": [{"index": i, "fixture": f, "endpoint_ns": t} for i, f, t in r.stale],
        "turns": [
            {
                "index": j.index,
                "fixture": j.fixture,
                "endpoint_ns": j.endpoint_ns,
                "latency_ns": j.score.latency_ns,
                "cut": j.cut,
                "cut_in_pause": j.pause is not None,
                "pause_ns": list(j.pause) if j.pause else None,
                "missed": j.score.missed,
                "transcript": j.transcript,
            }
            for j in r.turns
        ],
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
        f"(fixtures cut at least once{'; runs: turns cut' if any(map(_wire, pts)) else ''})</text>"
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
        parts.append(_mark(s, x, y))
    names = sorted({(_wire(s), s.config.endpointer) for s in pts})
    for i, (wire, name) in enumerate(names):
        y = _T + 10 + 16 * i
        colour = COLOURS.get(name, _OTHER)
        x = _W - _R + 16
        parts.append(
            f'<rect x="{x - 4}" y="{y - 4}" width="8" height="8" fill="{colour}"/>'
            if wire
            else f'<circle cx="{x}" cy="{y}" r="4" fill="{colour}"/>'
        )
        label = f"{name} (wire)" if wire else name
        parts.append(f'<text x="{_W - _R + 26}" y="{y + 4}">{escape(label)}</text>')
    y0 = _T + 22 + 16 * len(names)
    parts.append(
        f'<text x="{_W - _R + 12}" y="{y0}">line: Pareto front</text>'
        f'<text x="{_W - _R + 12}" y="{y0 + 16}" fill="#c00">dashed: budget</text>'
    )
    if any(wire for wire, _ in names):
        parts.append(
            f'<text x="{_W - _R + 12}" y="{y0 + 32}">squares: recorded runs,</text>'
            f'<text x="{_W - _R + 12}" y="{y0 + 46}">measured on the wire</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _mark(s: ConfigScore, x: float, y: float) -> str:
    """A configuration's mark: a circle offline, a square for a run's point (on the wire)."""
    colour = COLOURS.get(s.config.endpointer, _OTHER)
    tip = escape(f"{s.config.label}: P50 {fmt_ms(s.p50_ns)} ms, cut-offs {_pct(s)}")
    if _wire(s):
        return (
            f'<rect x="{x - 4.5:.1f}" y="{y - 4.5:.1f}" width="9" height="9" fill="{colour}" '
            f'stroke="#333" fill-opacity="0.85"><title>{tip}</title></rect>'
        )
    return (
        f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{colour}" fill-opacity="0.75">'
        f"<title>{tip}</title></circle>"
    )


def html(t: TradeOff) -> str:
    """The whole page: the curve, the front and picks, the full table."""
    rows = "".join(
        "<tr>"
        + "".join(
            f"<td>{escape(v)}</td>"
            for v in (
                *_cells(s),
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
    notes = "".join(f"<p>{escape(line)}</p>" for line in _wire_note(t) if line)
    cuts = "".join(
        f"<h3>{escape(r.score.config.label)} ({escape(r.run)})</h3><ul>"
        + (
            "".join(f"<li>{escape(c)}</li>" for c in cut_turn_lines(r))
            or "<li>no turn cut off</li>"
        )
        + "</ul>"
        for r in t.runs
    )
    if cuts:
        cuts = f"<h2>Turns the provider cut off (recorded runs)</h2>{cuts}"
    return (
        '<!doctype html><html><head><meta charset="utf-8"><title>voicelat endpointing</title>'
        "<style>body{font-family:sans-serif;margin:2em;max-width:60em}table{border-collapse:"
        "collapse}td,th{border:1px solid #ddd;padding:2px 8px;text-align:right}</style></head>"
        f"<body><h1>Endpointing trade-off</h1><p>{t.fixtures} fixtures ({t.with_pauses} with "
        f"{t.pauses} annotated pauses); latency after the true speech end; a cut-off is an "
        f"endpoint before it.</p>{notes}{curve_svg(t.scores, t.budget)}<h2>Pareto front</h2>"
        f"<ul>{front}</ul><p>{picks}</p>{cuts}<h2>Every configuration</h2>"
        f"<table><tr>{head}</tr>{rows}</table>"
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
        grid[row][col] = "*" if id(s) in front else _letter(s)
    lines = []
    for r, cells in enumerate(grid):
        label = f"{top * (height - r) / height:5.0f} |" if r % 2 == 0 else "      |"
        lines.append(label + "".join(cells))
    lines.append("      +" + "-" * (width + 1))
    lines.append("       0%" + " " * (width - 8) + "100%")
    names = sorted({(_letter(s), s.config.endpointer) for s in pts if _wire(s)})
    wire = ", ".join(f"{letter}: {name}" for letter, name in names)
    lines.append(
        "P50 ms up, false cut-off rate across; * Pareto front, e/s/w: energy/silero/webrtc"
        + (f"; on the wire (recorded runs) {wire}" if wire else "")
    )
    return "\n".join(lines)


def _letter(s: ConfigScore) -> str:
    """A point's letter on the text curve: lower case offline, upper case on the wire."""
    first = s.config.endpointer[:1]
    return first.upper() if _wire(s) else first
