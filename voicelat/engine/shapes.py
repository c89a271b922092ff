"""The turn shape a pipeline runs: cascade, realtime (S2S) or agent (one place decides)."""

from __future__ import annotations

from typing import Any

from voicelat.engine.agent_turn import AgentTurnEngine, TraceSource
from voicelat.engine.cascade_turn import CascadeTurnEngine
from voicelat.engine.s2s_turn import S2STurnEngine
from voicelat.engine.turn import TurnEngine
from voicelat.files.pipeline import Pipeline

__all__ = ["turn_engine_for"]


def turn_engine_for(
    pipeline: Pipeline, *, trace_source: TraceSource | None = None, **options: Any
) -> TurnEngine:
    """The engine of ``pipeline``'s shape (an ``[agent]`` table, an ``[s2s]`` table, else the
    cascade), built with ``options`` (clock, observer, loop_lag, out_dir, spin_ns);
    ``trace_source``: the agent's spans (only an agent turn reads them)."""
    if pipeline.agent is not None:
        return AgentTurnEngine(pipeline, trace_source=trace_source, **options)
    if pipeline.s2s is not None:
        return S2STurnEngine(pipeline, **options)
    return CascadeTurnEngine(pipeline, **options)
