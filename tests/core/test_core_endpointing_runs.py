"""A recorded run as a trade-off point: literal turns and summaries in, scores out."""

from __future__ import annotations

from typing import Any

import pytest

from voicelat.core.base.errors import ConfigError
from voicelat.core.base.turn import Turn
from voicelat.core.measure.endpointing import Truth, score_turn
from voicelat.core.measure.endpointing_runs import provider_setting, run_point

MS = 1_000_000


def _summary(**stt: Any) -> dict[str, Any]:
    return {
        "pipeline": {
            "endpointing": {"mode": "provider", "hangover_ms": 600},
            "stt": {"stage": "deepgram-stt", "endpointing": 300, **stt},
        },
        "stages": {
            "stt": {
                "stage": "deepgram-stt",
                "endpointing": 300,
                "utterance_end_ms": 1000,
                "interim_results": True,
            }
        },
        "fixtures": [
            {
                "id": "a",
                "speech_start_ms": 400,
                "speech_end_ms": 3000,
                "annotated": True,
                "pauses": [{"start_ms": 1500, "end_ms": 2200}],
            },
            {"id": "c", "speech_start_ms": 400, "speech_end_ms": 2000, "pauses": []},
        ],
    }


def _turn(
    index: int,
    fixture: str,
    endpoint_ms: int | None,
    *,
    warmup: bool = False,
    failure: tuple[str, str] | None = None,
) -> Turn:
    milestones = {"speech_start": 400 * MS}
    if endpoint_ms is not None:
        milestones["endpoint"] = endpoint_ms * MS
    return Turn(
        index=index,
        fixture=fixture,
        t0_ns=10**12,
        milestones=milestones,
        segments={},
        e2e_ns=None,
        warmup=warmup,
        failed=failure is not None,
        failure_stage=failure[0] if failure else None,
        failure_reason=failure[1] if failure else None,
        transcript="book me",
    )


TURNS = [
    _turn(0, "a", 3400, warmup=True),  # warm-up: not scored
    _turn(1, "a", 1900, failure=("turn", "output_first_audible is before speech_end: no e2e")),
    _turn(2, "a", 3425),
    _turn(3, "c", 2450),
    _turn(4, "a", None, failure=("turn", "incomplete turn: no endpoint")),  # never ended
    _turn(5, "c", None, failure=("stt", "ConnectionClosed: 1011")),  # failed first: left out
]


def test_run_point_scores_turns_by_the_offline_rules() -> None:
    point = run_point("runs/dg-300", _summary(), TURNS)
    s = point.score
    assert s.config.label == "deepgram endpointing=300 utterance_end_ms=1000 (wire)"
    assert s.config.measured_on_wire and s.config.hangover_ms == 300
    # Four turns: one cut inside the pause, two with latency (425, 450 ms), one that missed.
    assert (s.n, s.cut_fixtures, s.cutoffs, s.cutoffs_in_pause, s.missed) == (4, 1, 1, 1, 1)
    assert (s.p50_ns, s.p90_ns) == (437_500_000, 447_500_000)
    assert s.cutoff_rate == 0.25
    (cut,) = point.cut_turns
    assert (cut.index, cut.fixture, cut.endpoint_ns, cut.pause) == (
        1,
        "a",
        1900 * MS,
        (1500 * MS, 2200 * MS),
    )
    assert cut.score.latency_ns is None and not cut.score.missed  # it answered, too early
    assert point.left_out == ((5, "c", "stt: ConnectionClosed: 1011"),)
    assert (point.warmup, point.with_pauses, point.pauses, point.controls_only) == (1, 1, 1, False)
    assert point.fixtures == ("a", "c")


def test_a_cut_between_words_is_a_cut_outside_any_pause() -> None:
    point = run_point("r", _summary(), [_turn(0, "a", 1000)])
    (cut,) = point.cut_turns
    assert cut.pause is None and point.score.cutoffs_in_pause == 0 and point.score.cutoffs == 1


def test_score_turn_vs_score_fixture_on_a_cut() -> None:
    truth = Truth("a", 100, 1000, ((300, 500),))
    turn = score_turn(truth, 400)
    assert (turn.latency_ns, turn.cutoffs, turn.cutoffs_in_pause, turn.missed) == (
        None,
        1,
        1,
        False,
    )
    assert score_turn(truth, None).missed and score_turn(truth, 1040).latency_ns == 40


