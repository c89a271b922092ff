"""The phases a turn is made of, public and small, shared by every turn shape and by calls.

* :class:`Listener`: the user's frames from a :class:`~voicelat.engine.turn_input.FrameSource`
  into the stage that hears them (:meth:`Listener.audio`) and the endpointer, until the endpoint;
  its events say when the endpoint, the provider's end of turn and the STT's end came.
* :class:`Playback`: the reply's audio into a :class:`~voicelat.engine.turn_input.Sink`, the
  onset detector on it, ``output_first_audible`` when the sink plays the first audible sample,
  and the sink's figures.
* :class:`CascadeReply`: the cascade's reply, LLM deltas through the chunker into TTS and a
  :class:`Playback`.

A phase stamps nothing itself but through its turn's context (:class:`TurnContext`: the
engine's clock and observer), so a fake clock moves every milestone alike.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol, TypeVar

from voicelat.audio import (
    Endpoint,
    Endpointer,
    OnsetDetector,
    Pacer,
    SpeechEnd,
    SpeechStart,
    StopPacing,
)
from voicelat.core.measure.chunker import Chunker
from voicelat.core.measure.clock import Clock
from voicelat.core.measure.events import Audio, Delta, Done, EndOfTurn, Failed, Final, StageName
from voicelat.core.measure.recorder import TurnRecorder
from voicelat.engine.probes import LoopLagProbe
from voicelat.engine.turn_input import FRAME_MS, NS_PER_MS, FrameSource, Sink, TurnInput
from voicelat.files.pipeline import Pipeline
from voicelat.stages.base import LLMStage, STTStage, TTSStage

__all__ = ["CascadeReply", "Listener", "Playback", "TurnContext", "cancel_tasks", "closing"]

T = TypeVar("T")


class TurnContext(Protocol):
    """What a phase needs of its turn engine: the settings, the clock, the observer hook."""

    pipeline: Pipeline
    clock: Clock
    spin_ns: int | None
    #: The loop-lag probe, told of the pacer's wake-ups (None: no probe).
    loop_lag: LoopLagProbe | None

    def milestone(self, rec: TurnRecorder, name: str, t_ns: int) -> None: ...


@contextlib.asynccontextmanager
async def closing(stream: AsyncIterator[T]) -> AsyncIterator[AsyncIterator[T]]:
    """``stream``, closed (``aclose()``, when it has one) as the block ends: a stream left at a
    ``break`` is then closed at once, not whenever the generator is collected. A call's next
    turn shares the connection, and a stage stream left open kept reading it (its receiver
    took the next turn's reply)."""
    try:
        yield stream
    finally:
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()


async def cancel_tasks(*tasks: asyncio.Task[Any] | None) -> None:
    """Cancel the unfinished ``tasks`` and wait for them to end (none outlives its turn)."""
    pending = [t for t in tasks if t is not None and not t.done()]
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)


