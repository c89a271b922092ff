"""The S2S turn engine with a scripted speech-to-speech stage (no network).

The fake stage counts the frames it is sent and, like a server VAD, says the speech stopped
once it has heard 300 ms of silence after the fixture's speech; then it answers. With
``endpoint_by_server = False`` the engine's endpointer decides and the stage sees the end of
its input (where a real stage commits). Every turn: S2S milestones, segments summing to e2e,
and the audio stopping right after the endpoint.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar, Self

import pytest

from tests.engine.test_runner import _pipeline, fixtures_dir
from voicelat.core.base.plan import plan_turns
from voicelat.core.measure.clock import Clock, MonotonicClock
from voicelat.core.measure.events import (
    Audio,
    Delta,
    Done,
    RequestSent,
    ResponseStarted,
    ServerSpeech,
    StageEvent,
    StageName,
)
from voicelat.engine.runner import Runner
from voicelat.engine.s2s_turn import S2STurnEngine
from voicelat.engine.stageset import S2SStageSet
from voicelat.files.fixtures import load_fixtures

__all__ = ["fixtures_dir"]

RATE = 16000
MS = 1_000_000
FRAME = RATE * 20 // 1000 * 2


class FakeS2S:
    """Speech (0.2 s lead + 0.4 s tone) then silence: endpoint after 300 ms of it."""

    kind: ClassVar[StageName] = "s2s"
    input_rate = RATE
    output_rate = 24000

    def __init__(self, *, by_server: bool = True) -> None:
        self.endpoint_by_server = by_server
        self.clock: Clock = MonotonicClock()
        self.entered = 0
        self.frames: list[int] = []

    async def __aenter__(self) -> Self:
        self.entered += 1
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def prepare(self) -> None:
        return None

    def describe(self) -> dict[str, Any]:
        return {"stage": "fake-s2s"}

    async def converse(self, audio: AsyncIterable[bytes]) -> AsyncIterator[StageEvent]:
        n = 0
        async for frame in audio:
            assert len(frame) == FRAME
            n += 1
            # 0.6 s of fixture audio (30 frames), then 300 ms (15 frames) of silence.
            if self.endpoint_by_server and n == 45:
                yield ServerSpeech(self.clock.now_ns(), started=False, audio_ms=900)
        self.frames.append(n)
        if not self.endpoint_by_server:
            yield RequestSent(self.clock.now_ns(), "commit")
        yield ResponseStarted(self.clock.now_ns(), "r1")
        await asyncio.sleep(0.05)
        yield Delta(self.clock.now_ns(), content="Hi.")
        yield Audio(self.clock.now_ns(), b"\x00\x00" * 240 + b"\x10\x27" * 4800, 24000)
        await asyncio.sleep(0.01)
        yield Done(self.clock.now_ns(), "completed", {"output_tokens": 7})


async def _run(tmp_path: Path, fixtures: Path, stage: FakeS2S, **pipe: Any) -> Runner:
    fx = load_fixtures(fixtures)
    pipeline = replace(_pipeline(**pipe), s2s={"stage": "fake-s2s"}, stt={}, llm={}, tts={})
    runner = Runner(pipeline, fx, tmp_path / "out")
    runner.build_stages = lambda: S2SStageSet.single(stage)  # type: ignore[method-assign]
    assert isinstance(runner.turn_engine(), S2STurnEngine)
    await runner.run(plan_turns([f.id for f in fx], turns=2, warmup=0))
    return runner


async def test_server_endpoint_stops_the_audio_and_the_turn_sums(
    tmp_path: Path, fixtures_dir: Path
) -> None:
    stage = FakeS2S(by_server=True)
    runner = await _run(tmp_path, fixtures_dir, stage)
    assert stage.entered == 1  # one stage, entered once for the run
    # The pacer stopped at the server's endpoint (a frame already due may still go out).
    assert all(45 <= n <= 47 for n in stage.frames), stage.frames
    for turn in runner.turns:
        assert turn.ok, turn.failure_reason
        m = turn.milestones
        assert m["speech_end"] == 600 * MS
        # 45 frames of 20 ms paced in real time: the endpoint near 880-900 ms.
        assert 860 * MS <= m["endpoint"] <= 960 * MS, m
        assert m["endpoint"] < m["response_start"] < m["first_text"] <= m["first_audio"]
        assert m["first_audible"] - m["first_audio"] == 10 * MS  # 240 silent samples at 24 kHz
        assert tuple(turn.segments) == ("endpointing", "model", "leading_silence", "playout")
        assert sum(turn.segments.values()) == turn.e2e_ns
        assert turn.figures["s2s_usage_output_tokens"] == 7
        assert turn.reply == "Hi."
    assert runner.outcome.summary["stages"] == {"s2s": {"stage": "fake-s2s"}}


async def test_voicelat_endpoint_ends_the_input_and_the_commit_follows(
    tmp_path: Path, fixtures_dir: Path
) -> None:
    stage = FakeS2S(by_server=False)
    runner = await _run(tmp_path, fixtures_dir, stage)
    for turn, frames in zip(runner.turns, stage.frames, strict=True):
        assert turn.ok, turn.failure_reason
        # The endpointer's 200 ms hangover after the speech (600 ms): ~40 frames, not the tail.
        assert 38 <= frames <= 44, frames
        assert 790 * MS <= turn.milestones["endpoint"] <= 900 * MS
        assert sum(turn.segments.values()) == turn.e2e_ns
        assert "endpoint:not_detected" not in turn.flags


@pytest.mark.e2e
async def test_a_server_that_never_endpoints_is_flagged_and_times_out(
    tmp_path: Path, fixtures_dir: Path
) -> None:
    class Deaf(FakeS2S):
        async def converse(self, audio: AsyncIterable[bytes]) -> AsyncIterator[StageEvent]:
            async for _ in audio:
                pass
            await asyncio.sleep(10)
            yield Done(self.clock.now_ns())

    stage = Deaf()
    fx = load_fixtures(fixtures_dir)
    pipeline = replace(_pipeline(), s2s={"stage": "x"}, stt={}, llm={}, tts={})
    pipeline = replace(pipeline, turn=replace(pipeline.turn, timeout_s=4.5))
    runner = Runner(pipeline, fx[:1], tmp_path / "out")
    runner.build_stages = lambda: S2SStageSet.single(stage)  # type: ignore[method-assign]
    try:
        await runner.run(plan_turns([fx[0].id], turns=1, warmup=0))
    except Exception as exc:
        assert "every turn failed" in str(exc)
    (turn,) = runner.turns
    assert turn.failed and "timed out after 4.5 s" in (turn.failure_reason or "")
    assert "endpoint:not_detected" in turn.flags
