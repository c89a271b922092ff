"""The public turn engine and its clock seam: an injected clock drives every stamp.

A :class:`FakeClock` far from ``perf_counter_ns`` runs one turn without real time: the
milestones come out exact, and a stamp taken on another clock would be off by ~10**17 ns. An
offset monotonic clock drives a whole fixture run the same way (pacer, sink, loop-lag probe,
the stages' own stamps through ``stage.clock``).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Self

import numpy as np
import pytest

from tests.engine.test_runner import _pipeline, fixtures_dir
from voicelat.audio import SimulatedSink, StopPacing, frames
from voicelat.audio.device import LiveFrame
from voicelat.audio.wav import PCM
from voicelat.core.base.plan import PlannedTurn, plan_turns
from voicelat.core.measure.clock import Clock, FakeClock, MonotonicClock
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
from voicelat.engine.cascade_turn import CascadeTurnEngine
from voicelat.engine.live import LiveSource
from voicelat.engine.runner import Runner
from voicelat.engine.stageset import CascadeStageSet, StageSet
from voicelat.engine.turn_input import TurnInput
from voicelat.files.fixtures import Fixture, load_fixtures

__all__ = ["fixtures_dir"]  # the fixture, re-used from test_runner

RATE = 16000
MS = 1_000_000
#: Far from any perf_counter_ns reading (that is the time since boot): a stamp taken on the
#: real clock instead of the injected one lands ~10**17 ns away from the turn's t0.
FAR = 5 * 10**17


class _Clocked:
    """A stage that stamps on ``self.clock`` (what the engine hands it) and, with a fake
    clock, moves it by the time its work takes."""

    clock: Clock = MonotonicClock()

    def __init__(self) -> None:
        self.entered = False
        self.exited = False

    async def __aenter__(self) -> Self:
        self.entered = True
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.exited = True

    async def prepare(self) -> None:
        return None

    def describe(self) -> dict[str, Any]:
        return {"stage": type(self).__name__}

    async def _work(self, ns: int) -> None:
        if isinstance(self.clock, FakeClock):
            self.clock.advance(ns)
            await asyncio.sleep(0)
        else:
            await asyncio.sleep(ns / 1e9)


class ClockedSTT(_Clocked):
    kind: ClassVar[StageName] = "stt"
    input_rate = RATE

    async def transcribe(self, audio: AsyncIterable[bytes]) -> AsyncIterator[StageEvent]:
        async for _ in audio:
            pass
        yield RequestSent(self.clock.now_ns(), "audio_end")
        await self._work(50 * MS)
        yield Final(self.clock.now_ns(), "hello there")
        yield Done(self.clock.now_ns())


class ClockedLLM(_Clocked):
    kind: ClassVar[StageName] = "llm"

    async def complete(self, text: str) -> AsyncIterator[StageEvent]:
        yield RequestSent(self.clock.now_ns())
        await self._work(100 * MS)
        yield Delta(self.clock.now_ns(), "Hello there.")
        yield Done(self.clock.now_ns(), "stop")


class ClockedTTS(_Clocked):
    kind: ClassVar[StageName] = "tts"

    async def synthesize(self, text: AsyncIterable[str]) -> AsyncIterator[StageEvent]:
        lead = np.zeros(RATE * 50 // 1000)
        tone = 0.5 * np.sin(2 * math.pi * 440 * np.arange(RATE // 5) / RATE)
        pcm = (np.concatenate([lead, tone]) * 32767).astype("<i2").tobytes()
        async for piece in text:
            yield TextSent(self.clock.now_ns(), piece)
            await self._work(30 * MS)
            yield Audio(self.clock.now_ns(), pcm, RATE)
        yield Done(self.clock.now_ns())


class StepSource:
    """A FrameSource on a fake clock: each frame is "captured" 20 ms after the last."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.t0_ns: int | None = None
        self.sent = 0

    async def run(
        self, frames: Sequence[bytes], send: Callable[[int, bytes], Awaitable[None]]
    ) -> int:
        self.t0_ns = self.clock.now_ns()
        for k, frame in enumerate(frames):
            self.clock.advance(20 * MS)
            self.sent += 1
            try:
                await send(k, frame)
            except StopPacing:
                break
            await asyncio.sleep(0)
        return self.sent

    def time_of_sample(self, sample_index: int, rate: int) -> int:
        assert self.t0_ns is not None
        return self.t0_ns + sample_index * 1_000_000_000 // rate

    @property
    def lags_ns(self) -> list[int]:
        return [0] * self.sent


def _fake_sleep(clock: FakeClock) -> Callable[[float], Awaitable[None]]:
    async def sleep(seconds: float) -> None:
        clock.advance(round(seconds * 1e9))
        await asyncio.sleep(0)

    return sleep


