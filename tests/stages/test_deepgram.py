"""``deepgram-stt`` and ``deepgram-tts`` against the Deepgram emulator: stamps within 2 ms of
the emulator's ground truth, warm sockets across turns, and every fault as one Failed line."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.stages.ws_helpers import (
    FIXTURE_TEXT,
    KEY,
    KEY_ENV,
    WS_FAULT_MATRIX,
    audio,
    check_one_failure,
    collect,
    fixture_pcm,
    texts,
)
from voicelat.audio import frames
from voicelat.core.base.errors import StageError
from voicelat.core.measure.events import (
    Audio,
    Connected,
    Done,
    EndOfTurn,
    Final,
    Partial,
    RequestSent,
    Span,
    TextSent,
)
from voicelat.emulate import Emulators
from voicelat.emulate.content import tone_speech
from voicelat.stages.deepgram import DeepgramSTT, DeepgramTTS

EXACT = {"latency": {"stt_partial": 60, "stt_final": 150, "tts_first_audio": 100, "tts_chunk": 5}}


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


def _ws(em: Emulators) -> str:
    return em.root("deepgram").replace("http://", "ws://")


def _stt(em: Emulators, **extra: Any) -> DeepgramSTT:
    return DeepgramSTT({"base_url": _ws(em), "api_key_env": KEY_ENV, **extra})


def _tts(em: Emulators, **extra: Any) -> DeepgramTTS:
    return DeepgramTTS({"base_url": _ws(em), "api_key_env": KEY_ENV, **extra})


async def test_stt_finalize_latency_and_partials_match_truth() -> None:
    async with Emulators(["deepgram"], profile={"deepgram": EXACT}, seed=1) as em:
        async with _stt(em, endpointing=False) as stt:
            await stt.prepare()
            # 4x real time: the emulator is idle when Finalize arrives, as it is with a
            # live (paced) stream; as fast as possible, its own audio backlog would show.
            events = await collect(stt.transcribe(audio(fixture_pcm(), pace_s=0.005)))
        ex = em.truth.last("deepgram", "listen")
        assert em.errors == []
    partials = [e for e in events if isinstance(e, Partial)]
    (final,) = [e for e in events if isinstance(e, Final)]
    request = next(e for e in events if isinstance(e, RequestSent))
    assert isinstance(events[-1], Done)
    assert final.text == FIXTURE_TEXT
    assert partials and partials[0].text == "What's"
    assert partials[-1].text.startswith("What's the weather")
    # Every interim's arrival within 2 ms of its write (truth <= arrival, always).
    written = ex.all("partial_written")
    assert len(written) == len(partials)
    for p, t in zip(partials, written, strict=True):
        assert 0 <= p.t_ns - t < 2_000_000
    assert 0 <= final.t_ns - ex.marks["final_written"] < 2_000_000
    truth = ex.between_ms("finalize_received", "final_written")
    assert truth is not None and truth >= 150.0 and ex.injected_ms("stt_final") == 150.0
    measured = (final.t_ns - request.t_ns) / 1e6
    assert 0 <= measured - truth < 2.0, (measured, truth)


async def test_stt_provider_endpointing_reports_end_of_turn() -> None:
    async with Emulators(["deepgram"], profile={"deepgram": EXACT}, seed=1) as em:
        async with _stt(em, endpointing=300) as stt:
            events = await collect(stt.transcribe(audio(fixture_pcm())))
        ex = em.truth.last("deepgram", "listen")
    eot = [e for e in events if isinstance(e, EndOfTurn)]
    finals = [e for e in events if isinstance(e, Final)]
    assert eot and [f.text for f in finals] == [FIXTURE_TEXT]
    assert 0 <= eot[0].t_ns - ex.marks["end_of_turn_written"] < 2_000_000
    # speech_final carried the final: the EndOfTurn and the Final share its stamp.
    assert finals[0].t_ns == eot[0].t_ns
    assert isinstance(events[-1], Done)


async def test_stt_reuses_one_warm_socket_across_turns_kept_alive() -> None:
    # The emulator closes a socket that hears nothing for 0.4 s (Deepgram: 10 s, NET-0001);
    # the stage's KeepAlive every 0.1 s keeps it open through a 0.8 s pause between turns.
    profile = {"deepgram": {**EXACT, "content": {"idle_timeout_s": 0.4}}}
    async with Emulators(["deepgram"], profile=profile, seed=1) as em:
        async with _stt(em, keepalive_s=0.1) as stt:
            first = await collect(stt.transcribe(audio(fixture_pcm())))
            await asyncio.sleep(0.8)
            await stt.prepare()
            second = await collect(stt.transcribe(audio(fixture_pcm())))
        assert len(em.truth.select("deepgram", "listen")) == 1
    for events in (first, second):
        assert isinstance(events[-1], Done)
        assert [e.text for e in events if isinstance(e, Final)] == [FIXTURE_TEXT]
    c1 = next(e for e in first if isinstance(e, Connected))
    c2 = next(e for e in second if isinstance(e, Connected))
    assert (c1.cold, c1.new_connection) == (False, True)
    assert (c2.cold, c2.new_connection) == (False, False)
    assert {s.name for s in first if isinstance(s, Span)} == {"connect", "handshake"}
    assert not any(isinstance(s, Span) for s in second)  # the same socket: reported once


async def test_stt_idle_close_is_reopened_before_the_turn() -> None:
    profile = {"deepgram": {**EXACT, "content": {"idle_timeout_s": 0.2}}}
    async with Emulators(["deepgram"], profile=profile, seed=1) as em:
        async with _stt(em, keepalive_s=60) as stt:
            await asyncio.sleep(0.5)  # NET-0001: the emulator closed the idle socket
            await stt.prepare()  # re-opened outside the measured request
            events = await collect(stt.transcribe(audio(fixture_pcm())))
        exchanges = em.truth.select("deepgram", "listen")
    assert exchanges[0].detail.get("close_code") == 1011
    assert len(exchanges) == 2
    connected = next(e for e in events if isinstance(e, Connected))
    assert connected.cold is False and isinstance(events[-1], Done)


async def test_stt_connection_opened_inside_the_turn_is_cold() -> None:
    profile = {"deepgram": {**EXACT, "content": {"idle_timeout_s": 0.2}}}
    async with (
        Emulators(["deepgram"], profile=profile, seed=1) as em,
        _stt(em, keepalive_s=60) as stt,
    ):
        await asyncio.sleep(0.5)
        events = await collect(stt.transcribe(audio(fixture_pcm())))  # no prepare()
    connected = next(e for e in events if isinstance(e, Connected))
    assert connected.cold is True
    assert isinstance(events[-1], Done)


async def test_stt_close_stream_mode_opens_a_socket_per_turn() -> None:
    async with Emulators(["deepgram"], profile={"deepgram": EXACT}, seed=1) as em:
        async with _stt(em, end_of_audio="close_stream", endpointing=False) as stt:
            first = await collect(stt.transcribe(audio(fixture_pcm())))
            await stt.prepare()
            second = await collect(stt.transcribe(audio(fixture_pcm())))
        assert len(em.truth.select("deepgram", "listen")) == 2
    sent_ms = sum(len(f) for f in frames(fixture_pcm(), 20)) * 1000 // (2 * 16000)
    for events in (first, second):
        assert [e.text for e in events if isinstance(e, Final)] == [FIXTURE_TEXT]
        done = events[-1]
        assert isinstance(done, Done)
        # Each socket's closing Metadata says how much audio Deepgram processed (what it
        # bills): the usage is that, the audio this turn sent, not the two turns' sum.
        assert abs(done.usage["audio_ms"] - sent_ms) <= 1, (done.usage, sent_ms)


@pytest.mark.parametrize(("fault", "expected"), WS_FAULT_MATRIX)
async def test_stt_faults_are_one_failed_line(fault: dict[str, Any], expected: str) -> None:
    profile = {"deepgram": {"latency": {"stt_partial": 5, "stt_final": 5}, "faults": fault}}
    async with Emulators(["deepgram"], profile=profile, seed=1) as em:
        async with _stt(em, endpointing=False, timeout_s=0.5) as stt:
            await stt.prepare()
            t0 = time.perf_counter()
            events = await collect(stt.transcribe(audio(fixture_pcm())))
            elapsed = time.perf_counter() - t0
        assert em.truth.last("deepgram", "listen").fault == next(iter(fault))
    reason = check_one_failure(events, expected)
    assert reason.startswith("deepgram-stt: ")
    assert elapsed < 2.0
    if "close_1011" in fault:
        assert "1011 Deepgram did not receive audio data" in reason


async def test_stt_error_event_names_the_providers_description() -> None:
    profile = {"deepgram": {"faults": {"error_event": {"p": 1.0, "after": 0}}}}
    async with Emulators(["deepgram"], profile=profile, seed=1) as em, _stt(em) as stt:
        events = await collect(stt.transcribe(audio(fixture_pcm())))
    reason = check_one_failure(events, "error from")
    assert "did not provide a response message" in reason


async def test_missing_or_empty_key_variable_is_a_startup_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(StageError) as err:
        DeepgramSTT({"base_url": "ws://127.0.0.1:9", "api_key_env": KEY_ENV})
    assert f"${KEY_ENV}, which is not set" in str(err.value)
    monkeypatch.setenv(KEY_ENV, "")
    with pytest.raises(StageError) as err:
        DeepgramTTS({"base_url": "ws://127.0.0.1:9", "api_key_env": KEY_ENV})
    assert f"${KEY_ENV}" in str(err.value)
    with pytest.raises(StageError) as err:
        DeepgramTTS({"base_url": "ws://127.0.0.1:9"})
    assert "api_key_env" in str(err.value)


async def test_refused_key_is_a_startup_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VOICELAT_TEST_PINNED", "the-right-key")
    profile = {"deepgram": {"api_key_env": "VOICELAT_TEST_PINNED"}}
    async with Emulators(["deepgram"], profile=profile, seed=1) as em:
        for stage in (_stt(em), _tts(em)):
            with pytest.raises(StageError) as err:
                async with stage:
                    pass
            message = str(err.value)
            assert "HTTP 401" in message and f"${KEY_ENV}" in message
            assert KEY not in message


async def test_unknown_model_is_a_startup_error() -> None:
    async with Emulators(["deepgram"], seed=1) as em:
        with pytest.raises(StageError) as err:
            async with _stt(em, model="parakeet-1"):
                pass
        assert "HTTP 400" in str(err.value) and "model=parakeet-1" in str(err.value)
        with pytest.raises(StageError) as err:
            async with _tts(em, model="thalia"):
                pass
        assert "No such model: thalia" in str(err.value)


async def test_unreachable_server_is_a_startup_error() -> None:
    with pytest.raises(StageError) as err:
        async with DeepgramSTT({"base_url": "ws://127.0.0.1:9", "api_key_env": KEY_ENV}):
            pass
    assert "not reachable" in str(err.value) and "connection refused" in str(err.value)


async def test_tts_first_audio_matches_truth_and_audio_is_exact() -> None:
    profile = {"deepgram": {**EXACT, "content": {"leading_silence_ms": 30.0}}}
    async with Emulators(["deepgram"], profile=profile, seed=1) as em:
        async with _tts(em) as tts:
            await tts.prepare()
            events = await collect(tts.synthesize(texts("Hello there. ", "How are you?")))
            again = await collect(tts.synthesize(texts("Bye.")))
        ex = em.truth.last("deepgram", "speak")
        assert em.errors == []
    sent = [e for e in events if isinstance(e, TextSent)]
    got = [e for e in events if isinstance(e, Audio)]
    assert [s.text for s in sent] == ["Hello there. ", "How are you?"]
    assert isinstance(events[-1], Done) and isinstance(again[-1], Done)
    truth = ex.between_ms("flush_received", "first_audio_written")
    assert truth is not None and truth >= 100.0
    assert 0 <= got[0].t_ns - ex.marks["first_audio_written"] < 2_000_000
    assert abs((got[0].t_ns - sent[0].t_ns) / 1e6 - truth) < 2.0
    expected = tone_speech("Hello there. ", 24000, leading_silence_ms=30.0) + tone_speech(
        "How are you?", 24000, leading_silence_ms=30.0
    )
    assert b"".join(a.pcm for a in got) == expected and {a.rate for a in got} == {24000}
    assert next(e for e in again if isinstance(e, Connected)).new_connection is False


@pytest.mark.parametrize(("fault", "expected"), WS_FAULT_MATRIX)
async def test_tts_faults_are_one_failed_line(fault: dict[str, Any], expected: str) -> None:
    profile = {"deepgram": {"latency": {"tts_first_audio": 5, "tts_chunk": 2}, "faults": fault}}
    async with Emulators(["deepgram"], profile=profile, seed=1) as em:
        async with _tts(em, timeout_s=0.5) as tts:
            await tts.prepare()
            t0 = time.perf_counter()
            events = await collect(tts.synthesize(texts("Hello there. ", "Again.")))
            elapsed = time.perf_counter() - t0
        assert em.truth.last("deepgram", "speak").fault == next(iter(fault))
    check_one_failure(events, expected)
    assert elapsed < 2.0
