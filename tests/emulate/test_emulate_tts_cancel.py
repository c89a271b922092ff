"""A cascade's TTS cancel on a websocket (Deepgram ``Clear``, via ``deepgram-sdk``): the rest of
the generation is dropped at once, ``Cleared`` answers, and the truth records the cancel and
the last audio written before it (``detail["stops"]``)."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.emulate.test_emulate_ws_sdks import _deepgram
from voicelat.emulate import Emulators

SLOW = {"latency": {"tts_first_audio": 10, "tts_chunk": 20}}


async def test_deepgram_clear_stops_the_audio_and_records_when() -> None:
    from deepgram.speak.v1.types import SpeakV1Text

    async with Emulators(["deepgram"], profile={"deepgram": SLOW}, seed=1) as em:
        got: list[Any] = []
        async with _deepgram(em).speak.v1.connect(
            model="aura-2-thalia-en", encoding="linear16", sample_rate=24000
        ) as conn:
            await conn.send_text(SpeakV1Text(text="A long enough sentence to take a while. " * 3))
            await conn.send_flush()
            async with asyncio.timeout(10):
                async for message in conn:
                    got.append(message)
                    if isinstance(message, bytes) and sum(isinstance(m, bytes) for m in got) == 3:
                        await conn.send_clear()
                    # The SDK's union parses Cleared as its look-alike Flushed: read the type.
                    if getattr(message, "type", None) == "Cleared":
                        break
            await conn.send_close()
        ex = em.truth.last("deepgram", "speak")
        assert em.errors == []
    (stop,) = ex.detail["stops"]
    assert stop["cancel_ns"] == ex.marks["cancel_received"]
    audio = ex.all("audio_written")
    assert stop["last_audio_ns"] == audio[-1] <= stop["cancel_ns"]
    assert len(audio) < 20  # of ~130 chunks: the rest was dropped
    frames = [m for m in got if isinstance(m, bytes)]
    assert len(frames) == len(audio)  # nothing after Cleared
