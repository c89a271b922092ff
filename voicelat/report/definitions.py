"""The run's latency in every public definition: text (``voicelat view RUN --definitions``)
and a ``report.html`` section (pure: results in, text or HTML out). docs/DEFINITIONS.md."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from voicelat.core.base.display import fmt_ms
from voicelat.core.judge.definitions import DefinitionResult

DOC = "docs/DEFINITIONS.md"


def _title(r: DefinitionResult) -> str:
    return f"{r.definition.who}: {r.definition.name}"


def _figures(r: DefinitionResult) -> str:
    if r.n == 0:
        return f"not computable: {r.reason}"
    if r.p90_ns is None:
        return f"P50 {fmt_ms(r.p50_ns)} ms (no P90), n={r.n}"
    return f"P50 {fmt_ms(r.p50_ns)} ms  P90 {fmt_ms(r.p90_ns)} ms  n={r.n}"


def _verdicts(r: DefinitionResult) -> list[str]:
    """The budget and cut-off lines under a result, and the turns it left out."""
    d, out = r.definition, []
    if d.budget is not None and r.n:
        p50 = "within" if r.p50_within_target else "OVER"
        p90 = {True: "within", False: "OVER", None: "-"}[r.p90_within_upper]
        out.append(
            f"budget {d.budget.target_ms} ms target / {d.budget.upper_ms} ms upper: P50 {p50} "
            f"the target, P90 {p90} the upper bound"
        )
    rate = r.cutoff_rate
    if d.cutoff_budget is not None and rate is not None:
        verdict = "within" if r.within_cutoff_budget else "OVER"
        out.append(
            f"cut-offs {r.cut_off} of {r.n + r.cut_off} turns ({rate:.1%}): {verdict} the "
            f"{d.cutoff_budget:.0%} budget"
        )
    if r.n:
        out.extend(f"left out {n} turn(s): {why}" for why, n in r.excluded.items())
    return out


def instrument_line(instrument: Mapping[str, Any] | None) -> str | None:
    """``± instrument error`` from the summary's ``instrument`` section, when it has one."""
    if not isinstance(instrument, Mapping):
        return None
    p50, p99 = instrument.get("error_p50_ns"), instrument.get("error_p99_ns")
    if not isinstance(p50, int | float) or not isinstance(p99, int | float):
        return None
    return (
        f"every figure carries the run's instrument error: P50 ±{fmt_ms(p50, decimals=1)} ms, "
        f"P99 ±{fmt_ms(p99, decimals=1)} ms"
    )


def definitions_text(
    results: Sequence[DefinitionResult], *, instrument: Mapping[str, Any] | None = None
) -> str:
    """Every definition, its figures and formula; what cannot be computed, and why."""
    kinds = sorted({k for r in results for k in r.kinds})
    n = max((r.n for r in results if r.definition.key == "voicelat_e2e"), default=0)
    lines = [
        f"Public latency definitions from this run ({DOC}); kinds of turn: "
        f"{', '.join(kinds) or 'none'}; {n} headline turn(s) with an e2e",
    ]
    extra = instrument_line(instrument)
    if extra:
        lines.append(extra)
    for r in results:
        lines.append("")
        lines.append(f"{_title(r)}  [{r.definition.key}]")
        lines.append(f"    {_figures(r)}")
        lines.append(f"    formula: {r.formula}")
        lines.extend(f"    {v}" for v in _verdicts(r))
    return "\n".join(lines)


def definitions_html(
    results: Sequence[DefinitionResult], *, instrument: Mapping[str, Any] | None = None
) -> str:
    """The ``report.html`` section: one table row per definition."""
    rows = []
    for r in results:
        d = r.definition
        figures = (
            f"<td>{fmt_ms(r.p50_ns)}</td><td>{fmt_ms(r.p90_ns)}</td><td>{r.n}</td>"
            if r.n
            else f'<td colspan="3" class="warn">not computable: {escape(r.reason or "")}</td>'
        )
        notes = "<br>".join(escape(v) for v in _verdicts(r))
        rows.append(
            f"<tr><td>{escape(d.who)}: {escape(d.name)}<br><small>{escape(d.from_to)}; "
            f"{escape(d.source)}</small></td>{figures}<td><code>{escape(r.formula)}</code>"
            f"{'<br><small>' + notes + '</small>' if notes else ''}</td></tr>"
        )
    extra = instrument_line(instrument)
    return (
        "<h2>Every public definition</h2><p><small>This run's headline turns re-expressed as "
        "each public benchmark defines latency, in voicelat's milestones (ms; reference: "
        f"{DOC}).{' ' + escape(extra) if extra else ''}</small></p>"
        '<table class="definitions"><tr><th>definition</th><th>P50</th><th>P90</th><th>n</th>'
        "<th>formula</th></tr>" + "".join(rows) + "</table>"
    )


__all__ = ["definitions_html", "definitions_text", "instrument_line"]
