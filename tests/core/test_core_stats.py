"""Percentiles (linear, as numpy), distributions, percentile bands and bootstrap intervals."""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence

import numpy as np
import pytest

from voicelat.core.base.stats import (
    Distribution,
    band_width,
    bootstrap_ci,
    bootstrap_diff,
    percentile,
    percentile_band,
)

SEGS = ("a", "b", "c")


@pytest.mark.parametrize("seed", range(20))
def test_percentile_matches_numpy_linear(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(1, 60)
    if seed % 2:
        values: list[float] = [rng.randint(0, 5_000_000_000) for _ in range(n)]
    else:
        values = [rng.lognormvariate(20, 0.5) for _ in range(n)]
    for p in (0, 1, 10, 25, 33.3, 50, 75, 90, 95, 99, 99.9, 100):
        expected = float(np.percentile(values, p, method="linear"))
        assert percentile(values, p) == pytest.approx(expected, rel=1e-12, abs=1e-6)


def test_percentile_interpolates_between_ranks() -> None:
    assert percentile([10, 20, 30, 40], 50) == 25
    assert percentile([40, 10, 30, 20], 90) == pytest.approx(37)  # order of input is irrelevant
    assert percentile([1, 2], 25) == pytest.approx(1.25)


def test_percentile_edges() -> None:
    assert percentile([7], 0) == 7
    assert percentile([7], 50) == 7
    assert percentile([7], 100) == 7
    values = [5, 3, 9, 1]
    assert percentile(values, 0) == 1
    assert percentile(values, 100) == 9
    with pytest.raises(ValueError, match="empty"):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1], 101)
    with pytest.raises(ValueError):
        percentile([1], -1)


def test_distribution_of_and_json_round_trip() -> None:
    values = [float(v) for v in range(1, 11)]
    d = Distribution.of(values)
    assert d.n == 10
    assert d.p50 == pytest.approx(5.5)
    assert d.p90 == pytest.approx(9.1)
    assert d.p99 == pytest.approx(9.91)
    assert (d.min, d.max, d.mean) == (1, 10, 5.5)
    assert d.at(50) == d.p50 and d.at(100) == 10 and d.at(75) is None
    j = d.to_json()
    assert j == {"n": 10, "p50": 6, "p90": 9, "p99": 10, "min": 1, "max": 10, "mean": 6}
    back = Distribution.from_json(j)
    assert back.n == 10 and back.p90 == 9.0


def test_empty_distribution() -> None:
    d = Distribution.of([])
    assert d.n == 0 and d.p50 is None
    assert d.to_json()["p50"] is None
    assert Distribution.from_json(d.to_json()) == d


# -- percentile bands ------------------------------------------------------------------------
def rows_of(n: int, seed: int = 1) -> list[tuple[int, float, dict[str, float]]]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        segs = {s: float(rng.randint(1, 400_000_000)) for s in SEGS}
        rows.append((i, sum(segs.values()), segs))
    return rows


@pytest.mark.parametrize("n", [1, 2, 4, 5, 9, 10, 14, 15, 16, 25, 37, 100, 101])
def test_band_width(n: int) -> None:
    assert band_width(n) == max(1, round(n / 10))
    band = percentile_band(rows_of(n), 90, SEGS)
    assert band is not None
    assert band.band_n == band_width(n) == len(band.indexes)
    assert band.n == n


@pytest.mark.parametrize("n", [1, 3, 10, 37, 100])
@pytest.mark.parametrize("p", [0, 50, 90, 99, 100])
def test_band_segments_sum_to_band_mean_e2e(n: int, p: int) -> None:
    rows = rows_of(n, seed=n * 100 + p)
    band = percentile_band(rows, p, SEGS)
    assert band is not None
    assert sum(band.segments.values()) == pytest.approx(band.mean_e2e, rel=1e-12)
    by_index = {r[0]: r for r in rows}
    assert band.mean_e2e == pytest.approx(statistics.fmean(by_index[i][1] for i in band.indexes))
    assert band.e2e_percentile == pytest.approx(percentile([r[1] for r in rows], p))
    assert band.p == p


