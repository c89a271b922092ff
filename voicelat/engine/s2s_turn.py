"""One turn through a realtime speech-to-speech model (OpenAI Realtime, Gemini Live).

:class:`S2STurnEngine` is the realtime :class:`~voicelat.engine.turn.TurnEngine` shape, over an
:class:`~voicelat.engine.stageset.S2SStageSet` and recorded by
:class:`~voicelat.core.traces.s2s.S2SRecorder`, so the runner, the load shapes and ``voicelat
compare`` run S2S turns exactly as they run cascade turns. One turn (:func:`converse_turn`,
which the agent shape shares):

1. The pacer sends the fixture's 20 ms frames in real time, then silence (a microphone keeps
   delivering after the user stops), up to :data:`~voicelat.engine.turn_input.TAIL_MS`.
2. Who ends the user's turn is the stage's ``endpoint_by_server``. True (server VAD): frames
   keep flowing until the server says the speech stopped (``ServerSpeech(started=False)`` or
   ``EndOfTurn``); that event is ``endpoint``. A server that never says (Gemini's automatic
   activity detection) hears silence until its reply's first audio; the turn's endpoint is
   then unobserved (see :class:`~voicelat.core.traces.s2s.S2SRecorder`). False: the pipeline's
   endpointer (the same one as the cascade's ``[endpointing] mode = "vad"``) decides, the audio
   ends and the stage commits (and asks for the response); the endpointer's decision is
   ``endpoint``.
3. The reply's audio goes into the sink as it arrives (onset found as for TTS audio); the sink
   stamps ``output_first_audible``. The turn ends when the stage reports ``Done`` or ``Failed``
   and the sink has played the reply.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import ClassVar

from voicelat.core.base.plan import PlannedTurn
from voicelat.core.measure.events import (
    Audio,
    Done,
    EndOfTurn,
    Failed,
    ServerSpeech,
    StageEvent,
    StageName,
)
from voicelat.core.measure.recorder import TurnRecorder
from voicelat.core.traces.s2s import S2SRecorder
from voicelat.engine.overlay import LineOverlay
from voicelat.engine.phases import Listener, Playback, cancel_tasks, closing
from voicelat.engine.stageset import S2SStageSet, StageSet
from voicelat.engine.turn import TurnEngine
from voicelat.engine.turn_input import TAIL_MS, FrameSource, Sink, TurnInput, with_silence_tail
from voicelat.stages.base import AgentStage, S2SStage

__all__ = ["TAIL_MS", "S2STurnEngine", "converse_turn", "with_silence_tail"]


@dataclass
class S2STurnEngine(TurnEngine):
    """Runs one speech-to-speech turn at a time (see the module docstring)."""

    recorder_class: ClassVar[type[TurnRecorder]] = S2SRecorder
    stage_key: ClassVar[StageName] = "s2s"

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
        """Listen and answer at once: the S2S stage's one stream carries both."""
        stage = S2SStageSet.expect(stages).s2s
        await converse_turn(self, stage, planned, inp, rec, source=source, sink=sink)


async def converse_turn(
    engine: TurnEngine,
    stage: S2SStage | AgentStage,
    planned: PlannedTurn,
    inp: TurnInput,
    rec: TurnRecorder,
    *,
    source: FrameSource | None = None,
    sink: Sink | None = None,
    overlay: Callable[[Playback], LineOverlay] | None = None,
    resume: tuple[int, int] | None = None,
) -> None:
    """One turn of a stage whose one stream hears the user and answers (realtime, agent):
    its events are recorded under ``engine.stage_key``. ``overlay``: makes the
    :class:`~voicelat.engine.overlay.LineOverlay` that keeps the line going during the reply
    (a call's interruption or backchannel); ``resume``: see
    :class:`~voicelat.engine.phases.Listener`."""
    if source is None:
        inp = with_silence_tail(inp)
    # Our endpointer decides only when the server does not.
    listener = Listener(
        engine, inp, rec, source, endpointer_decides=not stage.endpoint_by_server, resume=resume
    )
    playback = Playback(engine, rec, sink if sink is not None else engine.default_sink(planned))
    line = overlay(playback) if overlay is not None else None
    events = stage.converse(listener.audio())
    watch = line.on_event if line is not None else None
    talk = asyncio.create_task(_converse(engine, events, listener, playback, watch))
    keeper: asyncio.Task[None] | None = None
    playback.start()
    try:
        await listener.listen()
        if stage.endpoint_by_server and not listener.provider_eot.is_set():
            rec.flag("endpoint:not_detected")
        listener.audio_ended(end_line=line is None)
        if line is not None:
            keeper = asyncio.create_task(line.keep_line(listener.line))
        await talk
        if line is not None and keeper is not None:
            line.stop()
            await keeper
            listener.line.put_nowait(None)
        await playback.played()
    finally:
        if line is not None:
            line.stop()
        await cancel_tasks(talk, keeper)
        await playback.stop()
    if line is not None and playback.last_audio_ns is not None:
        line.run.last_byte_ns = playback.last_audio_ns
    playback.record_figures(engine.stage_key)


async def _converse(
    engine: TurnEngine,
    events: AsyncIterator[StageEvent],
    listener: Listener,
    playback: Playback,
    watch: Callable[[StageEvent], None] | None = None,
) -> None:
    """The stage's events: endpoint (stops the pacer), reply audio into the sink; each also
    to ``watch`` (an overlay's detection)."""
    rec, key = listener.rec, engine.stage_key
    try:
        async with closing(events) as stream:
            async for ev in stream:
                rec.on_event(key, ev)
                if watch is not None:
                    watch(ev)
                if isinstance(ev, ServerSpeech | EndOfTurn) and not getattr(ev, "started", False):
                    if not listener.provider_eot.is_set():
                        listener.provider_eot.set()
                        engine.milestone(rec, "endpoint", ev.t_ns)
                elif isinstance(ev, Audio) and ev.pcm:
                    if playback.feed(ev):
                        engine.milestone(rec, "first_audio", ev.t_ns)
                        # A server that ends the turn without saying so (Gemini's automatic
                        # activity detection) has ended it by now: the audio stops here.
                        listener.provider_eot.set()
                elif isinstance(ev, Done | Failed):
                    break
    except Exception as exc:
        rec.fail(key, f"{type(exc).__name__}: {exc}")
    finally:
        # Whatever happened, the pacer stops and the sink plays what it has.
        listener.stt_done.set()
        listener.provider_eot.set()
        playback.finish()
