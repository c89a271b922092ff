"""One turn through a running voice agent, over the transport it already exposes.

An agent seen from outside is a speech-to-speech stage (docs/AGENTS.md), so
:class:`AgentTurnEngine`, the agent :class:`~voicelat.engine.turn.TurnEngine` shape over an
:class:`~voicelat.engine.stageset.AgentStageSet`, runs the realtime shape's
:func:`~voicelat.engine.s2s_turn.converse_turn` with the agent's recorder
(:class:`~voicelat.core.traces.agent.AgentRecorder`) and stage name: the pacer streams the
fixture's 20 ms frames in real time, then silence (the agent endpoints itself, as on a phone
line); the stage's reply audio goes into the sink, which stamps ``output_first_audible``; the
turn ends when the stage reports ``Done`` (the reply is over) or ``Failed``.

After the reply has played, a :class:`TraceSource` (the OTLP trace receiver) may be asked for
the agent's spans of the turn; :func:`~voicelat.core.traces.agent_trace.split_from_spans` maps them
(LiveKit's: :func:`~voicelat.core.traces.framework_turns.split_window`) and the recorder splits
``agent_response`` with them. That wait is after every stamp of the
turn, so it moves none of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Protocol

from voicelat.core.base.plan import PlannedTurn
from voicelat.core.measure.events import StageName
from voicelat.core.measure.recorder import TurnRecorder
from voicelat.core.traces.agent import AgentRecorder
from voicelat.core.traces.agent_trace import FRAMEWORK_MAPPINGS, AgentSpan, split_from_spans
from voicelat.core.traces.framework_turns import split_window
from voicelat.engine.s2s_turn import converse_turn
from voicelat.engine.stageset import AgentStageSet, StageSet
from voicelat.engine.turn import TurnEngine
from voicelat.engine.turn_input import FrameSource, Sink, TurnInput

__all__ = ["AgentTurnEngine", "TraceSource"]


class TraceSource(Protocol):
    """Where the agent's spans of a turn come from (the trace receiver). A source may also
    have ``clock_info() -> dict`` (the placement's offset and uncertainty): a traced turn
    records it in its ``extra``. ``conversation`` (only passed when the stage knows its
    call's id): just the traces naming that call, so calls at once (``--concurrency``) are
    told apart."""

    async def spans_for(
        self, window: tuple[int, int], *, wait_s: float, conversation: str | None = None
    ) -> list[AgentSpan]: ...


@dataclass
class AgentTurnEngine(TurnEngine):
    """Runs one agent turn at a time (see the module docstring). ``trace_source``: the agent's
    spans (None, or the pipeline's ``[agent] traces = "none"``: every turn stays black-box)."""

    recorder_class: ClassVar[type[TurnRecorder]] = AgentRecorder
    stage_key: ClassVar[StageName] = "agent"
    trace_source: TraceSource | None = None

    async def body(
        self,
        planned: PlannedTurn,
        inp: TurnInput,
        rec: TurnRecorder,
        stages: StageSet,
        *,
        source: FrameSource | None = None,
        sink: Sink | None = None,
    ) -> None:
        """The S2S turn through the agent's stage, then its trace (when there is one)."""
        agent = AgentStageSet.expect(stages).agent
        await converse_turn(self, agent, planned, inp, rec, source=source, sink=sink)
        # What the stage measured of its own media path this turn (webrtc: lost frames, the
        # media relay's tallies under a network profile).
        figures = getattr(agent, "turn_figures", None)
        if callable(figures):
            for name, value in figures().items():
                rec.figure(name, value)
        call_id = getattr(agent, "call_id", None)
        await self.read_trace(rec, call_id if isinstance(call_id, str) else None)

    async def read_trace(
        self, rec: TurnRecorder, call_id: str | None = None, *, until_ns: int | None = None
    ) -> None:
        """Hand ``rec`` the split of the agent's spans of this turn (None when nothing maps);
        a trace source that fails flags the turn and leaves it black-box. ``call_id``: the
        id the agent names this call by in its traces (the stage's ``call_id``: a Twilio
        call SID, pipecat-ws ``call_id_param``, a WebRTC ``pc_id``)."""
        traces = self.pipeline.agent_traces
        if self.trace_source is None or traces.mapping == "none" or not rec.t0_ns:
            return
        assert isinstance(rec, AgentRecorder)
        # ``until_ns``: where the turn ended when its trace is read later (a call's turns are
        # read once the call is over: the window must not take in the turns after it).
        window = (rec.t0_ns, self.clock.now_ns() if until_ns is None else until_ns)
        try:
            wait_s = traces.wait_ms / 1000
            if call_id is None:
                spans = await self.trace_source.spans_for(window, wait_s=wait_s)
            else:
                spans = await self.trace_source.spans_for(
                    window, wait_s=wait_s, conversation=call_id
                )
        except Exception as exc:
            rec.flag(f"trace_error:{type(exc).__name__}")
            return
        if traces.mapping in FRAMEWORK_MAPPINGS:
            # LiveKit times a reply its own way (its user_turn beside the agent_turn).
            split = split_window(spans, window, traces.mapping)
        else:
            split = split_from_spans(spans, window, traces.mapping)
        rec.add_trace(split)
        # Where the spans were placed (offset, uncertainty), when the source says.
        clock_info = getattr(self.trace_source, "clock_info", None)
        if split is not None and callable(clock_info):
            for key, value in dict(clock_info()).items():
                rec.extra(str(key), value)

    def fail_timed_out(self, rec: TurnRecorder) -> None:
        """Fail ``rec`` for running past the turn timeout, naming the agent's last event."""
        last = list(rec.milestones())[-1:] or ["start"]
        seen = rec.last_event() if isinstance(rec, AgentRecorder) else "?"
        timeout = self.pipeline.turn.timeout_s
        rec.fail(
            "turn",
            f"timed out after {timeout:g} s (last milestone: {last[0]}; last event from the "
            f"agent: {seen})",
        )
