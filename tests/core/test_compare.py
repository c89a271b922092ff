"""Baseline comparison with literal turns: significance, tolerance, reproducibility, refusals."""

from __future__ import annotations

import random
from typing import Any

import pytest

from voicelat.core.base.contract import SEGMENTS
from voicelat.core.base.errors import EXIT_USAGE, ConfigError
from voicelat.core.base.turn import Turn
from voicelat.core.judge.budget import Budget
from voicelat.core.judge.compare import (
    FASTER,
    MIN_COMPARE_TURNS,
    NOT_SIGNIFICANT,
    REGRESSION,
    WITHIN_TOLERANCE,
    Comparison,
    Tolerance,
    check_baseline,
    compare_turns,
    too_few_turns_check,
)
from voicelat.core.judge.gate import evaluate_gate
from voicelat.core.summaries.run_summary import SCHEMA_VERSION

MS = 1_000_000
BASE = {
    "endpointing": 500,
    "stt": 300,
    "handoff": 1,
    "llm_ttft": 45,
    "aggregation": 90,
    "tts_ttfb": 70,
    "leading_silence": 55,
    "playout": 0,
}


def make_turn(index: int, segments_ms: dict[str, float], **kw: Any) -> Turn:
    segments = {s: round(segments_ms[s] * MS) for s in SEGMENTS}
    return Turn(
        index=index,
        fixture=f"f{index % 3}",
        t0_ns=0,
        milestones={},
        segments=segments,
        e2e_ns=sum(segments.values()),
        **kw,
    )


def run(
    n: int = 14, *, seed: int = 1, noise_ms: float = 30, shift: dict[str, float] | None = None
) -> list[Turn]:
    """``n`` warm turns around BASE (uniform noise on stt and aggregation), plus a warm-up."""
    rng = random.Random(seed)
    shift = shift or {}
    turns = [make_turn(0, {s: 5000 for s in SEGMENTS}, warmup=True, cold=True)]
    for i in range(1, n + 1):
        seg = {s: BASE[s] + shift.get(s, 0) for s in SEGMENTS}
        seg["stt"] += rng.uniform(-noise_ms, noise_ms)
        seg["aggregation"] += rng.uniform(0, noise_ms)
        turns.append(make_turn(i, seg))
    return turns


def get(comps: list[Comparison], name: str) -> Comparison:
    (found,) = [c for c in comps if c.name == name]
    return found


def test_a_run_against_itself_is_not_significant_everywhere() -> None:
    turns = run()
    comps = compare_turns(turns, turns)
    assert len(comps) == 18  # e2e + 8 segments, at P50 and P90
    assert {c.verdict for c in comps} == {NOT_SIGNIFICANT}
    e2e = get(comps, "e2e P90")
    assert e2e.interval.estimate == 0
    assert e2e.interval.low < 0 < e2e.interval.high  # a real interval, not a degenerate one
    assert e2e.change_text() == "not significant"
    assert all(c.to_check().passed for c in comps)
    assert get(comps, "e2e P50").to_check().message.endswith(": not significant")


def test_shift_of_150_ms_is_a_regression_where_it_happened() -> None:
    base, slow = run(seed=1), run(seed=2, shift={"llm_ttft": 150})
    comps = compare_turns(base, slow)
    for name in ("e2e P50", "e2e P90", "llm_ttft P50", "llm_ttft P90"):
        c = get(comps, name)
        assert c.verdict == REGRESSION, name
        assert c.interval.low > 0
        assert not c.to_check().passed
    e2e = get(comps, "e2e P50")
    assert 100 * MS < e2e.interval.estimate < 200 * MS
    assert e2e.change_text().startswith("+1")
    assert "x slower" in e2e.change_text()
    msg = e2e.to_check().message
    assert msg.startswith("e2e P50 ")
    assert "regression" in msg and "tolerance" in msg
    # Segments that did not change are not blamed.
    assert not get(comps, "endpointing P50").regression
    assert not get(comps, "tts_ttfb P90").regression


def test_noise_and_small_shifts_stay_within_tolerance() -> None:
    base, now = run(seed=1), run(seed=2, shift={"stt": 10})
    comps = compare_turns(base, now)
    assert not any(c.regression for c in comps)
    assert get(comps, "e2e P50").verdict in (NOT_SIGNIFICANT, WITHIN_TOLERANCE)


def test_significant_but_small_increase_is_within_tolerance() -> None:
    # No noise: +10 ms is certain (the interval is [10, 10]) but under the 20 ms tolerance.
    base, now = run(noise_ms=0), run(noise_ms=0, shift={"llm_ttft": 10})
    c = get(compare_turns(base, now), "llm_ttft P50")
    assert c.interval.low == c.interval.high == pytest.approx(10 * MS)
    assert c.verdict == WITHIN_TOLERANCE
    assert c.to_check().passed
    assert c.change_text().startswith("+10 ms [+10, +10]")


def test_tolerance_is_the_larger_of_absolute_and_relative() -> None:
    # +50 ms on a ~1060 ms e2e: over 20 ms but under 10 % (106 ms).
    base, now = run(noise_ms=0), run(noise_ms=0, shift={"stt": 50})
    e2e = get(compare_turns(base, now), "e2e P50")
    assert e2e.verdict == WITHIN_TOLERANCE
    assert e2e.tolerance_ns == pytest.approx(0.1 * e2e.baseline_ns)
    strict = get(compare_turns(base, now, tolerance=Tolerance(20, 0)), "e2e P50")
    assert strict.verdict == REGRESSION
    assert Tolerance(20, 10).allowed_ns(100 * MS) == 20 * MS


