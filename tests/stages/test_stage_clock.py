"""The clock seam: every stamp a stage reports comes from the clock handed to it (here a fake
one that never moves), whether it stamps a websocket message, an HTTP read or a worker's
result."""

from __future__ import annotations

from typing import Any

import pytest

from tests.stages.ws_helpers import KEY, KEY_ENV, audio, collect, fixture_pcm, texts
from voicelat.core.measure.clock import FakeClock
from voicelat.core.measure.events import Done, Span, StageEvent
from voicelat.emulate import Emulators
from voicelat.stages.base import use_clock
from voicelat.stages.deepgram import DeepgramSTT, DeepgramTTS
from voicelat.stages.espeak import EspeakTTS
from voicelat.stages.openai import OpenAILLM

T = 10**18  # far from any perf_counter_ns() reading


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


def _stamps(events: list[StageEvent]) -> set[int]:
    out: set[int] = set()
    for e in events:
        if isinstance(e, Span):
            out |= {e.start_ns, e.end_ns}
        else:
            out.add(e.t_ns)
    return out


def _on_fake_clock(stage: Any) -> FakeClock:
    clock = FakeClock(t_ns=T)
    stage.clock = clock
    return clock


async def test_websocket_stages_stamp_on_their_clock() -> None:
    async with Emulators(["deepgram"], seed=1) as em:
        url = em.root("deepgram").replace("http://", "ws://")
        stt = DeepgramSTT({"base_url": url, "api_key_env": KEY_ENV, "endpointing": False})
        tts = DeepgramTTS({"base_url": url, "api_key_env": KEY_ENV})
        clocks = [_on_fake_clock(stt), _on_fake_clock(tts)]
        async with stt, tts:
            heard = await collect(stt.transcribe(audio(fixture_pcm())))
            spoken = await collect(tts.synthesize(texts("Hello there. ")))
    for events in (heard, spoken):
        assert isinstance(events[-1], Done), events
        assert any(isinstance(e, Span) for e in events)  # the connection's own sub-spans too
        assert _stamps(events) == {T}
    assert all(clock._history for clock in clocks)


async def test_http_stages_stamp_on_their_clock() -> None:
    async with Emulators(["openai"], seed=1) as em:
        llm = OpenAILLM({"base_url": em.url("openai"), "model": "m", "api_key_env": KEY_ENV})
        _on_fake_clock(llm)
        async with llm:
            events = await collect(llm.complete("Hi"))
    assert isinstance(events[-1], Done)
    assert _stamps(events) == {T}


async def test_worker_stages_stamp_on_their_clock_in_this_process() -> None:
    tts = EspeakTTS({})
    _on_fake_clock(tts)
    async with tts:
        events = await collect(tts.synthesize(texts("Hello.")), limit_s=30)
    assert isinstance(events[-1], Done)
    assert _stamps(events) == {T}


def test_use_clock_hands_a_clock_to_stages_that_take_one() -> None:
    class Foreign:
        """A third-party stage that stamps on its own."""

    stage = EspeakTTS({})
    clock = FakeClock()
    assert use_clock(stage, clock) and stage.clock is clock
    assert not use_clock(Foreign(), clock) and not hasattr(Foreign(), "clock")
