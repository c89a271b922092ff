"""Rank combinations by voice-to-voice latency, and say which gaps to the best are real (pure).

Input is plain integers: per combination, one row per headline turn (``e2e`` and each segment in
ns) plus turn counts. Output is a ranking by e2e at one percentile (P50 by default), with

* e2e P50 and P90, each with a seeded percentile-bootstrap confidence interval;
* each segment's P50 and P90 (not additive: percentiles of parts do not sum to the whole);
* the failure rate of the measured turns and ``n``, the turns the numbers are made of;
* against the best combination, at each percentile, the bootstrap interval of the difference
  (``other - best``, :func:`voicelat.core.base.stats.bootstrap_diff`): *significant* only when the interval
  excludes zero, otherwise "not significant", and "too few turns" when either side has fewer
  than :data:`voicelat.core.judge.compare.MIN_COMPARE_TURNS` (a bootstrap of two turns has no variety and
  would claim a precision it does not have); a significant gap whose interval, widened by the
  two runs' instrument error (each run's summary ``instrument.error_p99_ns``), holds zero is
  "not resolvable on this machine".

A combination that failed every turn stays in the ranking, unranked, with its reason. One that
fails some turns is ranked on the others, and its failure rate is printed beside it: a fast
combination that often fails is not the best one, and the reader must see both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from voicelat.core.base.contract import ALL_SEGMENTS, E2E
from voicelat.core.base.display import NS_PER_MS as NS_PER_MS
from voicelat.core.base.display import fmt_ms
from voicelat.core.base.errors import ConfigError
from voicelat.core.base.stats import bootstrap_ci, bootstrap_diff, percentile
from voicelat.core.judge.compare import MIN_COMPARE_TURNS, NOT_RESOLVABLE, resolvable
from voicelat.core.summaries.run_summary import BargeInSummary

RANK_PERCENTILES: tuple[int, ...] = (50, 90)
NOT_SIGNIFICANT = "not significant"
TOO_FEW = "too few turns"

OK = "ok"
FAILED = "failed"
NO_WARM_TURNS = "no warm turns"


@dataclass(frozen=True)
class CombinationSample:
    """What the ranking needs of one combination (integers only; no turns, no files)."""

    name: str
    rows: Sequence[Mapping[str, int]]  # one per headline turn: "e2e" and segments, ns
    measured: int  # measured (not warm-up) turns that ran
    failed: int  # of those, how many failed
    warmup: int = 0
    cold: int = 0
    failure: str | None = None  # the most common failure reason, or why it never ran
    #: The run's instrument error at P99 (ns), None when it was not calibrated.
    instrument_ns: float | None = None


@dataclass(frozen=True, slots=True)
class Estimate:
    """A percentile and its bootstrap interval (``None`` bounds: too few turns for one)."""

    value: float
    low: float | None
    high: float | None


@dataclass(frozen=True, slots=True)
class VsBest:
    """The difference to the best combination at one percentile (``other - best``, ns)."""

    estimate: float
    low: float | None
    high: float | None
    tested: bool  # enough turns on both sides for a bootstrap
    significant: bool
    #: Both runs' instrument error added (ns), None when neither was calibrated.
    instrument_ns: float | None = None

    @property
    def resolvable(self) -> bool:
        """Significant, and still clear of zero with the instrument error added."""
        if not self.significant or self.low is None or self.high is None:
            return False
        return resolvable(self.low, self.high, self.instrument_ns)

    @property
    def resolvable_ns(self) -> float | None:
        """The smallest gap these two runs resolve (ns): CI half-width plus instrument error."""
        if self.low is None or self.high is None:
            return None
        return (self.high - self.low) / 2 + (self.instrument_ns or 0.0)

    def text(self) -> str:
        if not self.tested:
            return TOO_FEW
        if not self.significant:
            return NOT_SIGNIFICANT
        assert self.low is not None and self.high is not None
        if not self.resolvable:
            return NOT_RESOLVABLE
        return (
            f"{fmt_ms(self.estimate, sign=True, fine_below_ms=10)} ms "
            f"[{fmt_ms(self.low, sign=True, fine_below_ms=10)}, "
            f"{fmt_ms(self.high, sign=True, fine_below_ms=10)}]"
        )


@dataclass(frozen=True)
class Ranked:
    """One row of the ranking."""

    rank: int | None  # 1 = best; None when it has no warm turn to rank
    name: str
    status: str  # OK, FAILED, NO_WARM_TURNS
    n: int
    measured: int
    failed: int
    warmup: int
    cold: int
    failure: str | None
    e2e: dict[int, Estimate] = field(default_factory=dict)
    segments: dict[str, dict[int, float]] = field(default_factory=dict)
    vs_best: dict[int, VsBest] = field(default_factory=dict)  # empty for the best itself

    @property
    def failure_rate(self) -> float | None:
        return None if self.measured == 0 else self.failed / self.measured

    @property
    def best(self) -> bool:
        return self.rank == 1

    def to_json(self) -> dict[str, Any]:
        def r(v: float | None) -> int | None:
            return None if v is None else round(v)

        return {
            "rank": self.rank,
            "name": self.name,
            "status": self.status,
            "n": self.n,
            "measured": self.measured,
            "failed": self.failed,
            "failure_rate": self.failure_rate,
            "warmup": self.warmup,
            "cold": self.cold,
            "failure": self.failure,
            "e2e": {
                f"p{p}": {"ns": r(e.value), "ci_low_ns": r(e.low), "ci_high_ns": r(e.high)}
                for p, e in self.e2e.items()
            },
            "segments": {
                s: {f"p{p}": r(v) for p, v in ps.items()} for s, ps in self.segments.items()
            },
            "vs_best": {
                f"p{p}": {
                    "diff_ns": r(v.estimate),
                    "ci_low_ns": r(v.low),
                    "ci_high_ns": r(v.high),
                    "tested": v.tested,
                    "significant": v.significant,
                    "resolvable": v.resolvable,
                    "instrument_ns": r(v.instrument_ns),
                    "resolvable_ns": r(v.resolvable_ns),
                    "verdict": v.text(),
                }
                for p, v in self.vs_best.items()
            },
        }


def _values(rows: Sequence[Mapping[str, int]], metric: str) -> list[float]:
    return [float(r[metric]) for r in rows if metric in r]


@dataclass(frozen=True, slots=True)
class _Bootstrap:
    """How every interval of one ranking is drawn (the same for all, so verdicts compare)."""

    level: float
    resamples: int
    seed: int
    min_turns: int

    def ci(self, values: Sequence[float], p: int) -> tuple[float, float]:
        return bootstrap_ci(
            values, _stat_at(p), resamples=self.resamples, level=self.level, seed=self.seed
        )

    def diff(
        self, best: Sequence[float], other: Sequence[float], p: int, instrument: float | None
    ) -> VsBest:
        iv = bootstrap_diff(
            best, other, _stat_at(p), resamples=self.resamples, level=self.level, seed=self.seed
        )
        return VsBest(iv.estimate, iv.low, iv.high, True, iv.significant, instrument)


def _stat_at(p: int) -> Callable[[Sequence[float]], float]:
    return lambda v: percentile(v, p)


def _unranked(s: CombinationSample) -> Ranked:
    """A combination with no warm measured turn: kept in the table, with why."""
    status = FAILED if (s.failed > 0 or s.failure) else NO_WARM_TURNS
    reason = s.failure
    if reason is None and status == NO_WARM_TURNS:
        reason = "no warm measured turn (every turn was cold or a warm-up)"
    return Ranked(None, s.name, status, 0, s.measured, s.failed, s.warmup, s.cold, reason)


def _ranked(
    rank: int,
    s: CombinationSample,
    e2e: Sequence[float],
    best: Sequence[float] | None,
    percentiles: Sequence[int],
    boot: _Bootstrap,
    best_instrument: float | None = None,
) -> Ranked:
    """One ranked row; ``best`` is the e2e sample of #1 (None for #1 itself)."""
    enough = len(e2e) >= boot.min_turns
    estimates: dict[int, Estimate] = {}
    for p in percentiles:
        low, high = boot.ci(e2e, p) if enough else (None, None)
        estimates[p] = Estimate(percentile(e2e, p), low, high)
    segments = {
        seg: {p: percentile(vals, p) for p in percentiles}
        for seg in ALL_SEGMENTS
        if (vals := _values(s.rows, seg))
    }
    vs: dict[int, VsBest] = {}
    if best is not None:
        tested = enough and len(best) >= boot.min_turns
        errors = [e for e in (best_instrument, s.instrument_ns) if e is not None]
        instrument = sum(errors) if errors else None
        for p in percentiles:
            if tested:
                vs[p] = boot.diff(best, e2e, p, instrument)
            else:
                est = percentile(e2e, p) - percentile(best, p)
                vs[p] = VsBest(est, None, None, False, False)
    return Ranked(
        rank,
        s.name,
        OK,
        len(e2e),
        s.measured,
        s.failed,
        s.warmup,
        s.cold,
        s.failure,
        estimates,
        segments,
        vs,
    )