def test_a_faster_run_passes_and_says_so() -> None:
    base, fast = run(seed=1), run(seed=2, shift={"endpointing": -200})
    c = get(compare_turns(base, fast), "endpointing P50")
    assert c.verdict == FASTER
    assert c.to_check().passed
    assert "x faster" in c.change_text()


def test_verdicts_are_reproducible_and_seeded() -> None:
    base, now = run(seed=1), run(seed=2, shift={"stt": 15})
    a = compare_turns(base, now)
    b = compare_turns(base, now)
    assert [c.interval for c in a] == [c.interval for c in b]
    other = compare_turns(base, now, seed=7)
    assert [c.interval for c in a] != [c.interval for c in other]


def test_only_headline_turns_are_compared() -> None:
    base = run(seed=1)
    # Warm-up, cold and failed turns around the same headline turns change nothing.
    noisy = [
        *base,
        make_turn(90, {s: 9000 for s in SEGMENTS}, cold=True),
        Turn(91, "f", 0, {}, {}, None, failed=True, failure_stage="llm", failure_reason="HTTP 500"),
    ]
    comps = compare_turns(base, noisy)
    assert {c.verdict for c in comps} == {NOT_SIGNIFICANT}
    assert get(comps, "e2e P50").n_current == 14


def test_too_few_turns_gives_no_comparison_and_a_failing_check() -> None:
    assert compare_turns(run(n=2), run(n=14)) == []
    check = too_few_turns_check(2, 14)
    assert check is not None and not check.passed
    assert check.message.startswith("sample too small to compare: 2 warm turns in the baseline")
    assert too_few_turns_check(MIN_COMPARE_TURNS, MIN_COMPARE_TURNS) is None


def test_gate_exit_code_follows_the_regression_checks() -> None:
    base, slow = run(seed=1), run(seed=2, shift={"aggregation": 150})
    summary = {"counts": {"turns": 15, "headline": 14, "failed": 0}, "e2e": {}, "segments": {}}
    bad = evaluate_gate(summary, slow, Budget(), baseline_turns=base, baseline="b")
    assert bad.exit_code == 1
    assert {c.name for c in bad.failures} >= {"e2e P50", "aggregation P90"}
    good = evaluate_gate(summary, base, Budget(), baseline_turns=base, baseline="b")
    assert good.exit_code == 0
    short = evaluate_gate(summary, base, Budget(), baseline_turns=run(n=1), baseline="b")
    assert short.exit_code == 1
    assert short.comparisons == ()
    assert short.failures[0].message.startswith("sample too small to compare")


# -- which baselines may be compared ---------------------------------------------------------
def meta(
    name: str = "local", sha: str = "a" * 64, fixtures: str = "f" * 64, **kw: Any
) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "pipeline": {"name": name, "sha256": sha},
        "fixture_set_sha256": fixtures,
        **kw,
    }


def test_same_pipeline_and_fixtures_compare_without_notes() -> None:
    assert check_baseline(meta(), meta(), source="b") == []


def test_another_pipeline_is_refused_unless_forced() -> None:
    with pytest.raises(ConfigError) as exc:
        check_baseline(meta(name="cloud"), meta(), source="runs/b")
    assert str(exc.value) == (
        "baseline runs/b is of pipeline 'cloud', this run of 'local': compare runs of one "
        "pipeline, or pass --force"
    )
    assert exc.value.exit_code == EXIT_USAGE
    notes = check_baseline(meta(name="cloud"), meta(), source="runs/b", force=True)
    assert notes == ["forced: baseline runs/b is of pipeline 'cloud', this run of 'local'"]


def test_another_fixture_set_is_refused_unless_forced() -> None:
    with pytest.raises(
        ConfigError,
        match=r"another fixture set \(sha256 111111111111, this run ffffffffffff\).*--force",
    ):
        check_baseline(meta(fixtures="1" * 64), meta(), source="b")
    assert check_baseline(meta(fixtures="1" * 64), meta(), source="b", force=True)[0].startswith(
        "forced:"
    )


def test_an_edited_pipeline_file_is_compared_and_noted() -> None:
    (note,) = check_baseline(meta(sha="b" * 64), meta(), source="b")
    assert note.startswith(
        "pipeline file changed since the baseline (sha256 bbbbbbbbbbbb -> aaaaaaaaaaaa)"
    )


@pytest.mark.parametrize("version", [SCHEMA_VERSION + 1, 0, None, "1"])
def test_incompatible_schema_is_refused_even_when_forced(version: object) -> None:
    with pytest.raises(ConfigError, match=r"results schema .* record a new baseline"):
        check_baseline(meta(schema_version=version), meta(), source="b", force=True)


def test_a_baseline_without_summary_needs_force() -> None:
    with pytest.raises(ConfigError, match=r"has no summary\.json.*--force"):
        check_baseline(None, meta(), source="b")
    assert check_baseline(None, meta(), source="b", force=True)[0].startswith("forced:")
