"""Scoring endpointers: the hangover rule, cut-offs, latency, the Pareto front, the budget pick."""

from __future__ import annotations

import pytest

from voicelat.core.measure.endpointing import (
    Config,
    ConfigScore,
    FixtureScore,
    Truth,
    frames_for,
    hangover_endpoints,
    pareto_front,
    pick_for_budget,
    score_config,
    score_fixture,
)


def _v(pattern: str) -> list[bool]:
    return [c == "#" for c in pattern]


def test_hangover_endpoint_after_silence_run() -> None:
    # voiced frames 2..6, then silence: the endpoint is on frame 6 + 3.
    assert hangover_endpoints(_v("..#####......"), hangover_frames=3, min_speech_frames=2) == [9]


def test_short_gap_bridged_long_gap_ends() -> None:
    v = _v("####..####....####......")
    assert hangover_endpoints(v, hangover_frames=3, min_speech_frames=2) == [12, 20]
    assert hangover_endpoints(v, hangover_frames=5, min_speech_frames=2) == [22]


def test_blip_does_not_start_a_turn() -> None:
    assert hangover_endpoints(_v("..#...#......"), hangover_frames=2, min_speech_frames=2) == []
    # two blips closer than min_speech count together
    assert hangover_endpoints(_v("..#.#......"), hangover_frames=2, min_speech_frames=2) == [6]


def test_open_turn_has_no_endpoint() -> None:
    assert hangover_endpoints(_v("..######"), hangover_frames=3, min_speech_frames=1) == []
    with pytest.raises(ValueError):
        hangover_endpoints([], hangover_frames=0, min_speech_frames=1)


def test_frames_for_rounds_up() -> None:
    assert [frames_for(ms, 20) for ms in (0, 1, 20, 21, 500)] == [1, 1, 1, 2, 25]


TRUTH = Truth("a", 100, 1000, ((300, 500),))


def test_score_fixture_latency_cutoffs_in_and_out_of_pause() -> None:
    s = score_fixture(TRUTH, [50, 400, 700, 1040, 1300])
    # 50 is before speech (ignored); 400 in the pause; 700 outside it; 1040 is the endpoint.
    assert (s.latency_ns, s.cutoffs, s.cutoffs_in_pause, s.missed) == (40, 2, 1, False)
    assert score_fixture(TRUTH, [1000]).latency_ns == 0  # right at the end is not a cut-off
    missed = score_fixture(TRUTH, [450])
    assert missed.missed and missed.cutoffs == 1


def test_score_config_percentiles_and_rates() -> None:
    scores = [
        FixtureScore("a", 100, 0, 0),
        FixtureScore("b", 200, 1, 1),
        FixtureScore("c", 300, 2, 1),
        FixtureScore("d", None, 0, 0),
    ]
    c = score_config(Config("energy", -40, 300), scores)
    assert (c.n, c.p50_ns, c.p90_ns) == (4, 200, 280)
    assert (c.cut_fixtures, c.cutoffs, c.cutoffs_in_pause, c.missed) == (2, 3, 2, 1)
    assert c.cutoff_rate == 0.5
    assert c.config.label == "energy thr=-40 hang=300ms"


def _cs(name: str, p50: int, cut: int, missed: int = 0) -> ConfigScore:
    return ConfigScore(Config(name, 0, p50), 10, p50, p50 + 5, cut, cut, cut, missed)


def test_pareto_front_and_budget() -> None:
    a, b, c, d, e = (
        _cs("a", 200, 8),
        _cs("b", 300, 5),
        _cs("c", 350, 6),
        _cs("d", 500, 0),
        _cs("e", 100, 0, missed=1),
    )
    front = pareto_front([d, c, b, a, e])
    assert [s.config.endpointer for s in front] == ["a", "b", "d"]  # c is beaten by b, e misses
    assert pick_for_budget([a, b, c, d, e], 0.5).config.endpointer == "b"  # type: ignore[union-attr]
    assert pick_for_budget([a, b, c, d, e], 0.0).config.endpointer == "d"  # type: ignore[union-attr]
    assert pick_for_budget([a, e], 0.1) is None
