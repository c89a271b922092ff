"""The cascade turn: listen -> endpoint -> STT -> LLM -> chunker -> TTS -> sink.

:class:`CascadeTurnEngine` is the :class:`~voicelat.engine.turn.TurnEngine` shape of a pipeline
with ``[stt]``, ``[llm]`` and ``[tts]`` tables, over a
:class:`~voicelat.engine.stageset.CascadeStageSet`: the :class:`~voicelat.engine.phases.Listener`
feeds the STT and the endpointer in real time; once the transcript is final the
:class:`~voicelat.engine.phases.CascadeReply` streams the LLM into the chunker and the chunker
into TTS while the LLM still runs, and the :class:`~voicelat.engine.phases.Playback` plays the
audio and stamps ``output_first_audible``.

A call (``engine/call.py``) runs the same two halves, :meth:`hear` and :meth:`reply`, with the
call's conversation as the LLM's prompt.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, ClassVar

from voicelat.core.base.plan import PlannedTurn
from voicelat.core.measure.events import StageName
from voicelat.core.measure.recorder import TurnRecorder
from voicelat.engine.phases import CascadeReply, Listener, Playback, cancel_tasks
from voicelat.engine.stageset import CascadeStageSet, StageSet
from voicelat.engine.turn import TurnEngine
from voicelat.engine.turn_input import (
    FRAME_MS,
    NS_PER_MS,
    FrameSource,
    Sink,
    TurnInput,
    with_silence_tail,
)

__all__ = ["CascadeTurnEngine"]


@dataclass
class CascadeTurnEngine(TurnEngine):
    """Runs one cascade turn at a time (see the module docstring)."""

    stage_key: ClassVar[StageName] = "tts"

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
        """Listen (frames from ``source``, a real-time pacer over the input by default),
        endpoint, transcribe, then reply into ``sink`` (see :meth:`reply`)."""
        cascade = CascadeStageSet.expect(stages)
        transcript = await self.hear(inp, rec, cascade, source)
        if transcript is not None:
            await self.reply(planned, rec, transcript, cascade, sink=sink)

    async def hear(
        self,
        inp: TurnInput,
        rec: TurnRecorder,
        stages: CascadeStageSet,
        source: FrameSource | None = None,
    ) -> str | None:
        """The listening half: the transcript, or None with the turn failed."""
        if source is None:
            inp = self._with_room_to_endpoint(inp, rec)
        listener = Listener(self, inp, rec, source)
        stt_task = asyncio.create_task(listener.run_stt(stages.stt))
        warm: asyncio.Task[None] | None = None
        try:
            await listener.listen()
            # Re-warm the next stages' connections while STT finalizes (servers drop idle
            # keep-alive connections after a few seconds; a real agent keeps them warm too).
            warm = asyncio.create_task(self.prepare(rec, stages.llm, stages.tts))
            listener.audio_ended()
            await stt_task
            await warm
        finally:
            await cancel_tasks(stt_task, warm)
        if rec.failed:
            return None
        transcript = rec.transcript()
        if not transcript:
            rec.fail("stt", "empty transcript (no speech recognized)")
            return None
        return transcript

    def _with_room_to_endpoint(self, inp: TurnInput, rec: TurnRecorder) -> TurnInput:
        """A clip whose trailing silence is shorter than the endpointer's hangover would end at
        the end of the file, earlier than any microphone lets a VAD decide (a realtime or an
        agent turn hears silence after the clip, as a phone line carries it): such a clip gets
        the silence the hangover needs, and the turn says so (``endpoint:padded_tail``), so a
        cascade is timed like the other kinds on the same clips (issue #30)."""
        ep = self.pipeline.endpointing
        if ep.mode != "vad" or inp.speech_end_ms is None:
            return inp
        tail_ms = inp.duration_ns // NS_PER_MS - inp.speech_end_ms
        need_ms = ep.hangover_ms + 2 * FRAME_MS
        if tail_ms >= need_ms:
            return inp
        rec.flag("endpoint:padded_tail")
        return with_silence_tail(inp, need_ms - tail_ms + FRAME_MS)

    async def reply(
        self,
        planned: PlannedTurn,
        rec: TurnRecorder,
        prompt: Any,
        stages: CascadeStageSet,
        sink: Sink | None = None,
    ) -> CascadeReply:
        """LLM -> chunker -> TTS -> ``sink`` (a simulated sink by default), all streaming, for
        ``prompt`` (the transcript, or a call's messages). Cancelling it (a timeout, a barge-in)
        cancels its TTS and playback tasks. Returns the reply (its spoken text)."""
        playback = Playback(self, rec, sink if sink is not None else self.default_sink(planned))
        reply = CascadeReply(self, rec, playback)
        tts = asyncio.create_task(reply.run_tts(stages.tts))
        playback.start()
        # Everything from here is inside try/finally: a cancelled reply (turn timeout, barge-in)
        # must not leave its TTS and playback tasks running on the loop.
        try:
            await reply.stream_llm(stages.llm, prompt)
            await tts
            await playback.played()
        finally:
            await cancel_tasks(tts)
            await playback.stop()
        playback.record_figures("tts")
        return reply
