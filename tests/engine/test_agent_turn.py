"""The agent turn engine with a scripted agent stage (no network; the real transports have
their own tests against a real Pipecat agent in tests/e2e).

The fake agent answers once it has heard 300 ms of silence after the fixture's speech, as a
VAD would; the turn is black-box unless a trace source hands the engine the agent's spans.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterable, AsyncIterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar, Self

import pytest

import voicelat.engine.agent_turn as agent_turn
from tests.engine.test_runner import _pipeline, fixtures_dir
from voicelat.core.base.errors import ConfigError, InfraError
from voicelat.core.base.plan import plan_turns
from voicelat.core.measure.clock import Clock, MonotonicClock
from voicelat.core.measure.events import Audio, Done, StageEvent, StageName
from voicelat.core.traces.agent_trace import AgentSpan, TraceSplit
from voicelat.engine.agent_turn import AgentTurnEngine
from voicelat.engine.runner import Runner
from voicelat.engine.stageset import AgentStageSet
from voicelat.files.fixtures import load_fixtures
from voicelat.files.pipeline import AgentTraces, TurnConfig

__all__ = ["fixtures_dir"]

RATE = 8000
MS = 1_000_000


class FakeAgent:
    """Answers 300 ms into the silence after 0.6 s of fixture audio; or never (``mute``)."""

    kind: ClassVar[StageName] = "agent"
    input_rate = RATE
    output_rate = RATE
    endpoint_by_server = True

    def __init__(self, *, mute: bool = False) -> None:
        self.mute = mute
        self.clock: Clock = MonotonicClock()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def prepare(self) -> None:
        return None

    def describe(self) -> dict[str, Any]:
        return {"stage": "fake-agent"}

    async def converse(self, audio: AsyncIterable[bytes]) -> AsyncIterator[StageEvent]:
        n = 0
        async for _frame in audio:
            n += 1
            if n == 45 and not self.mute:
                break
        if self.mute:
            await asyncio.sleep(3600)
        await asyncio.sleep(0.1)
        yield Audio(self.clock.now_ns(), b"\x00\x00" * 80 + b"\x10\x27" * 1600, RATE)
        await asyncio.sleep(0.05)
        yield Done(self.clock.now_ns())


class FakeTraces:
    """A trace source: records the windows asked for, returns no spans (split is patched)."""

    def __init__(self, *, broken: bool = False) -> None:
        self.windows: list[tuple[int, int]] = []
        self.conversations: list[str | None] = []
        self.broken = broken

    async def spans_for(
        self, window: tuple[int, int], *, wait_s: float, conversation: str | None = None
    ) -> list[AgentSpan]:
        self.windows.append(window)
        self.conversations.append(conversation)
        if self.broken:
            raise ConnectionError("receiver gone")
        return []

    def clock_info(self) -> dict[str, int]:
        return {"trace_clock_offset_ns": 0, "trace_clock_uncertainty_ns": 12_000}


async def _run(
    tmp_path: Path, fixtures: Path, stage: FakeAgent, traces: FakeTraces | None = None, **pipe: Any
) -> Runner:
    fx = load_fixtures(fixtures)
    pipeline = replace(
        _pipeline(**pipe),
        agent={"stage": "fake-agent"},
        agent_traces=AgentTraces(mapping="pipecat", wait_ms=10),
        stt={},
        llm={},
        tts={},
    )
    runner = Runner(pipeline, fx, tmp_path / "out", trace_source=traces)
    runner.build_stages = lambda: AgentStageSet.agent_of(stage)  # type: ignore[method-assign]
    assert isinstance(runner.turn_engine(), AgentTurnEngine)
    # A run whose every turn failed raises InfraError after writing everything.
    with contextlib.suppress(InfraError):
        await runner.run(plan_turns([f.id for f in fx], turns=2, warmup=0))
    return runner


async def test_black_box_agent_turn_sums_and_says_untraced(
    tmp_path: Path, fixtures_dir: Path
) -> None:
    runner = await _run(tmp_path, fixtures_dir, FakeAgent())
    for turn in runner.turns:
        assert turn.ok, turn.failure_reason
        assert turn.extra["kind"] == "agent" and "untraced" in turn.flags
        assert tuple(turn.segments) == ("agent_response", "leading_silence", "playout")
        assert sum(turn.segments.values()) == turn.e2e_ns
        # 45 frames then 100 ms: the reply near 1000 ms, speech_end at 600 ms.
        assert 350 * MS <= turn.segments["agent_response"] <= 550 * MS, turn.segments
        assert turn.milestones["first_audible"] - turn.milestones["first_audio"] == 10 * MS
        assert turn.figures["agent_response_ns"] == turn.segments["agent_response"]
    assert runner.outcome.summary["stages"] == {"agent": {"stage": "fake-agent"}}


async def test_trace_source_splits_the_turn(
    tmp_path: Path, fixtures_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def split(spans: Sequence[AgentSpan], window: tuple[int, int], mapping: str) -> TraceSplit:
        assert mapping == "pipecat"
        t0 = window[0]
        return TraceSplit(
            {
                "agent_endpoint": t0 + 850 * MS,
                "agent_stt_final": t0 + 870 * MS,
                "agent_llm_first_token": t0 + 900 * MS,
                "agent_tts_first_byte": t0 + 920 * MS,
            },
            {"agent_reported_tts_ttfb_ms": 20.0},
        )

    monkeypatch.setattr(agent_turn, "split_from_spans", split)
    traces = FakeTraces()
    runner = await _run(tmp_path, fixtures_dir, FakeAgent(), traces)
    assert len(traces.windows) == 2
    for turn in runner.turns:
        assert turn.ok and "untraced" not in turn.flags
        assert turn.segments["endpointing"] == 250 * MS and turn.segments["stt"] == 20 * MS
        assert turn.segments["transport"] > 0
        assert sum(turn.segments.values()) == turn.e2e_ns
        assert turn.figures["agent_reported_tts_ttfb_ms"] == 20.0
        assert turn.extra["trace_clock_uncertainty_ns"] == 12_000
        assert turn.figures["agent_response_ns"] == (
            turn.milestones["first_audio"] - turn.milestones["speech_end"]
        )


class CallingAgent(FakeAgent):
    """A stage that knows the id its agent names each call by (as twilio, pipecat-ws, webrtc)."""

    calls = 0
    call_id: str | None = None

    async def converse(self, audio: AsyncIterable[bytes]) -> AsyncIterator[StageEvent]:
        CallingAgent.calls += 1
        self.call_id = f"call-{CallingAgent.calls}"
        async for event in super().converse(audio):
            yield event


@pytest.mark.e2e
async def test_the_traces_are_asked_for_the_stages_call(tmp_path: Path, fixtures_dir: Path) -> None:
    """Calls at once (--concurrency) overlap in time: the window alone cannot tell their traces
    apart, the call id the agent puts on its spans can."""
    traces = FakeTraces()
    CallingAgent.calls = 0
    await _run(tmp_path, fixtures_dir, CallingAgent(), traces)
    assert traces.conversations == ["call-1", "call-2"]
    await _run(tmp_path / "plain", fixtures_dir, FakeAgent(), plain := FakeTraces())
    assert plain.conversations == [None, None]  # no id: the window alone


async def test_a_broken_trace_source_leaves_the_turn_black_box(
    tmp_path: Path, fixtures_dir: Path
) -> None:
    runner = await _run(tmp_path, fixtures_dir, FakeAgent(), FakeTraces(broken=True))
    for turn in runner.turns:
        assert turn.ok and "trace_error:ConnectionError" in turn.flags and "untraced" in turn.flags


async def test_an_agent_that_never_answers_times_out_naming_the_last_event(
    tmp_path: Path, fixtures_dir: Path
) -> None:
    runner = await _run(
        tmp_path, fixtures_dir, FakeAgent(mute=True), turn=TurnConfig(timeout_s=1.5)
    )
    assert len(runner.turns) == 2  # the run went on after the first failure
    for turn in runner.turns:
        assert turn.failed and turn.failure_stage == "turn"
        assert turn.failure_reason == (
            "timed out after 1.5 s (last milestone: speech_end; last event from the agent: "
            "none (nothing since the turn started))"
        )


def test_traces_for_a_pipeline_starts_the_receiver_for_the_run() -> None:
    from voicelat.engine.job import traces_for
    from voicelat.engine.trace_receiver import TraceReceiver
    from voicelat.files.pipeline import parse_pipeline

    black_box = parse_pipeline({"agent": {"stage": "twilio", "url": "ws://127.0.0.1:1/x"}})
    with traces_for(black_box) as source:
        assert source is None
    traced = parse_pipeline(
        {"agent": {"stage": "twilio", "url": "ws://127.0.0.1:1/x", "traces": "pipecat",
                   "trace_port": 0, "trace_clock_uncertainty_ms": 1.5}}
    )  # fmt: skip
    with traces_for(traced) as source:
        assert isinstance(source, TraceReceiver)
        assert source.url.endswith("/v1/traces") and source.port != 0
        assert source.mapping == "pipecat" and source.offset_uncertainty_ns == 1_500_000
    import socket

    with socket.socket() as s:  # stopped with the run: the port is free again
        assert s.connect_ex(("127.0.0.1", source.port)) != 0


def _agent_file(tmp_path: Path, name: str, traces: str, wait_ms: int = 2000) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(
        f'[pipeline]\nname = "{name}"\n[agent]\nstage = "twilio"\nurl = "ws://127.0.0.1:1/ws"\n'
        f'traces = "{traces}"\ntrace_port = 0\ntrace_wait_ms = {wait_ms}\n',
        encoding="utf-8",
    )
    return path


def test_a_comparison_reads_its_traced_agents_spans(
    tmp_path: Path, fixtures_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`voicelat compare` on a traced agent (`compare agent-twilio.toml --network lan,4g`) ran
    every turn `untraced`: only `voicelat run` opened the trace receiver. Each traced
    combination gets one while the turns run (shared by those naming the same settings), a
    black-box one none, and it is stopped afterwards."""
    import socket

    import voicelat.engine.compare as compare
    from voicelat.engine.request import PlanRequest
    from voicelat.engine.trace_receiver import TraceReceiver

    seen: dict[str, Any] = {}

    async def drive(runs: Sequence[compare.CombinationRun], *_: Any) -> None:
        for r in runs:
            source = r.runner.trace_source
            ok = source is None or socket.create_connection(("127.0.0.1", source.port)).close()
            seen[r.combo.name] = (source, ok)

    monkeypatch.setattr(compare, "_drive", drive)
    traced = _agent_file(tmp_path, "traced", "pipecat")
    request = compare.CompareRequest(
        pipelines=(traced, _agent_file(tmp_path, "black", "none")),
        fixtures_dir=fixtures_dir,
        plan=PlanRequest(turns=1, warmup=0),
        out_dir=tmp_path / "cmp",
        network="lan,4g",
    )
    setup = compare.plan_comparison(request)
    runs = compare.prepare_comparison(setup, progress=lambda _: None)
    compare.measure_comparison(setup, runs, _Quiet(), progress=lambda _: None)
    sources = {name: s for name, (s, _) in seen.items()}
    assert set(sources) == {"traced @ lan", "traced @ 4g", "black @ lan", "black @ 4g"}
    assert isinstance(sources["traced @ lan"], TraceReceiver)
    assert sources["traced @ 4g"] is sources["traced @ lan"]  # one receiver, one port
    assert sources["traced @ lan"].mapping == "pipecat"
    assert sources["black @ lan"] is None and sources["black @ 4g"] is None
    with socket.socket() as s:  # stopped with the comparison
        assert s.connect_ex(("127.0.0.1", sources["traced @ lan"].port)) != 0

    other = compare.CompareRequest(
        pipelines=(traced, _agent_file(tmp_path, "slow", "pipecat", wait_ms=500)),
        fixtures_dir=fixtures_dir,
        plan=PlanRequest(turns=1, warmup=0),
        out_dir=tmp_path / "cmp2",
    )
    setup = compare.plan_comparison(other)
    runs = compare.prepare_comparison(setup, progress=lambda _: None)
    with pytest.raises(ConfigError, match=r"combination slow: .*same trace_port 0"):
        compare.measure_comparison(setup, runs, _Quiet(), progress=lambda _: None)


class _Quiet:
    def start(self) -> None:
        return None

    def skip(self, slot: Any) -> None:
        return None

    def __call__(self, slot: Any, combo: str, turn: Any) -> None:
        return None
