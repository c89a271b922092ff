"""The measuring thread: a real Runner on its own loop, stopped from the UI side; run_with_tui.

The runner here uses small in-process stages (real time, no servers), so these tests check
the threading, the queue and the clean stop, not any engine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import queue
import threading
import time
import wave
from collections.abc import AsyncIterable, AsyncIterator, Callable
from pathlib import Path
from typing import Any, ClassVar, Self

import numpy as np
import pytest

from tests.tui.helpers import make_turn
from voicelat.config import Endpointing, Pipeline, TurnConfig
from voicelat.errors import EXIT_INTERRUPTED, EXIT_OK, InfraError
from voicelat.events import (
    Audio,
    Delta,
    Done,
    Final,
    RequestSent,
    StageEvent,
    StageName,
    TextSent,
)
from voicelat.fixtures import Fixture, load_fixtures
from voicelat.plan import PlannedTurn, plan_turns
from voicelat.results import write_summary
from voicelat.runner import Runner
from voicelat.tui import live as live_mod
from voicelat.tui.app import VoicelatApp
from voicelat.tui.live import LiveRun, StopSwitch, want_tui
from voicelat.tui.model import MilestoneSeen, RunEnded, RunEvent, TurnFinished, TurnStarted

RATE = 16000


# -- small in-process stages that follow the stage contract ------------------------------------
class _Stage:
    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def prepare(self) -> None:
        return None

    def describe(self) -> dict[str, Any]:
        return {"stage": type(self).__name__}


class FakeSTT(_Stage):
    kind: ClassVar[StageName] = "stt"
    input_rate = RATE

    async def transcribe(self, audio: AsyncIterable[bytes]) -> AsyncIterator[StageEvent]:
        async for _ in audio:
            pass
        yield RequestSent(time.perf_counter_ns(), "audio_end")
        await asyncio.sleep(0.03)
        yield Final(time.perf_counter_ns(), "hello there")
        yield Done(time.perf_counter_ns())


class FakeLLM(_Stage):
    kind: ClassVar[StageName] = "llm"

    async def complete(self, text: str) -> AsyncIterator[StageEvent]:
        yield RequestSent(time.perf_counter_ns())
        for piece in ("Hi", " there."):
            await asyncio.sleep(0.02)
            yield Delta(time.perf_counter_ns(), piece)
        yield Done(time.perf_counter_ns(), "stop")


class FakeTTS(_Stage):
    kind: ClassVar[StageName] = "tts"

    async def synthesize(self, text: AsyncIterable[str]) -> AsyncIterator[StageEvent]:
        tone = 0.5 * np.sin(2 * math.pi * 440 * np.arange(RATE // 10) / RATE)
        async for piece in text:
            yield TextSent(time.perf_counter_ns(), piece)
            await asyncio.sleep(0.02)
            yield Audio(time.perf_counter_ns(), (tone * 32767).astype("<i2").tobytes(), RATE)
        yield Done(time.perf_counter_ns())


@pytest.fixture
def fixtures(tmp_path: Path) -> list[Fixture]:
    d = tmp_path / "fx"
    d.mkdir()
    entries = []
    for name in ("alpha", "beta"):
        t = np.arange(int(0.3 * RATE)) / RATE
        audio = np.concatenate(
            [np.zeros(RATE // 10), 0.3 * np.sin(2 * math.pi * 300 * t), np.zeros(RATE // 2)]
        )
        with wave.open(str(d / f"{name}.wav"), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(RATE)
            w.writeframes((audio * 32767).astype("<i2").tobytes())
        entries.append(
            {
                "id": name,
                "file": f"{name}.wav",
                "text": "hello there",
                "speech_start_ms": 100,
                "speech_end_ms": 400,
            }
        )
    (d / "manifest.json").write_text(json.dumps({"version": 1, "fixtures": entries}))
    return load_fixtures(d)


def _pipeline() -> Pipeline:
    return Pipeline(
        name="fake",
        path=None,
        sha256="",
        stack=None,
        stt={"stage": "fake"},
        llm={"stage": "fake"},
        tts={"stage": "fake"},
        endpointing=Endpointing(hangover_ms=100),
        turn=TurnConfig(timeout_s=5),
        budget={"e2e": {"p50_ms": 2000}},
    )


def _runner_work(
    fixtures: list[Fixture], out: Path, turns: int, seen: dict[str, Any]
) -> Callable[[Any], Any]:
    """What execute_run does for the TUI, minus the embedded stack: a Runner on a new loop."""

    def work(observer: Any) -> Any:
        seen["thread"] = threading.current_thread()
        runner = Runner(_pipeline(), fixtures, out, observer=observer)
        runner.build_stages = lambda: (FakeSTT(), FakeLLM(), FakeTTS())  # type: ignore[method-assign]
        plan = plan_turns([f.id for f in fixtures], turns=turns, warmup=0)
        return asyncio.run(runner.run(plan))

    return work


def _drain(events: queue.SimpleQueue[RunEvent]) -> list[RunEvent]:
    out = []
    while True:
        try:
            out.append(events.get_nowait())
        except queue.Empty:
            return out


def _wait_for(events: queue.SimpleQueue[RunEvent], kind: type, got: list[RunEvent]) -> None:
    deadline = time.monotonic() + 30
    while not any(isinstance(e, kind) for e in got):
        assert time.monotonic() < deadline, f"no {kind.__name__} within 30 s: {got}"
        with contextlib.suppress(queue.Empty):
            got.append(events.get(timeout=0.1))


def test_the_runner_measures_on_its_own_thread_and_reports_through_the_queue(
    tmp_path: Path, fixtures: list[Fixture]
) -> None:
    seen: dict[str, Any] = {}
    run = LiveRun(_runner_work(fixtures, tmp_path / "out", 2, seen), {"alpha": 400, "beta": 400})
    run.start()
    run.join(60)
    assert run.done and run.status == "complete", run.error
    assert seen["thread"] is not threading.main_thread()
    events = _drain(run.events)
    kinds = [type(e).__name__ for e in events]
    assert kinds[0] == "TurnStarted" and kinds[-1] == "RunEnded"
    assert kinds.count("TurnFinished") == 2
    started = events[0]
    assert isinstance(started, TurnStarted) and started.speech_end_ns == 400_000_000
    live = [e for e in events if isinstance(e, MilestoneSeen) and e.index == 0]
    names = [e.name for e in live]
    assert names[0] == "endpoint" and "output_first_audible" in names
    # the live milestones are the ones the finished turn recorded, at the same times
    finished = next(e for e in events if isinstance(e, TurnFinished))
    for e in live:
        assert finished.turn.milestones[e.name] == e.t_rel_ns
    assert run.outcome.summary["run"]["status"] == "complete"


def test_stopping_cancels_the_run_on_its_loop_and_the_summary_is_still_written(
    tmp_path: Path, fixtures: list[Fixture]
) -> None:
    out = tmp_path / "out"
    run = LiveRun(_runner_work(fixtures, out, 50, {}), {})
    run.start()
    got: list[RunEvent] = []
    _wait_for(run.events, TurnFinished, got)
    t0 = time.monotonic()
    run.request_stop()
    run.join(30)
    assert run.done and time.monotonic() - t0 < 10
    assert run.status == "interrupted" and run.error is None
    got += _drain(run.events)
    assert isinstance(got[-1], RunEnded) and got[-1].status == "interrupted"
    summary = json.loads((out / "summary.json").read_text())
    kept = (out / "turns.jsonl").read_text().splitlines()
    assert summary["run"]["status"] == "interrupted"
    assert 1 <= summary["counts"]["turns"] == len(kept) < 50


def test_a_stop_asked_before_the_first_turn_takes_effect_at_it(
    tmp_path: Path, fixtures: list[Fixture]
) -> None:
    out = tmp_path / "out"
    gate = threading.Event()
    inner = _runner_work(fixtures, out, 5, {})

    def slow_setup(observer: Any) -> Any:
        gate.wait(10)  # the stack coming up: nothing to cancel yet
        return inner(observer)

    run = LiveRun(slow_setup, {})
    run.start()
    run.request_stop()
    gate.set()
    run.join(30)
    assert run.status == "interrupted"
    assert json.loads((out / "summary.json").read_text())["counts"]["turns"] == 0


def test_a_failing_run_reports_its_error() -> None:
    def broken(observer: Any) -> Any:
        raise InfraError("embedded stack: llm did not become ready")

    run = LiveRun(broken, {})
    run.start()
    run.join(10)
    assert run.status == "failed" and isinstance(run.error, InfraError)
    (ended,) = _drain(run.events)
    assert (
        isinstance(ended, RunEnded) and ended.message == "embedded stack: llm did not become ready"
    )


def test_stop_switch_is_harmless_after_the_loop_closed() -> None:
    switch = StopSwitch()

    async def bind() -> None:
        switch.bind_current_task()

    asyncio.run(bind())
    switch.request()  # the loop is closed: no error
    assert switch.requested


def test_want_tui_follows_the_flags_then_the_terminal() -> None:
    assert want_tui(argparse.Namespace(tui=True), stdout_isatty=False)
    assert not want_tui(argparse.Namespace(tui=False), stdout_isatty=True)
    assert want_tui(argparse.Namespace(tui=None), stdout_isatty=True)
    assert not want_tui(argparse.Namespace(tui=None), stdout_isatty=False)
    assert not want_tui(argparse.Namespace(), stdout_isatty=False)


# -- run_with_tui: exit codes, the stop path, the summary after the screen closes --------------
def _fake_execute_run(turns: int, fail: BaseException | None = None) -> Callable[..., Any]:
    def execute_run(
        args: Any, pipeline: Any, fixtures: Any, out_dir: Path, observer: Any, argv: Any = ()
    ) -> Any:
        async def main() -> None:
            done = []
            try:
                for i in range(turns):
                    observer.turn_started(PlannedTurn(i, "alpha", 0, False), turns)
                    await asyncio.sleep(0.02)
                    observer.milestone(i, "endpoint", 500_000_000)
                    turn = make_turn(i, fixture="alpha")
                    done.append(turn)
                    observer.turn_finished(turn, turns)
                if fail is not None:
                    raise fail
            finally:
                from voicelat.summary import build_summary

                write_summary(
                    out_dir,
                    build_summary(done, run={"status": "x"}, pipeline={}, fixtures=[], stages={}),
                )

        out_dir.mkdir(parents=True, exist_ok=True)
        asyncio.run(main())
        return None

    return execute_run


def _app_that_quits(after_turns: int) -> Callable[[VoicelatApp], None]:
    """Replaces App.run: starts the controller like on_mount, presses q after some turns."""

    def run(self: VoicelatApp) -> None:
        controller = self.controller
        assert controller is not None
        controller.start()
        finished = 0
        deadline = time.monotonic() + 30
        while finished < after_turns and not controller.done:
            assert time.monotonic() < deadline
            with contextlib.suppress(queue.Empty):
                finished += isinstance(controller.events.get(timeout=0.1), TurnFinished)
        controller.request_stop()
        while not controller.done:
            time.sleep(0.01)

    return run


def _args() -> argparse.Namespace:
    return argparse.Namespace(repeat=1, turns=100, warmup=0, tui=True)


def _fx() -> list[Fixture]:
    return [Fixture("alpha", Path("alpha.wav"), "hi", 100, 400, "")]


def test_run_with_tui_returns_130_when_stopped_and_prints_the_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("voicelat.cli.execute_run", _fake_execute_run(100_000))
    monkeypatch.setattr(VoicelatApp, "run", _app_that_quits(after_turns=2))
    switch = __import__("sys").getswitchinterval()
    code = live_mod.run_with_tui(_args(), _pipeline(), _fx(), tmp_path / "out")
    assert code == EXIT_INTERRUPTED
    captured = capsys.readouterr()
    assert "Per-segment percentiles" in captured.out
    assert "interrupted" in captured.err
    assert __import__("sys").getswitchinterval() == switch  # restored


def test_run_with_tui_returns_0_when_the_run_completed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("voicelat.cli.execute_run", _fake_execute_run(3))
    monkeypatch.setattr(VoicelatApp, "run", _app_that_quits(after_turns=10**6))
    assert live_mod.run_with_tui(_args(), _pipeline(), _fx(), tmp_path / "out") == EXIT_OK


def test_run_with_tui_raises_the_runs_error_after_the_screen_closes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        "voicelat.cli.execute_run", _fake_execute_run(1, fail=InfraError("every turn failed (1)"))
    )
    monkeypatch.setattr(VoicelatApp, "run", _app_that_quits(after_turns=10**6))
    with pytest.raises(InfraError, match="every turn failed"):
        live_mod.run_with_tui(_args(), _pipeline(), _fx(), tmp_path / "out")
