"""One turn through a realtime speech-to-speech model (OpenAI Realtime, Gemini Live).

The turn engine's S2S twin (:class:`S2STurnEngine` is a
:class:`~voicelat.engine.turn.TurnEngine`: same timeout, loop-lag, schedule-lag and observer
handling, same ``run`` signature), so the runner, the load shapes and ``voicelat compare`` run
S2S turns exactly as they run cascade turns. One turn:

1. The pacer sends the fixture's 20 ms frames in real time, then silence (a microphone keeps
   delivering after the user stops), up to :data:`TAIL_MS`.
2. Who ends the user's turn is the stage's ``endpoint_by_server``. True (server VAD): frames
   keep flowing until the server says the speech stopped (``ServerSpeech(started=False)`` or
   ``EndOfTurn``); that event is ``endpoint``. A server that never says (Gemini's automatic
   activity detection) hears silence until its reply's first audio; the turn's endpoint is
   then unobserved (see :class:`~voicelat.core.s2s.S2SRecorder`). False: the pipeline's endpointer (the same one
   as the cascade's ``[endpointing] mode = "vad"``) decides, the audio ends and the stage
   commits (and asks for the response); the endpointer's decision is ``endpoint``.
3. The reply's audio goes into the sink as it arrives (onset found as for TTS audio); the sink
   stamps ``output_first_audible``. The turn ends when the stage reports ``Done`` or ``Failed``
   and the sink has played the reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from typing import ClassVar

from voicelat.core.events import Audio, Done, EndOfTurn, Failed, ServerSpeech, StageName
from voicelat.core.plan import PlannedTurn
from voicelat.core.recorder import TurnRecorder
from voicelat.core.s2s import S2SRecorder
from voicelat.engine.stageset import S2SStageSet, StageSet
from voicelat.engine.turn import (
    FRAME_MS,
    FrameSource,
    Sink,
    TurnEngine,
    TurnInput,
    _Listener,
    _Reply,
)
from voicelat.stages.base import S2SStage

__all__ = ["TAIL_MS", "S2STurnEngine", "with_silence_tail"]

#: How much silence follows a fixture's audio while the server's VAD has not ended the turn.
TAIL_MS = 3000


def with_silence_tail(inp: TurnInput, tail_ms: int = TAIL_MS) -> TurnInput:
    """``inp`` with ``tail_ms`` of silence frames after its audio (same frame size)."""
    frame_bytes = inp.pcm.rate * FRAME_MS // 1000 * 2
    tail = [bytes(frame_bytes)] * (tail_ms // FRAME_MS)
    return dataclasses.replace(inp, frames=[*inp.frames, *tail])


class S2STurnEngine(TurnEngine):
    """Runs one speech-to-speech turn at a time (see the module docstring)."""

    recorder_class: ClassVar[type[TurnRecorder]] = S2SRecorder
    #: The stage name its events and failures are recorded under (an agent's: ``agent``).
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
        if not isinstance(stages, S2SStageSet):
            raise TypeError("an S2S turn needs an S2SStageSet (a pipeline with an [s2s] table)")
        stage = stages.s2s
        if source is None:
            inp = with_silence_tail(inp)
        listener = _Listener(self, inp, rec, source)
        # Our endpointer decides only when the server does not.
        listener.vad_mode = not stage.endpoint_by_server
        reply = _Reply(self, rec, sink if sink is not None else self.default_sink(planned))
        tasks = (
            asyncio.create_task(self._converse(stage, listener, reply)),
            asyncio.create_task(reply.out.play()),
            asyncio.create_task(reply.watch_sink()),
        )
        try:
            await listener.listen()
            if stage.endpoint_by_server and not listener.provider_eot.is_set():
                rec.flag("endpoint:not_detected")
            listener.audio_ended()
            await tasks[0]
            await tasks[1]
        finally:
            for task in tasks:
                if not task.done():
                    task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        out = reply.out
        if out.started_ns is not None and out.first_audible_ns is None and not rec.failed:
            rec.fail(
                self.stage_key, "the reply audio is silent (no sample above the onset threshold)"
            )
        reply.record_figures()

    async def _converse(self, stage: S2SStage, listener: _Listener, reply: _Reply) -> None:
        """The stage's events: endpoint (stops the pacer), reply audio into the sink."""
        rec, out = listener.rec, reply.out
        first_audio = True
        try:
            async for ev in stage.converse(listener._audio()):
                rec.on_event(self.stage_key, ev)
                if isinstance(ev, ServerSpeech | EndOfTurn) and not getattr(ev, "started", False):
                    if not listener.provider_eot.is_set():
                        listener.provider_eot.set()
                        self.milestone(rec, "endpoint", ev.t_ns)
                elif isinstance(ev, Audio) and ev.pcm:
                    if first_audio:
                        first_audio = False
                        self.milestone(rec, "first_audio", ev.t_ns)
                        # A server that ends the turn without saying so (Gemini's automatic
                        # activity detection) has ended it by now: the audio stops here.
                        listener.provider_eot.set()
                    out.feed(ev.pcm, ev.rate, ev.t_ns)
                    found = reply.onset.feed(ev.pcm, ev.rate)
                    if found is not None:
                        rec.set_onset(found)
                elif isinstance(ev, Done | Failed):
                    break
        except Exception as exc:
            rec.fail(self.stage_key, f"{type(exc).__name__}: {exc}")
        finally:
            # Whatever happened, the pacer stops and the sink plays what it has.
            listener.stt_done.set()
            listener.provider_eot.set()
            out.finish()
