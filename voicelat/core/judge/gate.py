"""The CI gate's verdict: budget checks and baseline comparisons put together (pure; no I/O).

:func:`evaluate_gate` takes a run's summary and turns (and optionally a baseline's turns) and
returns a :class:`GateResult`; ``voicelat ci``, the reports and the pytest plugin all read it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from voicelat.core.base.contract import SEGMENTS
from voicelat.core.base.display import NS_PER_MS, fmt_ms
from voicelat.core.base.errors import EXIT_GATE_FAILED, EXIT_GATE_INCONCLUSIVE, EXIT_OK
from voicelat.core.base.turn import Turn
from voicelat.core.judge.budget import Budget, Check, evaluate_budget
from voicelat.core.judge.compare import (
    DEFAULT_TOLERANCE,
    Comparison,
    Tolerance,
    combined_instrument_ns,
    compare_turns,
    instrument_error_ns,
    metric_rows,
    too_few_turns_check,
)
from voicelat.core.summaries.run_summary import RunSummary, SummaryLike, TrustReason

#: Trust reasons that say the measuring machine, not the pipeline, may have inflated the
#: figures: a rerun on a quiet machine can tell the two apart. A Nagle hold is not one of
#: them: it is the connection's configuration, and a rerun gets it again.
MACHINE_TRUST_CODES = frozenset(
    {
        "loop_lag",
        "pacer_lag",
        "schedule_lag",
        "server_starved",
        "machine_load",
        "machine_inflated",
        "machine_turns",
    }
)
#: What ``ci`` does with a latency failure on a run that distrusts its machine: ``fail``
#: (exit 1, the default) or ``inconclusive`` (exit 4: rerun on a quiet machine).
UNTRUSTED_POLICIES = ("fail", "inconclusive")


def _is_latency(check: Check) -> bool:
    """A time the machine can inflate: a budget limit with a measured value, or a
    regression. The sample size and the failure rate are not (a loaded machine does not
    make a turn fail or go missing without saying so in the turn)."""
    if check.suite == "regression":
        return True
    return check.suite == "budget" and check.unit == "ms" and check.measured is not None


@dataclass(frozen=True)
class GateResult:
    """Everything the gate decided, and the run it decided on."""

    checks: tuple[Check, ...]
    summary: RunSummary
    comparisons: tuple[Comparison, ...] = ()
    notes: tuple[str, ...] = ()
    budget_source: str = "defaults"
    baseline: str | None = None
    baseline_summary: RunSummary | None = None
    tolerance: Tolerance = field(default_factory=Tolerance)
    run_dir: str | None = None
    untrusted: str = "fail"

    def __post_init__(self) -> None:
        # Callers that still hold summary.json documents get them typed here, once.
        object.__setattr__(self, "summary", RunSummary.coerce(self.summary))
        if self.baseline_summary is not None:
            object.__setattr__(self, "baseline_summary", RunSummary.coerce(self.baseline_summary))

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]

    @property
    def distrust(self) -> list[TrustReason]:
        """The run's own trust reasons that blame the measuring machine (see
        :data:`MACHINE_TRUST_CODES`); empty when the run trusts its figures."""
        trust = self.summary.trust
        if trust is None:
            return []
        return [r for r in trust.reasons if r.code in MACHINE_TRUST_CODES]

    @property
    def inconclusive(self) -> bool:
        """With ``untrusted="inconclusive"``: the gate failed, every failed check is a
        latency, and the run distrusts its machine. A rerun on a quiet machine decides."""
        return (
            self.untrusted == "inconclusive"
            and not self.passed
            and bool(self.distrust)
            and all(_is_latency(c) for c in self.failures)
        )

    @property
    def verdict(self) -> str:
        """``passed``, ``failed`` or ``inconclusive``."""
        if self.passed:
            return "passed"
        return "inconclusive" if self.inconclusive else "failed"

    @property
    def exit_code(self) -> int:
        """0 when every check passed; 4 when inconclusive (:attr:`inconclusive`); else 1 (a
        broken budget, a regression, too few turns)."""
        if self.passed:
            return EXIT_OK
        return EXIT_GATE_INCONCLUSIVE if self.inconclusive else EXIT_GATE_FAILED

    def suite(self, name: str) -> list[Check]:
        return [c for c in self.checks if c.suite == name]

    def to_json(self) -> dict[str, Any]:
        """A machine-readable verdict (``gate.json`` in the run directory)."""
        return {
            "passed": self.passed,
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "untrusted": self.untrusted,
            "distrust": [{"code": r.code, "message": r.message} for r in self.distrust],
            "budget_source": self.budget_source,
            "baseline": self.baseline,
            "tolerance": {"ms": self.tolerance.abs_ms, "pct": self.tolerance.rel_pct},
            "notes": list(self.notes),
            "checks": [
                {
                    "suite": c.suite,
                    "name": c.name,
                    "passed": c.passed,
                    "message": c.message,
                    "measured": c.measured,
                    "limit": c.limit,
                    "unit": c.unit,
                }
                for c in self.checks
            ],
            "comparisons": [
                {
                    "metric": c.metric,
                    "percentile": c.percentile,
                    "baseline_ns": round(c.baseline_ns),
                    "current_ns": round(c.current_ns),
                    "diff_ns": round(c.interval.estimate),
                    "ci_low_ns": round(c.interval.low),
                    "ci_high_ns": round(c.interval.high),
                    "level": c.interval.level,
                    "tolerance_ns": round(c.tolerance_ns),
                    "n_baseline": c.n_baseline,
                    "n_current": c.n_current,
                    "verdict": c.verdict,
                    "resolvable": c.resolvable,
                    "sampling_ns": round(c.sampling_ns),
                    "instrument_ns": None if c.instrument_ns is None else round(c.instrument_ns),
                    "resolvable_ns": round(c.resolvable_ns),
                }
                for c in self.comparisons
            ],
        }


def evaluate_gate(
    summary: SummaryLike,
    turns: Sequence[Turn],
    budget: Budget,
    *,
    baseline_turns: Sequence[Turn] | None = None,
    baseline: str | None = None,
    baseline_summary: SummaryLike | None = None,
    tolerance: Tolerance = DEFAULT_TOLERANCE,
    level: float = 0.95,
    notes: Sequence[str] = (),
    run_dir: str | None = None,
    untrusted: str = "fail",
) -> GateResult:
    """Budget checks, then (with a baseline) one regression check per metric and percentile.

    ``untrusted`` (one of :data:`UNTRUSTED_POLICIES`) decides what a latency failure on a run
    that distrusts its machine is: a failure, or inconclusive (:attr:`GateResult.inconclusive`).
    """
    if untrusted not in UNTRUSTED_POLICIES:
        raise ValueError(f"untrusted must be one of {UNTRUSTED_POLICIES}, not {untrusted!r}")
    typed = RunSummary.coerce(summary)
    checks = evaluate_budget(budget, typed)
    comparisons: list[Comparison] = []
    if baseline_turns is not None:
        short = too_few_turns_check(len(metric_rows(baseline_turns)), len(metric_rows(turns)))
        if short is not None:
            checks.append(short)
        else:
            comparisons = compare_turns(
                baseline_turns, turns, tolerance=tolerance, level=level,
                instrument_ns=combined_instrument_ns(typed, baseline_summary),
            )  # fmt: skip
            checks.extend(c.to_check() for c in comparisons)
    return GateResult(
        checks=tuple(checks),
        summary=typed,
        comparisons=tuple(comparisons),
        notes=(*notes, *unenforceable_notes(budget, typed)),
        budget_source=budget.source,
        baseline=baseline,
        baseline_summary=None if baseline_summary is None else RunSummary.coerce(baseline_summary),
        tolerance=tolerance,
        run_dir=run_dir,
        untrusted=untrusted,
    )


def unenforceable_notes(budget: Budget, summary: SummaryLike) -> list[str]:
    """One note per latency limit no larger than the run's instrument error (P99): this machine
    cannot tell a pass from a fail at that limit, so the line is flagged, not trusted. The check
    itself still runs (a flag, not a verdict: the gate's exit code does not change)."""
    error_ns = instrument_error_ns(summary)
    if error_ns is None:
        return []
    return [
        f"budget {lim.name} limit {lim.limit_ms:g} ms is within this run's instrument error "
        f"(±{fmt_ms(error_ns, fine_below_ms=10)} ms P99): unenforceable on this machine; "
        "raise the limit or calibrate on a quieter one (docs/CI.md)"
        for lim in budget.limits
        if lim.limit_ms * NS_PER_MS <= error_ns
    ]


# -- plain text ------------------------------------------------------------------------------
def headline_text(summary: SummaryLike) -> str:
    """``e2e P50 1066 ms, P90 1186 ms (n=14 warm turns; 15 run, 1 warm-up, 0 failed)``."""
    s = RunSummary.coerce(summary)
    c = s.counts
    return (
        f"e2e P50 {fmt_ms(s.e2e.p50)} ms, P90 {fmt_ms(s.e2e.p90)} ms "
        f"(n={c.headline} warm turns; {c.turns} run, "
        f"{c.warmup} warm-up, {c.cold} cold, {c.failed} failed)"
    )


def waterfall_lines(summary: SummaryLike, width: int = 40) -> list[str]:
    """The P50 and P90 bands as bars: what the turns around each percentile spent their time on.

    Each band is the mean composition of the turns ranked around the percentile, so its bars
    sum to the band's mean e2e; the exact percentile is given beside it (they differ slightly).
    """
    lines: list[str] = []
    s = RunSummary.coerce(summary)
    for p in (50, 90):
        band = s.band(p)
        if band is None:
            continue
        total = band.mean_e2e_ns
        lines.append(
            f"waterfall at P{p}: mean of {band.band_n} turn(s) around it = "
            f"{fmt_ms(total)} ms (exact P{p} e2e {fmt_ms(band.e2e_percentile_ns)} ms, "
            f"n={band.n})"
        )
        for seg in SEGMENTS:
            v = band.segments_ns.get(seg, 0)
            bar = "#" * round(width * v / total) if total > 0 else ""
            lines.append(f"  {seg:<16}{fmt_ms(v):>6} ms  {bar}")
    return lines


def waterfall_compact(summary: SummaryLike) -> list[str]:
    """The P50 and P90 bands, one line each (for places that truncate long explanations)."""
    lines: list[str] = []
    s = RunSummary.coerce(summary)
    for p in (50, 90):
        band = s.band(p)
        if band is None:
            continue
        parts = " + ".join(f"{seg} {fmt_ms(band.segments_ns.get(seg, 0))}" for seg in SEGMENTS)
        lines.append(
            f"P{p} band ({band.band_n} turn(s), {fmt_ms(band.mean_e2e_ns)} ms; "
            f"exact P{p} {fmt_ms(band.e2e_percentile_ns)} ms): {parts} ms"
        )
    return lines


def gate_text(result: GateResult) -> str:
    """The verdict for a terminal or CI log: one line per check, the failures summed up last."""
    lines = [f"gate: {headline_text(result.summary)}"]
    lines.extend(f"note: {n}" for n in result.notes)
    lines.append(f"budget ({result.budget_source}):")
    for c in result.checks:
        if c.suite in ("budget", "sample"):
            lines.append(f"  {'PASS' if c.passed else 'FAIL'}  {c.message}")
    if result.baseline is not None:
        cmp = result.comparisons
        level = f"{cmp[0].interval.level:.0%} CI, " if cmp else ""
        lines.append(
            f"vs baseline {result.baseline} ({level}tolerance {result.tolerance.describe()}):"
        )
        for comp in cmp:
            lines.append(
                f"  {'FAIL' if comp.regression else 'ok  '}  {comp.name:<20}"
                f"{fmt_ms(comp.baseline_ns, width=7)} -> {fmt_ms(comp.current_ns, width=5)} ms  "
                f"{comp.change_text()}"
            )
    failed = result.failures
    if failed:
        # A failure's reader must see at once when the run blames its own machine.
        lines.extend(f"distrust: {r.message}" for r in result.distrust)
        listed = "; ".join(c.message for c in failed[:3]) + (
            f"; and {len(failed) - 3} more" if len(failed) > 3 else ""
        )
        if result.inconclusive:
            lines.append(
                f"GATE INCONCLUSIVE: {len(failed)} of {len(result.checks)} checks failed, each a "
                f"latency this run says its machine may have inflated: {listed}. Rerun on a quiet "
                "machine (exit 4; --untrusted fail makes it a failure)"
            )
        else:
            lines.append(
                f"GATE FAILED: {len(failed)} of {len(result.checks)} checks failed: {listed}"
            )
    else:
        lines.append(f"GATE PASSED: {len(result.checks)} checks")
    return "\n".join(lines)
