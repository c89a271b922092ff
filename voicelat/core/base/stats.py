"""Percentiles, the percentile waterfall and bootstrap intervals (pure, integer ns in and out)."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

PERCENTILES: tuple[int, ...] = (50, 90, 99)


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile by linear interpolation between closest ranks (NumPy's default)."""
    if not values:
        raise ValueError("percentile of an empty sample")
    if not 0 <= p <= 100:
        raise ValueError(f"percentile must be within 0..100, not {p}")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100
    lo = math.floor(rank)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (rank - lo)


@dataclass(frozen=True, slots=True)
class Distribution:
    """Summary of one sample; ``n`` always travels with the numbers."""

    n: int
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    min: float | None = None
    max: float | None = None
    mean: float | None = None

    @classmethod
    def of(cls, values: Sequence[float]) -> Distribution:
        if not values:
            return cls(n=0)
        return cls(
            n=len(values),
            p50=percentile(values, 50),
            p90=percentile(values, 90),
            p99=percentile(values, 99),
            min=min(values),
            max=max(values),
            mean=sum(values) / len(values),
        )

    def at(self, p: int) -> float | None:
        return {50: self.p50, 90: self.p90, 99: self.p99, 100: self.max}.get(p)

    def to_json(self, *, integer: bool = True) -> dict[str, float | int | None]:
        """Integer ns by default; ``integer=False`` keeps ratios and rates (RTF, tokens/s)."""

        def r(v: float | None) -> float | int | None:
            if v is None:
                return None
            return round(v) if integer else round(v, 6)

        return {
            "n": self.n,
            "p50": r(self.p50),
            "p90": r(self.p90),
            "p99": r(self.p99),
            "min": r(self.min),
            "max": r(self.max),
            "mean": r(self.mean),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, float | int | None]) -> Distribution:
        def f(k: str) -> float | None:
            v = data.get(k)
            return None if v is None else float(v)

        return cls(
            n=int(data.get("n") or 0),
            p50=f("p50"),
            p90=f("p90"),
            p99=f("p99"),
            min=f("min"),
            max=f("max"),
            mean=f("mean"),
        )


@dataclass(frozen=True, slots=True)
class Band:
    """The mean composition of the turns ranked around a percentile of e2e.

    ``segments`` sum to ``mean_e2e`` exactly (up to float rounding), so a waterfall drawn from a
    band never lies about its total; ``e2e_percentile`` is the exact interpolated percentile,
    drawn on the same axis.
    """

    p: int
    n: int
    band_n: int
    e2e_percentile: float
    mean_e2e: float
    segments: dict[str, float]
    indexes: tuple[int, ...]


def band_width(n: int) -> int:
    """How many turns around a percentile make its band: the nearest max(1, n/10)."""
    return max(1, round(n / 10))


def percentile_band(
    rows: Sequence[tuple[int, float, Mapping[str, float]]], p: int, segment_names: Sequence[str]
) -> Band | None:
    """Band of ``band_width(n)`` rows whose e2e rank is nearest the rank of percentile ``p``.

    ``rows`` are ``(turn index, e2e, segments)``.
    """
    if not rows:
        return None
    ordered = sorted(rows, key=lambda r: (r[1], r[0]))
    n = len(ordered)
    width = band_width(n)
    rank = (n - 1) * p / 100
    # Centre the window on the fractional rank, kept inside the sample.
    start = round(rank - (width - 1) / 2)
    start = max(0, min(start, n - width))
    chosen = ordered[start : start + width]
    mean_e2e = sum(r[1] for r in chosen) / width
    segments = {s: sum(float(r[2].get(s, 0)) for r in chosen) / width for s in segment_names}
    return Band(
        p=p,
        n=n,
        band_n=width,
        e2e_percentile=percentile([r[1] for r in ordered], p),
        mean_e2e=mean_e2e,
        segments=segments,
        indexes=tuple(r[0] for r in chosen),
    )


@dataclass(frozen=True, slots=True)
class Interval:
    """A bootstrap confidence interval for a statistic of the difference ``b - a``."""

    estimate: float
    low: float
    high: float
    level: float

    @property
    def significant(self) -> bool:
        """The interval excludes zero."""
        return self.low > 0 or self.high < 0


def bootstrap_diff(
    a: Sequence[float],
    b: Sequence[float],
    stat: Callable[[Sequence[float]], float],
    *,
    resamples: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> Interval:
    """Percentile-bootstrap interval of ``stat(b) - stat(a)``; seeded, so verdicts reproduce."""
    if not a or not b:
        raise ValueError("bootstrap of an empty sample")
    rng = random.Random(seed)
    diffs: list[float] = []
    na, nb = len(a), len(b)
    for _ in range(resamples):
        ra = [a[rng.randrange(na)] for _ in range(na)]
        rb = [b[rng.randrange(nb)] for _ in range(nb)]
        diffs.append(stat(rb) - stat(ra))
    alpha = (1 - level) / 2
    return Interval(
        estimate=stat(b) - stat(a),
        low=percentile(diffs, 100 * alpha),
        high=percentile(diffs, 100 * (1 - alpha)),
        level=level,
    )


def bootstrap_ci(
    values: Sequence[float],
    stat: Callable[[Sequence[float]], float],
    *,
    resamples: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile-bootstrap interval of ``stat(values)``."""
    if not values:
        raise ValueError("bootstrap of an empty sample")
    rng = random.Random(seed)
    n = len(values)
    stats = [stat([values[rng.randrange(n)] for _ in range(n)]) for _ in range(resamples)]
    alpha = (1 - level) / 2
    return percentile(stats, 100 * alpha), percentile(stats, 100 * (1 - alpha))
