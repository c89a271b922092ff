"""The turn engine: runs ONE turn, listen -> endpoint -> STT -> LLM -> chunker -> TTS -> sink.

Given the pipeline's turn settings, a :class:`~voicelat.engine.stageset.StageSet` the caller
has entered, a prepared :class:`TurnInput`, an optional :class:`FrameSource` (default: a
real-time :class:`~voicelat.audio.Pacer` over the input's frames) and :class:`Sink` (default: a
:class:`~voicelat.audio.SimulatedSink`), it streams the turn and returns the finished
:class:`~voicelat.core.turn.Turn`. The fixture runner, the load shapes, live sessions and
``voicelat compare`` all run their turns through it.

Every stamp goes through the engine's clock (``TurnEngine.clock``), which also drives the
pacer, the simulated sink and, through ``StageSet.use_clock``, the stages: a fake or offset
clock moves every milestone of the turn alike. A stamp stays the first statement after the
``await`` that delivered the data.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from voicelat.audio import (
    PCM,
    Endpoint,
    Endpointer,
    OnsetDetector,
    Pacer,
    SimulatedSink,
    SpeechEnd,
    SpeechStart,
    StopPacing,
    first_audible_sample,
    frames,
    load_for_stage,
)
from voicelat.audio.fixture_check import check_fixture_audio
from voicelat.core.chunker import Chunker
from voicelat.core.clock import Clock, MonotonicClock
from voicelat.core.events import Audio, Delta, Done, EndOfTurn, Failed, Final
from voicelat.core.plan import PlannedTurn
from voicelat.core.recorder import TurnRecorder
from voicelat.core.schedule import schedule_lag_ns
from voicelat.core.turn import Turn
from voicelat.engine.probes import LoopLagProbe
from voicelat.engine.progress import NullObserver, Observer
from voicelat.engine.stageset import StageSet
from voicelat.files.fixtures import Fixture
from voicelat.files.pipeline import Pipeline
from voicelat.stages.base import LLMStage, STTStage, TTSStage

FRAME_MS = 20
NS_PER_MS = 1_000_000


class FrameSource(Protocol):
    """Where a turn's input frames come from: the :class:`~voicelat.audio.Pacer` replaying a
    fixture in real time (the default), or a live microphone (``voicelat.engine.live``).

    ``run`` calls ``send(k, frame)`` for frame ``k`` of the turn as it becomes available and
    stops early when ``send`` raises :class:`~voicelat.audio.StopPacing`. ``t0_ns`` is the
    clock time of the turn's first sample (known before ``send(0, ...)``), ``time_of_sample``
    places a sample of the turn on the clock, ``lags_ns`` are the per-frame delivery lags.
    """

    t0_ns: int | None

    async def run(
        self, frames: Sequence[bytes], send: Callable[[int, bytes], Awaitable[None]]
    ) -> int: ...

    def time_of_sample(self, sample_index: int, rate: int) -> int: ...

    @property
    def lags_ns(self) -> list[int]: ...


class Sink(Protocol):
    """Where a reply plays: :class:`~voicelat.audio.SimulatedSink` (the default) or a real
    output device (``voicelat.audio.device.DeviceSink``). Times are on the measuring clock."""

    audible: asyncio.Event
    first_audible_ns: int | None
    started_ns: int | None
    underruns: int
    underrun_total_ns: int

    def feed(self, pcm_bytes: bytes, rate: int, arrival_ns: int) -> None: ...

    def finish(self) -> None: ...

    def cancel(self) -> None: ...

    async def play(self) -> None: ...


@dataclass(frozen=True)
class TurnInput:
    """A turn's prepared input: the fixture, its audio at the STT rate cut into 20 ms frames,
    and where its speech starts and ends (ms from the first sample; None: the VAD finds it)."""

    fixture: Fixture
    pcm: PCM
    frames: Sequence[bytes]
    speech_start_ms: int | None
    speech_end_ms: int | None

    @classmethod
    def from_fixture(cls, fixture: Fixture, rate: int) -> TurnInput:
        """Read and resample ``fixture`` for an STT taking ``rate`` Hz (before any timing)."""
        pcm = load_for_stage(fixture.path, rate)
        check_fixture_audio(fixture, pcm)
        start, end = fixture.speech_start_ms, fixture.speech_end_ms
        if start is None or end is None:
            # Not annotated: the first and last audible samples stand in for ground truth.
            first = first_audible_sample(pcm)
            start = None if first is None else first * 1000 // pcm.rate
            end = _last_audible_ms(pcm)
        return cls(fixture, pcm, frames(pcm, FRAME_MS), start, end)

    @classmethod
    def live(cls, fixture_id: str, rate: int) -> TurnInput:
        """An input with no audio of its own: its frames come from a :class:`FrameSource`,
        its speech bounds from the turn's VAD."""
        fixture = Fixture(fixture_id, Path(), None, None, None, "", annotated=False)
        return cls(fixture, PCM(b"", rate), [], None, None)

    @property
    def duration_ns(self) -> int:
        """The length of the input audio."""
        return self.pcm.n_samples * 1_000_000_000 // self.pcm.rate


