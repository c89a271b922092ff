"""voicelat: a latency profiler for realtime voice pipelines (speech in, speech out).

The public API is re-exported here and imported on first use, so ``import voicelat`` stays light
(no numpy, httpx or textual until a name that needs them is touched).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # the metric contract and the sans-I/O core
    "MILESTONES": "voicelat.contract",
    "SEGMENTS": "voicelat.contract",
    "CRITICAL_PATH": "voicelat.contract",
    "Clock": "voicelat.clock",
    "MonotonicClock": "voicelat.clock",
    "FakeClock": "voicelat.clock",
    "Connected": "voicelat.events",
    "Span": "voicelat.events",
    "RequestSent": "voicelat.events",
    "TextSent": "voicelat.events",
    "Partial": "voicelat.events",
    "Final": "voicelat.events",
    "EndOfTurn": "voicelat.events",
    "Delta": "voicelat.events",
    "Audio": "voicelat.events",
    "Done": "voicelat.events",
    "Failed": "voicelat.events",
    "StageEvent": "voicelat.events",
    "TurnRecorder": "voicelat.recorder",
    "Turn": "voicelat.turn",
    "SpanRecord": "voicelat.turn",
    "critical_segments": "voicelat.metrics",
    "percentile": "voicelat.stats",
    "Distribution": "voicelat.stats",
    "percentile_band": "voicelat.stats",
    "bootstrap_diff": "voicelat.stats",
    "build_summary": "voicelat.summary",
    "load_run": "voicelat.results",
    "LoadedRun": "voicelat.results",
    "SCHEMA_VERSION": "voicelat.results",
    "Pipeline": "voicelat.config",
    "load_pipeline": "voicelat.config",
    "Fixture": "voicelat.fixtures",
    "load_fixtures": "voicelat.fixtures",
    "plan_turns": "voicelat.plan",
    "Chunker": "voicelat.chunker",
    # running and stages
    "Runner": "voicelat.runner",
    "STTStage": "voicelat.stages.base",
    "LLMStage": "voicelat.stages.base",
    "TTSStage": "voicelat.stages.base",
    "load_stage_class": "voicelat.stages.base",
    # errors
    "VoicelatError": "voicelat.errors",
    "ConfigError": "voicelat.errors",
    "InfraError": "voicelat.errors",
}

__all__ = [
    "CRITICAL_PATH",
    "MILESTONES",
    "SCHEMA_VERSION",
    "SEGMENTS",
    "Audio",
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
    "InfraError",
    "LLMStage",
    "LoadedRun",
    "MonotonicClock",
    "Partial",
    "Pipeline",
    "RequestSent",
    "Runner",
    "STTStage",
    "Span",
    "SpanRecord",
    "StageEvent",
    "TTSStage",
    "TextSent",
    "Turn",
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
    "percentile",
    "percentile_band",
    "plan_turns",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'voicelat' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from voicelat.chunker import Chunker
    from voicelat.clock import Clock, FakeClock, MonotonicClock
    from voicelat.config import Pipeline, load_pipeline
    from voicelat.contract import CRITICAL_PATH, MILESTONES, SEGMENTS
    from voicelat.errors import ConfigError, InfraError, VoicelatError
    from voicelat.events import (
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
    from voicelat.fixtures import Fixture, load_fixtures
    from voicelat.metrics import critical_segments
    from voicelat.plan import plan_turns
    from voicelat.recorder import TurnRecorder
    from voicelat.results import SCHEMA_VERSION, LoadedRun, load_run
    from voicelat.runner import Runner
    from voicelat.stages.base import LLMStage, STTStage, TTSStage, load_stage_class
    from voicelat.stats import Distribution, bootstrap_diff, percentile, percentile_band
    from voicelat.summary import build_summary
    from voicelat.turn import SpanRecord, Turn