def test_options_as_recorded_query_last() -> None:
    stage, options = provider_setting(_summary(query={"endpointing": 500}), "r")
    assert stage == "deepgram-stt" and options == (
        ("endpointing", "500"),
        ("utterance_end_ms", "1000"),
    )
    no_interim = _summary(interim_results=False)
    assert provider_setting(no_interim, "r")[1] == (("endpointing", "300"),)
    aai = {
        "pipeline": {
            "endpointing": {"mode": "provider"},
            "stt": {
                "stage": "assemblyai-stt",
                "min_turn_silence": 160,
                "query": {"max_turn_silence": 1200},
            },
        },
        "stages": {"stt": {"stage": "assemblyai-stt"}},
    }
    assert provider_setting(aai, "r") == (
        "assemblyai-stt",
        (("min_turn_silence", "160"), ("max_turn_silence", "1200")),
    )
    aai["pipeline"]["stt"] = {"stage": "assemblyai-stt"}
    point = run_point("r", {**aai, "fixtures": _summary()["fixtures"]}, [_turn(0, "a", 3500)])
    assert point.score.config.label == "assemblyai defaults (wire)"


def test_controls_only_run_is_said_so() -> None:
    summary = _summary()
    summary["fixtures"] = [{"id": "a", "speech_start_ms": 400, "speech_end_ms": 3000}]
    point = run_point("r", summary, [_turn(0, "a", 1900), _turn(1, "a", 3500)])
    assert point.controls_only and point.score.cutoffs == 1 and point.score.cutoffs_in_pause == 0


@pytest.mark.parametrize(
    ("summary", "turns", "message"),
    [
        (None, TURNS, "r has no summary.json (stopped before its end?)"),
        (
            {**_summary(), "pipeline": {"endpointing": {"mode": "vad", "hangover_ms": 500}}},
            TURNS,
            "r ended its turns on the client VAD ([endpointing] mode = 'vad', hangover_ms = 500)",
        ),
        (
            {
                **_summary(),
                "fixtures": [{"id": "a", "speech_start_ms": None, "speech_end_ms": None}],
            },
            [_turn(0, "a", 3400)],
            "r: fixture a has no annotated speech_start_ms/speech_end_ms",
        ),
        ({**_summary(), "fixtures": None}, TURNS, "r's summary.json lists no fixtures"),
        (
            _summary(),
            [_turn(0, "a", 3400, warmup=True)],
            "r has no turn to score (1 turn(s), 1 warm-up",
        ),
    ],
)
def test_runs_that_cannot_be_a_point(
    summary: dict[str, Any] | None, turns: list[Turn], message: str
) -> None:
    with pytest.raises(ConfigError) as err:
        run_point("r", summary, turns)
    assert str(err.value).startswith(message)


def test_stale_end_of_turn_is_left_out_and_named() -> None:
    # endpointing=300, speech from 400 ms: an end-of-turn before 700 ms cannot come from this
    # turn's speech (the previous turn's leftover audio ended on this turn's leading silence).
    turns = [_turn(0, "a", 322), _turn(1, "c", 690), _turn(2, "a", 3425), _turn(3, "c", 700)]
    point = run_point("r", _summary(), turns)
    assert point.stale == ((0, "a", 322 * MS), (1, "c", 690 * MS))
    assert [t.index for t in point.turns] == [2, 3] and point.score.n == 2
    assert point.score.cutoffs == 1  # 700 ms: possible (300 ms of silence after 400 ms), early
    with pytest.raises(ConfigError, match="2 ended by a stale end-of-turn"):
        run_point("r", _summary(), turns[:2])


def test_front_compares_rates_not_counts() -> None:
    from voicelat.core.measure.endpointing import Config, ConfigScore, pareto_front

    offline = ConfigScore(Config("energy", -35, 300), 12, 297 * MS, 304 * MS, 8, 8, 8, 0)
    wire = ConfigScore(Config("deepgram", 0, 100, (), "wire"), 9, 322 * MS, 346 * MS, 6, 6, 4, 0)
    assert pareto_front([offline, wire]) == [offline]  # 6/9 is no better than 8/12
