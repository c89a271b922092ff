"""Ranking and significance against the best, with literal integers (no turns, no files)."""

from __future__ import annotations

import pytest

from voicelat.core.base.errors import ConfigError
from voicelat.core.judge.ranking import (
    FAILED,
    NO_WARM_TURNS,
    NOT_SIGNIFICANT,
    OK,
    TOO_FEW,
    CombinationSample,
    check_same_fixtures,
    rank_combinations,
)

MS = 1_000_000


def _sample(
    name: str, e2e: list[int], *, failed: int = 0, stt: list[int] | None = None
) -> CombinationSample:
    """Rows from literal milliseconds (the ranking works in integer ns)."""
    rows = [{"e2e": v * MS, **({"stt": stt[i] * MS} if stt else {})} for i, v in enumerate(e2e)]
    return CombinationSample(name, rows, measured=len(e2e) + failed, failed=failed)


FAST = [100, 110, 120, 130, 140]
SLOW = [300, 310, 320, 330, 340]  # every value above every FAST value: a real difference
CLOSE = [105, 115, 125, 135, 145]  # FAST shifted by 5: inside the noise of five turns


def test_ranks_by_p50_and_marks_real_differences_significant() -> None:
    ranked = rank_combinations([_sample("slow", SLOW), _sample("fast", FAST)], resamples=500)
    assert [(r.rank, r.name) for r in ranked] == [(1, "fast"), (2, "slow")]
    best, slow = ranked
    assert best.best and best.vs_best == {}
    assert best.e2e[50].value == 120 * MS  # linear interpolation, as NumPy
    assert best.e2e[90].value == pytest.approx(136 * MS)
    v = slow.vs_best[50]
    assert v.estimate == 200 * MS
    assert v.tested and v.significant
    # No resample of SLOW can have a median within 160 ms of one of FAST.
    assert v.low is not None and v.low >= 160 * MS
    assert v.text() == f"+200 ms [{v.low / MS:+.0f}, {v.high / MS:+.0f}]"


def test_a_difference_inside_the_noise_is_not_significant() -> None:
    ranked = rank_combinations([_sample("fast", FAST), _sample("close", CLOSE)], resamples=500)
    close = ranked[1]
    assert close.name == "close"
    v = close.vs_best[50]
    assert v.estimate == 5 * MS
    assert v.tested and not v.significant
    assert v.low is not None and v.high is not None and v.low < 0 < v.high
    assert v.text() == NOT_SIGNIFICANT


def test_confidence_intervals_bracket_the_estimate_and_reproduce_with_the_seed() -> None:
    a = rank_combinations([_sample("fast", FAST)], resamples=300, seed=7)[0]
    b = rank_combinations([_sample("fast", FAST)], resamples=300, seed=7)[0]
    e = a.e2e[50]
    assert e.low is not None and e.high is not None
    assert 100 * MS <= e.low <= e.value <= e.high <= 140 * MS
    assert a.e2e == b.e2e


def test_too_few_turns_are_ranked_but_not_tested() -> None:
    ranked = rank_combinations([_sample("a", [100, 120]), _sample("b", [300, 320])])
    assert ranked[0].e2e[50].low is None  # no CI from two turns
    v = ranked[1].vs_best[50]
    assert not v.tested and not v.significant
    assert v.estimate == 200 * MS
    assert v.text() == TOO_FEW


def test_a_combination_that_failed_every_turn_stays_in_the_table_with_its_reason() -> None:
    dead = CombinationSample("dead", [], measured=5, failed=5, failure="stt: connection refused")
    ranked = rank_combinations([dead, _sample("fast", FAST), _sample("slow", SLOW)], resamples=200)
    assert [r.name for r in ranked] == ["fast", "slow", "dead"]
    d = ranked[-1]
    assert d.rank is None and d.status == FAILED
    assert d.failure == "stt: connection refused"
    assert d.failure_rate == 1.0
    # The others still compare with each other.
    assert ranked[1].vs_best[50].significant


def test_no_warm_turn_is_not_a_failure() -> None:
    cold = CombinationSample("cold", [], measured=1, failed=0)
    (r,) = rank_combinations([cold])
    assert r.status == NO_WARM_TURNS and r.rank is None
    assert "cold" in (r.failure or "")


def test_partial_failures_are_ranked_on_the_rest_with_their_rate() -> None:
    (r,) = rank_combinations([_sample("flaky", FAST, failed=5)], resamples=100)
    assert r.status == OK and r.rank == 1
    assert r.n == 5 and r.measured == 10
    assert r.failure_rate == 0.5


def test_rank_by_p90_can_change_the_order() -> None:
    steady = [200, 200, 200, 200, 200]
    spiky = [100, 100, 100, 100, 900]  # better median, far worse tail
    by50 = rank_combinations([_sample("steady", steady), _sample("spiky", spiky)], resamples=100)
    by90 = rank_combinations(
        [_sample("steady", steady), _sample("spiky", spiky)], by=90, resamples=100
    )
    assert [r.name for r in by50] == ["spiky", "steady"]
    assert [r.name for r in by90] == ["steady", "spiky"]
    assert by90[1].vs_best[90].estimate == pytest.approx((580 - 200) * MS)


def test_segment_percentiles_are_reported_on_their_own() -> None:
    (r,) = rank_combinations([_sample("a", FAST, stt=[10, 20, 30, 40, 50])], resamples=100)
    assert r.segments == {"stt": {50: 30 * MS, 90: pytest.approx(46 * MS)}}


def test_json_has_integer_ns_and_verdicts() -> None:
    ranked = rank_combinations([_sample("fast", FAST), _sample("close", CLOSE)], resamples=200)
    j = ranked[1].to_json()
    assert j["e2e"]["p50"]["ns"] == 125 * MS
    assert j["vs_best"]["p50"]["verdict"] == NOT_SIGNIFICANT
    assert j["vs_best"]["p50"]["diff_ns"] == 5 * MS
    assert j["failure_rate"] == 0.0


def test_rank_percentile_must_be_reported() -> None:
    with pytest.raises(ValueError, match="rank percentile 99"):
        rank_combinations([_sample("a", FAST)], by=99)


def test_runs_on_different_fixtures_are_refused() -> None:
    check_same_fixtures({"a": "abc", "b": "abc"})
    with pytest.raises(ConfigError, match=r"different fixtures: 'a' \(fixture set abc\) vs 'c'"):
        check_same_fixtures({"a": "abc", "b": "abc", "c": "def"})
