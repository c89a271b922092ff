"""``elevenlabs-tts`` against the ElevenLabs emulator: first audio within 2 ms of the truth,
a pre-opened socket per turn, the protocol's errors, and every fault as one Failed line."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.stages.ws_helpers import (
    KEY,
    KEY_ENV,
    WS_FAULT_MATRIX,
    check_one_failure,
    collect,
    texts,
)
from voicelat.core.base.errors import StageError
from voicelat.core.measure.events import Audio, Connected, Done, Span, TextSent
from voicelat.emulate import Emulators
from voicelat.emulate.content import tone_speech
from voicelat.stages.elevenlabs import ElevenLabsTTS

EXACT = {"latency": {"tts_first_audio": 100, "tts_chunk": 5}}


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


def _tts(em: Emulators, **extra: Any) -> ElevenLabsTTS:
    url = em.root("elevenlabs").replace("http://", "ws://")
    return ElevenLabsTTS({"base_url": url, "api_key_env": KEY_ENV, **extra})


async def test_first_audio_matches_truth_and_audio_is_exact() -> None:
    profile = {"elevenlabs": {**EXACT, "content": {"leading_silence_ms": 20.0}}}
    async with Emulators(["elevenlabs"], profile=profile, seed=1) as em:
        async with _tts(em) as tts:
            await tts.prepare()
            events = await collect(tts.synthesize(texts("Hello there. ", "How are you?")))
        ex = em.truth.last("elevenlabs", "stream_input")
        assert em.errors == []
    sent = [e for e in events if isinstance(e, TextSent)]
    got = [e for e in events if isinstance(e, Audio)]
    assert [s.text for s in sent] == ["Hello there. ", "How are you?"]
    assert isinstance(events[-1], Done)
    truth = ex.between_ms("trigger_received", "first_audio_written")
    assert truth is not None and truth >= 100.0 and ex.injected_ms("tts_first_audio") == 100.0
    assert 0 <= got[0].t_ns - ex.marks["first_audio_written"] < 2_000_000
    assert abs((got[0].t_ns - sent[0].t_ns) / 1e6 - truth) < 2.0
    # flush: true per piece, so one generation per piece, in order; the SDK-style trailing
    # space is added on the wire only.
    expected = tone_speech("Hello there. ", 24000, leading_silence_ms=20.0) + tone_speech(
        "How are you? ", 24000, leading_silence_ms=20.0
    )
    assert b"".join(a.pcm for a in got) == expected
    assert ex.detail["close_code"] == 1000  # after isFinal, as the SDK requires


async def test_each_turn_gets_a_socket_opened_before_it() -> None:
    async with Emulators(["elevenlabs"], profile={"elevenlabs": EXACT}, seed=1) as em:
        async with _tts(em) as tts:
            first = await collect(tts.synthesize(texts("One.")))
            await tts.prepare()  # the runner calls it at the endpoint
            second = await collect(tts.synthesize(texts("Two.")))
            third = await collect(tts.synthesize(texts("Three.")))  # no prepare(): cold
        assert len(em.truth.select("elevenlabs", "stream_input")) == 3
    for events in (first, second, third):
        assert isinstance(events[-1], Done)
    flags = [next(e for e in ev if isinstance(e, Connected)).cold for ev in (first, second, third)]
    assert flags == [False, False, True]
    assert {s.name for s in third if isinstance(s, Span)} == {"connect", "handshake"}


async def test_a_socket_older_than_the_inactivity_timeout_is_replaced() -> None:
    async with Emulators(["elevenlabs"], profile={"elevenlabs": EXACT}, seed=1) as em:
        async with _tts(em, inactivity_timeout=2) as tts:
            await asyncio.sleep(0.1)  # stale after inactivity - 2 s = 0 s
            events = await collect(tts.synthesize(texts("Hi.")))
        assert len(em.truth.select("elevenlabs", "stream_input")) == 2
    assert next(e for e in events if isinstance(e, Connected)).cold is True
    assert isinstance(events[-1], Done)


async def test_server_inactivity_timeout_is_the_providers_message() -> None:
    async with (
        Emulators(["elevenlabs"], profile={"elevenlabs": EXACT}, seed=1) as em,
        _tts(em, inactivity_timeout=1, timeout_s=3) as tts,
    ):
        events = await collect(tts.synthesize(texts("Hi.", gap_s=1.3)), limit_s=5)
    reason = check_one_failure(events, "Have not received a new text input within the timeout")
    assert "(input_timeout_exceeded)" in reason


@pytest.mark.parametrize(("fault", "expected"), WS_FAULT_MATRIX)
async def test_faults_are_one_failed_line(fault: dict[str, Any], expected: str) -> None:
    profile = {"elevenlabs": {"latency": {"tts_first_audio": 5, "tts_chunk": 2}, "faults": fault}}
    async with Emulators(["elevenlabs"], profile=profile, seed=1) as em:
        async with _tts(em, timeout_s=0.5) as tts:
            await tts.prepare()
            t0 = time.perf_counter()
            events = await collect(tts.synthesize(texts("Hello there. ", "Again.")))
            elapsed = time.perf_counter() - t0
        assert em.truth.last("elevenlabs", "stream_input").fault == next(iter(fault))
    reason = check_one_failure(events, expected)
    assert reason.startswith("elevenlabs-tts: ")
    assert elapsed < 2.0


async def test_unknown_voice_is_a_startup_error() -> None:
    async with Emulators(["elevenlabs"], seed=1) as em:
        with pytest.raises(StageError) as err:
            async with _tts(em, voice="nobody"):
                pass
    assert "HTTP 404" in str(err.value) and "voice_id nobody was not found" in str(err.value)


async def test_unknown_voice_as_an_error_frame_is_a_turn_failure() -> None:
    profile = {"elevenlabs": {"content": {"reject_at_handshake": False}}}
    async with (
        Emulators(["elevenlabs"], profile=profile, seed=1) as em,
        _tts(em, model="eleven_v9") as tts,
    ):
        await tts.prepare()
        events = await collect(tts.synthesize(texts("Hello.")))
    reason = check_one_failure(events, "model ID eleven_v9 does not exist")
    assert "(model_not_found)" in reason


async def test_refused_or_missing_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOICELAT_TEST_PINNED", "the-right-key")
    profile = {"elevenlabs": {"api_key_env": "VOICELAT_TEST_PINNED"}}
    async with Emulators(["elevenlabs"], profile=profile, seed=1) as em:
        with pytest.raises(StageError) as err:
            async with _tts(em):
                pass
    assert "HTTP 401" in str(err.value) and f"${KEY_ENV}" in str(err.value)
    assert KEY not in str(err.value)
    monkeypatch.setenv(KEY_ENV, "")
    with pytest.raises(StageError) as err:
        ElevenLabsTTS({"base_url": "ws://127.0.0.1:9", "api_key_env": KEY_ENV})
    assert f"${KEY_ENV}" in str(err.value)
