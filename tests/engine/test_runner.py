"""The runner with in-process stages that follow the stage contract (no servers, real time).

These check the runner's own logic: pacing into STT, endpointing, streaming the LLM through the
chunker into TTS while the LLM still runs, failures, timeouts and cancellation.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
import wave
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar, Self

import numpy as np
import pytest

from voicelat.core.base.contract import SEGMENTS
from voicelat.core.base.errors import InfraError
from voicelat.core.base.plan import plan_turns
from voicelat.core.measure.events import (
    Audio,
    Delta,
    Done,
    Final,
    RequestSent,
    StageEvent,
    StageName,
    TextSent,
)
from voicelat.engine.runner import Runner
from voicelat.files.fixtures import load_fixtures
from voicelat.files.pipeline import Endpointing, Pipeline, TurnConfig

RATE = 16000


def _write_fixture(
    d: Path, name: str, lead_s: float, speech_s: float, tail_s: float
) -> dict[str, Any]:
    t = np.arange(int(speech_s * RATE)) / RATE
    tone = 0.3 * np.sin(2 * math.pi * 300 * t)
    audio = np.concatenate([np.zeros(int(lead_s * RATE)), tone, np.zeros(int(tail_s * RATE))])
    with wave.open(str(d / f"{name}.wav"), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes((audio * 32767).astype("<i2").tobytes())
    return {
        "id": name,
        "file": f"{name}.wav",
        "text": f"say {name}",
        "speech_start_ms": int(lead_s * 1000),
        "speech_end_ms": int((lead_s + speech_s) * 1000),
    }


@pytest.fixture
def fixtures_dir(tmp_path: Path) -> Path:
    d = tmp_path / "fx"
    d.mkdir()
    entries = [_write_fixture(d, n, 0.2, 0.4, 0.6) for n in ("alpha", "beta")]
    (d / "manifest.json").write_text(json.dumps({"version": 1, "fixtures": entries}))
    return d


class FakeSTT:
    kind: ClassVar[StageName] = "stt"
    input_rate = RATE

    def __init__(self, text: str = "hello there", delay_s: float = 0.05) -> None:
        self.text, self.delay_s = text, delay_s
        self.frames_seen: list[int] = []

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def prepare(self) -> None:
        return None

    def describe(self) -> dict[str, Any]:
        return {"stage": "fake-stt"}

    async def transcribe(self, audio: AsyncIterable[bytes]) -> AsyncIterator[StageEvent]:
        n = 0
        async for _ in audio:
            n += 1
        self.frames_seen.append(n)
        yield RequestSent(time.perf_counter_ns(), "audio_end")
        await asyncio.sleep(self.delay_s)
        yield Final(time.perf_counter_ns(), self.text)
        yield Done(time.perf_counter_ns())


class SegmentingSTT(FakeSTT):
    """A streaming recognizer that finalizes a first segment while the audio still flows."""

    async def transcribe(self, audio: AsyncIterable[bytes]) -> AsyncIterator[StageEvent]:
        n = 0
        async for _ in audio:
            n += 1
            if n == 5:
                yield Final(time.perf_counter_ns(), "hello")
        self.frames_seen.append(n)
        yield RequestSent(time.perf_counter_ns(), "audio_end")
        yield Final(time.perf_counter_ns(), "there")
        yield Done(time.perf_counter_ns())


class FakeLLM:
    kind: ClassVar[StageName] = "llm"

    def __init__(self, pieces: list[str], gap_s: float = 0.03, hang: bool = False) -> None:
        self.pieces, self.gap_s, self.hang = pieces, gap_s, hang

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def prepare(self) -> None:
        return None

    def describe(self) -> dict[str, Any]:
        return {"stage": "fake-llm"}

    async def complete(self, text: str) -> AsyncIterator[StageEvent]:
        yield RequestSent(time.perf_counter_ns())
        if self.hang:
            await asyncio.sleep(3600)
        for p in self.pieces:
            await asyncio.sleep(self.gap_s)
            yield Delta(time.perf_counter_ns(), p)
        yield Done(time.perf_counter_ns(), "stop")


class FakeTTS:
    kind: ClassVar[StageName] = "tts"

    def __init__(self, fail_after_audio: bool = False, lead_ms: int = 50) -> None:
        self.fail_after_audio, self.lead_ms = fail_after_audio, lead_ms
        self.received: list[tuple[int, str]] = []

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def prepare(self) -> None:
        return None

    def describe(self) -> dict[str, Any]:
        return {"stage": "fake-tts"}

    async def synthesize(self, text: AsyncIterable[str]) -> AsyncIterator[StageEvent]:
        rate = 16000
        lead = np.zeros(rate * self.lead_ms // 1000)
        tone = 0.5 * np.sin(2 * math.pi * 440 * np.arange(rate // 5) / rate)
        async for piece in text:
            t = time.perf_counter_ns()
            self.received.append((t, piece))
            yield TextSent(t, piece)
            await asyncio.sleep(0.02)
            pcm = (np.concatenate([lead, tone]) * 32767).astype("<i2").tobytes()
            yield Audio(time.perf_counter_ns(), pcm, rate)
            if self.fail_after_audio:
                raise ConnectionResetError("peer went away")
        yield Done(time.perf_counter_ns())


def _pipeline(**over: Any) -> Pipeline:
    p = Pipeline(
        name="fake",
        path=None,
        sha256="",
        stack=None,
        stt={"stage": "fake"},
        llm={"stage": "fake"},
        tts={"stage": "fake"},
        endpointing=Endpointing(hangover_ms=200),
        turn=TurnConfig(timeout_s=5),
    )
    return replace(p, **over)


def _run(
    tmp_path: Path, fixtures_dir: Path, stt: Any, llm: Any, tts: Any, turns: int = 2, **pipe: Any
) -> tuple[Runner, list[Any]]:
    fixtures = load_fixtures(fixtures_dir)
    runner = Runner(_pipeline(**pipe), fixtures, tmp_path / "out")
    runner.build_stages = lambda: (stt, llm, tts)  # type: ignore[method-assign]
    plan = plan_turns([f.id for f in fixtures], turns=turns, warmup=0)
    # A run whose every turn failed raises InfraError after writing everything: the turns
    # are what these tests look at.
    with contextlib.suppress(InfraError):
        asyncio.run(runner.run(plan))
    return runner, runner.turns


def test_a_turn_streams_the_llm_into_tts_while_the_llm_still_runs(
    tmp_path: Path, fixtures_dir: Path
) -> None:
    llm = FakeLLM(["Hello", " there.", " How", " are", " you", " today?"], gap_s=0.05)
    tts = FakeTTS()
    _, turns = _run(tmp_path, fixtures_dir, FakeSTT(), llm, tts, turns=1)
    (turn,) = turns
    assert turn.ok, turn.failure_reason
    m = turn.milestones
    # the first sentence went to TTS before the LLM finished: real overlap
    assert m["tts_request"] < m["llm_done"]
    assert [p for _, p in tts.received] == ["Hello there.", " How are you today?"]
    assert m["llm_first_speakable"] <= m["tts_request"]
    assert sum(turn.segments.values()) == turn.e2e_ns
    assert list(turn.segments) == list(SEGMENTS)
    # endpointing: the 200 ms hangover, quantized to 20 ms frames
    assert 180e6 <= turn.segments["endpointing"] <= 260e6
    # leading silence of the reply is the 50 ms the TTS put before its tone
    assert 40e6 <= turn.segments["leading_silence"] <= 60e6
    assert turn.transcript == "hello there" and turn.reply == "Hello there. How are you today?"


def test_stt_gets_audio_only_up_to_the_endpoint(tmp_path: Path, fixtures_dir: Path) -> None:
    stt = FakeSTT()
    _run(tmp_path, fixtures_dir, stt, FakeLLM(["Ok."]), FakeTTS(), turns=1)
    # 0.2 s lead + 0.4 s speech + 0.2 s hangover = 40 frames of 20 ms; the 0.6 s tail is not sent
    assert 38 <= stt.frames_seen[0] <= 42


def test_an_early_final_segment_does_not_cut_the_audio(tmp_path: Path, fixtures_dir: Path) -> None:
    stt = SegmentingSTT()
    _, turns = _run(tmp_path, fixtures_dir, stt, FakeLLM(["Ok."]), FakeTTS(), turns=1)
    # the audio still ran to the VAD endpoint (40 frames), not to the first finalized segment
    assert 38 <= stt.frames_seen[0] <= 42
    assert turns[0].transcript == "hello there"
    assert turns[0].ok


def test_a_stage_failing_mid_turn_fails_the_turn_and_the_run_goes_on(
    tmp_path: Path, fixtures_dir: Path
) -> None:
    fixtures = load_fixtures(fixtures_dir)
    runner = Runner(_pipeline(), fixtures, tmp_path / "out")
    stages = (FakeSTT(), FakeLLM(["Ok."]), FakeTTS(fail_after_audio=True))
    runner.build_stages = lambda: stages  # type: ignore[method-assign]
    plan = plan_turns([f.id for f in fixtures], turns=2, warmup=0)
    with pytest.raises(
        InfraError, match=r"every turn failed \(2\); the first: tts: ConnectionResetError"
    ):
        asyncio.run(runner.run(plan))
    assert len(runner.turns) == 2
    for t in runner.turns:
        assert t.failed and t.failure_stage == "tts"
        assert "stt_final" in t.milestones  # what happened before the failure is kept
    lines = (tmp_path / "out" / "turns.jsonl").read_text().splitlines()
    assert len(lines) == 2
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["counts"]["failed"] == 2


def test_a_hung_stage_times_the_turn_out(tmp_path: Path, fixtures_dir: Path) -> None:
    t0 = time.monotonic()
    _, turns = _run(
        tmp_path,
        fixtures_dir,
        FakeSTT(),
        FakeLLM([], hang=True),
        FakeTTS(),
        turns=1,
        turn=TurnConfig(timeout_s=2),
    )
    assert time.monotonic() - t0 < 10
    (turn,) = turns
    assert turn.failed and "timed out after 2 s" in (turn.failure_reason or "")
    assert "last milestone: llm_request" in (turn.failure_reason or "")


def test_empty_transcript_is_a_failed_turn(tmp_path: Path, fixtures_dir: Path) -> None:
    _, turns = _run(
        tmp_path, fixtures_dir, FakeSTT(text="  "), FakeLLM(["Ok."]), FakeTTS(), turns=1
    )
    assert turns[0].failed and "empty transcript" in (turns[0].failure_reason or "")


def test_cancelling_the_run_keeps_finished_turns_and_writes_the_summary(
    tmp_path: Path, fixtures_dir: Path
) -> None:
    fixtures = load_fixtures(fixtures_dir)
    runner = Runner(_pipeline(), fixtures, tmp_path / "out")
    runner.build_stages = lambda: (FakeSTT(), FakeLLM(["Ok."]), FakeTTS())  # type: ignore[method-assign]
    plan = plan_turns([f.id for f in fixtures], turns=6, warmup=0)

    async def main() -> None:
        task = asyncio.create_task(runner.run(plan))
        out = tmp_path / "out" / "turns.jsonl"
        while not out.exists() or len(out.read_text().splitlines()) < 1:
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    kept = (tmp_path / "out" / "turns.jsonl").read_text().splitlines()
    assert summary["run"]["status"] == "interrupted"
    assert 1 <= summary["counts"]["turns"] == len(kept) < 6
