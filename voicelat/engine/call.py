"""A whole call: one session, a scenario's steps in order, every turn timed like any other.

:class:`CallEngine` runs one :class:`~voicelat.core.calls.call.Scenario` on one entered stage set,
of any shape:

* **cascade**: the stage connections stay open and the LLM sees the conversation so far (a
  :class:`~voicelat.core.calls.conversation.Conversation`: every earlier user turn and reply), as a
  real agent's does. voicelat's cascade greets by speaking the scenario's ``greeting`` text
  through its TTS. Between turns it waits the human gap; its STT hears each utterance from
  its first frame (a VAD-gated agent does the same).
* **realtime** and **agent**: the hearing stage is put in call mode (``keep_call``): one
  realtime session (its conversation items grow) or one agent call (one Twilio stream, one
  Pipecat websocket, one WebRTC peer) for every step. Each turn's input starts with the human
  gap as silence, so the line carries silence in real time between the reply and the next
  words; ``t0`` is the first sample of that input and the speech bounds are moved by the gap.

Turn timing: a ``say`` step starts ``gap_ms`` (+- a seeded spread) after the previous reply
ended (the sink played it), or at ``at_ms`` on the call's clock (connected = 0). The call's
own figures (greeting latency, dead air, duration, the step that failed) go into a
:class:`~voicelat.core.calls.call.CallRecord`; each turn carries ``call_id`` and ``call_turn``.
A turn that fails is recorded with its reason and the call goes on, or ends as the
scenario's ``on_failure`` says. Cancelled mid-call (Ctrl-C), every finished turn has already
been handed to ``done``.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from voicelat.audio import SimulatedSink
from voicelat.core.base.plan import PlannedTurn
from voicelat.core.base.turn import Turn
from voicelat.core.calls.bargein import BARGE_IN, OverlayOutcome, barge_in_extra
from voicelat.core.calls.call import (
    CALL_CONNECTED,
    CALL_GREETING,
    CALL_ID,
    CALL_TURN,
    INTERRUPTED,
    INTERRUPTING,
    CallRecord,
    Scenario,
    SilenceOutcome,
    Step,
    gap_ns,
)
from voicelat.core.calls.conversation import Conversation
from voicelat.core.measure.clock import Clock
from voicelat.core.measure.recorder import TurnRecorder
from voicelat.engine.agent_turn import AgentTurnEngine
from voicelat.engine.cascade_turn import CascadeTurnEngine
from voicelat.engine.overlay import (
    BargeInVad,
    LineOverlay,
    OverlayRun,
    OverlayWords,
    TappedPacer,
    played_ms,
)
from voicelat.engine.phases import CascadeReply, Playback, cancel_tasks
from voicelat.engine.phone_leg import heard_input
from voicelat.engine.s2s_turn import converse_turn
from voicelat.engine.stageset import CascadeStageSet, StageSet
from voicelat.engine.turn import TurnEngine
from voicelat.engine.turn_input import (
    FRAME_MS,
    NS_PER_MS,
    FrameSource,
    Sink,
    TurnInput,
    silence_frame,
)

__all__ = ["GREETING_WAIT_MS", "CallEngine", "CallView", "SourcedStep", "StepSource"]

#: How long the line stays silent waiting for an expected greeting before it is missing.
GREETING_WAIT_MS = 8000
#: How long after a silence step's end a re-prompt that started may take to finish.
_SILENCE_GRACE_S = 0.5
#: An agent that says nothing of an interruption stopped for it if its audio ended by this
#: long after the interruption's onset (a stop is rarely slower; a reply that happens to end
#: then is taken for a stop: ``stop_inferred`` says so).
_INFER_STOP_NS = 1_500 * NS_PER_MS
#: How long the line is heard after a backchannel or noise for the agent's reaction to it.
_REACTION_S = 8.0


async def _discard(k: int, frame: bytes) -> None:
    """A backchannel's frames on voicelat's own line: only its barge-in VAD hears them."""


@dataclass(frozen=True)
class PlannedCall:
    """One call of a run: its scenario, its id and the run index of its first turn."""

    scenario: Scenario
    call_id: str
    first_index: int


def plan_calls(scenarios: Sequence[Scenario], repeat: int = 1) -> list[PlannedCall]:
    """``repeat`` rounds of ``scenarios`` (A B C A B C), each call's turns numbered on from
    the call before it (so turn indexes are unique in the run whatever runs at once)."""
    planned: list[PlannedCall] = []
    index = 0
    for scenario in [s for _ in range(repeat) for s in scenarios]:
        planned.append(PlannedCall(scenario, f"call-{len(planned) + 1:04d}-{scenario.name}", index))
        index += scenario.max_turns
    return planned


@dataclass(frozen=True)
class CallView:
    """What a :class:`StepSource` sees of its call before each step: the call, its finished
    turns so far (in order; an agent's are refined by its trace once the call is over) and
    the greeting's text when it was heard."""

    call_id: str
    scenario: Scenario
    turns: tuple[Turn, ...]
    greeting: str | None


@dataclass(frozen=True)
class SourcedStep:
    """A step a :class:`StepSource` made, with the input of a ``say`` step it rendered
    (None: the step names one of the engine's prepared inputs)."""

    step: Step
    input: TurnInput | None = None


class StepSource(Protocol):
    """Where a call's steps come from when they are not a fixed script (a simulated caller
    decides its next line from what the agent said). Called between steps, outside every
    turn's timed window; None ends the call."""

    async def next_step(self, view: CallView) -> SourcedStep | None:
        """The call's next step, or None when the call is over."""
        ...


@dataclass
class _Call:
    """One call's running state."""

    scenario: Scenario
    call_id: str
    session: int | None
    connected_ns: int
    rng: random.Random
    next_index: int
    conversation: Conversation = field(default_factory=lambda: Conversation((), ""))
    reply_ended_ns: int = 0
    turn_number: int = 0
    completed: int = 0
    indexes: list[int] = field(default_factory=list)
    waits: list[int] = field(default_factory=list)
    silences: list[SilenceOutcome] = field(default_factory=list)
    greeting_ns: int | None = None
    greeting_first_audible_ns: int | None = None
    failed_step: str | None = None
    failure_reason: str | None = None
    ended_early: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    #: Agent turns whose trace is still being read (off the call's timeline).
    traced: list[tuple[TurnRecorder, str | None, int]] = field(default_factory=list)
    #: This call's finished turns, in order (what a step source sees).
    turns: list[Turn] = field(default_factory=list)
    greeting_text: str | None = None
    overlays: list[OverlayOutcome] = field(default_factory=list)
    #: Turns (by call_turn) whose reply an overlay plays into: the outcome, once it is over.
    watching: dict[int, Callable[[], OverlayOutcome]] = field(default_factory=dict)


@dataclass
class _TurnPlan:
    """A turn of the call made before it runs (an interruption's, while the reply plays)."""

    planned: PlannedTurn
    inp: TurnInput
    rec: TurnRecorder
    call_turn: int


@dataclass
class CallEngine:
    """Runs calls on entered stage sets with ``engine`` (the pipeline's turn shape).
    ``inputs``: each fixture a scenario speaks, prepared at the hearing stage's rate."""

    engine: TurnEngine
    inputs: dict[str, TurnInput]

    @property
    def _line_shape(self) -> bool:
        """Realtime and agent calls keep one stream open and carry silence on it."""
        return not isinstance(self.engine, CascadeTurnEngine)

    async def run(
        self,
        scenario: Scenario,
        stages: StageSet,
        *,
        call_id: str,
        first_index: int,
        done: Callable[[Turn], None],
        session: int | None = None,
        source: StepSource | None = None,
    ) -> CallRecord:
        """Run ``scenario`` as one call on ``stages``; each finished turn goes to ``done`` at
        once (numbered from ``first_index``); returns the call's record. ``source``: where
        the steps come from instead of ``scenario.steps`` (see :class:`StepSource`)."""
        hearing = stages.hearing
        keeps = self._line_shape and hasattr(hearing, "keep_call")
        if keeps:
            hearing.keep_call = True  # type: ignore[attr-defined]
            # A connection of the call's own: the one an earlier call used is hung up (one the
            # session opened and no turn used yet is this call's: what the agent sent on it
            # since it opened, a greeting, is still unread).
            end = getattr(hearing, "end_call", None)
            if end is not None and not getattr(hearing, "fresh_call", False):
                with contextlib.suppress(Exception):
                    await end()
        with contextlib.suppress(Exception):  # a failure shows in the first step
            await hearing.prepare()
        clock = self.engine.clock
        opened = getattr(hearing, "call_opened_ns", None)
        connected = opened if isinstance(opened, int) and keeps else clock.now_ns()
        call = _Call(
            scenario, call_id, session, connected, random.Random(scenario.seed), first_index
        )
        call.reply_ended_ns = call.connected_ns
        try:
            k = 0
            async for step, overlays in self._chains(self._steps(call, source), source is None):
                k += 1
                if k > 1 and self._hung_up(stages):
                    # A new connection would be another call, with none of this one's
                    # context: the rest of the call fails here, named.
                    call.failed_step = call.failed_step or step.line
                    call.failure_reason = call.failure_reason or "the agent closed the call"
                    call.ended_early = True
                    break
                if not await self._step(call, step, stages, done, overlays):
                    call.ended_early = True
                    break
        except BaseException:
            for rec, _, _ in call.traced:  # cancelled mid-call: each turn is handed over untraced
                done(rec.finish())
            call.traced.clear()
            raise
        finally:
            if keeps:
                hearing.keep_call = False  # type: ignore[attr-defined]
                end = getattr(hearing, "end_call", None)
                if end is not None:
                    with contextlib.suppress(Exception):
                        await end()
        ended = clock.now_ns()
        await self._read_traces(call, done)
        return self._record(call, ended)

    async def _steps(self, call: _Call, source: StepSource | None) -> AsyncIterator[Step]:
        """The call's steps: the scenario's, or the source's until it says the call is over."""
        if source is None:
            for step in call.scenario.steps:
                yield step
            return
        while True:
            view = CallView(call.call_id, call.scenario, tuple(call.turns), call.greeting_text)
            made = await source.next_step(view)
            if made is None:
                return
            if made.input is not None and made.step.fixture is not None:
                self.inputs[made.step.fixture] = made.input
            yield made.step

    @staticmethod
    async def _chains(
        steps: AsyncIterator[Step], look_ahead: bool = True
    ) -> AsyncIterator[tuple[Step, tuple[Step, ...]]]:
        """Each step with the overlay steps right after it (they play during its reply, and
        an interruption's own reply takes the overlays after it). A step source's steps are
        not looked ahead of (``look_ahead`` False): it makes its next step from the turn the
        one before it left."""
        if not look_ahead:
            async for step in steps:
                yield step, ()
            return
        current: Step | None = None
        overlays: list[Step] = []
        async for step in steps:
            if step.overlay and current is not None:
                overlays.append(step)
                continue
            if current is not None:
                yield current, tuple(overlays)
            current, overlays = step, []
        if current is not None:
            yield current, tuple(overlays)

    async def _read_traces(self, call: _Call, done: Callable[[Turn], None]) -> None:
        """An agent call's turns, split with its spans once the call is over: an agent's
        conversation span (where the bot states its VAD's stop_secs) is exported when its call
        ends, and every stamp of the turns was taken long before (none moves)."""
        engine = self.engine
        pending, call.traced = call.traced, []
        for k, (rec, ref, until) in enumerate(pending):
            try:
                if isinstance(engine, AgentTurnEngine):
                    await engine.read_trace(rec, ref, until_ns=until)
            except BaseException:
                for left, _, _ in pending[k:]:
                    done(left.finish())
                raise
            done(rec.finish())

    async def _step(
        self,
        call: _Call,
        step: Step,
        stages: StageSet,
        done: Callable[[Turn], None],
        overlays: tuple[Step, ...] = (),
    ) -> bool:
        """Run ``step`` (with the overlays during its reply); False when the call must end
        here."""
        if step.kind == "greeting":
            reason = await self._greeting(call, stages)
            if reason is not None and call.failed_step is None:
                call.failed_step, call.failure_reason = step.line, reason
            return True
        if step.kind == "silence":
            await self._silence(call, step, stages)
            return True
        turns = await self._turns(call, step, overlays, stages, done)
        for turn_step, turn in turns:
            if not turn.ok and call.failed_step is None:
                call.failed_step, call.failure_reason = turn_step.line, turn.failure_reason
        if any(not t.ok for _, t in turns):
            return call.scenario.on_failure == "continue"
        return True

    async def _turns(
        self,
        call: _Call,
        step: Step,
        overlays: tuple[Step, ...],
        stages: StageSet,
        done: Callable[[Turn], None],
    ) -> list[tuple[Step, Turn]]:
        """``step``'s turn and, when an interruption cuts into its reply, the interrupting
        turn (and so on down the chain of overlays)."""
        if not overlays:
            return [(step, await self._say(call, step, stages, done))]
        if self._line_shape:
            return await self._line_chain(call, step, overlays, stages, done)
        return await self._cascade_chain(call, step, overlays, stages, done)

    def _hung_up(self, stages: StageSet) -> bool:
        """Whether the call's connection closed since it started (realtime and agents)."""
        return self._line_shape and getattr(stages.hearing, "call_open", None) is False

    # -- a `say` step: one measured turn ---------------------------------------------------------
    async def _say(
        self,
        call: _Call,
        step: Step,
        stages: StageSet,
        done: Callable[[Turn], None],
        *,
        turn: _TurnPlan | None = None,
        line: Callable[[Playback], LineOverlay] | None = None,
        resume: tuple[int, int] | None = None,
        source: FrameSource | None = None,
        sink: SimulatedSink | None = None,
        hold: Callable[[asyncio.Task[None]], None] | None = None,
    ) -> Turn:
        """One measured turn; it goes to ``done`` now, or once its agent trace is read.
        ``turn``: its plan when made already (an interruption's); ``line``/``resume``: an
        overlay on a realtime or agent call's line, an input going on from the last turn's
        line; ``source``/``sink``/``hold``: the cascade's (an interruption heard by the
        barge-in VAD, the sink it flushes, the reply it cancels)."""
        engine = self.engine
        plan = turn if turn is not None else self._plan_turn(call, step)
        planned, inp, rec = plan.planned, plan.inp, plan.rec
        interrupting = resume is not None or source is not None
        lead_ns = 0 if interrupting else self._lead_ns(call, step)
        if lead_ns < 0:
            rec.flag("call:step_late")
        lead_ns = max(0, lead_ns)
        if self._line_shape and resume is None:
            inp = _with_lead_silence(inp, lead_ns)
            rec.extra("lead_silence_ms", lead_ns // NS_PER_MS)
        leg = engine.phone_leg
        if leg is not None and resume is None and source is None:
            # The caller's phone leg, as a run's turn has it (TurnEngine.measure, which a
            # call's own body bypasses): the frames' loss concealed, the leg's delay ahead.
            # An interruption's rest goes on from a line already on the leg.
            inp = heard_input(inp, leg, rec)
        if self._line_shape:
            body = converse_turn(
                engine,
                stages.hearing,  # type: ignore[arg-type]
                planned,
                inp,
                rec,
                overlay=line,
                resume=resume,
            )
        else:
            await asyncio.sleep(lead_ns / 1e9)
            cascade = CascadeStageSet.expect(stages)
            body = self._cascade_body(planned, inp, rec, cascade, call, source=source, sink=sink)
        await engine.measure(
            planned, stages, inp, rec=rec, body=body, session=call.session, hold=hold
        )
        return self._turn_over(call, rec, stages, done, plan.call_turn)

    def _plan_turn(self, call: _Call, step: Step) -> _TurnPlan:
        """The next turn of the call: its plan, input and recorder (with the call's extras)."""
        assert step.fixture is not None
        call.turn_number += 1
        planned = PlannedTurn(call.next_index, step.fixture, 0, False)
        call.next_index += 1
        inp = self.inputs[step.fixture]
        rec = self.engine.recorder(planned, expected=inp.fixture.text)
        rec.extra(CALL_ID, call.call_id)
        rec.extra(CALL_TURN, call.turn_number)
        rec.extra("scenario", call.scenario.name)
        # Where the call began on the turn's clock (the exporters hang the turn under the call),
        # and on its first turn the greeting before it (Prometheus' greeting histogram).
        rec.extra(CALL_CONNECTED, call.connected_ns)
        if call.turn_number == 1 and call.greeting_ns is not None:
            rec.extra(CALL_GREETING, call.greeting_ns)
            if "greeting_audio_ns" in call.extra:
                rec.extra("call_greeting_audio_ns", call.extra["greeting_audio_ns"])
        if step.kind == "interrupt":
            rec.extra(INTERRUPTING, True)
        return _TurnPlan(planned, inp, rec, call.turn_number)

    def _turn_over(
        self,
        call: _Call,
        rec: TurnRecorder,
        stages: StageSet,
        done: Callable[[Turn], None],
        call_turn: int,
    ) -> Turn:
        """A measured turn is over: handed to ``done`` (or kept for its trace), counted."""
        engine, clock = self.engine, self.engine.clock
        call.reply_ended_ns = max(call.reply_ended_ns, clock.now_ns())
        watch = call.watching.pop(call_turn, None)
        if watch is not None:
            # The overlay's outcome, on the turn its speech played into (the exporters' view).
            outcome = watch()
            call.overlays.append(outcome)
            rec.extra(BARGE_IN, barge_in_extra(outcome, rec.t0_ns))
        turn = rec.finish()
        if isinstance(engine, AgentTurnEngine) and engine.trace_source is not None:
            # Its trace is read once the call is over (see _read_traces): the next step's gap
            # stays on time, and the agent's conversation span has arrived by then.
            call_ref = getattr(stages.hearing, "call_id", None)
            ref = call_ref if isinstance(call_ref, str) else None
            call.traced.append((rec, ref, clock.now_ns()))
        else:
            done(turn)
        call.indexes.append(turn.index)
        call.turns.append(turn)
        if turn.ok:
            call.completed += 1
            if turn.e2e_ns is not None:
                call.waits.append(turn.e2e_ns)
        if not self._line_shape:
            transcript = turn.transcript or ""
            call.conversation = call.conversation.with_text(transcript).then(turn.reply or "")
        return turn

    # -- overlays: speech during a reply (core/calls/bargein.py) ---------------------------------------
    def _overlay_run(self, call: _Call, overlay: Step, call_turn: int) -> OverlayRun:
        assert overlay.fixture is not None
        return OverlayRun(overlay, self.inputs[overlay.fixture], call_turn)

    async def _cascade_chain(
        self,
        call: _Call,
        step: Step,
        overlays: tuple[Step, ...],
        stages: StageSet,
        done: Callable[[Turn], None],
        *,
        turn: _TurnPlan | None = None,
        source: FrameSource | None = None,
    ) -> list[tuple[Step, Turn]]:
        """voicelat's cascade: ``step``'s turn while its barge-in VAD hears the overlay
        played into its reply; an interruption is the next turn, heard from its first frame
        while the reply still plays (and cut, as ``[turn_taking]`` says). With
        ``ignore_words``, a VAD trigger waits for the overlay's words (:class:`OverlayWords`,
        at most ``words_timeout_ms``) and only a word outside the list cuts the reply."""
        engine, clock = self.engine, self.engine.clock
        plan = turn if turn is not None else self._plan_turn(call, step)
        overlay, rest = overlays[0], overlays[1:]
        ov = self._overlay_run(call, overlay, plan.call_turn)
        sink = engine.default_sink(plan.planned)
        call.watching[plan.call_turn] = lambda: ov.outcome(sink.audible_spans_ns())
        held: list[asyncio.Task[None]] = []
        measured = asyncio.create_task(
            self._say(
                call, step, stages, done, turn=plan, source=source, sink=sink, hold=held.append
            )
        )
        taking = engine.pipeline.turn_taking
        vad = BargeInVad(taking)
        words = (
            OverlayWords(CascadeStageSet.expect(stages).stt, taking.ignore_words)
            if taking.ignore_words and taking.barge_in
            else None
        )
        side: list[asyncio.Task[None]] = []  # the words session and its judge

        def stop() -> None:
            _stop_reply(ov, held, sink, plan.rec, clock)

        def tap(k: int, frame: bytes) -> None:
            if k == 0 and pacer.t0_ns is not None:
                ov.started(pacer.t0_ns)
                if words is not None:
                    side.append(asyncio.create_task(words.run()))
            if words is not None:
                words.feed(frame)
            if vad.feed(frame) and not measured.done():
                if words is None:
                    stop()
                    return
                ov.vad_ns = clock.now_ns()
                words.close()
                judged = _judge_words(ov, words, taking.words_timeout_ms, measured, stop)
                side.append(asyncio.create_task(judged))

        pacer = TappedPacer(tap, clock)
        nxt: asyncio.Task[list[tuple[Step, Turn]]] | None = None
        out: list[tuple[Step, Turn]] = []
        try:
            if await self._overlay_due(ov, sink, measured):
                if overlay.kind == "interrupt":
                    nplan = self._plan_turn(call, overlay)
                    nxt = asyncio.create_task(
                        self._cascade_next(call, overlay, rest, stages, done, nplan, pacer)
                    )
                else:
                    await pacer.run(ov.inp.frames, _discard)
            out.append((step, await measured))
        finally:
            await cancel_tasks(measured, *side)
        if nxt is not None:
            out += await nxt
        elif overlay.kind == "interrupt":  # the reply ended first: the interruption is a turn
            out += await self._turns(call, overlay, rest, stages, done)
        return out

    async def _cascade_next(
        self,
        call: _Call,
        step: Step,
        overlays: tuple[Step, ...],
        stages: StageSet,
        done: Callable[[Turn], None],
        plan: _TurnPlan,
        source: FrameSource,
    ) -> list[tuple[Step, Turn]]:
        """The interrupting turn, heard from ``source`` (with its own overlays, if any)."""
        if overlays:
            return await self._cascade_chain(
                call, step, overlays, stages, done, turn=plan, source=source
            )
        return [(step, await self._say(call, step, stages, done, turn=plan, source=source))]

    async def _overlay_due(
        self, ov: OverlayRun, sink: SimulatedSink, measured: asyncio.Task[Turn]
    ) -> bool:
        """Wait until the overlay is due (``after_ms`` after the reply became audible); False
        when the reply ended first (recorded as such: nothing to interrupt)."""
        heard = asyncio.create_task(sink.audible.wait())
        try:
            await asyncio.wait({measured, heard}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await cancel_tasks(heard)
        first = sink.first_audible_ns
        if first is None or measured.done():
            ov.reply_ended_before = True
            return False
        delay = (first + ov.step.after_ms * NS_PER_MS - self.engine.clock.now_ns()) / 1e9
        if delay > 0:
            await asyncio.wait({measured}, timeout=delay)
        if measured.done():
            ov.reply_ended_before = True
            return False
        return True

    async def _line_chain(
        self,
        call: _Call,
        step: Step,
        overlays: tuple[Step, ...],
        stages: StageSet,
        done: Callable[[Turn], None],
        *,
        resume: tuple[int, int] | None = None,
        turn: _TurnPlan | None = None,
    ) -> list[tuple[Step, Turn]]:
        """A realtime or agent call: the overlay goes on the open line during ``step``'s
        reply; what is left of an interruption is the next turn's input, going on."""
        clock = self.engine.clock
        overlay, rest = overlays[0], overlays[1:]
        plan = turn if turn is not None else self._plan_turn(call, step)
        ov = self._overlay_run(call, overlay, plan.call_turn)
        made: list[LineOverlay] = []
        sinks: list[Sink] = []
        hearing = stages.hearing
        call.watching[plan.call_turn] = lambda: _line_outcome(ov, sinks)

        async def interrupt(run: OverlayRun) -> None:
            """Detected: voicelat's side of the stop, as the protocol says (the sink flushed:
            a ``clear``, a client's local flush; OpenAI's cancel and truncate)."""
            out = sinks[0]
            heard_ms = played_ms(out)
            cancel = getattr(out, "cancel", None)
            if cancel is not None:
                cancel()
            send = getattr(hearing, "interrupt", None)
            if send is not None:
                try:
                    run.cancel_ns = await send(heard_ms)
                except Exception as exc:  # recorded with the provider's answer
                    run.refused = f"{type(exc).__name__}: {exc}"

        def line(playback: Playback) -> LineOverlay:
            sinks.append(playback.out)
            made.append(
                LineOverlay(
                    ov,
                    stages.input_rate,
                    clock,
                    lambda: playback.out.first_audible_ns,
                    lambda: bool(getattr(playback.out, "finished", False)),
                    interrupt,
                )
            )
            return made[0]

        said = await self._say(call, step, stages, done, turn=plan, line=line, resume=resume)
        out = [(step, said)]
        lo = made[0] if made else None
        left = lo.remainder if lo is not None else []
        resumed = lo.resume_point() if lo is not None else None
        if overlay.kind == "interrupt":
            nplan = self._plan_turn(call, overlay)
            if resumed is not None:
                nplan.inp = replace(nplan.inp, frames=left)
            if rest:
                out += await self._line_chain(
                    call, overlay, rest, stages, done, resume=resumed, turn=nplan
                )
            else:
                out.append(
                    (
                        overlay,
                        await self._say(call, overlay, stages, done, turn=nplan, resume=resumed),
                    )
                )
        elif left or ov.stopped:
            # After a backchannel or noise: the rest of it goes on the line, and what the
            # agent says to it (a false barge-in's new reply) is heard, unmeasured, so the
            # next step's turn starts on a quiet line.
            inp = replace(ov.inp, frames=left)
            await self._unmeasured(stages, "(reaction)", inp, _REACTION_S, resume=resumed)
            call.reply_ended_ns = clock.now_ns()
        return out

    async def _unmeasured(
        self,
        stages: StageSet,
        label: str,
        inp: TurnInput,
        limit_s: float,
        *,
        resume: tuple[int, int] | None = None,
    ) -> TurnRecorder:
        """``inp`` on a realtime or agent call's line with what the agent says heard but not
        a turn of the run (a silence step, a backchannel's reaction), for at most
        ``limit_s``; its recorder (when the agent spoke)."""
        engine = self.engine
        planned = PlannedTurn(-1, label, 0, True)
        rec = engine.recorder(planned)
        body = converse_turn(engine, stages.hearing, planned, inp, rec, resume=resume)  # type: ignore[arg-type]
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(limit_s):
                await engine.measure(planned, stages, inp, rec=rec, body=body, scheduled=False)
        return rec

    def _lead_ns(self, call: _Call, step: Step) -> int:
        """How long before the step's first frame: the human gap after the reply, or up to the
        fixed offset on the call's clock (negative: the offset has already passed)."""
        now = self.engine.clock.now_ns()
        if step.at_ms is not None:
            return call.connected_ns + step.at_ms * NS_PER_MS - now
        due = call.reply_ended_ns + gap_ns(step, call.rng)
        return max(0, due - now)

    async def _cascade_body(
        self,
        planned: PlannedTurn,
        inp: TurnInput,
        rec: TurnRecorder,
        stages: CascadeStageSet,
        call: _Call,
        *,
        source: FrameSource | None = None,
        sink: Sink | None = None,
    ) -> None:
        engine = self.engine
        assert isinstance(engine, CascadeTurnEngine)
        transcript = await engine.hear(inp, rec, stages, source)
        if transcript is not None:
            prompt = call.conversation.with_text(transcript)
            await engine.reply(planned, rec, prompt, stages, sink=sink)

    # -- the greeting ------------------------------------------------------------------------------
    async def _greeting(self, call: _Call, stages: StageSet) -> str | None:
        """The agent speaks first: connected -> its first audible sample at the sink. Returns
        why it failed (a stage's error), if it did; a greeting that never came is missing."""
        engine = self.engine
        planned = PlannedTurn(-1, "(greeting)", 0, True)
        rec = engine.recorder(planned)
        hearing = stages.hearing
        hears_open = self._line_shape and hasattr(hearing, "accept_from_open")
        if self._line_shape:
            inp = _silence_input(stages.input_rate, GREETING_WAIT_MS)
            sink = engine.default_sink(planned)
            sink.open_since_ns = call.connected_ns  # the ear is on the line from connect
            body = converse_turn(engine, hearing, planned, inp, rec, sink=sink)  # type: ignore[arg-type]
            if hears_open:
                hearing.accept_from_open = True  # type: ignore[attr-defined]
        else:
            rec.t0_ns = call.connected_ns
            inp = _silence_input(stages.input_rate, 0)
            body = self._speak(planned, rec, CascadeStageSet.expect(stages), call.scenario.greeting)
        try:
            await engine.measure(planned, stages, inp, rec=rec, body=body, scheduled=False)
        finally:
            if hears_open:
                hearing.accept_from_open = False  # type: ignore[attr-defined]
        call.reply_ended_ns = engine.clock.now_ns()
        built = rec.finish()  # the greeting is not a turn of the run: its figures are the call's
        seen = rec.milestones()
        heard = seen.get("output_first_audible")
        first_audio = seen.get("first_audio", seen.get("tts_first_byte"))
        if first_audio is not None:
            call.extra["greeting_first_audio_ns"] = first_audio - call.connected_ns
        played = built.figures.get("reply_audio_ns")
        if isinstance(played, int) and played > 0:
            call.extra["greeting_audio_ns"] = played
        if heard is not None:
            call.greeting_first_audible_ns = heard
            call.greeting_ns = heard - call.connected_ns
            call.waits.append(call.greeting_ns)
        greeting = call.scenario.greeting if not self._line_shape else (rec.reply() or "")
        if greeting and heard is not None:
            call.conversation = call.conversation.then(greeting)
            call.greeting_text = greeting
        return built.failure_reason if built.failure_stage not in (None, "turn") else None

    async def _speak(
        self, planned: PlannedTurn, rec: TurnRecorder, stages: CascadeStageSet, text: str
    ) -> None:
        """voicelat's cascade says ``text`` (its greeting) through the TTS into the sink."""
        engine = self.engine
        playback = Playback(engine, rec, engine.default_sink(planned))
        reply = CascadeReply(engine, rec, playback)
        reply.text_q.put_nowait(text)
        reply.text_q.put_nowait(None)
        playback.start()
        try:
            await reply.run_tts(stages.tts)
            await playback.played()
        finally:
            await playback.stop()
        playback.record_figures("tts")

    # -- a silence step ------------------------------------------------------------------------------
    async def _silence(self, call: _Call, step: Step, stages: StageSet) -> None:
        """The user says nothing for ``step.ms``: does the agent speak into it (re-prompt)?"""
        clock = self.engine.clock
        start = clock.now_ns()
        if not self._line_shape:
            # voicelat's own cascade never re-prompts: the silence just passes.
            await asyncio.sleep(step.ms / 1000)
            call.silences.append(SilenceOutcome(step.ms))
            return
        inp = _silence_input(stages.input_rate, step.ms)
        rec = await self._unmeasured(stages, "(silence)", inp, step.ms / 1000 + _SILENCE_GRACE_S)
        first = rec.milestones().get("output_first_audible")
        call.silences.append(SilenceOutcome(step.ms, None if first is None else first - start))
        call.reply_ended_ns = clock.now_ns()

    # -- the record ----------------------------------------------------------------------------------
    def _record(self, call: _Call, ended_ns: int) -> CallRecord:
        scenario = call.scenario
        greets = scenario.greets
        return CallRecord(
            call_id=call.call_id,
            scenario=scenario.name,
            session=call.session,
            connected_ns=call.connected_ns,
            ended_ns=ended_ns,
            turns_planned=len(scenario.says),
            turns_completed=call.completed,
            turn_indexes=tuple(call.indexes),
            greeting_ns=call.greeting_ns,
            greeting_expected=greets,
            greeting_first_audible_ns=call.greeting_first_audible_ns,
            dead_air_max_ns=max(call.waits) if call.waits else None,
            failed_step=call.failed_step,
            failure_reason=call.failure_reason,
            ended_early=call.ended_early,
            silences=tuple(call.silences),
            extra=_shape_extra(self.engine) | call.extra,
            overlays=tuple(call.overlays),
        )


def _line_outcome(ov: OverlayRun, sinks: Sequence[Sink]) -> OverlayOutcome:
    """A line overlay's outcome from its sink's audible spans. With no signal from the agent
    (no ``speech_started``, ``interrupted`` or ``clear``), it stopped if its audio ended soon
    after the interruption's onset, which a reply's natural end may also do: labelled
    ``stop_inferred``."""
    spans: list[tuple[int, int]] = []
    if sinks and hasattr(sinks[0], "audible_spans_ns"):
        spans = sinks[0].audible_spans_ns()
    if not ov.stopped and ov.onset_ns is not None and spans:
        end = ov.onset_ns + _INFER_STOP_NS
        if ov.onset_ns <= spans[-1][1] <= end:
            ov.stopped = True
            ov.extra["stop_inferred"] = True
    return ov.outcome(spans)


def _shape_extra(engine: TurnEngine) -> dict[str, Any]:
    shape = "cascade" if isinstance(engine, CascadeTurnEngine) else engine.stage_key
    return {"shape": shape}


def _with_lead_silence(inp: TurnInput, lead_ns: int) -> TurnInput:
    """``inp`` preceded by ``lead_ns`` of silence (whole frames), its speech bounds moved by
    the lead (the realtime shape adds the silence tail a server VAD needs)."""
    n = lead_ns // (FRAME_MS * NS_PER_MS)
    lead_ms = n * FRAME_MS
    silence = silence_frame(inp.pcm.rate)
    return replace(
        inp,
        frames=[*([silence] * n), *inp.frames],
        speech_start_ms=None if inp.speech_start_ms is None else inp.speech_start_ms + lead_ms,
        speech_end_ms=None if inp.speech_end_ms is None else inp.speech_end_ms + lead_ms,
    )


def _silence_input(rate: int, ms: int) -> TurnInput:
    """An input of ``ms`` of silence and no speech (a greeting's or a silence step's line)."""
    return replace(TurnInput.live("(line)", rate), frames=[silence_frame(rate)] * (ms // FRAME_MS))


async def _judge_words(
    ov: OverlayRun,
    words: OverlayWords,
    timeout_ms: int,
    measured: asyncio.Task[Any],
    stop: Callable[[], None],
) -> None:
    """The barge-in VAD triggered with ``ignore_words``: stop once the overlay's words hold one
    outside the list (or none came within ``timeout_ms``: stop anyway, the reason kept); only
    listed words: the reply goes on."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(words.decided.wait(), timeout_ms / 1000)
    ov.words = words.transcript
    if words.verdict is None:
        ov.words_verdict = "fallback"
        ov.words_fallback = f"no words within {timeout_ms} ms"
    else:
        ov.words_verdict = words.verdict
        ov.words_fallback = words.reason
    if ov.words_verdict != "ignored" and not measured.done():
        stop()


def _stop_reply(
    ov: OverlayRun,
    held: list[asyncio.Task[None]],
    sink: SimulatedSink,
    rec: TurnRecorder,
    clock: Clock,
) -> None:
    """Interrupted: the reply's LLM stream and TTS request are cancelled, the sink flushed
    (the order a real agent does it in)."""
    ov.detected_ns = clock.now_ns()
    ov.last_byte_ns = sink.last_arrival_ns
    for task in held:
        task.cancel()
    ov.cancel_ns = clock.now_ns()
    sink.cancel()
    ov.stopped = True
    rec.flag("barge_in:stopped")
    rec.extra(INTERRUPTED, True)
