"""Baseline comparison: is this run slower than an earlier one, beyond noise? (pure; no I/O)

For e2e and every segment at P50 and P90, the difference ``current - baseline`` gets a seeded
percentile-bootstrap confidence interval over the two runs' headline turns. A check fails (a
regression) only when the increase is significant (the interval lies above zero) **and** the
estimate exceeds the tolerance: ``max(tolerance_ms, tolerance_pct % of the baseline value)``.
Both parts matter: a few ms on a 1 s e2e can be significant yet irrelevant, and 15 % of a 2 ms
hand-off is noise nobody can act on.

The smallest difference this machine can resolve is the sampling interval widened by the
instrument error: the two runs' measurement error at P99 (summary.json's ``instrument``
section, when the runs were calibrated; without it, the sampling interval alone). A difference
whose interval excludes zero but whose widened interval does not is **not resolvable on this
machine** (:data:`NOT_RESOLVABLE`): never a regression, never "faster".
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from voicelat.core.base.contract import ALL_SEGMENTS
from voicelat.core.base.display import fmt_ms
from voicelat.core.base.errors import ConfigError
from voicelat.core.base.stats import Interval
from voicelat.core.base.turn import Turn
from voicelat.core.judge.budget import METRICS, NS_PER_MS, Check
from voicelat.core.summaries.run_summary import SCHEMA_VERSION, RunSummary, SummaryLike

#: Percentiles compared (P99 of a CI-sized sample is its maximum: not worth a verdict).
COMPARED_PERCENTILES: tuple[int, ...] = (50, 90)
#: Oldest results schema a baseline may use and still be compared with this version's runs.
MIN_BASELINE_SCHEMA = 1
#: A bootstrap of one or two turns has next to no resampling variety: its interval lies.
MIN_COMPARE_TURNS = 3
DEFAULT_TOLERANCE_MS = 20.0
DEFAULT_TOLERANCE_PCT = 10.0
DEFAULT_RESAMPLES = 2000

REGRESSION = "regression"
FASTER = "faster"
NOT_SIGNIFICANT = "not significant"
WITHIN_TOLERANCE = "within tolerance"
NOT_RESOLVABLE = "not resolvable on this machine"


@dataclass(frozen=True, slots=True)
class Tolerance:
    """How much slower counts as a regression: the larger of an absolute and a relative margin."""

    abs_ms: float = DEFAULT_TOLERANCE_MS
    rel_pct: float = DEFAULT_TOLERANCE_PCT

    def allowed_ns(self, baseline_ns: float) -> float:
        """The margin (ns) an increase over ``baseline_ns`` must exceed to count."""
        return max(self.abs_ms * NS_PER_MS, abs(baseline_ns) * self.rel_pct / 100)

    def describe(self) -> str:
        return f"{self.abs_ms:g} ms / {self.rel_pct:g} %"


DEFAULT_TOLERANCE = Tolerance()


@dataclass(frozen=True, slots=True)
class Comparison:
    """One metric at one percentile, baseline vs current, with its verdict."""

    metric: str
    percentile: int
    baseline_ns: float
    current_ns: float
    n_baseline: int
    n_current: int
    interval: Interval  # of current - baseline, in ns
    tolerance_ns: float
    verdict: str
    #: The two runs' instrument error added (ns, P99), None when neither was calibrated.
    instrument_ns: float | None = None

    @property
    def name(self) -> str:
        return f"{self.metric} P{self.percentile}"

    @property
    def regression(self) -> bool:
        return self.verdict == REGRESSION

    @property
    def sampling_ns(self) -> float:
        """Half the sampling interval's width (ns)."""
        return (self.interval.high - self.interval.low) / 2

    @property
    def resolvable_ns(self) -> float:
        """The smallest difference these two runs resolve on this machine (ns): the sampling
        half-width plus the instrument error."""
        return self.sampling_ns + (self.instrument_ns or 0.0)

    @property
    def resolvable(self) -> bool:
        """Whether the difference stands out of both the sampling noise and the instrument."""
        return self.verdict not in (NOT_SIGNIFICANT, NOT_RESOLVABLE)

    def change_text(self) -> str:
        """pyperf style: the change with its interval and ratio, or "not significant"."""
        if self.verdict == NOT_SIGNIFICANT:
            return NOT_SIGNIFICANT
        if self.verdict == NOT_RESOLVABLE:
            return (
                f"{fmt_ms(self.interval.estimate, sign=True, fine_below_ms=10)} ms: "
                f"{NOT_RESOLVABLE} (instrument error ±"
                f"{fmt_ms(self.instrument_ns, fine_below_ms=10)} ms on top of the "
                f"{self.interval.level:.0%} CI [{fmt_ms(self.interval.low, sign=True, fine_below_ms=10)}, "
                f"{fmt_ms(self.interval.high, sign=True, fine_below_ms=10)}])"
            )
        iv = self.interval
        # A decimal below 10 ms: a 0.2 ms change of a 1 ms hand-off printed "-0 ms [-0, -0]".
        text = (
            f"{fmt_ms(iv.estimate, sign=True, fine_below_ms=10)} ms "
            f"[{fmt_ms(iv.low, sign=True, fine_below_ms=10)}, "
            f"{fmt_ms(iv.high, sign=True, fine_below_ms=10)}]"
        )
        if self.baseline_ns > 0 and self.current_ns > 0:
            ratio = self.current_ns / self.baseline_ns
            text += f" {ratio:.2f}x slower" if ratio >= 1 else f" {1 / ratio:.2f}x faster"
        return text

    def to_check(self) -> Check:
        """The comparison as a gate line; only a regression fails."""
        base, cur = self.baseline_ns / NS_PER_MS, self.current_ns / NS_PER_MS
        msg = f"{self.name} {base:.0f} ms -> {cur:.0f} ms: {self.change_text()}"
        if self.regression:
            msg += (
                f" > tolerance {fmt_ms(self.tolerance_ns)} ms "
                f"(n={self.n_baseline} vs {self.n_current}, "
                f"{self.interval.level:.0%} CI): regression"
            )
        elif self.verdict not in (NOT_SIGNIFICANT, NOT_RESOLVABLE):
            msg += f" ({self.verdict})"
        return Check(
            "regression",
            self.name,
            not self.regression,
            msg,
            self.interval.estimate / NS_PER_MS,
            self.tolerance_ns / NS_PER_MS,
        )


