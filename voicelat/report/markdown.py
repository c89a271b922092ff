"""Markdown for a pull request (or ``$GITHUB_STEP_SUMMARY``): the verdict, the budget table, the
baseline comparison and the P50/P90 waterfall, readable without opening the run directory."""

from __future__ import annotations

from collections.abc import Sequence

from voicelat.core.base.display import fmt_ms
from voicelat.core.base.palette import ordered_segments
from voicelat.core.judge.budget import Check
from voicelat.core.judge.compare import NOT_RESOLVABLE, Comparison
from voicelat.core.judge.gate import GateResult
from voicelat.core.summaries.run_summary import RunSummary


def _ms(ns: object) -> str:
    return fmt_ms(ns, unit=" ms", missing="–")


def _cell(text: str) -> str:
    # A pipe inside a cell would end the cell early.
    return text.replace("|", "\\|")


def _measured(c: Check) -> str:
    if c.measured is None:
        return "–"
    if c.unit == "ratio":
        return f"{c.measured:.1%}"
    if c.unit == "turns":
        return f"{c.measured:.0f}"
    if c.unit == "cost":
        return f"{c.measured:.4g}"
    return f"{c.measured:.0f} ms"


def _limit(c: Check) -> str:
    if c.limit is None:
        return "–"
    if c.unit == "ratio":
        return f"≤ {c.limit:.1%}"
    if c.unit == "turns":
        return f"≥ {c.limit:.0f}"
    if c.unit == "cost":
        return f"≤ {c.limit:g}"
    return f"≤ {c.limit:g} ms"


def _waterfall(summary: RunSummary) -> list[str]:
    bands = [(p, b) for p in (50, 90) if (b := summary.band(p)) is not None]
    if not bands:
        return []
    head = " | ".join(f"P{p} band ({b.band_n} turn(s), {_ms(b.mean_e2e_ns)})" for p, b in bands)
    out = [
        "",
        "<details><summary>Where the time went (waterfall bands: the mean composition of the "
        "turns around each percentile)</summary>",
        "",
        f"| segment | {head} |",
        "|---|" + "---:|" * len(bands),
    ]
    # The segments the bands hold (an S2S or agent run's own), in the contract's order.
    for s in ordered_segments(k for _, b in bands for k in b.segments_ns):
        out.append(f"| {s} | " + " | ".join(_ms(b.segments_ns.get(s)) for _, b in bands) + " |")
    out.append(
        "| **exact e2e percentile** | "
        + " | ".join(f"**{_ms(b.e2e_percentile_ns)}**" for _, b in bands)
        + " |"
    )
    out += ["", "</details>"]
    return out


def _verdict(result: GateResult) -> str:
    n = len(result.failures)
    if result.passed:
        return "✅ passed"
    if result.inconclusive:
        return f"⚠️ inconclusive ({n} latency check(s) on a distrusted machine)"
    return f"❌ failed ({n} check(s))"


def markdown_report(result: GateResult) -> str:
    """The whole report as GitHub-flavoured Markdown."""
    s = result.summary
    e2e, c = s.e2e, s.counts
    name = s.pipeline.get("name", "?")
    lines = [
        f"### voicelat latency gate: {_verdict(result)}",
        "",
        f"Pipeline **{_cell(str(name))}**: e2e P50 **{_ms(e2e.p50)}**, "
        f"P90 **{_ms(e2e.p90)}** (n={c.headline} warm turns; "
        f"{c.turns} run, {c.warmup} warm-up, {c.failed} failed).",
    ]
    for note in result.notes:
        lines += ["", f"> {_cell(note)}"]
    if result.failures:
        for reason in result.distrust:
            lines += ["", f"> distrust: {_cell(reason.message)}"]
    lines += [
        "",
        f"**Budget** ({_cell(result.budget_source)})",
        "",
        "| check | measured | limit | result |",
        "|---|---:|---:|---|",
    ]
    for ch in result.checks:
        if ch.suite in ("budget", "sample"):
            status = "✅ pass" if ch.passed else f"❌ {_cell(ch.message)}"
            lines.append(f"| {ch.name} | {_measured(ch)} | {_limit(ch)} | {status} |")
    if result.baseline is not None:
        cmp = result.comparisons
        level = f"{cmp[0].interval.level:.0%} CI" if cmp else "CI"
        lines += [
            "",
            f"**Against baseline** `{_cell(result.baseline)}` (change with its {level}; "
            f"tolerance {result.tolerance.describe()})",
            "",
            "| metric | baseline | this run | change | result |",
            "|---|---:|---:|---|---|",
        ]
        for comp in cmp:
            mark = (
                "❌ regression"
                if comp.regression
                else "🚀 faster"
                if comp.verdict == "faster"
                else "✅ not resolvable on this machine"
                if comp.verdict == NOT_RESOLVABLE
                else "✅"
            )
            lines.append(
                f"| {comp.name} | {_ms(comp.baseline_ns)} | {_ms(comp.current_ns)} | "
                f"{comp.change_text()} | {mark} |"
            )
        if not cmp:
            lines.append("| – | – | – | not compared (see the sample check above) | ❌ |")
        else:
            lines += ["", _resolution(cmp)]
    lines += _waterfall(s)
    if result.run_dir:
        lines += ["", f"Results: `{_cell(result.run_dir)}`"]
    return "\n".join(lines) + "\n"


def _resolution(cmp: Sequence[Comparison]) -> str:
    """What this machine resolves: the smallest difference at e2e P50 and where it comes from."""
    first = next((c for c in cmp if c.metric == "e2e"), cmp[0])
    source = (
        "the sampling CI only: these runs carry no instrument error (uncalibrated)"
        if first.instrument_ns is None
        else f"sampling ±{_ms(first.sampling_ns)} + instrument ±{_ms(first.instrument_ns)}"
    )
    return (
        f"Smallest resolvable difference on this machine, {first.name}: "
        f"±{_ms(first.resolvable_ns)} ({source}); a smaller change is reported as "
        "not resolvable, never as a regression."
    )


def markdown_error(message: str) -> str:
    """The report when the gate could not run at all (exit 3)."""
    return f"### voicelat latency gate: 💥 could not run\n\n{_cell(message)}\n"
