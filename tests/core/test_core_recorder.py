"""TurnRecorder: literal stamped events in, a Turn with exact milestones, segments and flags out."""

from __future__ import annotations

import pytest

from voicelat.core.base.contract import CRITICAL_PATH, MILESTONES, SEGMENT_BOUNDS, SEGMENTS
from voicelat.core.measure.events import (
    Audio,
    Connected,
    Delta,
    Done,
    EndOfTurn,
    Failed,
    Final,
    Partial,
    RequestSent,
    ServerTiming,
    Span,
    TextSent,
)
from voicelat.core.measure.recorder import TurnRecorder

MS = 1_000_000
T0 = 7_000_000_000  # an arbitrary monotonic origin: every expectation is relative to it
RATE = 16_000


def at(ms: float) -> int:
    return T0 + int(ms * MS)


def pcm(samples: int) -> bytes:
    return b"\x01\x00" * samples


def complete_turn(*, with_output: bool = True, **overrides: int) -> TurnRecorder:
    """A full turn. Times in ms after T0; any of them can be overridden."""
    t = {
        "speech_start": 400,
        "speech_end": 2000,
        "partial_empty": 500,
        "partial": 600,
        "partial2": 700,
        "stt_audio_end": 2500,
        "endpoint": 2500,
        "stt_final": 2900,
        "llm_request": 2950,
        "llm_role": 2960,
        "llm_reasoning": 3000,
        "llm_content": 3100,
        "llm_content2": 3150,
        "llm_done": 3300,
        "speakable": 3101,
        "tts_request": 3102,
        "tts_header": 3150,
        "tts_audio1": 3300,
        "tts_audio2": 3400,
        "tts_done": 3600,
        "output": 3360,
    }
    t.update(overrides)
    rec = TurnRecorder(index=3, fixture="weather", t0_ns=T0, repeat=1, expected="hi")
    rec.mark("speech_start", at(t["speech_start"]))
    rec.mark("speech_end", at(t["speech_end"]))
    rec.on_event("stt", Connected(at(100), cold=False))
    rec.on_event("stt", Partial(at(t["partial_empty"]), "  "))
    rec.on_event("stt", Partial(at(t["partial"]), "what"))
    rec.on_event("stt", Partial(at(t["partial2"]), "what is"))
    rec.on_event("stt", RequestSent(at(t["stt_audio_end"]), "audio_stop"))
    rec.mark("endpoint", at(t["endpoint"]))
    rec.on_event("stt", Final(at(t["stt_final"]), "what is the weather"))
    rec.on_event("llm", Connected(at(2940), cold=False))
    rec.on_event("llm", RequestSent(at(t["llm_request"])))
    rec.on_event("llm", Delta(at(t["llm_role"])))  # role-only chunk: no text at all
    rec.on_event("llm", Delta(at(t["llm_reasoning"]), reasoning="thinking"))
    rec.on_event("llm", Delta(at(t["llm_content"]), content="Sure."))
    rec.on_event("llm", Delta(at(t["llm_content2"]), content=" It is sunny."))
    rec.on_event(
        "llm",
        Done(at(t["llm_done"]), "stop", {"completion_tokens": 5, "prompt_tokens": 20}),
    )
    rec.mark("llm_first_speakable", at(t["speakable"]))
    rec.on_event("tts", TextSent(at(t["tts_request"]), "Sure."))
    rec.on_event("tts", Audio(at(t["tts_header"]), b"", RATE))  # header stripped: empty
    rec.on_event("tts", Audio(at(t["tts_audio1"]), pcm(1600), RATE))  # 100 ms
    rec.on_event("tts", Audio(at(t["tts_audio2"]), pcm(1600), RATE))  # 100 ms
    rec.on_event("tts", Done(at(t["tts_done"])))
    rec.set_onset(800)  # 50 ms of leading silence
    if with_output:
        rec.mark("output_first_audible", at(t["output"]))
    return rec


EXPECTED_MS = {
    "speech_start": 400,
    "speech_end": 2000,
    "endpoint": 2500,
    "stt_first_partial": 600,
    "stt_final": 2900,
    "llm_request": 2950,
    "llm_first_delta": 3000,
    "llm_first_token": 3100,
    "llm_first_speakable": 3101,
    "llm_done": 3300,
    "tts_request": 3102,
    "tts_first_byte": 3300,
    "tts_first_audible": 3350,
    "tts_done": 3600,
    "output_first_audible": 3360,
}


