"""``inworld-tts`` against the Inworld emulator: every chunk's WAV header stripped, first-audio
truth within 2 ms, Basic auth, and every fault as one Failed line."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from voicelat.core.base.errors import StageError
from voicelat.core.measure.events import Audio, Done, Failed, StageEvent, TextSent
from voicelat.emulate import Emulators
from voicelat.emulate.content import tone_speech
from voicelat.stages.inworld import InworldTTS

KEY_ENV = "VOICELAT_TEST_EMULATOR_KEY"
EXACT = {"latency": {"headers": 10, "tts_first_audio": 100, "tts_chunk": 15}}


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


def _tts(em: Emulators, **extra: Any) -> InworldTTS:
    return InworldTTS({"base_url": em.url("inworld"), "api_key_env": KEY_ENV, **extra})


async def test_every_chunk_carries_a_wav_header_on_the_wire() -> None:
    # The documented quirk the stage must undo: check the emulator really sends it.
    async with (
        Emulators(["inworld"], profile={"inworld": EXACT}, seed=1) as em,
        httpx.AsyncClient() as client,
    ):
        r = await client.post(
            em.url("inworld") + "/tts/v1/voice:stream",
            headers={"Authorization": "Basic test-key-123"},
            json={
                "text": "Hello there.",
                "voice_id": "Ashley",
                "audio_config": {"audio_encoding": "LINEAR16", "sample_rate_hertz": 16000},
            },
        )
    blobs = [
        base64.b64decode(json.loads(line)["result"]["audioContent"]) for line in r.text.splitlines()
    ]
    assert len(blobs) > 1 and all(b[:4] == b"RIFF" and b[8:12] == b"WAVE" for b in blobs)
    assert {int.from_bytes(b[24:28], "little") for b in blobs} == {16000}


@pytest.mark.parametrize("rate", [24000, 16000])
async def test_headers_are_stripped_and_first_audio_matches_truth(rate: int) -> None:
    async with Emulators(["inworld"], profile={"inworld": EXACT}, seed=1) as em:
        async with _tts(em, rate=rate) as tts:
            events = await _collect(tts.synthesize(_texts("Hello there. ", "Bye.")))
        ex = em.truth.select("inworld", "tts_stream")[0]
    sent = [e for e in events if isinstance(e, TextSent)]
    audio = [e for e in events if isinstance(e, Audio)]
    assert isinstance(events[-1], Done) and len(sent) == 2
    pcm = b"".join(a.pcm for a in audio)
    # Exactly the synthesized samples: not one header byte left in the audio.
    assert pcm == tone_speech("Hello there. ", rate) + tone_speech("Bye.", rate)
    assert b"RIFF" not in pcm and {a.rate for a in audio} == {rate}
    measured = (audio[0].t_ns - sent[0].t_ns) / 1e6
    truth = ex.between_ms("request_received", "first_audio_written")
    assert ex.injected_ms("tts_first_audio") == 100.0
    assert truth is not None and truth >= 100.0
    assert abs(measured - truth) < 2.0
    assert 0 <= audio[0].t_ns - ex.marks["first_audio_written"] < 2_000_000


async def test_wrong_scheme_is_a_startup_error_without_the_key() -> None:
    async with Emulators(["inworld"], seed=1) as em:
        with pytest.raises(StageError) as err:
            async with _tts(em, auth="bearer"):
                pass
    assert "refused the API key (HTTP 401)" in str(err.value)
    assert "test-key-123" not in str(err.value)


async def test_unknown_voice_is_a_clear_turn_failure() -> None:
    async with Emulators(["inworld"], seed=1) as em, _tts(em, voice="Nobody") as tts:
        events = await _collect(tts.synthesize(_texts("Hi.")))
    assert isinstance(events[-1], Failed)
    assert (
        "HTTP 400" in events[-1].reason and "Unknown voice: Nobody not found" in events[-1].reason
    )


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ({"http_429": 1.0}, "HTTP 429 from"),
        ({"http_500": 1.0}, "HTTP 500 from"),
        ({"error_event": {"p": 1.0, "after": 1}}, "error mid-stream: Internal error."),
        ({"stall": {"p": 1.0, "after": 1, "seconds": 3}}, "read timeout"),
        ({"truncate": {"p": 1.0, "after": 1}}, "broke the response off"),
        ({"refuse": {"p": 1.0, "seconds": 0.2}}, "reset the connection"),
    ],
)
async def test_every_fault_is_one_failed_line(fault: dict[str, Any], expected: str) -> None:
    profile = {"inworld": {"latency": {"headers": 2, "tts_first_audio": 5}, "faults": fault}}
    async with Emulators(["inworld"], profile=profile, seed=1) as em:
        async with _tts(em, timeout_s=0.5) as tts:
            t0 = time.perf_counter()
            events = await _collect(tts.synthesize(_texts("Hello there. ", "Bye.")))
            elapsed = time.perf_counter() - t0
        assert em.truth.last("inworld", "tts_stream").fault == next(iter(fault))
    failed = [e for e in events if isinstance(e, Failed)]
    assert len(failed) == 1 and events[-1] is failed[0]
    assert expected in failed[0].reason
    assert "\n" not in failed[0].reason and "test-key-123" not in failed[0].reason
    assert elapsed < 2.0


async def test_done_carries_the_characters_inworld_reported_for_every_request() -> None:
    async with Emulators(["inworld"], profile={"inworld": EXACT}, seed=1) as em:
        async with _tts(em) as tts:
            events = await _collect(tts.synthesize(_texts("Hello there. ", "Bye.")))
        billed = [x.detail["characters"] for x in em.truth.select("inworld", "tts_stream")]
    done = events[-1]
    assert isinstance(done, Done)
    # processedCharactersCount of each request, summed over the reply: the emulator's truth.
    assert billed == [len("Hello there. "), len("Bye.")]
    assert done.usage == {"characters": sum(billed)}