@pytest.mark.parametrize("n", [10, 37, 100, 250])
@pytest.mark.parametrize("p", [0, 10, 50, 90, 99, 100])
def test_band_is_contiguous_in_rank_and_near_the_percentile_rank(n: int, p: int) -> None:
    rows = rows_of(n, seed=n + p)
    ordered = sorted(rows, key=lambda r: r[1])
    rank_of = {r[0]: k for k, r in enumerate(ordered)}
    band = percentile_band(rows, p, SEGS)
    assert band is not None
    ranks = sorted(rank_of[i] for i in band.indexes)
    assert ranks == list(range(ranks[0], ranks[0] + band.band_n))  # contiguous in rank
    target = (n - 1) * p / 100
    centre = (ranks[0] + ranks[-1]) / 2
    # centred on the percentile rank, unless the window hits the edge of the sample
    if band.band_n / 2 <= target <= n - 1 - band.band_n / 2:
        assert abs(centre - target) <= 0.5
    else:
        assert ranks[0] == 0 or ranks[-1] == n - 1
    # the exact percentile lies within the band's e2e range (or at its edge)
    e2es = [r[1] for r in rows if r[0] in band.indexes]
    assert min(e2es) <= band.e2e_percentile <= max(e2es) or band.band_n == 1


def test_band_picks_the_right_turns_on_a_known_sample() -> None:
    # 20 turns with e2e 100..2000 (index i has e2e (i+1)*100), shuffled: width 2
    rows = [(i, float((i + 1) * 100), {"a": float((i + 1) * 100)}) for i in range(20)]
    random.Random(3).shuffle(rows)
    p50 = percentile_band(rows, 50, ["a"])
    p90 = percentile_band(rows, 90, ["a"])
    p100 = percentile_band(rows, 100, ["a"])
    assert p50 is not None and p90 is not None and p100 is not None
    assert sorted(p50.indexes) == [9, 10]  # rank 9.5
    assert p50.mean_e2e == 1050 and p50.e2e_percentile == 1050
    assert sorted(p90.indexes) == [17, 18]  # rank 17.1: the two nearest ranks are 17 and 18
    assert p90.mean_e2e == 1850 and p90.e2e_percentile == pytest.approx(1810)
    assert sorted(p100.indexes) == [18, 19]


def test_band_of_nothing() -> None:
    assert percentile_band([], 50, SEGS) is None


def test_band_missing_segment_counts_as_zero() -> None:
    band = percentile_band(
        [(0, 10.0, {"a": 10.0}), (1, 20.0, {"a": 15.0, "b": 5.0})], 100, ("a", "b")
    )
    assert band is not None
    assert band.segments == {"a": 15.0, "b": 5.0}


# -- bootstrap -------------------------------------------------------------------------------
def sample(seed: int, mu: float, n: int = 40) -> list[float]:
    rng = random.Random(seed)
    return [rng.gauss(mu, 10) for _ in range(n)]


def median(xs: Sequence[float]) -> float:
    return percentile(xs, 50)


def test_bootstrap_diff_is_deterministic_with_a_seed() -> None:
    a, b = sample(1, 100), sample(2, 103)
    one = bootstrap_diff(a, b, median, resamples=300, seed=7)
    two = bootstrap_diff(a, b, median, resamples=300, seed=7)
    other = bootstrap_diff(a, b, median, resamples=300, seed=8)
    assert one == two
    assert (one.low, one.high) != (other.low, other.high)


def test_bootstrap_diff_detects_a_clear_difference() -> None:
    a, b = sample(1, 500), sample(2, 600)
    iv = bootstrap_diff(a, b, median, resamples=400)
    assert iv.significant
    assert iv.low > 0
    assert iv.low <= iv.estimate <= iv.high
    assert iv.estimate == pytest.approx(median(b) - median(a))
    assert 80 < iv.estimate < 120
    assert iv.level == 0.95
    slower_a = bootstrap_diff(b, a, median, resamples=400)
    assert slower_a.significant and slower_a.high < 0


def test_bootstrap_diff_identical_samples_not_significant() -> None:
    a = sample(1, 500)
    iv = bootstrap_diff(a, list(a), median, resamples=400)
    assert not iv.significant
    assert iv.low <= 0 <= iv.high
    assert iv.estimate == 0


def test_bootstrap_empty_raises() -> None:
    with pytest.raises(ValueError):
        bootstrap_diff([], [1.0], median)
    with pytest.raises(ValueError):
        bootstrap_ci([], median)


def test_bootstrap_ci_contains_the_statistic_and_is_seeded() -> None:
    values = sample(5, 300, n=60)
    lo, hi = bootstrap_ci(values, median, resamples=400, seed=3)
    assert lo < median(values) < hi
    assert hi - lo < 20  # sigma 10, n 60: the median is pinned within a few units
    assert bootstrap_ci(values, median, resamples=400, seed=3) == (lo, hi)
    narrow = bootstrap_ci(values, median, resamples=400, seed=3, level=0.5)
    assert lo <= narrow[0] <= narrow[1] <= hi
    assert bootstrap_ci([4.0], median, resamples=50) == (4.0, 4.0)