def rank_combinations(
    samples: Sequence[CombinationSample],
    *,
    by: int = 50,
    percentiles: Sequence[int] = RANK_PERCENTILES,
    level: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    min_turns: int = MIN_COMPARE_TURNS,
    key: Mapping[str, float] | None = None,
) -> list[Ranked]:
    """Rank by e2e at percentile ``by`` (ties: the other percentiles, then the name).

    ``key`` (combination name -> a figure, lower is better) ranks by that figure first, such
    as each run's barge-in stop P50 or false barge-in rate (:func:`barge_in_key`): the
    combinations that have one come first, in its order, the rest after them by e2e; e2e
    and "vs best" (this minus #1, at e2e) are computed as ever.
    Every bootstrap uses ``seed``, so the same results always give the same verdicts.
    """
    if by not in percentiles:
        raise ValueError(f"rank percentile {by} must be one of {tuple(percentiles)}")
    measured = [(s, e2e) for s in samples if (e2e := _values(s.rows, E2E))]
    unranked = [_unranked(s) for s in samples if not _values(s.rows, E2E)]
    order = [by, *(p for p in percentiles if p != by)]
    first = key or {}

    def sort_key(m: tuple[CombinationSample, list[float]]) -> tuple[Any, ...]:
        figure = first.get(m[0].name)
        head = (0, figure) if figure is not None else (1, 0.0)
        return (*head, *(percentile(m[1], p) for p in order), m[0].name)

    measured.sort(key=sort_key)
    boot = _Bootstrap(level, resamples, seed, min_turns)
    best = measured[0][1] if measured else []
    best_instrument = measured[0][0].instrument_ns if measured else None
    ranked = [
        _ranked(i + 1, s, e2e, best if i > 0 else None, percentiles, boot, best_instrument)
        for i, (s, e2e) in enumerate(measured)
    ]
    return ranked + unranked