def _speech_input() -> TurnInput:
    """0.2 s of silence, 0.4 s of tone, 0.6 s of silence, annotated."""
    t = np.arange(int(0.4 * RATE)) / RATE
    tone = 0.3 * np.sin(2 * math.pi * 300 * t)
    audio = np.concatenate([np.zeros(int(0.2 * RATE)), tone, np.zeros(int(0.6 * RATE))])
    pcm = PCM((audio * 32767).astype("<i2").tobytes(), RATE)
    fixture = Fixture("tone", Path("tone.wav"), "say tone", 200, 600, "", annotated=True)
    return TurnInput(fixture, pcm, frames(pcm, 20), 200, 600)


def test_a_fake_clock_drives_every_stamp_of_a_turn() -> None:
    clock = FakeClock(t_ns=FAR)
    engine = CascadeTurnEngine(_pipeline(), clock=clock)
    stages = CascadeStageSet(ClockedSTT(), ClockedLLM(), ClockedTTS()).use_clock(clock)
    assert all(stage.clock is clock for stage in stages)
    planned = PlannedTurn(0, "tone", 0, False)
    rec = engine.recorder(planned, expected="say tone")
    sink = SimulatedSink(clock=clock, sleep=_fake_sleep(clock))

    async def main() -> None:
        inp = _speech_input()
        await engine.body(planned, inp, rec, stages, source=StepSource(clock), sink=sink)

    wall = time.monotonic()
    asyncio.run(main())
    assert time.monotonic() - wall < 1.0  # a turn of ~1.2 s of audio, in no real time
    turn = rec.finish()
    assert turn.ok, turn.failure_reason
    assert rec.t0_ns == FAR
    m = turn.milestones
    assert (m["speech_start"], m["speech_end"]) == (200 * MS, 600 * MS)
    # the endpoint is the engine's own stamp, on a frame of the fake clock: the 200 ms
    # hangover after the speech, quantized to 20 ms frames
    assert m["endpoint"] % (20 * MS) == 0 and 780 * MS <= m["endpoint"] <= 860 * MS
    # the stages' stamps (on the clock they were handed) and the engine's agree exactly
    assert m["stt_final"] == m["endpoint"] + 50 * MS
    assert m["llm_first_token"] == m["stt_final"] + 100 * MS
    assert m["llm_first_speakable"] == m["llm_first_token"]  # the engine's stamp
    assert m["tts_first_byte"] == m["llm_first_speakable"] + 30 * MS
    # the sink's stamp, on the same clock: 50 ms of leading silence, then the tone
    lead = m["output_first_audible"] - m["tts_first_byte"]
    assert 40 * MS <= lead <= 60 * MS
    assert sum(turn.segments.values()) == turn.e2e_ns


class _OffsetClock:
    """The monotonic clock shifted by :data:`FAR`: real time, on another origin."""

    def now_ns(self) -> int:
        return time.perf_counter_ns() + FAR


def test_an_injected_clock_drives_a_whole_fixture_run(tmp_path: Path, fixtures_dir: Path) -> None:
    fixtures = load_fixtures(fixtures_dir)
    clock = _OffsetClock()
    runner = Runner(_pipeline(), fixtures, tmp_path / "out", clock=clock)
    stages = CascadeStageSet(ClockedSTT(), ClockedLLM(), ClockedTTS())
    runner.build_stages = lambda: stages  # type: ignore[method-assign]
    before = clock.now_ns()
    outcome = asyncio.run(runner.run(plan_turns([f.id for f in fixtures], turns=2, warmup=0)))
    # the runner handed its clock to every stage before entering it
    assert all(stage.clock is clock for stage in stages)
    assert all(isinstance(s, _Clocked) and s.entered and s.exited for s in stages)
    for turn in outcome.turns:
        assert turn.ok, turn.failure_reason
        assert turn.t0_ns >= before  # the pacer's t0, on the offset clock
        for name, t in turn.milestones.items():
            assert 0 <= t < 5_000_000_000, (name, t)
        assert 700 * MS <= turn.milestones["endpoint"] <= 900 * MS
        # the probe stamps on the runner's clock: the turn's window finds its samples
        assert turn.figures["loop_lag_max_ns"] is not None
        intended = turn.figures["intended_start_ns"]
        assert isinstance(intended, int) and intended >= before
        assert 0 <= turn.figures["schedule_lag_ns"] < 1_000_000_000  # type: ignore[operator]
    assert outcome.summary["stages"] == {
        "stt": {"stage": "ClockedSTT"},
        "llm": {"stage": "ClockedLLM"},
        "tts": {"stage": "ClockedTTS"},
    }


class _NoClock:
    """A third-party stage without a ``clock`` attribute."""

    kind: ClassVar[StageName] = "llm"

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


def test_use_clock_leaves_a_stage_without_a_clock_alone() -> None:
    clock = FakeClock()
    stt, llm, tts = ClockedSTT(), _NoClock(), ClockedTTS()
    CascadeStageSet(stt, llm, tts).use_clock(clock)  # type: ignore[arg-type]
    assert stt.clock is clock and tts.clock is clock
    assert not hasattr(llm, "clock")


