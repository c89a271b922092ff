"""``cartesia-tts`` against the Cartesia emulator: first audio within 2 ms of the truth, one
socket and one context per turn, error frames, and every fault as one Failed line."""

from __future__ import annotations

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
from voicelat.core.measure.events import Audio, Connected, Done, TextSent
from voicelat.emulate import Emulators
from voicelat.emulate.content import tone_speech
from voicelat.stages.cartesia import CartesiaTTS

EXACT = {"latency": {"tts_first_audio": 100, "tts_chunk": 5}}


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


def _tts(em: Emulators, **extra: Any) -> CartesiaTTS:
    url = em.root("cartesia").replace("http://", "ws://")
    return CartesiaTTS({"base_url": url, "api_key_env": KEY_ENV, **extra})


@pytest.mark.parametrize("delay", [None, 0])
async def test_first_audio_matches_truth_and_audio_is_exact(delay: int | None) -> None:
    profile = {"cartesia": {**EXACT, "content": {"leading_silence_ms": 20.0}}}
    extra = {} if delay is None else {"max_buffer_delay_ms": delay}
    async with Emulators(["cartesia"], profile=profile, seed=1) as em:
        async with _tts(em, **extra) as tts:
            await tts.prepare()
            events = await collect(tts.synthesize(texts("Hello there. ", "How are you?")))
            again = await collect(tts.synthesize(texts("Bye now.")))
        ex = em.truth.last("cartesia", "tts_websocket")
        assert em.errors == []
        assert len(em.truth.select("cartesia")) == 1  # one socket for both turns
    sent = [e for e in events if isinstance(e, TextSent)]
    got = [e for e in events if isinstance(e, Audio)]
    assert [s.text for s in sent] == ["Hello there. ", "How are you?"]
    assert isinstance(events[-1], Done) and isinstance(again[-1], Done)
    truth = ex.between_ms("trigger_received", "first_audio_written")
    assert truth is not None and truth >= 100.0
    assert 0 <= got[0].t_ns - ex.marks["first_audio_written"] < 2_000_000
    assert abs((got[0].t_ns - sent[0].t_ns) / 1e6 - truth) < 2.0
    # "Hello there. " ends a sentence: generated at once, as is the rest at continue=false.
    expected = tone_speech("Hello there. ", 24000, leading_silence_ms=20.0) + tone_speech(
        "How are you?", 24000, leading_silence_ms=20.0
    )
    assert b"".join(a.pcm for a in got) == expected
    c2 = next(e for e in again if isinstance(e, Connected))
    assert (c2.cold, c2.new_connection) == (False, False)


@pytest.mark.parametrize(("fault", "expected"), WS_FAULT_MATRIX)
async def test_faults_are_one_failed_line(fault: dict[str, Any], expected: str) -> None:
    profile = {"cartesia": {"latency": {"tts_first_audio": 5, "tts_chunk": 2}, "faults": fault}}
    async with Emulators(["cartesia"], profile=profile, seed=1) as em:
        async with _tts(em, timeout_s=0.5) as tts:
            await tts.prepare()
            t0 = time.perf_counter()
            events = await collect(tts.synthesize(texts("Hello there. ", "Again.")))
            elapsed = time.perf_counter() - t0
        assert em.truth.last("cartesia").fault == next(iter(fault))
    reason = check_one_failure(events, expected)
    assert reason.startswith("cartesia-tts: ")
    assert elapsed < 2.0


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        ({"voice": "no-such-voice"}, "Voice not found: Voice 'no-such-voice' was not found."),
        ({"model": "sonic-99"}, "Invalid model: Model 'sonic-99' not found. (model_not_found)"),
    ],
)
async def test_unknown_voice_or_model_is_a_turn_failure_and_the_socket_stays(
    option: dict[str, Any], expected: str
) -> None:
    async with Emulators(["cartesia"], seed=1) as em, _tts(em, **option) as tts:
        events = await collect(tts.synthesize(texts("Hello.")))
    check_one_failure(events, expected)


async def test_refused_key_and_missing_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOICELAT_TEST_PINNED", "the-right-key")
    profile = {"cartesia": {"api_key_env": "VOICELAT_TEST_PINNED"}}
    async with Emulators(["cartesia"], profile=profile, seed=1) as em:
        with pytest.raises(StageError) as err:
            async with _tts(em, auth="x-api-key"):
                pass
    assert "HTTP 401" in str(err.value) and f"${KEY_ENV}" in str(err.value)
    assert KEY not in str(err.value)
    async with Emulators(["cartesia"], seed=1) as em:
        with pytest.raises(StageError) as err:
            async with _tts(em, version=""):
                pass
    assert "HTTP 400" in str(err.value) and "Cartesia-Version" in str(err.value)
