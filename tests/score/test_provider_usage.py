"""The usage STT and TTS providers report, on literal responses and frames: each parser keeps
it in the stage's keys (``audio_ms``, ``characters``, tokens), the recorder makes it figures
``stt_usage_*``/``tts_usage_*``, and core/judge/cost.py prices it before anything voicelat counted,
labelled ``reported`` (voicelat's own count stays the fallback, labelled ``sent``/``received``).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from voicelat.core.base.turn import Turn
from voicelat.core.judge.cost import parse_prices, turn_cost, turn_usage
from voicelat.core.measure.events import Audio, Done, Final, TextSent
from voicelat.core.measure.recorder import TurnRecorder
from voicelat.stages.inworld import _NDJSONAudioDecoder
from voicelat.stages.openai_audio import (
    _SpeechSSEDecoder,
    _total_usage,
    _Transcript,
    transcription_usage,
)

S = 1_000_000_000


# -- OpenAI transcription: tokens (gpt-4o-*) or duration (whisper-1) --------------------------
def test_token_usage_of_a_gpt_4o_transcription() -> None:
    usage = {
        "type": "tokens",
        "input_tokens": 14,
        "input_token_details": {"text_tokens": 2, "audio_tokens": 12},
        "output_tokens": 45,
        "total_tokens": 59,
    }
    assert transcription_usage(usage) == {
        "input_tokens": 14,
        "input_audio_tokens": 12,
        "input_text_tokens": 2,
        "output_tokens": 45,
    }


def test_duration_usage_of_whisper_is_audio_ms() -> None:
    assert transcription_usage({"type": "duration", "seconds": 9.4}) == {"audio_ms": 9400}
    assert transcription_usage({"type": "duration", "seconds": 3}) == {"audio_ms": 3000}


@pytest.mark.parametrize(
    "usage",
    [None, "tokens", [], {"type": "duration"}, {"type": "duration", "seconds": "3"},
     {"input_tokens": -1, "output_tokens": True}],
)  # fmt: skip
def test_usage_that_says_nothing_usable_is_empty(usage: Any) -> None:
    assert transcription_usage(usage) == {}


def test_the_streamed_final_carries_its_usage_into_done() -> None:
    t = _Transcript("http://x/v1/audio/transcriptions")
    done = {
        "type": "transcript.text.done",
        "text": "book a table",
        "usage": {"type": "tokens", "input_tokens": 30, "output_tokens": 3, "total_tokens": 33},
    }
    assert t.feed(json.dumps(done), 7) == [
        Final(7, "book a table"),
        Done(7, usage={"input_tokens": 30, "output_tokens": 3}),
    ]


# -- OpenAI speech (SSE): speech.audio.done's token usage -------------------------------------
def _sse(obj: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(obj)}\n\n".encode()


def test_speech_sse_done_reports_tokens_and_raw_audio_reports_nothing() -> None:
    d = _SpeechSSEDecoder(24000)
    pcm = d.feed(
        _sse({"type": "speech.audio.delta", "audio": base64.b64encode(b"\1\0" * 8).decode()})
    )
    assert pcm == [b"\1\0" * 8] and d.usage is None  # nothing reported until the end
    usage = {"input_tokens": 5, "output_tokens": 120, "total_tokens": 125}
    d.feed(_sse({"type": "speech.audio.done", "usage": usage}))
    assert d.done and d.usage == {"input_tokens": 5, "output_tokens": 120}
    bare = _SpeechSSEDecoder(24000)
    bare.feed(_sse({"type": "speech.audio.done"}))
    assert bare.done and bare.usage is None


def test_a_reply_reports_usage_only_when_every_request_did() -> None:
    a, b = {"input_tokens": 5, "output_tokens": 100}, {"input_tokens": 2, "output_tokens": 40}
    assert _total_usage([a, b]) == {"input_tokens": 7, "output_tokens": 140}
    # A piece that reported nothing: a sum would understate the bill, so nothing is reported.
    assert _total_usage([a, None]) == {}
    assert _total_usage([]) == {}


# -- Inworld: usage.processedCharactersCount ---------------------------------------------------
def _line(result: dict[str, Any]) -> bytes:
    return (json.dumps({"result": result}) + "\n").encode()


def test_inworld_processed_characters_are_the_usage() -> None:
    d = _NDJSONAudioDecoder(24000)
    audio = base64.b64encode(b"\0\0" * 4).decode()
    d.feed(_line({"audioContent": audio}))
    assert d.usage is None
    usage = {"processedCharactersCount": 47, "modelId": "inworld-tts-2"}
    d.feed(_line({"audioContent": audio, "usage": usage}))
    d.feed(_line({"audioContent": audio, "usage": usage}))  # a repeated total counts once
    assert d.usage == {"characters": 47}


# -- recorder: Done.usage -> figures -------------------------------------------------------------
def test_the_recorder_keeps_each_stages_reported_usage_as_figures() -> None:
    rec = TurnRecorder(index=0, fixture="f", t0_ns=0)
    rec.on_event("stt", Final(10, "hi"))
    rec.on_event("stt", Done(11, usage={"audio_ms": 2500}))
    rec.on_event("tts", TextSent(20, "Hello."))
    rec.on_event("tts", Audio(30, b"\0\0" * 240, 24000))
    rec.on_event("tts", Done(40, usage={"characters": 6}))
    f = rec.finish().figures
    assert f["stt_usage_audio_ms"] == 2500 and f["tts_usage_characters"] == 6
    assert not any(k.startswith("llm_usage") for k in f)


# -- cost: reported first, voicelat's count as the labelled fallback ------------------------------
def _turn(**figures: Any) -> Turn:
    return Turn(
        index=0,
        fixture="f",
        t0_ns=0,
        milestones={"endpoint": 2 * S, "stt_final": 3 * S, "output_first_audible": 5 * S},
        segments={},
        e2e_ns=S,
        figures={"tts_audio_ns": 4 * S, **figures},
        reply="x" * 100,
    )


def test_reported_usage_wins_over_what_voicelat_counted() -> None:
    turn = _turn(stt_usage_audio_ms=2500, tts_usage_characters=90, tts_usage_audio_ms=3900)
    stt, tts = turn_usage(turn, "stt"), turn_usage(turn, "tts")
    assert (stt["audio_second"].quantity, stt["audio_second"].source) == (2.5, "reported")
    assert (tts["character"].quantity, tts["character"].source) == (90.0, "reported")
    assert (tts["audio_second"].quantity, tts["audio_second"].source) == (3.9, "reported")
    plain = _turn()
    stt, tts = turn_usage(plain, "stt"), turn_usage(plain, "tts")
    # Nothing reported: the 3 s of input streamed and the 100 characters sent, labelled so.
    assert (stt["audio_second"].quantity, stt["audio_second"].source) == (3.0, "sent")
    assert (tts["character"].quantity, tts["character"].source) == (100.0, "sent")
    assert (tts["audio_second"].quantity, tts["audio_second"].source) == (4.0, "received")


def test_token_billed_stt_and_tts_are_priced_from_their_reported_tokens() -> None:
    prices = parse_prices(
        {
            "currency": "USD",
            "stt": {"per_million_input_audio_tokens": 3.0, "per_million_output_tokens": 5.0},
            "tts": {"per_million_input_tokens": 0.6, "per_million_output_tokens": 12.0},
        }
    )
    turn = _turn(
        stt_usage_input_tokens=32,
        stt_usage_input_audio_tokens=30,
        stt_usage_input_text_tokens=2,
        stt_usage_output_tokens=4,
        tts_usage_input_tokens=20,
        tts_usage_output_tokens=500,
    )
    stt, tts = turn_cost(turn, prices, {"stt": "openai-stt", "tts": "openai-tts"}).stages
    assert stt.amount == pytest.approx((30 * 3.0 + 4 * 5.0) / 1e6)
    assert tts.amount == pytest.approx((20 * 0.6 + 500 * 12.0) / 1e6)
    assert {u.source for u in (*stt.usage, *tts.usage)} == {"reported"}
    # A token price with no tokens reported is no guess: the cost is empty, with the reason.
    (bare,) = turn_cost(_turn(), prices, {"tts": "openai-tts"}).stages
    assert bare.amount is None and any("input_token" in m for m in bare.missing)