def test_every_milestone_at_the_exact_ns_relative_to_t0() -> None:
    turn = complete_turn().finish()
    assert turn.milestones == {k: v * MS for k, v in EXPECTED_MS.items()}
    assert list(turn.milestones) == [m for m in MILESTONES if m in turn.milestones]
    assert set(turn.milestones) == set(MILESTONES)
    assert turn.t0_ns == T0
    assert turn.ok and turn.headline
    assert not turn.failed and turn.failure_reason is None
    assert turn.flags == ()


def test_segments_exact_and_sum_to_e2e() -> None:
    turn = complete_turn().finish()
    assert turn.segments == {
        "endpointing": 500 * MS,
        "stt": 400 * MS,
        "handoff": 50 * MS,
        "llm_ttft": 150 * MS,
        "aggregation": 2 * MS,
        "tts_ttfb": 198 * MS,
        "leading_silence": 50 * MS,
        "playout": 10 * MS,
    }
    assert list(turn.segments) == list(SEGMENTS)
    assert turn.e2e_ns == 1360 * MS
    assert sum(turn.segments.values()) == turn.e2e_ns
    for name, (a, b) in SEGMENT_BOUNDS.items():
        assert turn.segments[name] == turn.milestones[b] - turn.milestones[a]


def test_ttfd_counts_reasoning_ttft_only_content_and_role_only_chunk_is_ignored() -> None:
    turn = complete_turn().finish()
    # the reasoning delta, not the role-only chunk before it
    assert turn.milestones["llm_first_delta"] == 3000 * MS
    assert turn.milestones["llm_first_token"] == 3100 * MS
    assert turn.figures["llm_ttfd_ns"] == 50 * MS
    assert turn.figures["llm_ttft_ns"] == 150 * MS
    assert turn.reply == "Sure. It is sunny."


def test_stage_figures_of_a_complete_turn() -> None:
    turn = complete_turn().finish()
    f = turn.figures
    assert f["stt_finalization_ns"] == 400 * MS  # audio end sent -> final
    assert f["stt_first_partial_ns"] == 200 * MS  # speech_start -> first non-empty partial
    assert f["llm_chunks"] == 2
    assert f["llm_tokens"] == 5
    assert f["llm_prompt_tokens"] == 20
    assert f["llm_total_ns"] == 350 * MS
    assert f["llm_tokens_per_s"] == pytest.approx(4 / 0.050)
    assert f["llm_itl_ns"] == 50 * MS // 4
    assert f["tts_audio_ns"] == 200 * MS
    assert f["tts_chunks"] == 2
    assert f["tts_rtf"] == pytest.approx(498 / 200)
    assert f["tts_stalls"] == 0
    assert turn.transcript == "what is the weather"
    assert turn.expected == "hi"
    assert turn.extra["llm_finish_reason"] == "stop"


def test_first_partial_is_the_first_non_empty_one() -> None:
    rec = complete_turn(partial_empty=450, partial=650)
    assert rec.milestones()["stt_first_partial"] == at(650)


def test_no_partial_at_all_means_no_milestone() -> None:
    rec = TurnRecorder(index=0, fixture="f", t0_ns=T0)
    rec.on_event("stt", Partial(at(1), ""))
    rec.on_event("stt", Final(at(2), "x"))
    assert "stt_first_partial" not in rec.milestones()
    assert rec.milestones()["stt_final"] == at(2)


def test_empty_first_audio_payload_is_not_the_first_byte() -> None:
    turn = complete_turn(tts_header=3200).finish()
    assert turn.milestones["tts_first_byte"] == 3300 * MS
    assert turn.figures["tts_chunks"] == 2


def test_first_audible_is_first_byte_plus_leading_silence() -> None:
    rec = complete_turn()
    # onset 800 samples at 16 kHz = 50 ms into the first piece, which arrived at 3300 ms
    assert rec.milestones()["tts_first_audible"] == at(3350)


def test_first_audible_in_a_later_piece_that_arrives_late() -> None:
    rec = TurnRecorder(index=0, fixture="f", t0_ns=T0)
    rec.on_event("tts", TextSent(at(0), "x"))
    rec.on_event("tts", Audio(at(10), pcm(1600), RATE))  # 100 ms of silence, plays 10..110
    rec.on_event("tts", Audio(at(300), pcm(1600), RATE))  # onset inside, arrives at 300 ms
    rec.set_onset(2000)  # would play at 10 + 125 = 135 ms, but is only here at 300 ms
    assert rec.milestones()["tts_first_audible"] == at(300)


