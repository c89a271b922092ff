"""The OpenAI Realtime emulator passes the official ``openai`` SDK's realtime client.

``AsyncOpenAI(base_url="http://H:P/v1").realtime.connect()`` reaches the emulator as it is
(PROTOCOLS-AGENTS.md §1.1). The SDK's own typed senders drive the session; every message the
emulator sends is validated against the SDK's pydantic union of server events
(``RealtimeServerEvent``, strict: an unknown ``type`` or a missing field fails), so the shapes
are the GA ones and not merely parseable.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from tests.helpers import ROOT
from voicelat.audio import frames, load_for_stage
from voicelat.emulate import Emulators

FIXTURE = ROOT / "fixtures" / "weather_paris.wav"
FAST = {"latency": {"response_created": 5, "first_audio": 20, "audio_chunk": 1}}
REPLY = "Sure. It is sunny and mild today."


def _client(em: Emulators, key: str = "sk-test") -> Any:
    from openai import AsyncOpenAI

    return AsyncOpenAI(api_key=key, base_url=em.url("openai-realtime"), max_retries=0)


def _audio_frames(silence_ms: int = 1000) -> list[str]:
    pcm = load_for_stage(FIXTURE, 24000)
    chunks = [*frames(pcm, 20), *([bytes(960)] * (silence_ms // 20))]
    return [base64.b64encode(c).decode() for c in chunks]


async def _events_until_done(conn: Any) -> list[Any]:
    from openai.types.realtime import RealtimeServerEvent
    from pydantic import TypeAdapter

    adapter: TypeAdapter[Any] = TypeAdapter(RealtimeServerEvent)
    seen: list[Any] = []
    while True:
        raw = await conn.recv_bytes()
        event = adapter.validate_json(raw)  # strict: the SDK's own models
        seen.append(event)
        if event.type == "response.done":
            return seen


@pytest.mark.parametrize("detection", ["server_vad", "semantic_vad", "none"])
async def test_openai_sdk_realtime_session_turn(detection: str) -> None:
    async with Emulators(["openai-realtime"], profile={"openai-realtime": FAST}) as em:
        client = _client(em)
        async with client.realtime.connect(model="gpt-realtime") as conn:
            created = await conn.recv()
            assert created.type == "session.created"
            turn_detection: Any = None if detection == "none" else {"type": detection}
            await conn.session.update(
                session={
                    "type": "realtime",
                    "output_modalities": ["audio"],
                    "audio": {
                        "input": {
                            "format": {"type": "audio/pcm", "rate": 24000},
                            "turn_detection": turn_detection,
                        },
                        "output": {
                            "format": {"type": "audio/pcm", "rate": 24000},
                            "voice": "cedar",
                        },
                    },
                }
            )
            updated = await conn.recv()
            assert updated.type == "session.updated"
            assert updated.session.audio.output.voice == "cedar"
            for audio in _audio_frames():
                await conn.input_audio_buffer.append(audio=audio)
            if detection == "none":
                await conn.input_audio_buffer.commit()
                await conn.response.create()
            events = await _events_until_done(conn)
        truth = em.truth.last("openai-realtime", "realtime")
        assert em.errors == []
    types = [e.type for e in events]
    if detection != "none":
        start = types.index("input_audio_buffer.speech_started")
        stop = types.index("input_audio_buffer.speech_stopped")
        assert start < stop < types.index("input_audio_buffer.committed")
        stopped = events[stop]
        # weather_paris: speech ends at ~2.3 s; the VAD waits silence_duration_ms after it.
        assert 2000 <= stopped.audio_end_ms <= 3500, stopped
    assert types.index("response.created") < types.index("response.output_audio.delta")
    audio = b"".join(
        base64.b64decode(e.delta) for e in events if e.type == "response.output_audio.delta"
    )
    transcript = "".join(
        e.delta for e in events if e.type == "response.output_audio_transcript.delta"
    )
    assert len(audio) > 24000  # over half a second of 24 kHz pcm16
    assert transcript == REPLY
    done = events[-1]
    assert done.response.status == "completed"
    assert done.response.usage.output_tokens > 0
    assert truth.marks["first_audio_written"] >= truth.marks["response_created_written"]


async def test_openai_sdk_sees_errors_as_events_and_a_refused_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from openai.types.realtime import RealtimeErrorEvent

    monkeypatch.setenv("VOICELAT_TEST_RT_KEY", "sk-test")
    profile = {"openai-realtime": {**FAST, "api_key_env": "VOICELAT_TEST_RT_KEY"}}
    async with Emulators(["openai-realtime"], profile=profile) as em:
        async with _client(em).realtime.connect(model="gpt-realtime") as conn:
            await conn.recv()
            # The beta (flat) shape is refused as the GA service refuses it.
            await conn.send(
                {"type": "session.update", "session": {"type": "realtime", "voice": "alloy"}}
            )
            error = await conn.recv()
            assert isinstance(error, RealtimeErrorEvent)
            assert error.error.code == "unknown_parameter"
            await conn.input_audio_buffer.commit()  # nothing appended: too small
            error = await conn.recv()
            assert isinstance(error, RealtimeErrorEvent)
            assert error.error.code == "input_audio_buffer_commit_empty"
        with pytest.raises(Exception, match="404"):
            async with _client(em).realtime.connect(model="no-such-model") as conn:
                await conn.recv()
        with pytest.raises(Exception, match="401"):
            async with _client(em, key="sk-wrong").realtime.connect(model="gpt-realtime") as conn:
                await conn.recv()


async def test_openai_sdk_barge_in_cancels_the_response_and_truncates() -> None:
    """Speech during a response (interrupt_response): the rest is dropped, response.done says
    cancelled/turn_detected; the client truncates the item at what it played."""
    slow = {"latency": {"response_created": 5, "first_audio": 20, "audio_chunk": 40}}
    async with Emulators(["openai-realtime"], profile={"openai-realtime": slow}) as em:
        async with _client(em).realtime.connect(model="gpt-realtime") as conn:
            await conn.recv()  # session.created
            for audio in _audio_frames(silence_ms=700):
                await conn.input_audio_buffer.append(audio=audio)
            item_id = None
            while True:
                event = await conn.recv()
                if event.type == "response.output_audio.delta":
                    item_id = event.item_id
                    break
            for audio in _audio_frames(silence_ms=0)[:60]:  # talk over the reply
                await conn.input_audio_buffer.append(audio=audio)
            seen = []
            while True:
                event = await conn.recv()
                seen.append(event)
                if event.type == "response.done":
                    break
            await conn.conversation.item.truncate(item_id=item_id, content_index=0, audio_end_ms=40)
            truncated = await conn.recv()
        truth = em.truth.last("openai-realtime", "realtime")
    done = seen[-1]
    assert done.response.status == "cancelled"
    assert done.response.status_details.reason == "turn_detected"
    assert any(e.type == "input_audio_buffer.speech_started" for e in seen)
    assert truncated.type == "conversation.item.truncated" and truncated.audio_end_ms == 40
    assert "cancelled_written" in truth.marks
