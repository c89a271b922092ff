"""The OpenAI-compatible and Wyoming stages against the real local servers."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.helpers import ROOT, wer
from voicelat.audio import frames, load_for_stage
from voicelat.core.measure.events import (
    Audio,
    Connected,
    Delta,
    Done,
    Failed,
    Final,
    RequestSent,
    Span,
    StageEvent,
    TextSent,
)
from voicelat.stages.openai import OpenAILLM
from voicelat.stages.wyoming import WyomingSTT, WyomingTTS

pytestmark = pytest.mark.stack


def _urls(local_stack: dict[str, Any]) -> dict[str, str]:
    cfg = local_stack["config"]
    return {"stt": cfg.stt_url, "tts": cfg.tts_url, "llm": f"{cfg.llm_url}/v1"}


async def _collect(agen: AsyncIterator[StageEvent]) -> list[StageEvent]:
    return [ev async for ev in agen]


async def _text(*pieces: str) -> AsyncIterator[str]:
    for p in pieces:
        yield p


async def test_openai_completions_streams_tokens_after_headers(local_stack: dict[str, Any]) -> None:
    opts = {
        "base_url": _urls(local_stack)["llm"],
        "endpoint": "completions",
        "max_tokens": 16,
        "stop": ["\n"],
        "seed": 1,
    }
    async with OpenAILLM(opts) as llm:
        events = await _collect(llm.complete("What is the capital of France?"))
    kinds = [type(e).__name__ for e in events]
    assert kinds[0] == "RequestSent" and kinds[-1] == "Done", kinds
    req = next(e for e in events if isinstance(e, RequestSent))
    deltas = [e for e in events if isinstance(e, Delta) and e.content]
    assert deltas, kinds
    spans = {e.name: e for e in events if isinstance(e, Span)}
    # headers come back long before the first token would be plausible as TTFT
    assert spans["response_headers"].end_ns <= deltas[0].t_ns
    assert req.t_ns < spans["response_headers"].end_ns
    # stamps are monotonic in arrival order
    stamps = [e.t_ns for e in events if hasattr(e, "t_ns")]
    assert stamps == sorted(stamps)
    done = events[-1]
    assert isinstance(done, Done) and done.finish_reason in ("stop", "length")


async def test_openai_chat_uses_the_chat_template(local_stack: dict[str, Any]) -> None:
    opts = {"base_url": _urls(local_stack)["llm"], "endpoint": "chat", "max_tokens": 16, "seed": 1}
    async with OpenAILLM(opts) as llm:
        events = await _collect(llm.complete("Say hello."))
    text = "".join(e.content for e in events if isinstance(e, Delta))
    assert text.strip(), [type(e).__name__ for e in events]
    assert isinstance(events[-1], Done)


async def test_openai_second_request_reuses_the_connection(local_stack: dict[str, Any]) -> None:
    opts = {"base_url": _urls(local_stack)["llm"], "endpoint": "completions", "max_tokens": 2}
    async with OpenAILLM(opts) as llm:
        await _collect(llm.complete("Hi"))
        second = await _collect(llm.complete("Hi"))
    conn = next(e for e in second if isinstance(e, Connected))
    assert conn.cold is False
    assert not any(isinstance(e, Span) and e.name == "connect" for e in second)


async def test_openai_http_error_is_a_failed_event(local_stack: dict[str, Any]) -> None:
    opts = {
        "base_url": _urls(local_stack)["llm"],
        "endpoint": "completions",
        "max_tokens": 4,
        "extra_body": {"max_tokens": "lots"},
    }
    async with OpenAILLM(opts) as llm:
        events = await asyncio.wait_for(_collect(llm.complete("Hi")), 30)
    failed = [e for e in events if isinstance(e, Failed)]
    assert failed and re.search(r"HTTP [45]\d\d from http://", failed[0].reason)
    assert "\n" not in failed[0].reason  # one line


async def _paced_frames(pcm_frames: list[bytes]) -> AsyncIterator[bytes]:
    for f in pcm_frames:
        yield f


async def test_wyoming_stt_transcribes_a_fixture(local_stack: dict[str, Any]) -> None:
    pcm = load_for_stage(ROOT / "fixtures" / "kitchen_lights.wav", 16000)
    async with WyomingSTT({"url": _urls(local_stack)["stt"]}) as stt:
        events = await asyncio.wait_for(_collect(stt.transcribe(_paced_frames(frames(pcm)))), 60)
    stop = next(e for e in events if isinstance(e, RequestSent))
    final = next(e for e in events if isinstance(e, Final))
    assert stop.what == "audio_end" and final.t_ns > stop.t_ns
    assert wer("Turn off the lights in the kitchen.", final.text) <= 0.25
    assert isinstance(events[-1], Done)


@pytest.mark.parametrize("streaming", [True, False])
async def test_wyoming_tts_streams_audio(local_stack: dict[str, Any], streaming: bool) -> None:
    async with WyomingTTS(
        {"url": _urls(local_stack)["tts"], "voice": "en_US-joe-medium", "streaming": streaming}
    ) as tts:
        first = await _collect(tts.synthesize(_text("Hello there. ", "How are you today?")))
        second = await _collect(tts.synthesize(_text("Fine, thanks.")))
    for events in (first, second):
        sent = [e for e in events if isinstance(e, TextSent)]
        audio = [e for e in events if isinstance(e, Audio) and e.pcm]
        assert sent and audio and isinstance(events[-1], Done), [type(e).__name__ for e in events]
        assert audio[0].rate == 22050
        assert sent[0].t_ns < audio[0].t_ns
        assert sum(a.n_samples for a in audio) / 22050 > 0.4  # real speech, not a click
    assert next(e for e in first if isinstance(e, Connected)).cold is True
    assert next(e for e in second if isinstance(e, Connected)).cold is False
    assert len([e for e in first if isinstance(e, TextSent)]) == (2 if streaming else 1)


async def test_wyoming_tts_unknown_voice_is_a_failed_event(local_stack: dict[str, Any]) -> None:
    async with WyomingTTS(
        {"url": _urls(local_stack)["tts"], "voice": "en_US-nobody-medium"}
    ) as tts:
        events = await asyncio.wait_for(_collect(tts.synthesize(_text("Hello."))), 60)
    failed = [e for e in events if isinstance(e, Failed)]
    assert failed, [type(e).__name__ for e in events]
    assert "server error" in failed[0].reason
