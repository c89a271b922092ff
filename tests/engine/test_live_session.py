"""The live session end to end on literal audio: a scripted microphone paced in real time,
in-process stages that follow the stage contract, and the simulated speaker.

No device and no server: what is checked is the session's own logic, i.e. VAD-driven turn
segmentation with milestones at known places, barge-in, push-to-talk, --record fixtures
that replay through the runner, stopping, and a device that fails mid-session.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar, Self

import numpy as np
import pytest

from voicelat.audio import sleep_until
from voicelat.audio.device import LiveFrame
from voicelat.core.base.errors import AudioError
from voicelat.core.base.plan import plan_turns
from voicelat.core.measure.clock import MonotonicClock
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
from voicelat.engine.live import LiveOptions, LiveSession, SimulatedOutput
from voicelat.engine.runner import Runner
from voicelat.files.fixtures import load_fixtures
from voicelat.files.pipeline import Endpointing, Pipeline, TurnConfig

RATE = 16000
FS = RATE // 50
MS = 1_000_000


def tone(seconds: float, freq: float = 300) -> bytes:
    t = np.arange(int(seconds * RATE)) / RATE
    return (0.3 * 32767 * np.sin(2 * math.pi * freq * t)).astype("<i2").tobytes()


def silence(seconds: float) -> bytes:
    return bytes(2 * int(seconds * RATE))


Step = bytes | Callable[[], bool]


class ScriptedMic:
    """A FrameInput playing a script in real time: audio, or a condition to wait for (in
    silence), e.g. "the reply is audible". Silence follows the end of the script."""

    rate = RATE
    latency_ns = 0
    overflows = 0

    def __init__(self, script: list[Step], wait_s: float = 10.0) -> None:
        self.script = list(script)
        self.wait_s = wait_s
        self.t0 = 0
        self.k = 0
        self._pcm = b""
        self._deadline: float | None = None
        self.times: dict[str, int] = {}

    def start(self) -> None:
        self.t0 = time.perf_counter_ns()

    def _next_pcm(self) -> bytes:
        while True:
            if len(self._pcm) >= 2 * FS:
                pcm, self._pcm = self._pcm[: 2 * FS], self._pcm[2 * FS :]
                return pcm
            if not self.script:
                return bytes(2 * FS)
            step = self.script[0]
            if isinstance(step, bytes):
                self._pcm += self.script.pop(0)
                continue
            if self._deadline is None:
                self._deadline = time.monotonic() + self.wait_s
            if step():
                self.script.pop(0)
                self._deadline = None
                continue
            if time.monotonic() > self._deadline:
                raise AssertionError("the scripted condition never came true")
            return bytes(2 * FS)

    async def read(self) -> list[LiveFrame]:
        pcm = self._next_pcm()
        t = self.t0 + self.k * 20 * MS
        now = await sleep_until(t + 20 * MS, MonotonicClock())
        frame = LiveFrame(self.k, pcm, t, now)
        self.k += 1
        return [frame]

    def close(self) -> None:
        return None

    def describe(self) -> dict[str, Any]:
        return {"device": "scripted"}


class STT:
    kind: ClassVar[StageName] = "stt"
    input_rate = RATE

    def __init__(self) -> None:
        self.frames: list[int] = []

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def prepare(self) -> None:
        return None

    def describe(self) -> dict[str, Any]:
        return {"stage": "scripted-stt"}

    async def transcribe(self, audio: AsyncIterable[bytes]) -> AsyncIterator[StageEvent]:
        n = 0
        async for _ in audio:
            n += 1
        self.frames.append(n)
        yield RequestSent(time.perf_counter_ns(), "audio_end")
        await asyncio.sleep(0.03)
        yield Final(time.perf_counter_ns(), "hello there")
        yield Done(time.perf_counter_ns())


class LLM:
    kind: ClassVar[StageName] = "llm"

    def __init__(self, gap_s: float = 0.02) -> None:
        self.gap_s = gap_s

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def prepare(self) -> None:
        return None

    def describe(self) -> dict[str, Any]:
        return {"stage": "scripted-llm"}

    async def complete(self, text: str) -> AsyncIterator[StageEvent]:
        yield RequestSent(time.perf_counter_ns())
        for piece in ("Hi", " there."):
            await asyncio.sleep(self.gap_s)
            yield Delta(time.perf_counter_ns(), piece)
        yield Done(time.perf_counter_ns(), "stop")


class TTS:
    kind: ClassVar[StageName] = "tts"

    def __init__(self, seconds: float = 0.3) -> None:
        self.seconds = seconds

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def prepare(self) -> None:
        return None

    def describe(self) -> dict[str, Any]:
        return {"stage": "scripted-tts"}

    async def synthesize(self, text: AsyncIterable[str]) -> AsyncIterator[StageEvent]:
        async for piece in text:
            yield TextSent(time.perf_counter_ns(), piece)
            await asyncio.sleep(0.02)
            yield Audio(time.perf_counter_ns(), silence(0.05) + tone(self.seconds, 440), RATE)
        yield Done(time.perf_counter_ns())


def pipeline() -> Pipeline:
    return Pipeline(
        name="scripted",
        path=None,
        sha256="",
        stack=None,
        stt={"stage": "scripted"},
        llm={"stage": "scripted"},
        tts={"stage": "scripted"},
        endpointing=Endpointing(hangover_ms=200, threshold_dbfs=-40, min_speech_ms=100),
        turn=TurnConfig(timeout_s=10),
    )


def session_for(
    tmp_path: Path,
    script: list[Step],
    *,
    stages: tuple[Any, Any, Any] | None = None,
    **options: Any,
) -> tuple[LiveSession, SimulatedOutput, ScriptedMic]:
    mic = ScriptedMic(script)
    out = SimulatedOutput()
    opts = LiveOptions(**{"warmup": 0, **options})
    session = LiveSession(pipeline(), tmp_path / "out", mic, out, options=opts)
    chosen = stages or (STT(), LLM(), TTS())
    session.runner.build_stages = lambda: chosen  # type: ignore[method-assign]
    return session, out, mic


def audible(out: SimulatedOutput, i: int) -> Callable[[], bool]:
    return lambda: len(out.sinks) > i and out.sinks[i].first_audible_ns is not None


@pytest.mark.e2e
def test_a_vad_turn_has_its_milestones_where_the_audio_put_them(tmp_path: Path) -> None:
    stt = STT()
    session, out, _ = session_for(
        tmp_path,
        [silence(0.4), tone(0.6), silence(0.3)],
        stages=(stt, LLM(), TTS()),
        turns=1,
        record=True,
    )
    outcome = asyncio.run(session.run())
    (turn,) = outcome.turns
    assert turn.ok, turn.failure_reason
    m = turn.milestones
    # t0 is the pre-roll's first sample, 300 ms before the onset; the tone is 0.4-1.0 s
    assert m["speech_start"] == 300 * MS
    assert m["speech_end"] == 900 * MS
    # the 200 ms hangover in 20 ms frames, plus the loop's handling of that frame
    assert 200 * MS <= turn.segments["endpointing"] <= 240 * MS
    assert sum(turn.segments.values()) == turn.e2e_ns
    assert turn.fixture == "live-0001" and turn.transcript == "hello there"
    # STT heard the pre-roll, the speech and the hangover, and nothing after the endpoint
    assert stt.frames == [15 + 30 + 10]
    assert out.sinks[0].first_audible_ns is not None
    assert turn.figures["output_latency_ns"] == 0 and turn.figures["input_overflows"] == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["run"]["status"] == "complete" and summary["counts"]["headline"] == 1
    assert summary["live"]["ptt"] is False and summary["live"]["barge_in"] is True

    # --record: a fixture whose annotations are the VAD's, and the reply audio
    (fx,) = load_fixtures(tmp_path / "out" / "recorded")
    assert (fx.id, fx.text, fx.speech_start_ms, fx.speech_end_ms) == (
        "live-0001",
        "hello there",
        300,
        900,
    )
    assert (tmp_path / "out" / "audio" / "turn-0000-live-0001.wav").exists()
    # ... which the runner replays as a fixture
    runner = Runner(pipeline(), [fx], tmp_path / "replay")
    runner.build_stages = lambda: (STT(), LLM(), TTS())  # type: ignore[method-assign]
    replayed = asyncio.run(runner.run(plan_turns([fx.id], warmup=0)))
    (again,) = replayed.turns
    assert again.ok, again.failure_reason
    assert again.milestones["speech_end"] == 900 * MS


@pytest.mark.e2e
def test_talking_over_an_audible_reply_interrupts_it_and_keeps_it_out_of_the_headline(
    tmp_path: Path,
) -> None:
    out_ref: list[SimulatedOutput] = []

    def reply_heard() -> bool:
        return audible(out_ref[0], 0)()

    session, out, _ = session_for(
        tmp_path,
        [silence(0.2), tone(0.5), reply_heard, tone(0.5)],
        stages=(STT(), LLM(), TTS(seconds=3.0)),
        turns=2,
    )
    out_ref.append(out)
    outcome = asyncio.run(session.run())
    first, second = sorted(outcome.turns, key=lambda t: t.index)
    assert first.interrupted and not first.failed and first.e2e_ns is not None
    assert not first.headline
    assert second.ok and not second.interrupted and second.headline
    # the speaker stopped at the barge-in, long before its 3 s reply was over
    sink = out.sinks[0]
    assert sink.cancelled and sink.ended_ns is not None
    assert sink.ended_ns - sink.first_audible_ns < 2_000 * MS  # type: ignore[operator]
    # the barge-in speech became the second turn, onset included
    assert second.milestones["speech_start"] == 300 * MS
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["counts"]["interrupted"] == 1 and summary["counts"]["headline"] == 1


@pytest.mark.e2e
def test_talking_before_the_reply_is_audible_fails_the_turn_as_the_users(tmp_path: Path) -> None:
    session, _, _ = session_for(
        tmp_path,
        [tone(0.5), silence(0.3), tone(0.4)],  # speaks again while the slow LLM thinks
        stages=(STT(), LLM(gap_s=0.8), TTS()),
        turns=2,
    )
    outcome = asyncio.run(session.run())
    first, second = sorted(outcome.turns, key=lambda t: t.index)
    assert first.failed and first.failure_stage == "user" and first.interrupted
    assert "before the reply was audible" in (first.failure_reason or "")
    assert second.ok, second.failure_reason


@pytest.mark.e2e
def test_without_barge_in_the_reply_plays_out_over_speech(tmp_path: Path) -> None:
    out_ref: list[SimulatedOutput] = []

    def reply_over() -> bool:
        sinks = out_ref[0].sinks
        return bool(sinks) and sinks[0].ended_ns is not None

    session, out, _ = session_for(
        tmp_path,
        [tone(0.5), lambda: audible(out_ref[0], 0)(), tone(0.3), reply_over, tone(0.4)],
        stages=(STT(), LLM(), TTS(seconds=1.0)),
        turns=2,
        barge_in=False,
    )
    out_ref.append(out)
    outcome = asyncio.run(session.run())
    assert [t.interrupted for t in outcome.turns] == [False, False]
    assert all(t.ok for t in outcome.turns)
    first = out.sinks[0]
    assert not first.cancelled
    assert first.ended_ns - first.first_audible_ns >= 950 * MS  # type: ignore[operator]


def test_push_to_talk_turn_ends_at_the_key_and_speech_end_comes_from_the_vad(
    tmp_path: Path,
) -> None:
    box: list[LiveSession] = []

    def press() -> bool:
        box[0].press()
        return True

    session, _, _ = session_for(
        tmp_path,
        # speech without the key is ignored; then press, talk, pause 300 ms, press
        [tone(0.4), silence(0.4), press, tone(0.5), silence(0.3), press],
        turns=1,
        ptt=True,
    )
    box.append(session)
    outcome = asyncio.run(session.run())
    (turn,) = outcome.turns
    assert turn.ok, turn.failure_reason
    m = turn.milestones
    # the press landed between two frames: the pre-roll is 200 ms, give or take one frame
    assert 180 * MS <= m["speech_start"] <= 240 * MS
    assert m["speech_end"] - m["speech_start"] == 500 * MS
    # the endpoint is the second press, the pause after the speech is the user's
    assert 280 * MS <= turn.segments["endpointing"] <= 360 * MS
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["live"]["ptt"] is True
    assert summary["pipeline"]["endpointing"]["mode"] == "vad"  # as the user gave it


def test_stopping_keeps_finished_turns_and_drops_the_one_in_flight(tmp_path: Path) -> None:
    box: list[LiveSession] = []

    def stop_now() -> bool:
        box[0].request_stop()
        return True

    session, _, _ = session_for(
        tmp_path,
        [tone(0.4), lambda: len(box[0].turns) == 1, tone(0.3), stop_now],
    )
    box.append(session)
    outcome = asyncio.run(session.run())
    assert len(outcome.turns) == 1
    lines = (tmp_path / "out" / "turns.jsonl").read_text().splitlines()
    assert len(lines) == 1
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["run"]["status"] == "complete"
    assert summary["run"]["planned_turns"] == 2 and summary["counts"]["turns"] == 1


def test_ctrl_c_keeps_finished_turns_and_writes_the_summary(tmp_path: Path) -> None:
    box: list[LiveSession] = []
    session, _, _ = session_for(tmp_path, [tone(0.4), lambda: len(box[0].turns) == 1, tone(0.3)])
    box.append(session)

    async def main() -> None:
        task = asyncio.create_task(session.run())
        while not session.turns or session.segmenter.state != "listening":
            await asyncio.sleep(0.02)  # the first turn is done, the second one listening
        task.cancel()  # what asyncio.run does on Ctrl-C
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["run"]["status"] == "interrupted"
    assert summary["counts"]["turns"] == 1
    assert len((tmp_path / "out" / "turns.jsonl").read_text().splitlines()) == 1


def test_a_device_that_fails_mid_session_ends_it_with_one_line_and_keeps_the_turns(
    tmp_path: Path,
) -> None:
    box: list[LiveSession] = []

    def unplug() -> bool:
        raise AudioError("input device #0 'mic' stopped delivering audio (unplugged?)")

    session, _, _ = session_for(tmp_path, [tone(0.4), lambda: len(box[0].turns) == 1, unplug])
    box.append(session)
    with pytest.raises(AudioError) as err:
        asyncio.run(session.run())
    assert "stopped delivering audio" in str(err.value)
    assert f"1 finished turn(s) saved in {tmp_path / 'out'}" in str(err.value)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["run"]["status"] == "failed" and summary["counts"]["turns"] == 1
    assert "unplugged" in summary["live"]["error"]


def test_a_ptt_copy_of_the_pipeline_never_endpoints_on_silence(tmp_path: Path) -> None:
    session, _, _ = session_for(tmp_path, [], ptt=True)
    ep = session.runner.pipeline.endpointing
    assert ep.mode == "provider" and ep.hangover_ms >= 10**6
    assert replace(session.pipeline.endpointing) == pipeline().endpointing