def test_first_audible_in_a_later_piece_that_arrived_in_time() -> None:
    rec = TurnRecorder(index=0, fixture="f", t0_ns=T0)
    rec.on_event("tts", Audio(at(10), pcm(1600), RATE))
    rec.on_event("tts", Audio(at(20), pcm(1600), RATE))
    rec.set_onset(2000)
    assert rec.milestones()["tts_first_audible"] == at(135)


def test_set_onset_first_call_wins_and_onset_past_the_audio_gives_nothing() -> None:
    rec = TurnRecorder(index=0, fixture="f", t0_ns=T0)
    rec.on_event("tts", Audio(at(10), pcm(1600), RATE))
    rec.set_onset(5000)
    rec.set_onset(0)
    assert "tts_first_audible" not in rec.milestones()


def test_runner_mark_of_first_audible_wins_over_onset() -> None:
    rec = TurnRecorder(index=0, fixture="f", t0_ns=T0)
    rec.on_event("tts", Audio(at(10), pcm(1600), RATE))
    rec.set_onset(0)
    rec.mark("tts_first_audible", at(42))
    assert rec.milestones()["tts_first_audible"] == at(42)


def test_mark_first_observation_wins_and_stage_milestones_are_refused() -> None:
    rec = TurnRecorder(index=0, fixture="f", t0_ns=T0)
    rec.mark("endpoint", at(5))
    rec.mark("endpoint", at(9))
    assert rec.milestones()["endpoint"] == at(5)
    with pytest.raises(ValueError, match="runner milestone"):
        rec.mark("stt_final", at(1))


def test_endpoint_from_provider_end_of_turn_unless_the_runner_marked_it() -> None:
    rec = TurnRecorder(index=0, fixture="f", t0_ns=T0)
    rec.on_event("stt", EndOfTurn(at(30)))
    rec.on_event("stt", EndOfTurn(at(40)))
    assert rec.milestones()["endpoint"] == at(30)
    rec.mark("endpoint", at(20))
    assert rec.milestones()["endpoint"] == at(20)


def test_last_final_is_the_turn_final_and_transcript_joins_finals() -> None:
    rec = TurnRecorder(index=0, fixture="f", t0_ns=T0)
    rec.on_event("stt", Final(at(10), " what is "))
    rec.on_event("stt", Final(at(20), ""))
    rec.on_event("stt", Final(at(30), "the time"))
    assert rec.milestones()["stt_final"] == at(30)
    assert rec.transcript() == "what is the time"


def test_negative_segment_is_clamped_flagged_and_still_sums_to_e2e() -> None:
    # A streaming STT that finalizes 100 ms before the VAD endpoint.
    turn = complete_turn(stt_final=2400).finish()
    assert turn.milestones["stt_final"] == 2400 * MS  # the raw milestone is kept
    assert turn.segments["stt"] == 0
    assert turn.segments["handoff"] == (2950 - 2500) * MS  # measured from the endpoint
    assert "clamped:stt" in turn.flags
    assert sum(turn.segments.values()) == turn.e2e_ns == 1360 * MS
    assert all(v >= 0 for v in turn.segments.values())
    assert not turn.failed  # a quirk of the provider, not a failure


def test_llm_request_on_a_partial_clamps_handoff() -> None:
    turn = complete_turn(llm_request=2800).finish()  # request before stt_final (2900)
    assert turn.segments["handoff"] == 0
    assert turn.segments["llm_ttft"] == (3100 - 2900) * MS
    assert "clamped:handoff" in turn.flags
    assert sum(turn.segments.values()) == turn.e2e_ns


def test_order_violations_are_flagged() -> None:
    # The first audio byte stamped before the text was sent: a bug, not a provider quirk.
    turn = complete_turn(tts_audio1=3050).finish()
    assert "order:tts_request>tts_first_byte" in turn.flags
    assert sum(turn.segments.values()) == turn.e2e_ns