#: ``--rank-by`` keys besides the e2e percentiles: a whole-call comparison's barge-in figures.
BARGE_IN_KEYS: tuple[str, ...] = ("barge_in_stop", "false_barge_in")


def barge_in_key(rank_by: str, barge_in: Mapping[str, BargeInFigures]) -> dict[str, float]:
    """Each combination's figure for ranking by ``rank_by`` (one of :data:`BARGE_IN_KEYS`):
    its interruptions' stop at the ear P50 (ns), or its false barge-in rate; a combination
    whose run has no such figure (no measured interruption, no backchannel) is left out."""
    if rank_by not in BARGE_IN_KEYS:
        raise ValueError(f"rank key {rank_by!r} must be one of {BARGE_IN_KEYS}")
    out: dict[str, float] = {}
    for name, b in barge_in.items():
        value = b.stop_p50_ns if rank_by == "barge_in_stop" else b.false_barge_in_rate
        if value is not None:
            out[name] = float(value)
    return out


@dataclass(frozen=True, slots=True)
class BargeInFigures:
    """What a comparison shows of one combination's interruptions (its summary's
    ``calls.barge_in``): how many were measured and stopped, the stop at the ear P50/P90
    (ns), the backchannels and noises it met and how many of them it stopped or paused on."""

    interrupts: int = 0
    stopped: int = 0
    never_stopped: int = 0
    stop_p50_ns: int | None = None
    stop_p90_ns: int | None = None
    backchannels: int = 0
    false_barge_ins: int = 0
    false_barge_in_rate: float | None = None
    #: "backchannel" / "noise" -> (met, false barge-ins on them).
    by_kind: Mapping[str, tuple[int, int]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "interrupts": self.interrupts,
            "stopped": self.stopped,
            "never_stopped": self.never_stopped,
            "stop_p50_ns": self.stop_p50_ns,
            "stop_p90_ns": self.stop_p90_ns,
            "backchannels": self.backchannels,
            "false_barge_ins": self.false_barge_ins,
            "false_barge_in_rate": self.false_barge_in_rate,
            "by_kind": {k: {"n": n, "false": f} for k, (n, f) in self.by_kind.items()},
        }

    @classmethod
    def of(cls, b: BargeInSummary) -> BargeInFigures:
        """The figures of a run's typed ``calls.barge_in`` section."""

        def ns(v: float | None) -> int | None:
            return None if v is None else round(v)

        return cls(
            interrupts=b.interrupts_measured,
            stopped=b.stopped,
            never_stopped=b.never_stopped,
            stop_p50_ns=ns(b.stop.p50) if b.stop.n else None,
            stop_p90_ns=ns(b.stop.p90) if b.stop.n else None,
            backchannels=b.backchannels,
            false_barge_ins=b.false_barge_ins,
            false_barge_in_rate=b.false_barge_in_rate,
            by_kind={
                k: (int(v.get("n", 0)), int(v.get("false", 0)))
                for k, v in b.by_kind.items()
                if v.get("n")
            },
        )

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BargeInFigures:
        def count(k: str) -> int:
            v = data.get(k)
            return v if isinstance(v, int) and not isinstance(v, bool) else 0

        def ns(k: str) -> int | None:
            v = data.get(k)
            return round(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

        rate = data.get("false_barge_in_rate")
        kinds = data.get("by_kind")
        return cls(
            interrupts=count("interrupts"),
            stopped=count("stopped"),
            never_stopped=count("never_stopped"),
            stop_p50_ns=ns("stop_p50_ns"),
            stop_p90_ns=ns("stop_p90_ns"),
            backchannels=count("backchannels"),
            false_barge_ins=count("false_barge_ins"),
            false_barge_in_rate=(
                float(rate)
                if isinstance(rate, int | float) and not isinstance(rate, bool)
                else None
            ),
            by_kind={
                str(k): (int(v.get("n") or 0), int(v.get("false") or 0))
                for k, v in (kinds.items() if isinstance(kinds, Mapping) else ())
                if isinstance(v, Mapping)
            },
        )


def check_same_fixtures(fixture_sets: Mapping[str, str | None]) -> None:
    """Refuse to compare combinations measured on different fixture sets (by set hash).

    Latency depends on what is said: a ranking across different audio compares the audio.
    """
    known = dict(fixture_sets)
    distinct = sorted({str(h) for h in known.values()})
    if len(distinct) <= 1:
        return
    first = next(iter(known))
    others = [n for n, h in known.items() if h != known[first]]
    raise ConfigError(
        f"combinations were measured on different fixtures: {first!r} (fixture set "
        f"{str(known[first])[:12]}) vs {', '.join(repr(n) for n in others)} "
        f"(fixture set {str(known[others[0]])[:12]}); compare runs on the same fixtures"
    )


__all__ = [
    "BARGE_IN_KEYS",
    "FAILED",
    "NOT_SIGNIFICANT",
    "NO_WARM_TURNS",
    "OK",
    "RANK_PERCENTILES",
    "TOO_FEW",
    "BargeInFigures",
    "CombinationSample",
    "Estimate",
    "Ranked",
    "VsBest",
    "barge_in_key",
    "check_same_fixtures",
    "rank_combinations",
]