@dataclass
class TurnEngine:
    """Runs one turn at a time on the measuring loop (see the module docstring).

    ``pipeline`` gives the turn settings (endpointing, chunker, output, timeouts); ``out_dir``
    is where ``output.save_audio`` records replies; ``spin_ns`` is how close to a frame's due
    time the default pacer busy-waits (None: its default, 1 ms; 0: no busy-wait, the runner's
    default unless the pipeline sets ``[turn] busy_wait``).
    """

    pipeline: Pipeline
    clock: Clock = field(default_factory=MonotonicClock)
    observer: Observer = field(default_factory=NullObserver)
    loop_lag: LoopLagProbe | None = None
    out_dir: Path | None = None
    spin_ns: int | None = None
    #: What records a turn: the cascade's recorder here, the S2S one in ``S2STurnEngine``.
    recorder_class: ClassVar[type[TurnRecorder]] = TurnRecorder

    # -- a whole fixture turn ------------------------------------------------------------------
    async def run(
        self,
        planned: PlannedTurn,
        stages: StageSet,
        inp: TurnInput,
        *,
        intended_ns: int | None = None,
        session: int | None = None,
        source: FrameSource | None = None,
        sink: Sink | None = None,
    ) -> Turn:
        """One turn under the pipeline's timeout, from ``source`` into ``sink`` (see
        :meth:`body`). ``intended_ns``: when it was meant to start (an open-loop arrival); by
        default now, i.e. the moment its session was free (a closed loop). The actual start is
        the first sample of its input audio (``t0_ns``); the difference is its schedule lag."""
        intended = self.clock.now_ns() if intended_ns is None else intended_ns
        rec = self.recorder(planned, expected=inp.fixture.text)
        await self.prepare(rec, stages.stt)
        turn_start = self.clock.now_ns()
        try:
            async with asyncio.timeout(self.pipeline.turn.timeout_s):
                await self.body(planned, inp, rec, stages, source=source, sink=sink)
        except TimeoutError:
            self.fail_timed_out(rec)
        except Exception as exc:
            rec.fail("runner", f"{type(exc).__name__}: {exc}")
        self.record_loop_lag(rec, turn_start)
        if rec.t0_ns:  # 0 until the first frame went out: a turn that never started has no lag
            rec.figure("intended_start_ns", intended)
            rec.figure("schedule_lag_ns", schedule_lag_ns(intended, rec.t0_ns))
        if session is not None:
            rec.extra("session", session)
        return rec.finish()

    # -- the pieces a caller with its own control flow (live sessions) composes ---------------
    def recorder(self, planned: PlannedTurn, *, expected: str | None = None) -> TurnRecorder:
        """A recorder for ``planned`` (``t0_ns`` is set when its first frame goes out)."""
        return self.recorder_class(
            index=planned.index,
            fixture=planned.fixture,
            t0_ns=0,
            repeat=planned.repeat,
            warmup=planned.warmup,
            expected=expected,
            wall_time_ns=time.time_ns(),  # a label, never a duration
        )

    async def prepare(self, rec: TurnRecorder, *stages: STTStage | LLMStage | TTSStage) -> None:
        """Re-warm ``stages``' connections; a failure is flagged (it shows again in the turn)."""
        for stage in stages:
            try:
                await stage.prepare()
            except Exception as exc:
                rec.flag(f"prepare_failed:{type(exc).__name__}")

    def fail_timed_out(self, rec: TurnRecorder) -> None:
        """Fail ``rec`` for running past the pipeline's turn timeout."""
        last = list(rec.milestones())[-1:] or ["start"]
        timeout = self.pipeline.turn.timeout_s
        rec.fail("turn", f"timed out after {timeout:g} s (last milestone: {last[0]})")

    def record_loop_lag(self, rec: TurnRecorder, since_ns: int) -> None:
        """The worst loop lag the probe saw from ``since_ns`` to now, as ``loop_lag_max_ns``."""
        worst = None
        if self.loop_lag is not None:
            worst = self.loop_lag.max_between(since_ns, self.clock.now_ns())
        rec.figure("loop_lag_max_ns", worst)

    def milestone(self, rec: TurnRecorder, name: str, t_ns: int) -> None:
        """Tell the observer that ``rec`` reached ``name`` at clock time ``t_ns``."""
        self.observer.milestone(rec.index, name, t_ns - rec.t0_ns)

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
        """Listen (frames from ``source``, a real-time :class:`Pacer` over the input by
        default), endpoint, transcribe, then reply into ``sink`` (see :meth:`reply`)."""
        listener = _Listener(self, inp, rec, source)
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
            # Cancelled mid-turn (a signal, the turn timeout): the STT task must not outlive
            # the turn. Left behind, it waited for audio nobody would send, and the loop's
            # shutdown hung on it (tests/cli/test_signals_stack.py).
            await _cancel_tasks(stt_task, warm)
        if rec.failed:
            return
        transcript = rec.transcript()
        if not transcript:
            rec.fail("stt", "empty transcript (no speech recognized)")
            return
        await self.reply(planned, rec, transcript, stages, sink=sink)

    async def reply(
        self,
        planned: PlannedTurn,
        rec: TurnRecorder,
        transcript: str,
        stages: StageSet,
        sink: Sink | None = None,
    ) -> None:
        """LLM -> chunker -> TTS -> ``sink`` (a :class:`SimulatedSink` by default), all
        streaming; marks ``output_first_audible`` when the sink says the first audible sample
        played. Cancelling it (a timeout, a barge-in) cancels its TTS and playback tasks."""
        reply = _Reply(self, rec, sink if sink is not None else self.default_sink(planned))
        tasks = (
            asyncio.create_task(reply.run_tts(stages.tts)),
            asyncio.create_task(reply.out.play()),
            asyncio.create_task(reply.watch_sink()),
        )
        # Everything from here is inside try/finally: a cancelled reply (turn timeout, barge-in)
        # must not leave its TTS and playback tasks running on the loop.
        try:
            await reply.stream_llm(stages.llm, transcript)
            await tasks[0]
            await tasks[1]
        finally:
            for task in tasks:
                if not task.done():
                    task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        reply.record_figures()

    def default_sink(self, planned: PlannedTurn) -> SimulatedSink:
        """The simulated speaker of a fixture turn (recording to ``out_dir`` with save_audio)."""
        record_path = None
        if self.pipeline.output.save_audio and self.out_dir is not None:
            record_path = self.out_dir / "audio" / f"turn-{planned.index:04d}-{planned.fixture}.wav"
            record_path.parent.mkdir(parents=True, exist_ok=True)
        return SimulatedSink(
            output_latency_ms=self.pipeline.output.latency_ms,
            record_path=record_path,
            clock=self.clock,
        )