def test_output_before_speech_end_gives_no_e2e_and_fails_with_a_reason() -> None:
    turn = complete_turn(output=1900).finish()
    assert turn.e2e_ns is None
    assert turn.segments == {}
    assert "order:output_first_audible<speech_end" in turn.flags
    assert turn.failed
    assert turn.failure_reason and "speech_end" in turn.failure_reason


def test_failure_reason_is_kept_and_the_first_failure_wins() -> None:
    rec = complete_turn()
    rec.on_event("llm", Failed(at(3500), "HTTP 500 from the server"))
    rec.fail("tts", "stream closed")
    rec.on_event("tts", Failed(at(3600), "also broken"))
    assert rec.failed
    turn = rec.finish()
    assert turn.failed and not turn.ok and not turn.headline
    assert turn.failure_stage == "llm"
    assert turn.failure_reason == "HTTP 500 from the server"
    assert turn.e2e_ns == 1360 * MS  # milestones observed before the failure are kept


def test_incomplete_turn_fails_with_a_reason_naming_what_is_missing() -> None:
    rec = TurnRecorder(index=0, fixture="f", t0_ns=T0)
    rec.mark("speech_end", at(100))
    rec.mark("endpoint", at(200))
    rec.on_event("stt", Final(at(300), "hello"))
    rec.on_event("llm", RequestSent(at(310)))
    turn = rec.finish()
    assert turn.failed
    assert turn.failure_stage == "turn"
    assert turn.failure_reason is not None
    # the first gap on the critical path: where the turn stopped
    assert turn.failure_reason == "incomplete turn: no llm_first_token"
    assert turn.e2e_ns is None and turn.segments == {}


def test_incomplete_turn_missing_only_the_output_names_it() -> None:
    turn = complete_turn(with_output=False).finish()
    assert turn.failed
    assert turn.failure_reason is not None
    assert "output_first_audible" in turn.failure_reason


def test_cold_flag_from_a_cold_connection() -> None:
    rec = complete_turn()
    assert not rec.finish().cold
    rec.on_event("tts", Connected(at(3101), cold=True))
    rec.on_event("llm", Connected(at(2945), cold=True))
    rec.on_event("llm", Connected(at(2946), cold=True))
    turn = rec.finish()
    assert turn.cold
    assert turn.cold_stages == ("llm", "tts")  # stage order, each once
    assert turn.ok and not turn.headline


def test_spans_are_relative_to_t0_and_server_timings_become_figures() -> None:
    rec = complete_turn()
    rec.on_event("llm", Span("connect", at(2940), at(2942)))
    rec.on_event("llm", Span("response_headers", at(2950), at(2951)))
    rec.on_event("tts", Span("connect", at(3090), at(3095)))
    rec.on_event("llm", ServerTiming(at(3300), {"predicted_ms": 12.5}))
    turn = rec.finish()
    assert [(s.stage, s.name, s.start_ns, s.end_ns) for s in turn.spans] == [
        ("llm", "connect", 2940 * MS, 2942 * MS),
        ("llm", "response_headers", 2950 * MS, 2951 * MS),
        ("tts", "connect", 3090 * MS, 3095 * MS),
    ]
    assert turn.spans_of("llm") == {"connect": 2 * MS, "response_headers": 1 * MS}
    assert turn.figures["llm_server_predicted_ms"] == 12.5


def test_runner_flags_figures_and_extras_reach_the_turn() -> None:
    rec = complete_turn()
    rec.flag("pacer_lag")
    rec.flag("pacer_lag")
    rec.figure("pacer_lag_max_ns", 12_000_000)
    rec.extra("note", "x")
    turn = rec.finish()
    assert turn.flags == ("pacer_lag",)
    assert turn.figures["pacer_lag_max_ns"] == 12_000_000
    assert turn.extra["note"] == "x"


def test_turn_helpers() -> None:
    turn = complete_turn().finish()
    assert turn.since_speech_end("output_first_audible") == turn.e2e_ns
    assert turn.since_speech_end("speech_start") == -1600 * MS
    assert turn.largest_segment() == ("endpointing", 500 * MS)
    assert turn.index == 3 and turn.repeat == 1 and turn.fixture == "weather"


def test_critical_path_is_covered_by_segment_bounds() -> None:
    chained = [SEGMENT_BOUNDS[s][0] for s in SEGMENTS] + [SEGMENT_BOUNDS[SEGMENTS[-1]][1]]
    assert tuple(chained) == CRITICAL_PATH