def _pct_sorted(ordered: Sequence[float], p: float) -> float:
    """Linear-interpolated percentile of an already sorted sample (same rule as stats.percentile)."""
    rank = (len(ordered) - 1) * p / 100
    lo = math.floor(rank)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (rank - lo)


_ROW_KEYS = frozenset(METRICS) | frozenset(ALL_SEGMENTS)


def metric_rows(turns: Sequence[Turn]) -> list[dict[str, int]]:
    """Per headline turn, its e2e and segments (ns): the unit the bootstrap resamples."""
    rows = []
    for t in turns:
        if not t.headline or t.e2e_ns is None:
            continue
        # Every segment of either kind (an S2S turn's ``model`` too): rankings put both kinds
        # side by side; comparisons only look at the metrics they are asked for.
        rows.append({"e2e": t.e2e_ns, **{k: v for k, v in t.segments.items() if k in _ROW_KEYS}})
    return rows


def _values(rows: Sequence[Mapping[str, int]], metric: str) -> list[float]:
    return sorted(float(r[metric]) for r in rows if metric in r)


def compare_turns(
    baseline: Sequence[Turn],
    current: Sequence[Turn],
    *,
    tolerance: Tolerance = DEFAULT_TOLERANCE,
    level: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    metrics: Sequence[str] = METRICS,
    percentiles: Sequence[int] = COMPARED_PERCENTILES,
    instrument_ns: float | None = None,
) -> list[Comparison]:
    """Compare the headline turns of two runs; one :class:`Comparison` per metric and percentile.

    Each bootstrap resample draws whole turns (with replacement) from each run and reuses that
    draw for every metric: the turn is the unit that was measured, and one draw serving all
    eighteen statistics is several times cheaper than eighteen independent bootstraps.
    Seeded, so the same two runs always get the same verdicts. ``instrument_ns``: the two runs'
    instrument error added (:func:`combined_instrument_ns`), None when uncalibrated.
    """
    a_rows, b_rows = metric_rows(baseline), metric_rows(current)
    if len(a_rows) < MIN_COMPARE_TURNS or len(b_rows) < MIN_COMPARE_TURNS:
        return []
    todo = [m for m in metrics if _values(a_rows, m) and _values(b_rows, m)]
    rng = random.Random(seed)
    diffs: dict[tuple[str, int], list[float]] = {(m, p): [] for m in todo for p in percentiles}
    for _ in range(resamples):
        ra = rng.choices(a_rows, k=len(a_rows))
        rb = rng.choices(b_rows, k=len(b_rows))
        for m in todo:
            va, vb = _values(ra, m), _values(rb, m)
            if not va or not vb:
                continue  # a metric absent from every drawn turn: this resample says nothing
            for p in percentiles:
                diffs[m, p].append(_pct_sorted(vb, p) - _pct_sorted(va, p))
    alpha = (1 - level) / 2
    out: list[Comparison] = []
    for m in todo:
        va, vb = _values(a_rows, m), _values(b_rows, m)
        for p in percentiles:
            base, cur = _pct_sorted(va, p), _pct_sorted(vb, p)
            ds = sorted(diffs[m, p])
            iv = Interval(
                estimate=cur - base,
                low=_pct_sorted(ds, 100 * alpha),
                high=_pct_sorted(ds, 100 * (1 - alpha)),
                level=level,
            )
            tol = tolerance.allowed_ns(base)
            verdict = _verdict(iv, tol, instrument_ns)
            out.append(
                Comparison(m, p, base, cur, len(va), len(vb), iv, tol, verdict, instrument_ns)
            )
    return out


