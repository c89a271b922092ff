"""What-if on recorded turns: settings parsed or refused with why, e2e moved per fixture."""

from __future__ import annotations

import pytest

from voicelat.core.base.errors import ConfigError
from voicelat.core.base.turn import Turn
from voicelat.core.judge.whatif import Setting, parse_setting, predict

MS = 1_000_000


def _turn(i: int, fixture: str, e2e_ms: int, **kw: object) -> Turn:
    ms = {"speech_end": 2000 * MS, "endpoint": 2500 * MS}
    seg = {"endpointing": 500 * MS}
    return Turn(i, fixture, 0, ms, seg, e2e_ms * MS, **kw)  # type: ignore[arg-type]


def test_parse_predictable_settings() -> None:
    assert parse_setting("endpointing.hangover_ms=300") == Setting("endpointing.hangover_ms", 300)
    assert parse_setting("endpointing.threshold_dbfs=-32.5").value == -32.5
    assert parse_setting(" output.latency_ms=40").text == "output.latency_ms=40"
    assert parse_setting("chunker.mode=clause") == Setting("chunker.mode", "clause")
    assert parse_setting("chunker.min_chars=12").number == 12
    assert parse_setting("tts=espeak").text == "tts=espeak"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("chunker.mode=fast", "choose from sentence, clause, token"),
        ("chunker.min_chars=0", "1..1000"),
        ("tts.voice=amy", "tts.voice cannot be predicted from recorded milestones"),
        ("stt=deepgram", "another STT's latency"),
        ("llm.model=x", "another LLM"),
        ("tts=", "give the TTS's label"),
        ("endpointing.mode=provider", "decided by the provider"),
        ("turn.timeout_s=3", "not a setting a what-if knows"),
        ("endpointing.hangover_ms", "give KEY=VALUE"),
        ("endpointing.hangover_ms=fast", "must be int"),
        ("endpointing.hangover_ms=-5", "0..5000"),
    ],
)
def test_unpredictable_or_bad_settings_are_named(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        parse_setting(text)
    assert "\n" not in str(err.value)


def test_predict_moves_each_fixture_by_its_shift() -> None:
    turns = [_turn(1, "a", 1000), _turn(2, "b", 1100), _turn(3, "a", 1200), _turn(4, "c", 900)]
    pred = predict(
        turns,
        [parse_setting("endpointing.threshold_dbfs=-30")],
        endpoint_shift_ns={"a": -200 * MS, "b": -60 * MS, "c": 0},
        output_latency_delta_ns=10 * MS,
    )
    assert pred.recorded_ns == (1000 * MS, 1100 * MS, 1200 * MS, 900 * MS)
    assert pred.predicted_ns == (810 * MS, 1050 * MS, 1010 * MS, 910 * MS)
    assert (pred.recorded(50), pred.predicted(50)) == (1050 * MS, 960 * MS)
    assert pred.n == 4 and pred.excluded == () and len(pred.assumptions) == 3
    assert pred.predicted_endpointing_ns == (300 * MS, 440 * MS, 300 * MS, 500 * MS)
    assert pred.predicted_endpointing(50) == 370 * MS


def test_predict_leaves_out_cutoffs_missing_and_non_headline_turns() -> None:
    turns = [
        _turn(0, "a", 3000, warmup=True),
        _turn(1, "a", 1000),
        _turn(2, "b", 1000),
        _turn(3, "c", 1000),
        _turn(4, "d", 1000, cold=True),
    ]
    pred = predict(
        turns,
        [parse_setting("endpointing.hangover_ms=100")],
        endpoint_shift_ns={"a": -400 * MS, "b": None, "c": -400 * MS, "d": 0},
        new_endpoint_ns={"a": 2100 * MS, "b": None, "c": 1990 * MS},
    )
    assert pred.predicted_ns == (600 * MS,)
    assert pred.excluded == (
        ("b", "no endpoint with the new setting (end of audio first)"),
        ("c", "the new endpoint comes before the speech end (cut-off)"),
    )
    assert predict([], [], endpoint_shift_ns={}).predicted(50) is None
