"""``openai-tts`` and ``openai-stt`` against the OpenAI emulator: exact ground truth for first
audio and final transcript, the decoded audio itself, and every fault as one Failed line."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

import pytest

from tests.helpers import ROOT
from voicelat.audio import PCM, first_audible_sample, frames, load_for_stage
from voicelat.core.base.errors import StageError
from voicelat.core.measure.events import (
    Audio,
    Connected,
    Done,
    Failed,
    Final,
    Partial,
    RequestSent,
    Span,
    StageEvent,
    TextSent,
)
from voicelat.emulate import Emulators
from voicelat.emulate.content import tone_speech
from voicelat.stages.openai_audio import OpenAISTT, OpenAITTS

KEY_ENV = "VOICELAT_TEST_EMULATOR_KEY"
EXACT = {
    "latency": {
        "headers": 10,
        "tts_first_audio": 100,
        "tts_chunk": 10,
        "stt_first": 60,
        "stt_final": 150,
        "token": 10,
    }
}
FIXTURE = ROOT / "fixtures" / "weather_paris.wav"
FIXTURE_TEXT = "What's the weather like in Paris today?"


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "test-key-123")


async def _collect(events: AsyncIterator[StageEvent], limit_s: float = 5.0) -> list[StageEvent]:
    async def run() -> list[StageEvent]:
        return [e async for e in events]

    return await asyncio.wait_for(run(), limit_s)


async def _texts(*pieces: str) -> AsyncIterator[str]:
    for piece in pieces:
        yield piece


async def _audio(pcm: PCM) -> AsyncIterable[bytes]:
    for frame in frames(pcm, 20):
        yield frame


def _tts(base_url: str, **extra: Any) -> OpenAITTS:
    return OpenAITTS({"base_url": base_url, "api_key_env": KEY_ENV, **extra})


def _stt(base_url: str, **extra: Any) -> OpenAISTT:
    return OpenAISTT({"base_url": base_url, "api_key_env": KEY_ENV, **extra})


@pytest.mark.parametrize("options", [{}, {"stream_format": "sse"}, {"response_format": "wav"}])
async def test_tts_first_audio_matches_truth_and_audio_is_exact(options: dict[str, Any]) -> None:
    profile = {"openai": {**EXACT, "content": {"leading_silence_ms": 50.0}}}
    async with Emulators(["openai"], profile=profile, seed=1) as em:
        async with _tts(em.url("openai"), **options) as tts:
            events = await _collect(tts.synthesize(_texts("Hello there. ", "How are you?")))
        exchanges = em.truth.select("openai", "speech")
    sent = [e for e in events if isinstance(e, TextSent)]
    audio = [e for e in events if isinstance(e, Audio)]
    assert [s.text for s in sent] == ["Hello there. ", "How are you?"]  # one request each
    assert len(exchanges) == 2 and isinstance(events[-1], Done)
    ex = exchanges[0]
    measured = (audio[0].t_ns - sent[0].t_ns) / 1e6
    truth = ex.between_ms("request_received", "first_audio_written")
    assert ex.injected_ms("tts_first_audio") == 100.0
    assert truth is not None and truth >= 100.0
    assert abs(measured - truth) < 2.0
    assert 0 <= audio[0].t_ns - ex.marks["first_audio_written"] < 2_000_000
    # Exactly the emulator's samples, container stripped, at 24 kHz.
    expected = tone_speech("Hello there. ", 24000, leading_silence_ms=50.0) + tone_speech(
        "How are you?", 24000, leading_silence_ms=50.0
    )
    assert b"".join(a.pcm for a in audio) == expected
    assert {a.rate for a in audio} == {24000}
    onset = first_audible_sample(PCM(audio[0].pcm + audio[1].pcm + audio[2].pcm, 24000))
    assert onset is not None and abs(onset - 1200) < 24 * 10  # 50 ms leading silence


async def test_tts_reports_sub_spans_and_warm_connections() -> None:
    async with (
        Emulators(["openai"], profile={"openai": EXACT}, seed=1) as em,
        _tts(em.url("openai")) as tts,
    ):
        events = await _collect(tts.synthesize(_texts("Hi.")))
    names = {e.name for e in events if isinstance(e, Span)}
    assert {"request_sent", "response_headers", "pool_wait"} <= names
    connected = next(e for e in events if isinstance(e, Connected))
    assert connected.cold is False  # warmed in __aenter__, reused for the request


async def test_stt_final_matches_truth_and_returns_the_manifest_text() -> None:
    pcm = load_for_stage(FIXTURE, 16000)
    async with Emulators(["openai"], profile={"openai": EXACT}, seed=1) as em:
        async with _stt(em.url("openai")) as stt:
            events = await _collect(stt.transcribe(_audio(pcm)))
        ex = em.truth.last("openai", "transcriptions")
    request = next(e for e in events if isinstance(e, RequestSent))
    partials = [e for e in events if isinstance(e, Partial)]
    final = next(e for e in events if isinstance(e, Final))
    assert final.text == FIXTURE_TEXT
    assert partials[-1].text == FIXTURE_TEXT and partials[0].text == "What's"
    assert isinstance(events[-1], Done)
    truth = ex.between_ms("request_received", "final_written")
    measured = (final.t_ns - request.t_ns) / 1e6
    assert truth is not None and truth >= 150.0
    # The measured segment also holds the upload of 3.4 s of audio (~110 kB on loopback).
    assert 0 <= measured - truth < 2.0
    assert 0 <= partials[0].t_ns - ex.marks["partial_written"] < 2_000_000
    assert ex.detail["audio_ms"] == len(frames(pcm, 20)) * 20  # every paced frame arrived


async def test_stt_reads_its_stream_to_the_end_and_keeps_the_connection() -> None:
    # The stream is read past transcript.text.done to the body's end: a response closed unread
    # lost its pooled connection, so every upload reconnected (in a re-warm, or cold).
    pcm = load_for_stage(FIXTURE, 16000)
    async with Emulators(["openai"], profile={"openai": EXACT}, seed=1) as em:
        async with _stt(em.url("openai")) as stt:
            first = await _collect(stt.transcribe(_audio(pcm)))
            second = await _collect(stt.transcribe(_audio(pcm)))
        uploads = em.truth.select("openai", "transcriptions")
    connected = [next(e for e in ev if isinstance(e, Connected)) for ev in (first, second)]
    assert [(c.cold, c.new_connection) for c in connected] == [(False, False)] * 2
    assert uploads[0].connection == uploads[1].connection
    assert all(isinstance(ev[-1], Done) for ev in (first, second))


async def test_stt_non_streaming_model_answers_json() -> None:
    pcm = load_for_stage(FIXTURE, 16000)
    async with (
        Emulators(["openai"], profile={"openai": EXACT}, seed=1) as em,
        _stt(em.url("openai"), model="whisper-1") as stt,
    ):
        events = await _collect(stt.transcribe(_audio(pcm)))
    assert [type(e).__name__ for e in events][-2:] == ["Final", "Done"]
    assert next(e for e in events if isinstance(e, Final)).text == FIXTURE_TEXT
    assert not any(isinstance(e, Partial) for e in events)


async def test_missing_key_variable_is_a_startup_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(StageError) as err:
        _tts("http://127.0.0.1:9/v1")
    assert f"${KEY_ENV}, which is not set" in str(err.value)


async def test_unreachable_server_is_a_startup_error() -> None:
    with pytest.raises(StageError) as err:
        async with _stt("http://127.0.0.1:9/v1"):
            pass
    assert "not reachable at http://127.0.0.1:9/v1" in str(err.value)
    assert "connection refused" in str(err.value)


_FAULTS = [
    ({"http_429": 1.0}, "HTTP 429 from", "HTTP 429 from"),
    ({"http_500": 1.0}, "HTTP 500 from", "HTTP 500 from"),
    ({"error_event": {"p": 1.0, "after": 2}}, "broke the response off", "error event mid-stream"),
    ({"stall": {"p": 1.0, "after": 2, "seconds": 3}}, "read timeout", "read timeout"),
    ({"truncate": {"p": 1.0, "after": 2}}, "broke the response off", "broke the response off"),
    ({"refuse": {"p": 1.0, "seconds": 0.2}}, "connection", "connection"),
]


@pytest.mark.parametrize(("fault", "raw_reason", "sse_reason"), _FAULTS)
@pytest.mark.parametrize("stream_format", ["audio", "sse"])
async def test_tts_faults_are_one_failed_line(
    fault: dict[str, Any], raw_reason: str, sse_reason: str, stream_format: str
) -> None:
    profile = {"openai": {"latency": {"headers": 2, "tts_first_audio": 5}, "faults": fault}}
    async with Emulators(["openai"], profile=profile, seed=1) as em:
        async with _tts(em.url("openai"), stream_format=stream_format, timeout_s=0.5) as tts:
            t0 = time.perf_counter()
            events = await _collect(tts.synthesize(_texts("Hello there. ", "Again.")))
            elapsed = time.perf_counter() - t0
        assert em.truth.last("openai", "speech").fault == next(iter(fault))
    failed = [e for e in events if isinstance(e, Failed)]
    assert len(failed) == 1 and events[-1] is failed[0]
    assert (raw_reason if stream_format == "audio" else sse_reason) in failed[0].reason
    assert "\n" not in failed[0].reason and "test-key-123" not in failed[0].reason
    assert not any(isinstance(e, Done) for e in events)
    assert elapsed < 2.0


async def test_tts_sse_early_clean_end_is_a_failure() -> None:
    profile = {"openai": {"faults": {"truncate": {"p": 1.0, "after": 1, "mode": "eof"}}}}
    async with (
        Emulators(["openai"], profile=profile, seed=1) as em,
        _tts(em.url("openai"), stream_format="sse") as tts,
    ):
        events = await _collect(tts.synthesize(_texts("Hello there.")))
    assert isinstance(events[-1], Failed)
    assert "stream ended before speech.audio.done" in events[-1].reason


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ({"http_429": 1.0}, "HTTP 429 from"),
        ({"http_500": 1.0}, "HTTP 500 from"),
        ({"error_event": {"p": 1.0, "after": 2}}, "error event mid-stream: The server had"),
        ({"stall": {"p": 1.0, "after": 1, "seconds": 3}}, "read timeout"),
        ({"truncate": {"p": 1.0, "after": 2}}, "broke the response off"),
        ({"truncate": {"p": 1.0, "after": 2, "mode": "eof"}}, "before transcript.text.done"),
        ({"refuse": {"p": 1.0, "seconds": 0.2}}, "connection"),
    ],
)
async def test_stt_faults_are_one_failed_line(fault: dict[str, Any], expected: str) -> None:
    pcm = load_for_stage(FIXTURE, 16000)
    profile = {"openai": {"latency": {"headers": 2, "stt_first": 5}, "faults": fault}}
    async with (
        Emulators(["openai"], profile=profile, seed=1) as em,
        _stt(em.url("openai"), timeout_s=0.5) as stt,
    ):
        t0 = time.perf_counter()
        events = await _collect(stt.transcribe(_audio(pcm)))
        elapsed = time.perf_counter() - t0
    failed = [e for e in events if isinstance(e, Failed)]
    assert len(failed) == 1 and events[-1] is failed[0]
    assert expected in failed[0].reason
    assert "\n" not in failed[0].reason
    assert not any(isinstance(e, Final) for e in events)
    assert elapsed < 2.0