def _verdict(iv: Interval, tolerance_ns: float, instrument_ns: float | None = None) -> str:
    if not iv.significant:
        return NOT_SIGNIFICANT
    if not resolvable(iv.low, iv.high, instrument_ns):
        return NOT_RESOLVABLE
    if iv.low > 0:
        return REGRESSION if iv.estimate > tolerance_ns else WITHIN_TOLERANCE
    return FASTER if -iv.estimate > tolerance_ns else WITHIN_TOLERANCE


def resolvable(low: float, high: float, instrument_ns: float | None) -> bool:
    """Whether a difference's interval, widened by the instrument error, still excludes zero."""
    widen = instrument_ns or 0.0
    return low - widen > 0 or high + widen < 0


def instrument_error_ns(summary: SummaryLike | None) -> float | None:
    """A run's instrument error at P99 (ns) from its summary's ``instrument`` section (written
    by a calibrated run), None when the run was not calibrated or the section is unreadable."""
    if summary is None:
        return None
    section = (
        summary.extra.get("instrument")
        if isinstance(summary, RunSummary)
        else summary.get("instrument")
    )
    value = section.get("error_p99_ns") if isinstance(section, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return None
    return float(value)


def combined_instrument_ns(*summaries: SummaryLike | None) -> float | None:
    """The instrument error of a difference of runs: their P99 errors added (each run's
    figure can be off by its own; added, not root-summed, because a bias need not be random).
    None when no run was calibrated."""
    errors = [e for s in summaries if (e := instrument_error_ns(s)) is not None]
    return sum(errors) if errors else None


def too_few_turns_check(n_baseline: int, n_current: int) -> Check | None:
    """A failing check when either run has too few warm turns to compare, else None."""
    n = min(n_baseline, n_current)
    if n >= MIN_COMPARE_TURNS:
        return None
    return Check(
        "sample",
        "baseline comparison",
        False,
        f"sample too small to compare: {n_baseline} warm turns in the baseline, {n_current} in "
        f"this run; a comparison needs at least {MIN_COMPARE_TURNS} in each",
        n,
        MIN_COMPARE_TURNS,
        "turns",
    )


# -- which baselines may be compared ---------------------------------------------------------
def _short(sha: object) -> str:
    return str(sha)[:12] if sha else "unknown"


def _identity(summary: SummaryLike) -> tuple[object, object, object, object]:
    """Schema version, pipeline name and sha256, fixture set: what makes two runs comparable.

    A partial document (only ``pipeline`` and ``fixture_set_sha256``, as ``ci`` has before its
    run) is read as it is: the schema version of what it lacks is its own.
    """
    if isinstance(summary, RunSummary):
        return (
            summary.schema_version,
            summary.pipeline_name,
            summary.pipeline_sha256,
            summary.fixture_set_sha256,
        )
    pipeline = summary.get("pipeline") or {}
    return (
        summary.get("schema_version"),
        pipeline.get("name"),
        pipeline.get("sha256"),
        summary.get("fixture_set_sha256"),
    )


def check_baseline(
    baseline: SummaryLike | None,
    current: SummaryLike,
    *,
    source: str,
    force: bool = False,
) -> list[str]:
    """Refuse a baseline that cannot be compared with ``current``; return notes for the report.

    Both arguments are run summaries (typed, or ``summary.json``-shaped): ``schema_version``,
    ``pipeline`` (``name``, ``sha256``) and ``fixture_set_sha256``. Another pipeline (by name)
    or another fixture set is refused unless ``force``; an incompatible schema always is. The
    same pipeline with an edited file is compared (that edit is usually what the regression
    check is for) and noted.
    """
    if baseline is None:
        if not force:
            raise ConfigError(
                f"baseline {source} has no summary.json, so its pipeline and fixtures are "
                "unknown: give a run directory voicelat wrote, or pass --force"
            )
        return [f"forced: baseline {source} has no summary.json (pipeline and fixtures unchecked)"]
    version, b_name, b_sha, bf = _identity(baseline)
    _, c_name, c_sha, cf = _identity(current)
    if not isinstance(version, int) or not MIN_BASELINE_SCHEMA <= version <= SCHEMA_VERSION:
        raise ConfigError(
            f"baseline {source} uses results schema {version}, which this voicelat cannot compare "
            f"(it reads {MIN_BASELINE_SCHEMA}..{SCHEMA_VERSION}): record a new baseline"
        )
    notes: list[str] = []
    if b_name != c_name:
        msg = f"baseline {source} is of pipeline {b_name!r}, this run of {c_name!r}"
        if not force:
            raise ConfigError(f"{msg}: compare runs of one pipeline, or pass --force")
        notes.append(f"forced: {msg}")
    elif b_sha and c_sha and b_sha != c_sha:
        notes.append(
            f"pipeline file changed since the baseline (sha256 {_short(b_sha)} -> "
            f"{_short(c_sha)}): the comparison measures that change"
        )
    if bf != cf:
        msg = (
            f"baseline {source} was measured on another fixture set (sha256 {_short(bf)}, "
            f"this run {_short(cf)})"
        )
        if not force:
            raise ConfigError(f"{msg}: compare runs on the same fixtures, or pass --force")
        notes.append(f"forced: {msg}")
    return notes