class _BrokenTTS(ClockedTTS):
    async def __aenter__(self) -> Self:
        raise ConnectionRefusedError("no server")


def test_a_stage_set_that_fails_to_enter_closes_what_it_entered() -> None:
    stt, llm = ClockedSTT(), ClockedLLM()
    stages = CascadeStageSet(stt, llm, _BrokenTTS())

    async def main() -> None:
        async with stages:
            pytest.fail("entered a set whose TTS cannot connect")

    with pytest.raises(ConnectionRefusedError):
        asyncio.run(main())
    assert stt.entered and stt.exited and llm.entered and llm.exited


def test_stage_set_of_a_triple_and_its_input_rate() -> None:
    stt, llm, tts = ClockedSTT(), ClockedLLM(), ClockedTTS()
    stages = StageSet.of((stt, llm, tts))
    assert StageSet.of(stages) is stages
    assert list(stages) == [stt, llm, tts] and stages.input_rate == RATE


def test_a_live_source_measures_its_lags_on_the_clock_it_is_given() -> None:
    clock = FakeClock(t_ns=FAR)
    first = LiveFrame(0, bytes(640), FAR - 20 * MS, FAR)
    source = LiveSource([first], RATE, clock=clock)
    sent: list[int] = []

    async def send(k: int, frame: bytes) -> None:
        sent.append(k)
        if k == 2:
            raise StopPacing

    async def main() -> None:
        task = asyncio.create_task(source.run([], send))
        clock.advance(20 * MS)
        source.push(LiveFrame(1, bytes(640), FAR - 15 * MS, FAR + 5 * MS))
        source.push(LiveFrame(2, bytes(640), FAR - 10 * MS, FAR + 10 * MS))
        await task

    asyncio.run(main())
    assert sent == [0, 1, 2]
    # both handed over at FAR + 20 ms on the fake clock: 15 and 10 ms after they arrived
    assert source.lags_ns == [15 * MS, 10 * MS]


def test_run_gives_the_finished_turn_with_its_schedule_on_the_fake_clock() -> None:
    clock = FakeClock(t_ns=FAR)
    engine = CascadeTurnEngine(_pipeline(), clock=clock)
    stages = CascadeStageSet(ClockedSTT(), ClockedLLM(), ClockedTTS()).use_clock(clock)
    planned = PlannedTurn(3, "tone", 1, False)
    sink = SimulatedSink(clock=clock, sleep=_fake_sleep(clock))
    turn = asyncio.run(
        engine.run(planned, stages, _speech_input(), session=7, source=StepSource(clock), sink=sink)
    )
    assert turn.ok, turn.failure_reason
    assert (turn.index, turn.repeat, turn.extra["session"]) == (3, 1, 7)
    assert turn.t0_ns == FAR
    # intended = the clock when the turn was asked for; nothing moved it before the first frame
    assert turn.figures["intended_start_ns"] == FAR and turn.figures["schedule_lag_ns"] == 0
    assert turn.figures["loop_lag_max_ns"] is None  # no probe given
    assert turn.figures["pacer_lag_max_ns"] == 0


def test_a_clip_with_too_little_trailing_silence_gets_what_the_hangover_needs() -> None:
    """Issue #30: a cascade turn on a clip whose silence after the speech is shorter than the
    VAD hangover used to end at the end of the file (flag endpoint:end_of_audio), earlier than
    a realtime or agent turn of the same clip, which hears the line's silence after it."""
    t = np.arange(int(0.4 * RATE)) / RATE
    tone = 0.3 * np.sin(2 * math.pi * 300 * t)
    audio = np.concatenate([np.zeros(int(0.2 * RATE)), tone, np.zeros(int(0.06 * RATE))])
    pcm = PCM((audio * 32767).astype("<i2").tobytes(), RATE)
    fixture = Fixture("short", Path("short.wav"), "say tone", 200, 600, "", annotated=True)
    inp = TurnInput(fixture, pcm, frames(pcm, 20), 200, 600)
    engine = CascadeTurnEngine(_pipeline())
    stages = CascadeStageSet(ClockedSTT(), ClockedLLM(), ClockedTTS())
    planned = PlannedTurn(0, "short", 0, False)
    rec = engine.recorder(planned, expected="say tone")
    asyncio.run(engine.body(planned, inp, rec, stages))
    turn = rec.finish()
    assert turn.ok, turn.failure_reason
    assert "endpoint:padded_tail" in turn.flags and "endpoint:end_of_audio" not in turn.flags
    # the endpoint is the hangover's (200 ms after the speech, in 20 ms frames), not the
    # end of the file 60 ms after it
    hangover = turn.milestones["endpoint"] - turn.milestones["speech_end"]
    assert 180 * MS <= hangover <= 300 * MS, hangover
