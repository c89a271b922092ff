"""``assemblyai-stt`` against the AssemblyAI emulator: stamps within 2 ms of the truth, the
50 ms chunk rule, one session across turns, and every fault as one Failed line."""

from __future__ import annotations

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
)
from voicelat.core.base.errors import StageError
from voicelat.core.measure.events import Connected, Done, EndOfTurn, Final, Partial, RequestSent
from voicelat.emulate import Emulators
from voicelat.stages.assemblyai import AssemblyAISTT

EXACT = {"latency": {"stt_partial": 60, "stt_final": 150}}
UNFORMATTED = "what's the weather like in paris today"


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


def _stt(em: Emulators, **extra: Any) -> AssemblyAISTT:
    url = em.root("assemblyai").replace("http://", "ws://")
    return AssemblyAISTT({"base_url": url, "api_key_env": KEY_ENV, **extra})


async def test_force_endpoint_latency_and_partials_match_truth() -> None:
    # A long min_turn_silence: only the stage's ForceEndpoint ends the turn.
    async with Emulators(["assemblyai"], profile={"assemblyai": EXACT}, seed=1) as em:
        async with _stt(em, min_turn_silence=5000) as stt:
            await stt.prepare()
            # 4x real time (see test_deepgram.py): the emulator is idle at ForceEndpoint.
            events = await collect(stt.transcribe(audio(fixture_pcm(), pace_s=0.005)))
        ex = em.truth.last("assemblyai", "v3_ws")
        assert em.errors == []
    partials = [e for e in events if isinstance(e, Partial)]
    (final,) = [e for e in events if isinstance(e, Final)]
    request = next(e for e in events if isinstance(e, RequestSent))
    assert isinstance(events[-1], Done) and final.text == UNFORMATTED
    assert partials and partials[0].text == "what's"
    written = ex.all("partial_written")
    assert len(written) == len(partials)
    for p, t in zip(partials, written, strict=True):
        assert 0 <= p.t_ns - t < 2_000_000
    assert 0 <= final.t_ns - ex.marks["final_written"] < 2_000_000
    truth = ex.between_ms("force_endpoint_received", "final_written")
    assert truth is not None and truth >= 150.0 and ex.injected_ms("stt_final") == 150.0
    measured = (final.t_ns - request.t_ns) / 1e6
    assert 0 <= measured - truth < 2.0, (measured, truth)


async def test_server_end_of_turn_and_formatted_turns_across_turns() -> None:
    async with Emulators(["assemblyai"], profile={"assemblyai": EXACT}, seed=1) as em:
        async with _stt(em, format_turns=True, wait_formatted=True) as stt:
            first = await collect(stt.transcribe(audio(fixture_pcm())))
            await stt.prepare()
            second = await collect(stt.transcribe(audio(fixture_pcm())))
        ex = em.truth.last("assemblyai", "v3_ws")
        assert len(em.truth.select("assemblyai")) == 1  # one session for both turns
    for events in (first, second):
        assert [e.text for e in events if isinstance(e, Final)] == [FIXTURE_TEXT]
        assert any(isinstance(e, EndOfTurn) for e in events)
        assert isinstance(events[-1], Done)
    final = next(e for e in first if isinstance(e, Final))
    assert 0 <= final.t_ns - ex.marks["formatted_written"] < 2_000_000
    eot = next(e for e in first if isinstance(e, EndOfTurn))
    assert 0 <= eot.t_ns - ex.marks["end_of_turn_written"] < 2_000_000
    assert next(e for e in second if isinstance(e, Connected)).new_connection is False


async def test_chunks_outside_50_to_1000_ms_close_3007() -> None:
    async with Emulators(["assemblyai"], seed=1) as em, _stt(em, timeout_s=1) as stt:
        # Bypass the stage's grouping: a 20 ms message, as a naive client would send.
        assert stt._conn is not None
        await stt._conn.send(bytes(640))
        events = await collect(stt.transcribe(audio(fixture_pcm())))
    check_one_failure(events, "3007 Input duration violation: 20 ms")


@pytest.mark.parametrize(("fault", "expected"), WS_FAULT_MATRIX)
async def test_faults_are_one_failed_line(fault: dict[str, Any], expected: str) -> None:
    profile = {"assemblyai": {"latency": {"stt_partial": 5, "stt_final": 5}, "faults": fault}}
    async with Emulators(["assemblyai"], profile=profile, seed=1) as em:
        async with _stt(em, timeout_s=0.5, min_turn_silence=5000) as stt:
            await stt.prepare()
            t0 = time.perf_counter()
            events = await collect(stt.transcribe(audio(fixture_pcm())))
            elapsed = time.perf_counter() - t0
        assert em.truth.last("assemblyai").fault == next(iter(fault))
    reason = check_one_failure(events, expected)
    assert reason.startswith("assemblyai-stt: ")
    assert elapsed < 2.0


async def test_startup_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOICELAT_TEST_PINNED", "the-right-key")
    profile = {"assemblyai": {"api_key_env": "VOICELAT_TEST_PINNED"}}
    async with Emulators(["assemblyai"], profile=profile, seed=1) as em:
        with pytest.raises(StageError) as err:
            async with _stt(em):
                pass
    assert "HTTP 401" in str(err.value) and f"${KEY_ENV}" in str(err.value)
    assert KEY not in str(err.value)
    async with Emulators(["assemblyai"], seed=1) as em:
        with pytest.raises(StageError) as err:
            async with _stt(em, speech_model="nano"):
                pass
    assert "Invalid speech_model: nano" in str(err.value)
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(StageError) as err:
        AssemblyAISTT({"base_url": "ws://127.0.0.1:9", "api_key_env": KEY_ENV})
    assert f"${KEY_ENV}, which is not set" in str(err.value)
