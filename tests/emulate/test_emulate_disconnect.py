"""The OpenAI-compatible chat and speech emulators stop streaming when the client goes away
(an SDK closing a stream early, as a cascade does on barge-in), and the ground truth says when
they noticed (``client_gone``) and when they stopped sending (``detail["stopped_ns"]``)."""

from __future__ import annotations

import asyncio
from typing import Any

from voicelat.core.measure.clock import now_ns
from voicelat.emulate import Emulators

LONG = " ".join(["word"] * 60)


def _client(em: Emulators) -> Any:
    from openai import AsyncOpenAI

    return AsyncOpenAI(api_key="sk-test", base_url=em.url("openai"), max_retries=0)


async def _settled(em: Emulators, endpoint: str) -> Any:
    """The exchange once the server finished it (closing is asynchronous)."""
    for _ in range(100):
        ex = em.truth.last("openai", endpoint)
        if ex.finished:
            return ex
        await asyncio.sleep(0.01)
    raise AssertionError(f"the {endpoint} exchange never finished")


async def test_chat_stream_stops_when_the_client_closes_it() -> None:
    profile = {"openai": {"latency": {"ttft": 10, "token": 15}, "content": {"reply": LONG}}}
    async with Emulators(["openai"], profile=profile) as em:
        stream = await _client(em).chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        got = 0
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                got += 1
                if got == 3:
                    break
        await stream.close()
        t_closed = now_ns()
        await asyncio.sleep(0.1)  # several token intervals
        ex = await _settled(em, "chat")
        assert em.errors == []
    tokens = ex.all("token_written")
    assert len(tokens) < 10  # of 60
    assert "client_gone" in ex.marks
    stopped = ex.detail["stopped_ns"]
    assert stopped == max(t for _, t in ex.events if _ != "client_gone")
    # Nothing was written after the client closed (one token interval of slack for a write
    # already on its way when the close happened).
    assert stopped < t_closed + 15_000_000
    assert ex.marks["client_gone"] - t_closed < 30_000_000


async def test_speech_stream_stops_when_the_client_closes_it() -> None:
    profile = {"openai": {"latency": {"tts_first_audio": 10, "tts_chunk": 15}}}
    async with Emulators(["openai"], profile=profile) as em:
        client = _client(em)
        async with client.audio.speech.with_streaming_response.create(
            model="gpt-4o-mini-tts", voice="alloy", input=LONG, response_format="pcm"
        ) as response:
            async for _chunk in response.iter_bytes(1024):
                break
        t_closed = now_ns()
        await asyncio.sleep(0.1)
        ex = await _settled(em, "speech")
        assert em.errors == []
    written = ex.all("audio_written")
    assert "client_gone" in ex.marks
    assert ex.detail["stopped_ns"] < t_closed + 15_000_000
    assert len(written) < 20  # the reply is ~3.6 s: ~90 chunks of 40 ms