async def _cancel_tasks(*tasks: asyncio.Task[Any] | None) -> None:
    """Cancel the unfinished ``tasks`` and wait for them to end."""
    pending = [t for t in tasks if t is not None and not t.done()]
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)


class _Listener:
    """One turn's listening phase: frames to STT and the endpointer, until the endpoint."""

    def __init__(
        self, engine: TurnEngine, inp: TurnInput, rec: TurnRecorder, source: FrameSource | None
    ) -> None:
        ep = engine.pipeline.endpointing
        self.engine, self.inp, self.rec = engine, inp, rec
        self.endpointer = Endpointer(
            threshold_dbfs=ep.threshold_dbfs,
            hangover_ms=ep.hangover_ms,
            min_speech_ms=ep.min_speech_ms,
            frame_ms=FRAME_MS,
        )
        self.vad_mode = ep.mode == "vad"
        self.endpoint_seen = False
        self.audio_q: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.stt_done = asyncio.Event()
        self.provider_eot = asyncio.Event()
        self.pacer: Pacer | None = None
        if source is None:
            source = self.pacer = Pacer(frame_ms=FRAME_MS, clock=engine.clock)
        self.source: FrameSource = source
        self._now = engine.clock.now_ns

    async def _audio(self) -> AsyncIterator[bytes]:
        while (frame := await self.audio_q.get()) is not None:
            yield frame

    async def run_stt(self, stt: STTStage) -> None:
        rec = self.rec
        try:
            async for ev in stt.transcribe(self._audio()):
                rec.on_event("stt", ev)
                if isinstance(ev, Final):
                    self.engine.milestone(rec, "stt_final", ev.t_ns)
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

    async def listen(self) -> None:
        """Play the input's frames (or the source's) into :meth:`send` until it stops."""
        if self.pacer is not None:
            await self.pacer.run(self.inp.frames, self.send, spin_ns=self.engine.spin_ns)
        else:
            await self.source.run(self.inp.frames, self.send)

    def _first_frame(self) -> None:
        t0 = self.source.t0_ns
        assert t0 is not None
        rec, inp = self.rec, self.inp
        rec.t0_ns = t0
        if inp.speech_start_ms is not None:
            rec.mark("speech_start", t0 + inp.speech_start_ms * NS_PER_MS)
        if inp.speech_end_ms is not None:
            rec.mark("speech_end", t0 + inp.speech_end_ms * NS_PER_MS)

    async def send(self, k: int, frame: bytes) -> None:
        if k == 0:
            self._first_frame()
        t = self._now()
        self.audio_q.put_nowait(frame)
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
            if isinstance(event, Endpoint) and self.vad_mode:
                self.endpoint_seen = True
                rec.mark("endpoint", t)
                self.engine.milestone(rec, "endpoint", t)
                raise StopPacing
        if not self.vad_mode and self.provider_eot.is_set():
            raise StopPacing
        if self.stt_done.is_set():
            raise StopPacing

    def audio_ended(self) -> None:
        """The frames stopped: end of audio without an endpoint, the STT's end, pacer lag."""
        rec = self.rec
        if not self.endpoint_seen and self.vad_mode:
            t = self._now()
            rec.mark("endpoint", t)
            rec.flag("endpoint:end_of_audio")
        self.audio_q.put_nowait(None)
        lags = self.source.lags_ns
        if lags:
            lag_max = max(lags)
            rec.figure("pacer_lag_max_ns", lag_max)
            rec.figure("pacer_lag_p50_ns", sorted(lags)[len(lags) // 2])
            if lag_max > self.engine.pipeline.turn.pacer_lag_limit_ms * NS_PER_MS:
                rec.flag("pacer_lag")


class _Reply:
    """One turn's reply phase: the LLM's deltas through the chunker into TTS and the sink."""

    def __init__(self, engine: TurnEngine, rec: TurnRecorder, out: Sink) -> None:
        self.engine, self.rec, self.out = engine, rec, out
        chunking = engine.pipeline.chunker
        self.chunker = Chunker(chunking.mode, chunking.min_chars)  # type: ignore[arg-type]
        self.text_q: asyncio.Queue[str | None] = asyncio.Queue()
        self.onset = OnsetDetector()
        self.first_speakable = True

    async def _text(self) -> AsyncIterator[str]:
        while (piece := await self.text_q.get()) is not None:
            yield piece

    async def run_tts(self, tts: TTSStage) -> None:
        rec, out = self.rec, self.out
        first = True
        try:
            async for ev in tts.synthesize(self._text()):
                rec.on_event("tts", ev)
                if isinstance(ev, Audio) and ev.pcm:
                    if first:
                        first = False
                        self.engine.milestone(rec, "tts_first_byte", ev.t_ns)
                    out.feed(ev.pcm, ev.rate, ev.t_ns)
                    found = self.onset.feed(ev.pcm, ev.rate)
                    if found is not None:
                        rec.set_onset(found)
                elif isinstance(ev, Failed):
                    break
        except Exception as exc:
            rec.fail("tts", f"{type(exc).__name__}: {exc}")
        finally:
            out.finish()

    async def watch_sink(self) -> None:
        await self.out.audible.wait()
        t = self.out.first_audible_ns
        if t is not None:
            self.rec.mark("output_first_audible", t)
            self.engine.milestone(self.rec, "output_first_audible", t)

    def _speak(self, piece: str) -> None:
        if self.first_speakable:
            self.first_speakable = False
            t = self.engine.clock.now_ns()
            self.rec.mark("llm_first_speakable", t)
            self.engine.milestone(self.rec, "llm_first_speakable", t)
        self.text_q.put_nowait(piece)

    async def stream_llm(self, llm: LLMStage, transcript: str) -> None:
        """The LLM's reply into the chunker, each speakable piece to TTS as it is complete;
        then the end of the text (the TTS task finishes the stream)."""
        rec = self.rec
        first_token = True
        try:
            async for ev in llm.complete(transcript):
                rec.on_event("llm", ev)
                if isinstance(ev, Delta) and ev.content:
                    if first_token:
                        first_token = False
                        self.engine.milestone(rec, "llm_first_token", ev.t_ns)
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

    def record_figures(self) -> None:
        rec, out = self.rec, self.out
        rec.figure("sink_underruns", out.underruns)
        rec.figure("sink_underrun_total_ns", out.underrun_total_ns)
        if out.started_ns is not None:
            # Where the played audio (``save_audio``) starts on the turn's timeline: sample i of
            # the recording played at playout_started + i / rate (bench/audio_truth.py).
            rec.extra("playout_started_ns", out.started_ns - rec.t0_ns)
        if out.started_ns is not None and out.first_audible_ns is None and not rec.failed:
            rec.fail("tts", "the reply audio is silent (no sample above the onset threshold)")


def _last_audible_ms(pcm: PCM) -> int | None:
    reversed_pcm = PCM(pcm.to_array()[::-1].tobytes(), pcm.rate)
    idx = first_audible_sample(reversed_pcm)
    if idx is None:
        return None
    return (pcm.n_samples - idx) * 1000 // pcm.rate


__all__ = ["FRAME_MS", "FrameSource", "Sink", "TurnEngine", "TurnInput"]
