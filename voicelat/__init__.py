"""voicelat: a latency profiler for realtime voice pipelines (speech in, speech out).

The public API is re-exported here and imported on first use, so ``import voicelat`` stays light
(no numpy, httpx or textual until a name that needs them is touched).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from voicelat.core.base.version import __version__

_EXPORTS: dict[str, str] = {
    # the metric contract and the sans-I/O core
    "MILESTONES": "voicelat.core.base.contract",
    "SEGMENTS": "voicelat.core.base.contract",
    "CRITICAL_PATH": "voicelat.core.base.contract",
    "Clock": "voicelat.core.measure.clock",
    "MonotonicClock": "voicelat.core.measure.clock",
    "FakeClock": "voicelat.core.measure.clock",
    "Connected": "voicelat.core.measure.events",
    "Span": "voicelat.core.measure.events",
    "RequestSent": "voicelat.core.measure.events",
    "TextSent": "voicelat.core.measure.events",
    "Partial": "voicelat.core.measure.events",
    "Final": "voicelat.core.measure.events",
    "EndOfTurn": "voicelat.core.measure.events",
    "Delta": "voicelat.core.measure.events",
    "Audio": "voicelat.core.measure.events",
    "Done": "voicelat.core.measure.events",
    "Failed": "voicelat.core.measure.events",
    "StageEvent": "voicelat.core.measure.events",
    "TurnRecorder": "voicelat.core.measure.recorder",
    "Turn": "voicelat.core.base.turn",
    "SpanRecord": "voicelat.core.base.turn",
    "critical_segments": "voicelat.core.measure.metrics",
    "percentile": "voicelat.core.base.stats",
    "Distribution": "voicelat.core.base.stats",
    "percentile_band": "voicelat.core.base.stats",
    "bootstrap_diff": "voicelat.core.base.stats",
    "build_summary": "voicelat.core.summaries.summary",
    "summarize": "voicelat.core.summaries.summary",
    "RunSummary": "voicelat.core.summaries.run_summary",
    "load_run": "voicelat.files.results",
    "LoadedRun": "voicelat.files.results",
    "SCHEMA_VERSION": "voicelat.core.summaries.run_summary",
    "Pipeline": "voicelat.files.pipeline",
    "load_pipeline": "voicelat.files.pipeline",
    "Fixture": "voicelat.files.fixtures",
    "load_fixtures": "voicelat.files.fixtures",
    "plan_turns": "voicelat.core.base.plan",
    "Chunker": "voicelat.core.measure.chunker",
    # running and stages
    "Runner": "voicelat.engine.runner",
    "TurnEngine": "voicelat.engine.turn",
    "CascadeTurnEngine": "voicelat.engine.cascade_turn",
    "S2STurnEngine": "voicelat.engine.s2s_turn",
    "AgentTurnEngine": "voicelat.engine.agent_turn",
    "turn_engine_for": "voicelat.engine.shapes",
    "TurnInput": "voicelat.engine.turn_input",
    "FrameSource": "voicelat.engine.turn_input",
    "Sink": "voicelat.engine.turn_input",
    "StageSet": "voicelat.engine.stageset",
    "CascadeStageSet": "voicelat.engine.stageset",
    "S2SStageSet": "voicelat.engine.stageset",
    "AgentStageSet": "voicelat.engine.stageset",
    "Observer": "voicelat.engine.progress",
    "NullObserver": "voicelat.engine.progress",
    "use_clock": "voicelat.stages.base",
    "parse_options": "voicelat.stages.options",
    "STTStage": "voicelat.stages.base",
    "LLMStage": "voicelat.stages.base",
    "TTSStage": "voicelat.stages.base",
    "load_stage_class": "voicelat.stages.base",
    # errors
    "VoicelatError": "voicelat.core.base.errors",
    "ConfigError": "voicelat.core.base.errors",
    "InfraError": "voicelat.core.base.errors",
}

__all__ = [
    "CRITICAL_PATH",
    "MILESTONES",
    "SCHEMA_VERSION",
    "SEGMENTS",
    "AgentStageSet",
    "AgentTurnEngine",
    "Audio",
    "CascadeStageSet",
    "CascadeTurnEngine",
    "Chunker",
    "Clock",
    "ConfigError",
    "Connected",
    "Delta",
    "Distribution",
    "Done",
    "EndOfTurn",
    "Failed",
    "FakeClock",
    "Final",
    "Fixture",
    "FrameSource",
    "InfraError",
    "LLMStage",
    "LoadedRun",
    "MonotonicClock",
    "NullObserver",
    "Observer",
    "Partial",
    "Pipeline",
    "RequestSent",
    "RunSummary",
    "Runner",
    "S2SStageSet",
    "S2STurnEngine",
    "STTStage",
    "Sink",
    "Span",
    "SpanRecord",
    "StageEvent",
    "StageSet",
    "TTSStage",
    "TextSent",
    "Turn",
    "TurnEngine",
    "TurnInput",
    "TurnRecorder",
    "VoicelatError",
    "__version__",
    "bootstrap_diff",
    "build_summary",
    "critical_segments",
    "load_fixtures",
    "load_pipeline",
    "load_run",
    "load_stage_class",
    "parse_options",
    "percentile",
    "percentile_band",
    "plan_turns",
    "summarize",
    "turn_engine_for",
    "use_clock",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'voicelat' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from voicelat.core.base.contract import CRITICAL_PATH, MILESTONES, SEGMENTS
    from voicelat.core.base.errors import ConfigError, InfraError, VoicelatError
    from voicelat.core.base.plan import plan_turns
    from voicelat.core.base.stats import Distribution, bootstrap_diff, percentile, percentile_band
    from voicelat.core.base.turn import SpanRecord, Turn
    from voicelat.core.measure.chunker import Chunker
    from voicelat.core.measure.clock import Clock, FakeClock, MonotonicClock
    from voicelat.core.measure.events import (
        Audio,
        Connected,
        Delta,
        Done,
        EndOfTurn,
        Failed,
        Final,
        Partial,
        RequestSent,
        Span,
        StageEvent,
        TextSent,
    )
    from voicelat.core.measure.metrics import critical_segments
    from voicelat.core.measure.recorder import TurnRecorder
    from voicelat.core.summaries.run_summary import SCHEMA_VERSION, RunSummary
    from voicelat.core.summaries.summary import build_summary, summarize
    from voicelat.engine.agent_turn import AgentTurnEngine
    from voicelat.engine.cascade_turn import CascadeTurnEngine
    from voicelat.engine.progress import NullObserver, Observer
    from voicelat.engine.runner import Runner
    from voicelat.engine.s2s_turn import S2STurnEngine
    from voicelat.engine.shapes import turn_engine_for
    from voicelat.engine.stageset import AgentStageSet, CascadeStageSet, S2SStageSet, StageSet
    from voicelat.engine.turn import TurnEngine
    from voicelat.engine.turn_input import FrameSource, Sink, TurnInput
    from voicelat.files.fixtures import Fixture, load_fixtures
    from voicelat.files.pipeline import Pipeline, load_pipeline
    from voicelat.files.results import LoadedRun, load_run
    from voicelat.stages.base import LLMStage, STTStage, TTSStage, load_stage_class, use_clock
    from voicelat.stages.options import parse_options
