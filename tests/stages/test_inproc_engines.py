"""pocketsphinx-stt and espeak-tts on real audio, in their worker processes (no servers needed)."""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import AsyncIterator

import numpy as np
import pytest

from tests.helpers import ROOT
from voicelat.audio import frames, load_for_stage
from voicelat.audio.frames import bytes_dbfs
from voicelat.core.base.errors import ConfigError
from voicelat.core.measure.events import (
    Audio,
    Connected,
    Done,
    Failed,
    Final,
    Partial,
    RequestSent,
    StageEvent,
    TextSent,
)
from voicelat.stages.espeak import EspeakTTS
from voicelat.stages.pocketsphinx import PocketSphinxSTT

WEATHER = ROOT / "fixtures" / "weather_paris.wav"


async def _paced(chunks: list[bytes], period_s: float) -> AsyncIterator[bytes]:
    for c in chunks:
        yield c
        await asyncio.sleep(period_s)


async def _text(*pieces: str, gap_s: float = 0.0) -> AsyncIterator[str]:
    for p in pieces:
        yield p
        await asyncio.sleep(gap_s)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_pocketsphinx_streams_partials_before_the_final_from_another_process() -> None:
    pcm = load_for_stage(WEATHER, 16000)
    # 4x real time keeps the test short; the decoder still sees every 20 ms frame in order.
    async with PocketSphinxSTT({}) as stt:
        info = stt.describe()
        assert info["engine_version"] == "5.1.1"
        worker = info["worker_pid"]
        assert isinstance(worker, int) and worker != os.getpid() and _alive(worker)
        events: list[StageEvent] = [e async for e in stt.transcribe(_paced(frames(pcm, 20), 0.005))]
    assert not _alive(worker)  # leaving the context ends (and reaps) the worker
    kinds = [type(e).__name__ for e in events]
    assert isinstance(events[0], Connected) and not isinstance(events[-1], Failed), kinds
    partials = [e for e in events if isinstance(e, Partial)]
    final = next(e for e in events if isinstance(e, Final))
    end = next(e for e in events if isinstance(e, RequestSent))
    assert len(partials) >= 3, kinds
    assert all(p.text for p in partials)  # only non-empty hypotheses are reported
    assert all(a.text != b.text for a, b in itertools.pairwise(partials))  # each one a change
    assert partials[0].t_ns < end.t_ns <= final.t_ns
    assert "weather" in final.text and "paris" in final.text
    assert isinstance(events[-1], Done)


async def test_pocketsphinx_keeps_serving_utterances_and_marks_only_the_first_cold() -> None:
    pcm = load_for_stage(WEATHER, 16000)
    chunks = frames(pcm, 20)
    async with PocketSphinxSTT({}) as stt:
        first = [e async for e in stt.transcribe(_paced(chunks, 0))]
        second = [e async for e in stt.transcribe(_paced(chunks, 0))]
    for events in (first, second):
        assert any(isinstance(e, Final) and "weather" in e.text for e in events)
    cold = [e.cold for ev in (first, second) for e in ev if isinstance(e, Connected)]
    assert cold == [True, False]


async def test_a_dead_worker_fails_the_turn_with_a_reason_not_a_hang() -> None:
    async with PocketSphinxSTT({"timeout_s": 5}) as stt:
        pid = stt.describe()["worker_pid"]
        os.kill(pid, 9)
        await asyncio.sleep(0.2)
        events = [e async for e in stt.transcribe(_paced([b"\0" * 640] * 5, 0))]
    failed = [e for e in events if isinstance(e, Failed)]
    assert failed and "pocketsphinx-stt" in failed[0].reason


def test_unknown_option_names_the_valid_keys() -> None:
    with pytest.raises(ConfigError, match=r"\[stt\] has unknown key\(s\) model; valid keys: dict"):
        PocketSphinxSTT({"model": "x"})
    with pytest.raises(
        ConfigError, match=r"\[tts\] has unknown key\(s\) speed; valid keys: buffer_ms"
    ):
        EspeakTTS({"speed": 2})


async def test_espeak_streams_audible_22khz_audio_from_another_process() -> None:
    async with EspeakTTS({}) as tts:
        info = tts.describe()
        assert info["engine_version"] and info["rate_hz"] == 22050
        assert info["worker_pid"] != os.getpid() and _alive(info["worker_pid"])
        events = [
            e
            async for e in tts.synthesize(
                _text("Hello, I'm a friendly voice assistant.", " How can I help?", gap_s=0.05)
            )
        ]
    assert isinstance(events[0], Connected) and isinstance(events[-1], Done)
    sent = [e for e in events if isinstance(e, TextSent)]
    audio = [e for e in events if isinstance(e, Audio)]
    assert [s.text for s in sent] == ["Hello, I'm a friendly voice assistant.", " How can I help?"]
    assert {a.rate for a in audio} == {22050}
    # Streaming: many buffers, the first long before the whole reply exists.
    assert len(audio) > 10
    assert sent[0].t_ns < audio[0].t_ns < sent[1].t_ns
    pcm = np.frombuffer(b"".join(a.pcm for a in audio), dtype="<i2")
    frame = 22050 // 100  # 10 ms
    audible = sum(
        bytes_dbfs(pcm[i : i + frame].tobytes()) > -40 for i in range(0, len(pcm) - frame, frame)
    )
    assert audible * 0.010 > 0.3, f"only {audible * 10} ms of audible audio"


async def test_espeak_with_no_text_finishes_cleanly() -> None:
    async with EspeakTTS({}) as tts:
        events = [e async for e in tts.synthesize(_text())]
    assert [type(e) for e in events] == [Connected, Done]
