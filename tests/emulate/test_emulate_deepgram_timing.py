"""The Deepgram emulator's results follow the audio it received (``deepgram-sdk``'s live
client, paced at 4x real time): word timings inside the speech heard, finals that never claim
audio not received yet, never overlap, and never repeat a transcript per segment."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import numpy as np

from tests.emulate.test_emulate_ws_sdks import _deepgram
from tests.helpers import ROOT
from voicelat.audio import PCM, frames, load_for_stage
from voicelat.emulate import Emulators

FAST = {"latency": {"handshake": 0, "stt_partial": 5, "stt_final": 5}}


def _manifest(directory: Path) -> dict[str, dict[str, Any]]:
    data = json.loads((directory / "manifest.json").read_text())
    return {f["id"]: f for f in data["fixtures"]}


async def _stream(em: Emulators, pcm: bytes) -> tuple[list[Any], list[tuple[Any, float]]]:
    """Send ``pcm`` paced at 4x real time; every result with the audio sent (s) when it came."""
    from deepgram.listen.v1.types import ListenV1Results

    sent_s = 0.0
    got: list[tuple[Any, float]] = []
    async with _deepgram(em).listen.v1.connect(
        model="nova-3", encoding="linear16", sample_rate=16000, interim_results=True,
        endpointing=300,
    ) as conn:  # fmt: skip

        async def read() -> None:
            async for message in conn:
                if isinstance(message, ListenV1Results):
                    got.append((message, sent_s))

        reader = asyncio.create_task(read())
        for frame in frames(PCM(pcm, 16000), 20):
            await conn.send_media(frame)
            sent_s += len(frame) / 2 / 16000
            await asyncio.sleep(0.005)
        await conn.send_close_stream()
        await asyncio.wait_for(reader, 10)
    finals = [m for m, _ in got if m.is_final and m.channel.alternatives[0].transcript]
    return finals, got


def _check_tiling(got: list[tuple[Any, float]]) -> None:
    """No result claims audio not sent yet; finals tile the stream and their words too."""
    window_end = 0.0
    last_word_end = 0.0
    for message, sent in got:
        assert message.start + message.duration <= sent + 0.001, (message, sent)
        for w in message.channel.alternatives[0].words:
            assert w.start <= w.end <= sent + 0.001
        if message.is_final:
            assert abs(message.start - window_end) < 0.002  # starts where the last one ended
            window_end = message.start + message.duration
            for w in message.channel.alternatives[0].words:
                assert w.start >= last_word_end - 0.001  # no overlap with earlier finals
                last_word_end = w.end


async def test_two_utterances_give_two_finals_timed_by_their_speech() -> None:
    fixtures = ROOT / "fixtures"
    info = _manifest(fixtures)
    a = load_for_stage(fixtures / "weather_paris.wav", 16000).samples
    b = load_for_stage(fixtures / "call_mom.wav", 16000).samples
    gap = bytes(32000)  # 1 s of silence between them
    async with Emulators(["deepgram"], profile={"deepgram": FAST}, seed=1) as em:
        finals, got = await _stream(em, a + gap + b + gap)
        assert em.errors == []
    texts = [f.channel.alternatives[0].transcript for f in finals]
    assert texts == [info["weather_paris"]["text"], info["call_mom"]["text"]]
    _check_tiling(got)
    # The words span each fixture's annotated speech (energy VAD: within a few frames).
    offset_b = (len(a) + len(gap)) / 2 / 16000
    for final, fx, offset in ((finals[0], info["weather_paris"], 0.0),
                              (finals[1], info["call_mom"], offset_b)):  # fmt: skip
        ws = final.channel.alternatives[0].words
        assert abs(ws[0].start - (offset + fx["speech_start_ms"] / 1000)) < 0.08
        assert abs(ws[-1].end - (offset + fx["speech_end_ms"] / 1000)) < 0.12


async def test_a_pause_splits_one_fixture_into_finals_without_repeats() -> None:
    pauses = ROOT / "fixtures" / "pauses"
    fx = _manifest(pauses)["hesitate_flight"]  # a 700 ms pause > endpointing 300 ms
    pcm = load_for_stage(pauses / "hesitate_flight.wav", 16000).samples
    profile = {"deepgram": {**FAST, "content": {"fixtures": str(pauses)}}}
    async with Emulators(["deepgram"], profile=profile, seed=1) as em:
        finals, got = await _stream(em, pcm + bytes(32000))
        assert em.errors == []
    texts = [f.channel.alternatives[0].transcript for f in finals]
    assert len(texts) >= 2, texts  # one final per segment...
    assert " ".join(texts) == fx["text"]  # ...and the transcript once, in order
    _check_tiling(got)
    pause_end = fx["pauses"][0]["end_ms"] / 1000
    assert finals[1].channel.alternatives[0].words[0].start >= pause_end - 0.06
    assert np.isclose(finals[0].start, 0.0)
