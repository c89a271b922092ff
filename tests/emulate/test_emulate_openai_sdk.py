"""Conformance: the official ``openai`` Python SDK against the OpenAI emulator.

Each test makes the SDK's ordinary streaming call, pointed at the emulator with
``base_url``, and checks what the SDK parsed, so a wire-format slip in the emulator (a
missing field, a wrong event type, a framing error) fails here the way it would for users.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import openai
import pytest
from openai import AsyncOpenAI

from voicelat.emulate import Emulators

ROOT = Path(__file__).resolve().parents[2]
FAST = {
    "latency": {
        "headers": 2,
        "ttft": 10,
        "token": 1,
        "stt_first": 5,
        "stt_final": 10,
        "tts_first_audio": 5,
        "tts_chunk": 1,
    }
}
REPLY = "Sure. It is sunny and mild today, around twenty degrees. Anything else?"


@pytest.fixture
async def emulator() -> AsyncIterator[Emulators]:
    async with Emulators(["openai"], profile={"openai": FAST}, seed=1) as em:
        yield em
        assert em.errors == []


def _client(em: Emulators, key: str = "sk-test") -> AsyncOpenAI:
    return AsyncOpenAI(base_url=em.url("openai"), api_key=key, max_retries=0, timeout=10)


async def test_chat_streaming_with_usage(emulator: Emulators) -> None:
    client = _client(emulator)
    stream = await client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "What's the weather like?"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    roles, text, finish, usage = [], [], None, None
    async for chunk in stream:
        if chunk.choices:
            delta = chunk.choices[0].delta
            roles += [delta.role] if delta.role else []
            text += [delta.content] if delta.content else []
            finish = chunk.choices[0].finish_reason or finish
        if chunk.usage is not None:
            usage = chunk.usage
    assert roles == ["assistant"]
    assert "".join(text) == REPLY
    assert len(text) == len(REPLY.split())  # one delta per token-like word
    assert finish == "stop"
    assert usage is not None and usage.completion_tokens == len(text)
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    await client.close()


async def test_completions_streaming(emulator: Emulators) -> None:
    client = _client(emulator)
    stream = await client.completions.create(
        model="gemma-3-270m", prompt="User: hi\nAssistant:", stream=True, max_tokens=3
    )
    pieces, finish = [], None
    async for chunk in stream:
        pieces.append(chunk.choices[0].text)
        finish = chunk.choices[0].finish_reason or finish
    assert "".join(pieces) == "Sure. It is"
    assert finish == "length"  # max_tokens cut the reply, as a real server reports it
    await client.close()


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_deltas_come_first_under_either_field_name(field: str) -> None:
    profile = {"openai": {**FAST, "content": {"reasoning_field": field}}}
    async with Emulators(["openai"], profile=profile, seed=1) as em:
        client = _client(em)
        stream = await client.chat.completions.create(
            model="deepseek-reasoner",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
        )
        kinds = []
        async for chunk in stream:
            delta = chunk.choices[0].delta
            extra = delta.model_extra or {}
            if extra.get(field):
                kinds.append("reasoning")
            elif delta.content:
                kinds.append("content")
        await client.close()
    assert kinds[0] == "reasoning" and kinds[-1] == "content"
    assert kinds == sorted(kinds, key=lambda k: k != "reasoning")  # all reasoning first
    ex = em.truth.last("openai", "chat")
    assert ex.marks["first_reasoning_written"] < ex.marks["first_content_written"]


async def test_non_streamed_chat(emulator: Emulators) -> None:
    client = _client(emulator)
    done = await client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
    )
    assert done.choices[0].message.content == REPLY
    assert done.choices[0].finish_reason == "stop"
    await client.close()


async def test_speech_streaming_raw_pcm(emulator: Emulators) -> None:
    client = _client(emulator)
    async with client.audio.speech.with_streaming_response.create(
        model="gpt-4o-mini-tts", voice="alloy", input="Hello there.", response_format="pcm"
    ) as response:
        assert response.headers["content-type"] == "audio/pcm"
        pcm = b"".join([piece async for piece in response.iter_bytes()])
    # 12 characters at 60 ms each, at 24 kHz 16-bit: 720 ms of audio.
    assert len(pcm) == round(24000 * 0.72) * 2
    assert any(pcm)
    await client.close()


async def test_speech_streaming_sse(emulator: Emulators) -> None:
    client = _client(emulator)
    response = await client.audio.speech.create(
        model="gpt-4o-mini-tts",
        voice="alloy",
        input="Hello there.",
        response_format="pcm",
        stream_format="sse",
    )
    events = [
        json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")
    ]
    assert {e["type"] for e in events[:-1]} == {"speech.audio.delta"}
    assert events[-1]["type"] == "speech.audio.done" and events[-1]["usage"]["total_tokens"] > 0
    await client.close()


async def test_transcription_streaming_returns_the_fixture_transcript(
    emulator: Emulators,
) -> None:
    client = _client(emulator)
    audio = (ROOT / "fixtures" / "weather_paris.wav").read_bytes()
    stream = await client.audio.transcriptions.create(
        model="gpt-4o-mini-transcribe",
        file=("weather_paris.wav", audio, "audio/wav"),
        stream=True,
    )
    events = [event async for event in stream]
    deltas = [e.delta for e in events if e.type == "transcript.text.delta"]
    done = [e for e in events if e.type == "transcript.text.done"]
    assert "".join(deltas) == "What's the weather like in Paris today?"
    assert len(done) == 1 and done[0].text == "What's the weather like in Paris today?"
    assert done[0].usage is not None
    await client.close()


async def test_missing_and_wrong_keys_are_401(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOICELAT_TEST_EMULATOR_KEY", "right-key")
    profile = {"openai": {**FAST, "api_key_env": "VOICELAT_TEST_EMULATOR_KEY"}}
    async with Emulators(["openai"], profile=profile, seed=1) as em:
        with pytest.raises(openai.AuthenticationError) as err:
            await _client(em, "wrong-key").models.list()
        assert err.value.status_code == 401
        assert "Incorrect API key" in err.value.message
        assert "wrong-key" not in err.value.message  # a key is never echoed
        models = await _client(em, "right-key").models.list()
        assert "gpt-4o-mini" in [m.id for m in models.data]


async def test_sdk_raises_on_the_mid_stream_error_event() -> None:
    profile = {"openai": {**FAST, "faults": {"error_event": {"p": 1.0, "after": 2}}}}
    async with Emulators(["openai"], profile=profile, seed=1) as em:
        client = _client(em)
        stream = await client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        seen = []
        with pytest.raises(openai.APIError) as err:
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    seen.append(chunk.choices[0].delta.content)
        assert seen == ["Sure.", " It"]
        assert "Sorry about that" in err.value.message
        await client.close()


async def test_sdk_sees_429_as_a_rate_limit() -> None:
    profile = {"openai": {**FAST, "faults": {"http_429": 1.0}}}
    async with Emulators(["openai"], profile=profile, seed=1) as em:
        with pytest.raises(openai.RateLimitError) as err:
            await _client(em).chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], stream=True
            )
        assert err.value.status_code == 429
