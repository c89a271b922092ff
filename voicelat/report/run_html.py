"""``report.html`` of one run: its pictures on one self-contained page (pure: summary and turns
in, HTML out).

The P50/P90 waterfalls, the e2e distribution with P50/P90/P99 and the budget, e2e over the run
with failed turns marked, the per-fixture breakdown and the transcript accuracy. Like the
comparison page it needs nothing from the network: inline SVG and one ``<style>``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from voicelat.core.base.display import fmt_ms
from voicelat.core.base.palette import ordered_segments
from voicelat.core.base.turn import Turn
from voicelat.core.calls.call import CallRecord
from voicelat.core.judge.definitions import compute_definitions
from voicelat.core.summaries.run_summary import RunSummary
from voicelat.report.call_svg import calls_html
from voicelat.report.chartdata import (
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
from voicelat.report.comparison_html import waterfall_svg
from voicelat.report.definitions import definitions_html
from voicelat.report.svg import (
    PICTURE_CSS,
    fixture_table_html,
    histogram_svg,
    legend_html,
    timeline_svg,
)
from voicelat.report.text import instrument_summary_line

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em;color:#222;max-width:80em}
table{border-collapse:collapse;margin:1em 0;font-variant-numeric:tabular-nums}
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:right;white-space:nowrap}
th{background:#f3f3f3}td:first-child,th:first-child,td:last-child,th:last-child{text-align:left}
.pair{display:flex;flex-wrap:wrap;gap:1.5em}.warn{color:#a00}small{color:#666}
.waterfall .head{font-weight:600}
table.definitions td:first-child,table.definitions td:last-child{white-space:normal}
.gate{border:2px solid;padding:.2em 1em;margin:1em 0}.gate.fail{border-color:#a00;color:#a00}
.gate.pass{border-color:#070}
"""


@dataclass(frozen=True, slots=True)
class GateHeadline:
    """What ``voicelat ci`` decided on the run (its ``gate.json``), for the top of the page."""

    passed: bool
    verdict: str
    budget_source: str
    #: One line per failed check, as the gate printed it.
    failures: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> GateHeadline:
        """From ``gate.json`` (``GateResult.to_json``)."""
        checks = doc.get("checks") or []
        failures = tuple(
            str(c.get("message", ""))
            for c in checks
            if isinstance(c, Mapping) and c.get("passed") is False
        )
        return cls(
            passed=bool(doc.get("passed")),
            verdict=str(doc.get("verdict") or ("pass" if doc.get("passed") else "fail")),
            budget_source=str(doc.get("budget_source") or "defaults"),
            failures=failures,
        )

    def html(self) -> str:
        """The verdict block: first thing on the page, in words (not only in colour)."""
        word = "PASSED" if self.passed else "FAILED"
        items = "".join(f"<li>{escape(f)}</li>" for f in self.failures)
        return (
            f'<div class="gate {"pass" if self.passed else "fail"}"><p><strong>latency gate '
            f"{word}</strong> ({escape(self.verdict)}); budget {escape(self.budget_source)}</p>"
            + (f"<ul>{items}</ul>" if items else "")
            + "</div>"
        )


def _head(s: RunSummary, run_dir: str, gate: GateHeadline | None = None) -> str:
    name = str(s.pipeline.get("name") or run_dir or "run")
    c = s.counts
    trust = s.trust
    verdict = (
        ""
        if trust is None
        else "<p>trust: ok</p>"
        if trust.trustworthy
        else '<p class="warn">trust: NOT trustworthy: '
        + escape("; ".join(r.message for r in trust.reasons))
        + "</p>"
    )
    line = instrument_summary_line(s.extra.get("instrument"))
    if line is not None:
        verdict += f"<p>{escape(line)}</p>"
    return (
        f"<h1>voicelat run: {escape(name)}</h1>"
        + ("" if gate is None else gate.html())
        + f"<p><small>{escape(str(s.run.started or ''))}; "
        f"status {escape(str(s.run.status or '?'))}; {c.turns} turn(s): {c.headline} in the "
        f"headline, {c.warmup} warm-up, {c.cold} cold, {c.failed} failed; e2e P50 "
        f"{fmt_ms(s.e2e.p50)} ms, P90 {fmt_ms(s.e2e.p90)} ms, P99 {fmt_ms(s.e2e.p99)} ms; "
        f"results in <code>{escape(run_dir)}/</code></small></p>{verdict}"
    )


def _waterfalls(s: RunSummary) -> str:
    bands = [(p, b.to_json()) for p in (50, 90) if (b := s.band(p)) is not None]
    if not bands:
        return "<p>No waterfall: no headline turn.</p>"
    scale = max(float(max(b["mean_e2e_ns"], b["e2e_percentile_ns"])) for _, b in bands)
    svgs = "".join(waterfall_svg(b, p=p, scale_ns=scale, title=f"P{p} waterfall") for p, b in bands)
    return (
        "<h2>Where the time went: waterfalls at P50 and P90</h2><p><small>Each is the mean "
        "composition of the turns ranked around the percentile: its bars sum to that band's "
        "mean e2e; the dashed line is the exact percentile.</small></p>"
        f'<div class="pair">{svgs}</div>'
    )


def run_html(
    summary: RunSummary,
    turns: Sequence[Turn],
    run_dir: str = "",
    calls: Sequence[CallRecord] = (),
    gate: GateHeadline | None = None,
) -> str:
    """The whole page for one run (a run of calls: with each call's timeline); ``gate``, when
    the run was gated, opens it."""
    s = summary
    values = headline_e2e(turns)
    marks = percentile_marks(values)
    budget = budget_lines(s.budget)
    rows = fixture_rows(turns)
    segments = ordered_segments(
        [*(k for k, d in s.segments.items() if d.n), *(k for t in turns for k in t.segments)]
    )
    once = (
        ""
        if fixtures_repeat(rows)
        else "<p><small>Every fixture ran once: each row is one turn (repeat the fixtures, "
        "<code>--repeat</code>, for per-fixture percentiles).</small></p>"
    )
    fixtures = once + fixture_table_html(rows)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>voicelat run: {escape(str(s.pipeline.get('name') or run_dir))}</title>"
        f"<style>{_CSS}{PICTURE_CSS}</style></head><body>"
        + _head(s, run_dir, gate)
        + legend_html(segments)
        + _waterfalls(s)
        + calls_html(calls, turns)
        + "<h2>e2e distribution</h2><p><small>Headline turns (warm, measured, not failed); "
        "dashed: P50/P90/P99; red: the budget's e2e limits.</small></p>"
        + histogram_svg(histogram(values), marks, budget, title="e2e distribution")
        + "<h2>e2e over the run</h2><p><small>Filled: headline turns; hollow: warm-up or cold "
        "turns (not in the percentiles); red crosses: failed turns.</small></p>"
        + timeline_svg(turn_points(turns), marks, budget, title="e2e over the run")
        + definitions_html(compute_definitions(turns), instrument=s.extra.get("instrument"))
        + "<h2>Per fixture</h2>"
        + fixtures
        + f"<h2>Transcript accuracy</h2><p>{escape(accuracy_text(accuracy(turns)))}</p>"
        + "</body></html>\n"
    )


__all__ = ["GateHeadline", "run_html"]
