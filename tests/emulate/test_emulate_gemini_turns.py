"""gemini-live, checked with the official ``google-genai`` SDK over TLS: many turns on one
session, input transcription, a client text turn (audio and text replies), interruption with
an injected stop latency, a greeting, and the per-response ground truth."""

from __future__ import annotations

import asyncio
import json
import ssl
from typing import Any

import pytest

from tests.emulate.test_emulate_gemini_sdk import _client, _pcm_chunks, _turn, tls
from tests.helpers import ROOT
from voicelat.core.measure.clock import now_ns
from voicelat.emulate import Emulators

genai = pytest.importorskip("google.genai")

__all__ = ["tls"]  # the module fixture, shared

MODEL = "gemini-live-2.5-flash-preview"
FAST = {"first_audio": 20, "audio_chunk": 1, "transcription": 10}
REPLY = "Sure. It is sunny and mild today."
#: The SDK plays nothing: turnComplete not held for an assumed playback (quick tests).
QUICK = {"assume_playback": False}


def _text(fixture_id: str) -> str:
    data = json.loads((ROOT / "fixtures" / "manifest.json").read_text())
    items = data["fixtures"] if isinstance(data, dict) else data
    return str(next(f["text"] for f in items if f["id"] == fixture_id))


async def _say(session: Any, name: str, silence_ms: int = 800) -> None:
    from google.genai import types

    for chunk in _pcm_chunks(ROOT / "fixtures" / f"{name}.wav", silence_ms):
        await session.send_realtime_input(
            audio=types.Blob(data=chunk, mime_type="audio/pcm;rate=16000")
        )


def _said(messages: list[Any]) -> str:
    return "".join(
        m.server_content.output_transcription.text or ""
        for m in messages
        if m.server_content and m.server_content.output_transcription
    )


async def test_many_turns_on_one_live_session_with_input_transcription(
    tls: tuple[ssl.SSLContext, ssl.SSLContext],
) -> None:
    from google.genai import types

    server_ctx, client_ctx = tls
    profile = {"gemini-live": {"latency": FAST, "content": QUICK}}
    async with Emulators(["gemini-live"], profile=profile, ssl=server_ctx) as em:
        config = types.LiveConnectConfig(
            response_modalities=[types.Modality.AUDIO],
            input_audio_transcription=types.AudioTranscriptionConfig(),
            output_audio_transcription=types.AudioTranscriptionConfig(),
        )
        turns = []
        async with _client(em, client_ctx).aio.live.connect(model=MODEL, config=config) as session:
            for name in ("weather_paris", "call_mom", "weather_paris"):
                await _say(session, name)
                turns.append(await _turn(session))
        session_truth = em.truth.last("gemini-live", "live")
        assert em.errors == []
    heard = [
        m.server_content.input_transcription.text
        for messages in turns
        for m in messages
        if m.server_content and m.server_content.input_transcription
    ]
    assert heard == [_text("weather_paris"), _text("call_mom"), _text("weather_paris")]
    assert [_said(messages) for messages in turns] == [REPLY] * 3
    assert session_truth.detail["turns"] == 3
    responses = [em.truth.response("gemini-live", i) for i in range(3)]
    assert [r.trigger for r in responses] == ["vad"] * 3
    for i, r in enumerate(responses):
        assert r.status == "completed"
        assert r.first_audio_ns is not None and r.last_audio_ns is not None
        assert r.done_ns is not None and r.first_audio_ns < r.last_audio_ns <= r.done_ns
        if i:
            assert r.trigger_ns > responses[i - 1].done_ns  # type: ignore[operator]


@pytest.mark.parametrize("modality", ["AUDIO", "TEXT"])
async def test_a_client_text_turn_completes(
    modality: str, tls: tuple[ssl.SSLContext, ssl.SSLContext]
) -> None:
    from google.genai import types

    server_ctx, client_ctx = tls
    profile = {"gemini-live": {"latency": FAST, "content": QUICK}}
    async with Emulators(["gemini-live"], profile=profile, ssl=server_ctx) as em:
        config = types.LiveConnectConfig(
            response_modalities=[types.Modality(modality)],
            output_audio_transcription=types.AudioTranscriptionConfig(),
        )
        async with _client(em, client_ctx).aio.live.connect(model=MODEL, config=config) as session:
            await session.send_client_content(
                turns=types.Content(role="user", parts=[types.Part(text="Weather, please?")]),
                turn_complete=True,
            )
            async with asyncio.timeout(10):  # a dropped text turn would hang forever
                messages = await _turn(session)
        truth = em.truth.last("gemini-live", "live")
        assert em.errors == []
    assert truth.detail["client_texts"] == ["Weather, please?"]
    assert em.truth.response("gemini-live", 0).trigger == "text"
    parts = [
        p
        for m in messages
        if m.server_content and m.server_content.model_turn
        for p in m.server_content.model_turn.parts or []
    ]
    if modality == "TEXT":
        assert "".join(p.text or "" for p in parts) == REPLY
        assert not any(p.inline_data for p in parts)
    else:
        assert sum(len(p.inline_data.data) for p in parts if p.inline_data) > 24000
        assert _said(messages) == REPLY
    assert messages[-1].server_content.turn_complete