class Listener:
    """One turn's listening phase: frames to the hearing stage and the endpointer.

    ``endpointer_decides``: voicelat's endpointer ends the user's turn (the cascade's
    ``[endpointing] mode = "vad"``, a realtime stage without server VAD); otherwise the stage
    does (``provider_eot``). ``line``: where the frames go instead of the listener's own queue
    (a call's open line, which outlives the turn); :meth:`audio` then yields nothing.
    ``resume``: ``(t0, start)``: the input began at ``t0`` on an earlier turn's line (an
    interruption heard while the reply played) and its frames go on from ``start`` (when the
    first of them was due, minus a frame): ``t0`` and the speech bounds stay the input's own.
    """

    def __init__(
        self,
        ctx: TurnContext,
        inp: TurnInput,
        rec: TurnRecorder,
        source: FrameSource | None,
        *,
        endpointer_decides: bool | None = None,
        line: asyncio.Queue[bytes | None] | None = None,
        resume: tuple[int, int] | None = None,
    ) -> None:
        ep = ctx.pipeline.endpointing
        self.ctx, self.inp, self.rec = ctx, inp, rec
        self.endpointer = Endpointer(
            threshold_dbfs=ep.threshold_dbfs,
            hangover_ms=ep.hangover_ms,
            min_speech_ms=ep.min_speech_ms,
            frame_ms=FRAME_MS,
        )
        self.endpointer_decides = (
            ep.mode == "vad" if endpointer_decides is None else endpointer_decides
        )
        self.endpoint_seen = False
        self.own_line = line is None
        self.line: asyncio.Queue[bytes | None] = asyncio.Queue() if line is None else line
        #: The hearing stage is done (its stream ended or failed): the frames stop.
        self.stt_done = asyncio.Event()
        #: The stage said the user's turn is over (or the turn's stream ended).
        self.provider_eot = asyncio.Event()
        self.pacer: Pacer | None = None
        if source is None:
            probe = ctx.loop_lag
            source = self.pacer = Pacer(
                frame_ms=FRAME_MS, clock=ctx.clock, on_wake=probe.note if probe else None
            )
        self.source: FrameSource = source
        self.resume = resume
        self._now = ctx.clock.now_ns

    async def audio(self) -> AsyncIterator[bytes]:
        """The frames as they are sent, until the listening ends (the hearing stage's input)."""
        while (frame := await self.line.get()) is not None:
            yield frame

    async def run_stt(self, stt: STTStage) -> None:
        """The STT stage's events for this turn, recorded; ``stt_done`` when it ends."""
        rec = self.rec
        try:
            async for ev in stt.transcribe(self.audio()):
                rec.on_event("stt", ev)
                if isinstance(ev, Final):
                    self.ctx.milestone(rec, "stt_final", ev.t_ns)
                if isinstance(ev, EndOfTurn):
                    self.provider_eot.set()
                # A streaming recognizer finalizes long utterances in pieces: a Final is not
                # the end of the turn's transcript. Only a failure stops the audio early.
                if isinstance(ev, Failed):
                    self.stt_done.set()
        except Exception as exc:
            rec.fail("stt", f"{type(exc).__name__}: {exc}")
        finally:
            self.stt_done.set()
            self.provider_eot.set()

    async def listen(self, frames: Sequence[bytes] | None = None) -> None:
        """Play the input's frames (or the source's) into :meth:`send` until it stops."""
        todo = self.inp.frames if frames is None else frames
        if self.pacer is not None:
            start = self.resume[1] if self.resume is not None else None
            await self.pacer.run(todo, self.send, spin_ns=self.ctx.spin_ns, start_ns=start)
        else:
            await self.source.run(todo, self.send)

    def _first_frame(self) -> None:
        t0 = self.source.t0_ns if self.resume is None else self.resume[0]
        assert t0 is not None
        rec, inp = self.rec, self.inp
        rec.t0_ns = t0
        if inp.speech_start_ms is not None:
            rec.mark("speech_start", t0 + inp.speech_start_ms * NS_PER_MS)
        if inp.speech_end_ms is not None:
            rec.mark("speech_end", t0 + inp.speech_end_ms * NS_PER_MS)

    async def send(self, k: int, frame: bytes) -> None:
        """Frame ``k`` went out: to the hearing stage and the endpointer (raises
        :class:`StopPacing` at the endpoint, the provider's end of turn or the STT's end)."""
        if k == 0:
            self._first_frame()
        t = self._now()
        self.line.put_nowait(frame)
        rec, inp = self.rec, self.inp
        for event in self.endpointer.feed(frame, k):
            if isinstance(event, SpeechStart) and inp.speech_start_ms is None:
                # Live input has no annotation: the VAD onset is the speech start.
                rec.mark(
                    "speech_start", self.source.time_of_sample(event.sample_offset, inp.pcm.rate)
                )
            if isinstance(event, SpeechEnd) and inp.speech_end_ms is None:
                # The VAD confirms an offset only at the endpoint: place it where it was.
                rec.mark(
                    "speech_end", self.source.time_of_sample(event.sample_offset, inp.pcm.rate)
                )
            if isinstance(event, Endpoint) and self.endpointer_decides:
                self.endpoint_seen = True
                rec.mark("endpoint", t)
                self.ctx.milestone(rec, "endpoint", t)
                raise StopPacing
        if not self.endpointer_decides and self.provider_eot.is_set():
            raise StopPacing
        if self.stt_done.is_set():
            raise StopPacing

    def audio_ended(self, *, end_line: bool = True) -> None:
        """The frames stopped: end of audio without an endpoint, the STT's end, pacer lag.
        ``end_line``: False keeps the line open (an overlay goes on it during the reply)."""
        rec = self.rec
        if not self.endpoint_seen and self.endpointer_decides:
            t = self._now()
            rec.mark("endpoint", t)
            rec.flag("endpoint:end_of_audio")
        if self.own_line and end_line:
            self.line.put_nowait(None)
        lags = self.source.lags_ns
        if lags:
            lag_max = max(lags)
            rec.figure("pacer_lag_max_ns", lag_max)
            rec.figure("pacer_lag_p50_ns", sorted(lags)[len(lags) // 2])
            if lag_max > self.ctx.pipeline.turn.pacer_lag_limit_ms * NS_PER_MS:
                rec.flag("pacer_lag")


class Playback:
    """One reply's playback: audio into ``out`` (the sink), its onset, its first audible
    sample, and the sink's figures. :meth:`start` runs the sink and the watch as tasks."""

    def __init__(self, ctx: TurnContext, rec: TurnRecorder, out: Sink) -> None:
        self.ctx, self.rec, self.out = ctx, rec, out
        self.onset = OnsetDetector()
        self.first_audio_ns: int | None = None
        #: When the reply's last audio so far arrived (a barge-in's drain ends there).
        self.last_audio_ns: int | None = None
        #: How much reply audio was fed (ns of audio, whatever its rate).
        self.audio_ns = 0
        self.tasks: tuple[asyncio.Task[None], ...] = ()

    def start(self) -> None:
        """Start playing what arrives and watching for its first audible sample."""
        self.tasks = (
            asyncio.create_task(self.out.play()),
            asyncio.create_task(self.watch()),
        )

    def feed(self, ev: Audio) -> bool:
        """Play ``ev``'s audio; True when it is the reply's first audio."""
        first = self.first_audio_ns is None
        if first:
            self.first_audio_ns = ev.t_ns
        self.last_audio_ns = ev.t_ns
        self.out.feed(ev.pcm, ev.rate, ev.t_ns)
        self.audio_ns += len(ev.pcm) // 2 * 1_000_000_000 // ev.rate
        found = self.onset.feed(ev.pcm, ev.rate)
        if found is not None:
            self.rec.set_onset(found)
        return first

    def finish(self) -> None:
        """No more audio: the sink plays what it has and ends."""
        self.out.finish()

    async def played(self) -> None:
        """Wait until the sink has played everything it was fed."""
        if self.tasks:
            await self.tasks[0]

    async def stop(self) -> None:
        """Cancel the sink and the watch if they still run (a timeout, a barge-in)."""
        await cancel_tasks(*self.tasks)

    async def watch(self) -> None:
        """Mark ``output_first_audible`` when the sink says the first audible sample played."""
        await self.out.audible.wait()
        t = self.out.first_audible_ns
        if t is not None:
            self.rec.mark("output_first_audible", t)
            self.ctx.milestone(self.rec, "output_first_audible", t)

    def record_figures(self, silent_stage: StageName) -> None:
        """The sink's figures; a reply that played but was never audible fails
        ``silent_stage``."""
        rec, out = self.rec, self.out
        rec.figure("sink_underruns", out.underruns)
        rec.figure("sink_underrun_total_ns", out.underrun_total_ns)
        # The reply's length as played (every shape; a call's timeline draws it).
        rec.figure("reply_audio_ns", self.audio_ns)
        # Continuity at the ear (docs/NETWORK.md): the longest silence inside the reply, chunks
        # that came after their time to play, and the stream's real-time factor.
        rec.figure("sink_longest_gap_ns", getattr(out, "longest_gap_ns", None))
        rec.figure("sink_late_chunks", getattr(out, "late_chunks", None))
        rec.figure("sink_realtime_factor", getattr(out, "realtime_factor", None))
        if out.started_ns is not None:
            # Where the played audio (``save_audio``) starts on the turn's timeline: sample i of
            # the recording played at playout_started + i / rate (bench/audio_truth.py).
            rec.extra("playout_started_ns", out.started_ns - rec.t0_ns)
        if out.started_ns is not None and out.first_audible_ns is None and not rec.failed:
            rec.fail(
                silent_stage, "the reply audio is silent (no sample above the onset threshold)"
            )


class CascadeReply:
    """The cascade's reply: the LLM's deltas through the chunker into TTS and ``playback``."""

    def __init__(self, ctx: TurnContext, rec: TurnRecorder, playback: Playback) -> None:
        self.ctx, self.rec, self.playback = ctx, rec, playback
        chunking = ctx.pipeline.chunker
        self.chunker = Chunker(chunking.mode, chunking.min_chars)  # type: ignore[arg-type]
        self.text_q: asyncio.Queue[str | None] = asyncio.Queue()
        self.first_speakable = True
        #: The speakable text handed to TTS, in order (a call's history keeps the reply).
        self.spoken: list[str] = []

    async def _text(self) -> AsyncIterator[str]:
        while (piece := await self.text_q.get()) is not None:
            yield piece

    async def run_tts(self, tts: TTSStage) -> None:
        """The TTS stage's audio into the playback as it arrives."""
        rec, playback = self.rec, self.playback
        try:
            async with closing(tts.synthesize(self._text())) as stream:
                async for ev in stream:
                    rec.on_event("tts", ev)
                    if isinstance(ev, Audio) and ev.pcm:
                        if playback.feed(ev):
                            self.ctx.milestone(rec, "tts_first_byte", ev.t_ns)
                    elif isinstance(ev, Failed):
                        break
        except Exception as exc:
            rec.fail("tts", f"{type(exc).__name__}: {exc}")
        finally:
            playback.finish()

    def _speak(self, piece: str) -> None:
        if self.first_speakable:
            self.first_speakable = False
            t = self.ctx.clock.now_ns()
            self.rec.mark("llm_first_speakable", t)
            self.ctx.milestone(self.rec, "llm_first_speakable", t)
        self.spoken.append(piece)
        self.text_q.put_nowait(piece)

    async def stream_llm(self, llm: LLMStage, prompt: Any) -> None:
        """The LLM's reply to ``prompt`` (a transcript, or a call's messages) into the
        chunker, each speakable piece to TTS as it is complete; then the end of the text."""
        rec = self.rec
        first_token = True
        try:
            async with closing(llm.complete(prompt)) as stream:
                async for ev in stream:
                    rec.on_event("llm", ev)
                    if isinstance(ev, Delta) and ev.content:
                        if first_token:
                            first_token = False
                            self.ctx.milestone(rec, "llm_first_token", ev.t_ns)
                        for piece in self.chunker.feed(ev.content):
                            self._speak(piece)
                    elif isinstance(ev, Done | Failed):
                        break
        except Exception as exc:
            rec.fail("llm", f"{type(exc).__name__}: {exc}")
        if not rec.failed:
            for piece in self.chunker.flush():
                self._speak(piece)
            if self.first_speakable:
                rec.fail("llm", "empty reply: the model produced no speakable text")
        self.text_q.put_nowait(None)
