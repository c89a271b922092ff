"""S2SRecorder and the S2S contract: literal stamped events in, exact milestones and segments out."""

from __future__ import annotations

from voicelat.core.base.contract import (
    ALL_SEGMENTS,
    S2S_CRITICAL_PATH,
    S2S_SEGMENT_BOUNDS,
    S2S_SEGMENTS,
    SEGMENTS,
    SHARED_SEGMENTS,
    segment_names,
)
from voicelat.core.judge.compare import metric_rows
from voicelat.core.measure.events import (
    Audio,
    Delta,
    Done,
    Failed,
    Final,
    Interrupted,
    RequestSent,
    ResponseStarted,
    ServerSpeech,
)
from voicelat.core.measure.recorder import TurnRecorder
from voicelat.core.summaries.summary import summarize
from voicelat.core.traces.s2s import S2SRecorder, is_s2s

MS = 1_000_000
T0 = 9_000_000_000
RATE = 24_000


def at(ms: float) -> int:
    return T0 + int(ms * MS)


def silence(ms: int) -> bytes:
    return b"\x00\x00" * (RATE * ms // 1000)


def loud(ms: int) -> bytes:
    return b"\x10\x27" * (RATE * ms // 1000)


def server_vad_turn(index: int = 0, shift_ms: float = 0.0) -> S2SRecorder:
    """speech 400..2000 ms; server VAD stops at 2520; first audio 2900 (40 ms of silence)."""
    rec = S2SRecorder(index=index, fixture="hello", t0_ns=T0)
    rec.mark("speech_start", at(400))
    rec.mark("speech_end", at(2000))
    for ev in (
        ServerSpeech(at(700), started=True, audio_ms=380),
        ServerSpeech(at(2520 + shift_ms), started=False, audio_ms=2500),
        Final(at(2700), "hello there"),
        ResponseStarted(at(2560 + shift_ms), "resp_1"),
        Delta(at(2850 + shift_ms), content="Sure"),
        Audio(at(2900 + shift_ms), silence(40), RATE),
        Audio(at(2920 + shift_ms), loud(200), RATE),
        Delta(at(2950 + shift_ms), content=", hi."),
        Done(at(3300 + shift_ms), "completed", {"input_tokens": 200, "output_tokens": 110}),
    ):
        rec.on_event("s2s", ev)
    rec.set_onset(RATE * 40 // 1000)  # the first loud sample: right after 40 ms of silence
    rec.mark("output_first_audible", at(2950 + shift_ms))
    return rec


def test_contract_shares_e2e_segments_with_the_cascade() -> None:
    assert S2S_CRITICAL_PATH[0] == "speech_end" and S2S_CRITICAL_PATH[-1] == "output_first_audible"
    assert S2S_SEGMENT_BOUNDS["model"] == ("endpoint", "first_audio")
    assert set(SHARED_SEGMENTS) <= set(SEGMENTS) and set(SHARED_SEGMENTS) <= set(S2S_SEGMENTS)
    assert ALL_SEGMENTS.index("model") == ALL_SEGMENTS.index("tts_ttfb") + 1
    # A cascade-only summary lists exactly the cascade's segments (unchanged schema).
    assert segment_names(frozenset(SEGMENTS)) == SEGMENTS
    assert segment_names(frozenset(S2S_SEGMENTS)) == (*SEGMENTS[:-2], "model", *SEGMENTS[-2:])


def test_server_vad_turn_has_every_milestone_and_segments_sum_to_e2e() -> None:
    turn = server_vad_turn().finish()
    assert turn.ok, turn.failure_reason
    assert is_s2s(turn)
    assert turn.milestones == {
        "speech_start": 400 * MS,
        "speech_end": 2000 * MS,
        "server_speech_start": 700 * MS,
        "endpoint": 2520 * MS,
        "response_start": 2560 * MS,
        "first_text": 2850 * MS,
        "first_audio": 2900 * MS,
        "first_audible": 2940 * MS,
        "response_done": 3300 * MS,
        "output_first_audible": 2950 * MS,
    }
    assert turn.segments == {
        "endpointing": 520 * MS,
        "model": 380 * MS,
        "leading_silence": 40 * MS,
        "playout": 10 * MS,
    }
    assert sum(turn.segments.values()) == turn.e2e_ns == 950 * MS
    assert turn.transcript == "hello there"
    assert turn.reply == "Sure, hi."
    assert turn.figures["s2s_usage_input_tokens"] == 200
    assert turn.figures["s2s_usage_output_tokens"] == 110
    assert turn.figures["s2s_chunks"] == 2
    assert turn.figures["s2s_audio_ns"] == 240 * MS
    assert turn.figures["s2s_stalls"] == 0
    assert turn.figures["s2s_interrupted"] == 0
    assert turn.extra["s2s_status"] == "completed"
    assert turn.largest_segment() == ("endpointing", 520 * MS)


def test_manual_commit_is_the_endpoint_and_a_stall_is_counted() -> None:
    rec = S2SRecorder(index=0, fixture="hello", t0_ns=T0)
    rec.mark("speech_end", at(2000))
    for ev in (
        RequestSent(at(2600), "commit"),
        RequestSent(at(2601), "response.create"),
        Audio(at(3000), loud(100), RATE),
        # arrives 100 ms after the first 100 ms finished playing: one audible gap
        Audio(at(3200), loud(100), RATE),
        Done(at(3400)),
    ):
        rec.on_event("s2s", ev)
    rec.set_onset(0)
    rec.mark("output_first_audible", at(3000))
    turn = rec.finish()
    assert turn.milestones["endpoint"] == 2600 * MS
    assert turn.segments == {
        "endpointing": 600 * MS,
        "model": 400 * MS,
        "leading_silence": 0,
        "playout": 0,
    }
    assert turn.e2e_ns == 1000 * MS
    assert turn.figures["s2s_stalls"] == 1
    assert turn.figures["s2s_stall_total_ns"] == 100 * MS
    assert "response_start" not in turn.milestones  # Gemini has none: not required


def test_no_audio_fails_at_the_first_missing_milestone() -> None:
    rec = S2SRecorder(index=0, fixture="hello", t0_ns=T0)
    rec.mark("speech_end", at(2000))
    rec.on_event("s2s", ServerSpeech(at(2500), started=False))
    rec.on_event("s2s", ResponseStarted(at(2550)))
    turn = rec.finish()
    assert turn.failed and turn.failure_reason == "incomplete turn: no first_audio"


def test_failure_event_keeps_the_servers_message() -> None:
    rec = S2SRecorder(index=0, fixture="hello", t0_ns=T0)
    rec.on_event("s2s", Failed(at(2500), "openai-realtime: error: Rate limit reached"))
    rec.on_event("s2s", Interrupted(at(2600)))
    turn = rec.finish()
    assert turn.failure_stage == "s2s"
    assert turn.failure_reason == "openai-realtime: error: Rate limit reached"
    assert turn.figures["s2s_interrupted"] == 1


def test_runner_milestones_of_the_cascade_are_refused() -> None:
    rec = S2SRecorder(index=0, fixture="hello", t0_ns=T0)
    try:
        rec.mark("llm_first_speakable", at(1))
    except ValueError as exc:
        assert "not a runner milestone" in str(exc)
    else:  # pragma: no cover - the assertion above is the test
        raise AssertionError("mark accepted a cascade milestone")


def test_clamped_segments_still_sum_to_e2e() -> None:
    # The server says speech stopped before the annotated end (aggressive VAD): clamped to 0.
    rec = S2SRecorder(index=0, fixture="hello", t0_ns=T0)
    rec.mark("speech_end", at(2000))
    rec.on_event("s2s", ServerSpeech(at(1900), started=False))
    rec.on_event("s2s", Audio(at(2300), loud(20), RATE))
    rec.set_onset(0)
    rec.mark("output_first_audible", at(2300))
    turn = rec.finish()
    assert turn.segments["endpointing"] == 0
    assert sum(turn.segments.values()) == turn.e2e_ns == 300 * MS
    assert "clamped:endpointing" in turn.flags


def _cascade_turn(index: int) -> TurnRecorder:
    from tests.core.test_core_recorder import complete_turn

    rec = complete_turn()
    rec.index = index
    return rec


def test_summary_of_s2s_turns_has_the_model_segment_and_bands_sum() -> None:
    turns = [server_vad_turn(i, shift_ms=10 * i).finish() for i in range(5)]
    summary = summarize(turns, run={}, pipeline={}, fixtures=[], stages={})
    assert set(summary.segments) == {*SEGMENTS, "model"}
    assert summary.segments["model"].n == 5
    assert summary.segments["stt"].n == 0
    assert summary.figures["s2s_usage_output_tokens"].n == 5
    assert summary.figures["s2s_audio_ns"].p50 == 240 * MS
    for band in summary.waterfall.values():
        assert sum(band.segments_ns.values()) == band.mean_e2e_ns


def test_cascade_summary_is_unchanged_and_mixed_rows_rank_on_shared_names() -> None:
    cascade = [_cascade_turn(i).finish() for i in range(3)]
    summary = summarize(cascade, run={}, pipeline={}, fixtures=[], stages={})
    assert tuple(summary.segments) == SEGMENTS
    s2s = [server_vad_turn(i).finish() for i in range(3)]
    rows = metric_rows(cascade + s2s)
    assert len(rows) == 6
    for row in rows:
        assert {"e2e", *SHARED_SEGMENTS} <= set(row), row


def test_an_unobserved_endpoint_merges_into_model_and_is_flagged() -> None:
    rec = S2SRecorder(index=0, fixture="hello", t0_ns=T0)
    rec.mark("speech_end", at(2000))
    rec.on_event("s2s", Audio(at(2700), loud(100), RATE))
    rec.on_event("s2s", Done(at(3000), "turnComplete"))
    rec.set_onset(0)
    rec.mark("output_first_audible", at(2700))
    turn = rec.finish()
    assert turn.ok
    assert turn.segments["endpointing"] == 0 and turn.segments["model"] == 700 * MS
    assert "endpoint_unobserved" in turn.flags