@pytest.mark.e2e
@pytest.mark.parametrize("stop_ms", [0, 60])
async def test_interrupted_stops_the_reply_after_the_injected_stop_latency(
    stop_ms: int, tls: tuple[ssl.SSLContext, ssl.SSLContext]
) -> None:
    from google.genai import types

    server_ctx, client_ctx = tls
    latency = {"first_audio": 20, "audio_chunk": 40, "cancel_stop": stop_ms}
    async with Emulators(["gemini-live"], profile={"gemini-live": {"latency": latency}},
                         ssl=server_ctx) as em:  # fmt: skip
        config = types.LiveConnectConfig(response_modalities=[types.Modality.AUDIO])
        async with _client(em, client_ctx).aio.live.connect(model=MODEL, config=config) as session:
            await _say(session, "weather_paris", 700)
            async for message in session.receive():
                if message.server_content and message.server_content.model_turn:
                    break  # the reply started
            await _say(session, "call_mom", 800)  # talk over it, then wait for the answer
            cut = await _turn(session)
            t_cut = now_ns()
            answer = await _turn(session)
        assert em.errors == []
        first, second = (em.truth.response("gemini-live", i) for i in (0, 1))
    assert any(m.server_content and m.server_content.interrupted for m in cut)
    assert first.status == "cancelled" and first.reason == "interrupted"
    assert first.cancel_ns is not None and first.last_audio_ns is not None
    stop = first.stop_ms()
    assert stop is not None
    if stop_ms:
        assert 60 <= stop < 70, stop
    else:
        assert first.last_audio_ns <= first.cancel_ns
    assert first.done_ns is not None and first.done_ns <= t_cut
    assert second.status == "completed" and second.trigger == "vad"
    assert answer[-1].server_content.turn_complete


async def test_a_greeting_comes_first(tls: tuple[ssl.SSLContext, ssl.SSLContext]) -> None:
    from google.genai import types

    server_ctx, client_ctx = tls
    greeting = "Hello, this is the weather line."
    profile = {"gemini-live": {"latency": FAST, "content": {**QUICK, "greeting": greeting}}}
    async with Emulators(["gemini-live"], profile=profile, ssl=server_ctx) as em:
        config = types.LiveConnectConfig(
            response_modalities=[types.Modality.AUDIO],
            output_audio_transcription=types.AudioTranscriptionConfig(),
        )
        async with _client(em, client_ctx).aio.live.connect(model=MODEL, config=config) as session:
            messages = await _turn(session)
        assert em.errors == []
    assert _said(messages) == greeting
    assert em.truth.response("gemini-live", 0).trigger == "greeting"


@pytest.mark.parametrize("prefix_ms", [0, 700])
async def test_speech_during_the_played_reply_interrupts_it_once_committed(
    prefix_ms: int, tls: tuple[ssl.SSLContext, ssl.SSLContext]
) -> None:
    """The reply's turnComplete waits for its assumed playback, and speech heard until then
    interrupts it once ``prefixPaddingMs`` of it is committed: an "mm-hmm" (600 ms of loud
    frames) interrupts with 0 (and is answered), and passes unheard with 700 (no turn, no
    second reply)."""
    from google.genai import types

    server_ctx, client_ctx = tls
    reply = "Sure, it is sunny."  # 18 characters at 60 ms: a 1.08 s reply
    profile = {"gemini-live": {"latency": FAST, "content": {"reply": reply}}}
    async with Emulators(["gemini-live"], profile=profile, ssl=server_ctx) as em:
        detection = types.AutomaticActivityDetection(prefix_padding_ms=prefix_ms)
        config = types.LiveConnectConfig(
            response_modalities=[types.Modality.AUDIO],
            realtime_input_config=types.RealtimeInputConfig(automatic_activity_detection=detection),
        )
        async with _client(em, client_ctx).aio.live.connect(model=MODEL, config=config) as session:
            await _say(session, "weather_paris", 600)
            async for message in session.receive():
                if message.server_content and message.server_content.model_turn:
                    break  # the reply started; all its parts go out at once (audio_chunk 1)
            mmhmm = _pcm_chunks(ROOT / "fixtures" / "calls" / "bc_mmhmm.wav", 300)
            for chunk in mmhmm:
                await session.send_realtime_input(
                    audio=types.Blob(data=chunk, mime_type="audio/pcm;rate=16000")
                )
            cut = await _turn(session)
            if not prefix_ms:  # the "mm-hmm" was a turn: its answer, read to its end
                await _turn(session)
        assert em.errors == []
        responses = em.truth.last("gemini-live", "live").responses
    first = responses[0]
    assert first.first_audio_ns is not None and first.done_ns is not None
    interrupted = any(m.server_content and m.server_content.interrupted for m in cut)
    if prefix_ms:
        # Held for the reply's playback (1.08 s from its first part), not interrupted.
        assert first.done_ns - first.first_audio_ns >= 1_080_000_000 - 1_000_000
        assert not interrupted and first.status == "completed" and len(responses) == 1
    else:
        assert interrupted and first.status == "cancelled" and first.reason == "interrupted"
        assert first.cancel_ns is not None and first.cancel_ns < first.done_ns
        assert len(responses) == 2 and responses[1].status == "completed"
