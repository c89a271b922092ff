"""The live session: the user talks into a microphone, hears the reply, every turn measured.

Data flow (one event loop, the measuring one)::

    capture callback ──► handoff ──► pump: resample, 20 ms frames ──► Segmenter
                                                                          │
           StartTurn (VAD onset / push-to-talk press, with the frames before it)
                                                                          ▼
    TurnEngine.measure(source=LiveSource, sink=DeviceSink): the same listening, endpointing,
    STT, LLM -> chunker -> TTS and playout code as ``voicelat run``, fed live frames
                                                                          │
                       turn written to turns.jsonl (and, with --record, a replayable fixture)

A turn starts when the :class:`Segmenter`'s VAD hears speech (or the push-to-talk key is
pressed); its frames from a little before the onset (the pre-roll) on go to the turn, whose
own VAD finds ``speech_start``, ``speech_end`` and the ``endpoint`` exactly as in a fixture
run. From the endpoint on the segmenter listens again: speech while the turn is still being
answered is a barge-in, which stops playback, flags the turn ``interrupted`` (kept out of the
headline numbers) and starts the next turn. With push-to-talk the key toggles talking: the
press starts a turn, the second press ends its input (the ``endpoint``); ``speech_end`` is
the VAD's offset before it.

Stopping (``q``, the ``--turns`` count, or a device error) keeps every finished turn, writes
the summary and closes the devices; a turn still in flight is discarded, as in ``voicelat run``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Protocol

from voicelat.audio import PCM, Endpointer, SimulatedSink, SpeechEnd, SpeechStart, StopPacing
from voicelat.audio.device import LiveFrame
from voicelat.audio.frames import frame_samples
from voicelat.audio.wav import write_wav
from voicelat.core.base.errors import AudioError
from voicelat.core.base.plan import PlannedTurn
from voicelat.core.base.turn import INTERRUPTED, Turn
from voicelat.core.measure.clock import Clock, MonotonicClock
from voicelat.core.measure.recorder import TurnRecorder
from voicelat.engine.overlay import played_ms
from voicelat.engine.probes import frozen_gc
from voicelat.engine.progress import NullObserver, Observer
from voicelat.engine.runner import Runner
from voicelat.engine.stageset import StageSet
from voicelat.engine.turn import FRAME_MS, Sink, TurnEngine, TurnInput
from voicelat.files.fixtures import Fixture, fixture_set_hash
from voicelat.files.pipeline import Endpointing, Pipeline
from voicelat.files.results import TurnsWriter, write_summary

NS_PER_S = 1_000_000_000
NS_PER_MS = 1_000_000

#: Audio kept from before the onset the segmenter detected: the turn's own VAD must see the
#: onset from silence to place ``speech_start`` where it was.
PREROLL_MS = 300
#: With push-to-talk people start talking as they press: keep this much from before the press.
PTT_PREROLL_MS = 200
#: A recorded fixture keeps this much audio after the endpoint, so a replay has silence to end on.
RECORD_TAIL_MS = 500
#: Frames the segmenter remembers (the longest pre-roll it can hand over).
RING_MS = 3000
#: Push-to-talk turns never end on silence: the key ends them.
_NEVER_MS = 10**9


# -- what the session needs from the devices (the real ones are in voicelat.audio.device) ----------
class FrameInput(Protocol):
    """Live input: 20 ms frames at the STT rate, in order, placed on the measuring clock."""

    rate: int

    @property
    def latency_ns(self) -> int:
        """The input latency the device reports (ns)."""
        ...

    @property
    def overflows(self) -> int:
        """Blocks that came after lost samples, so far."""
        ...

    def start(self) -> None:
        """Start capturing (on the loop that will call :meth:`read`)."""

    async def read(self) -> list[LiveFrame]:
        """The next frames (waits for at least one block); raises ``AudioError`` when the
        device stopped or misbehaves."""
        ...

    def close(self) -> None:
        """Stop capturing; never raises."""

    def describe(self) -> dict[str, Any]:
        """Device, rates, latency: for the summary."""
        ...


class ReplyOutput(Protocol):
    """Where replies play: one sink per turn."""

    @property
    def latency_ns(self) -> int | None:
        """The output latency the device reports (ns), once its stream is open."""
        ...

    @property
    def error(self) -> str | None:
        """Why the device stopped on its own (unplugged), if it did."""
        ...

    def validate(self) -> None:
        """Raise ``AudioError`` now if the output cannot work at all."""

    def new_sink(self, record_path: Path | None) -> Sink:
        """A sink for one reply (created on the measuring loop)."""
        ...

    def close(self) -> None:
        """Stop playing; never raises."""

    def describe(self) -> dict[str, Any]:
        """Device, rate, latency: for the summary."""
        ...


class DeviceInput:
    """:class:`~voicelat.audio.device.InputDevice` + frames at the STT rate."""

    def __init__(self, device: Any, stt_rate: int) -> None:
        from voicelat.audio.device import FrameAssembler

        self.device = device
        self.rate = stt_rate
        self._assembler = FrameAssembler(device.rate, stt_rate, FRAME_MS)

    @property
    def latency_ns(self) -> int:
        return int(self.device.latency_ns)

    @property
    def overflows(self) -> int:
        return self._assembler.overflows

    def start(self) -> None:
        self.device.start()

    async def read(self) -> list[LiveFrame]:
        return self._assembler.push(await self.device.read())

    def close(self) -> None:
        self.device.close()

    def describe(self) -> dict[str, Any]:
        return {
            "device": self.device.info.to_json(),
            "capture_rate": self.device.rate,
            "stt_rate": self.rate,
            "input_latency_ns": self.device.latency_ns,
        }


class DeviceOutput:
    """:class:`~voicelat.audio.device.OutputDevice`, one :class:`DeviceSink` per reply."""

    def __init__(self, device: Any) -> None:
        self.device = device

    @property
    def latency_ns(self) -> int | None:
        return int(self.device.latency_ns) if self.device.rate is not None else None

    @property
    def error(self) -> str | None:
        return self.device.error  # type: ignore[no-any-return]

    def validate(self) -> None:
        self.device.validate()

    def new_sink(self, record_path: Path | None) -> Sink:
        from voicelat.audio.device import DeviceSink

        return DeviceSink(self.device, record_path=record_path)

    def close(self) -> None:
        self.device.close()

    def describe(self) -> dict[str, Any]:
        return {
            "device": self.device.info.to_json(),
            "playback_rate": self.device.rate,
            "resampled": self.device.resampling,
            "output_latency_ns": self.latency_ns,
        }


class SimulatedOutput:
    """Replies into :class:`~voicelat.audio.SimulatedSink` (tests; no speaker needed)."""

    error: str | None = None

    def __init__(self, latency_ms: float = 0, clock: Clock | None = None) -> None:
        self.latency_ms = latency_ms
        self.clock = clock
        self.latency_ns: int | None = round(latency_ms * NS_PER_MS)
        self.sinks: list[SimulatedSink] = []

    def validate(self) -> None:
        return None

    def new_sink(self, record_path: Path | None) -> Sink:
        sink = SimulatedSink(
            output_latency_ms=self.latency_ms, record_path=record_path, clock=self.clock
        )
        self.sinks.append(sink)
        return sink

    def close(self) -> None:
        for sink in self.sinks:
            if sink.ended_ns is None:  # still playing
                sink.cancel()

    def describe(self) -> dict[str, Any]:
        return {"device": "simulated", "output_latency_ns": self.latency_ns}


# -- segmentation (sans-I/O) --------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class StartTurn:
    """Start turn ``turn_id`` with these frames (pre-roll up to the current frame; never
    empty: the segmenter waits for a frame); ``barge_in``: the user talked over the turn
    before it, which must stop now."""

    turn_id: int
    frames: tuple[LiveFrame, ...]
    barge_in: bool


@dataclass(frozen=True, slots=True)
class ToTurn:
    """This frame belongs to the listening turn."""

    turn_id: int
    frame: LiveFrame


@dataclass(frozen=True, slots=True)
class EndInput:
    """Push-to-talk: the user's input for turn ``turn_id`` ends here (the endpoint)."""

    turn_id: int


Action = StartTurn | ToTurn | EndInput
State = Literal["idle", "listening", "replying"]


class Segmenter:
    """Decides, frame by frame, when a live turn starts, where its frames go, and barge-in.

    Sans-I/O: it reads no clock and awaits nothing; frames and key presses go in, actions
    come out. States: ``idle`` (waiting for the user), ``listening`` (frames go to the turn,
    whose own VAD endpoints it), ``replying`` (the turn is being answered; speech, or a
    push-to-talk press, is a barge-in). The session reports :meth:`heard` (the turn's input
    ended) and :meth:`replied` (the turn is over); stale reports of an earlier turn are ignored.
    """

    def __init__(
        self,
        endpointing: Endpointing,
        *,
        ptt: bool = False,
        barge_in: bool = True,
        preroll_ms: int | None = None,
        frame_ms: int = FRAME_MS,
    ) -> None:
        self.ptt = ptt
        self.barge_in = barge_in
        self.frame_ms = frame_ms
        default_preroll = PTT_PREROLL_MS if ptt else PREROLL_MS
        self.preroll_frames = max(0, (preroll_ms or default_preroll) // frame_ms)
        self._vad = Endpointer(
            threshold_dbfs=endpointing.threshold_dbfs,
            hangover_ms=endpointing.hangover_ms,
            min_speech_ms=endpointing.min_speech_ms,
            frame_ms=frame_ms,
        )
        self._ring: deque[LiveFrame] = deque(
            maxlen=max(RING_MS // frame_ms, self.preroll_frames + 1)
        )
        self.state: State = "idle"
        self.turn_id = 0
        # A press before the microphone delivered its first frame: the turn starts with it.
        self._pressed_early = False

    def feed(self, frame: LiveFrame) -> list[Action]:
        """One captured frame."""
        self._ring.append(frame)
        if self._pressed_early:
            self._pressed_early = False
            return [self._start([frame])]
        if self.state == "listening":
            return [ToTurn(self.turn_id, frame)]
        if self.ptt or (self.state == "replying" and not self.barge_in):
            # Push-to-talk turns start on the key; half-duplex ignores speech over a reply.
            return []
        for event in self._vad.feed(frame.pcm, frame.index):
            if isinstance(event, SpeechStart):
                first = event.frame_index - self.preroll_frames
                return [self._start([f for f in self._ring if f.index >= first])]
        return []

    def press(self) -> list[Action]:
        """The push-to-talk key: starts talking, or ends the input of the turn listening."""
        if self.state == "listening":
            return [EndInput(self.turn_id)]
        if not self._ring:
            # No frame captured yet (a key pressed as the device opens, or a loaded machine):
            # a turn cannot start without audio, and starting none would leave the state
            # "listening" for a turn nobody runs, so the next press would end nothing. The
            # press is kept for the first frame; a second press before it takes it back.
            self._pressed_early = not self._pressed_early
            return []
        frames = list(self._ring)[-(self.preroll_frames + 1) :]
        return [self._start(frames)]

    def _start(self, frames: list[LiveFrame]) -> StartTurn:
        barge = self.state == "replying"
        self.turn_id += 1
        self.state = "listening"
        return StartTurn(self.turn_id, tuple(frames), barge)

    def heard(self, turn_id: int) -> None:
        """Turn ``turn_id`` has stopped listening (endpoint, key, failure)."""
        if turn_id == self.turn_id and self.state == "listening":
            self.state = "replying"
            # Its frames went to the turn, not here: start the watch afresh.
            self._vad.reset()

    def replied(self, turn_id: int) -> None:
        """Turn ``turn_id`` is over (answered, failed, or timed out)."""
        if turn_id == self.turn_id and self.state != "idle":
            if self.state == "listening" or not self.barge_in:
                # The VAD saw none of the frames since: do not resume on stale state.
                self._vad.reset()
            self.state = "idle"


# -- a turn's frames, as the runner's frame source ------------------------------------------------
class LiveSource:
    """The :class:`~voicelat.engine.runner.FrameSource` of one live turn: the pre-roll at once, then
    each frame as it is captured, until the runner's endpointer stops it (or :meth:`end`)."""

    def __init__(
        self,
        preroll: Sequence[LiveFrame],
        rate: int,
        *,
        on_end: Callable[[], None] = lambda: None,
        on_release: Callable[[int], None] | None = None,
        tracker: Endpointer | None = None,
        clock: Clock | None = None,
    ) -> None:
        if not preroll:
            raise ValueError("a live turn needs at least one frame")
        self.clock: Clock = clock if clock is not None else MonotonicClock()
        self.rate = rate
        self.fs = frame_samples(rate, FRAME_MS)
        self.t0_ns: int | None = preroll[0].t_ns
        self.frames: list[LiveFrame] = []
        self.listening = True
        self._preroll = list(preroll)
        self._q: asyncio.Queue[LiveFrame | int] = asyncio.Queue()
        self._lags: list[int] = []
        self._on_end = on_end
        self._on_release = on_release
        #: Push-to-talk: a VAD over the turn's frames that places ``speech_end``.
        self.tracker = tracker
        self.speech_ends: list[SpeechEnd] = []

    def push(self, frame: LiveFrame) -> None:
        """A captured frame for this turn."""
        self._q.put_nowait(frame)

    def end(self, t_ns: int) -> None:
        """No more frames (push-to-talk release at ``t_ns``, or shutdown)."""
        self._q.put_nowait(t_ns)

    async def run(
        self, frames: Sequence[bytes], send: Callable[[int, bytes], Awaitable[None]]
    ) -> int:
        """Send the turn's frames to ``send``; ``frames`` (the fixture's) is unused."""
        k = 0
        now_ns = self.clock.now_ns
        try:
            for f in self._preroll:
                await self._send(k, f, send)
                k += 1
            while True:
                item = await self._q.get()
                t = now_ns()
                if isinstance(item, int):
                    if self._on_release is not None:
                        self._on_release(item)
                    break
                # Capture callback -> this send: what the loop adds to the audio's arrival.
                self._lags.append(t - item.arrived_ns)
                await self._send(k, item, send)
                k += 1
        except StopPacing:
            pass
        finally:
            self.listening = False
            self._on_end()
        return k

    async def _send(
        self, k: int, frame: LiveFrame, send: Callable[[int, bytes], Awaitable[None]]
    ) -> None:
        self.frames.append(frame)
        if self.tracker is not None:
            self.speech_ends += [
                e for e in self.tracker.feed(frame.pcm, k) if isinstance(e, SpeechEnd)
            ]
        await send(k, frame.pcm)

    def time_of_sample(self, sample_index: int, rate: int) -> int:
        """Clock time of sample ``sample_index`` of the turn (counted from its first frame)."""
        if not self.frames:
            raise RuntimeError("the live source has sent no frame yet")
        k = min(max(0, sample_index // self.fs), len(self.frames) - 1)
        return self.frames[k].t_ns + (sample_index - k * self.fs) * NS_PER_S // rate

    def speech_end_ns(self) -> int | None:
        """Push-to-talk: where the VAD last heard speech end (None when it heard none)."""
        if self.tracker is None:
            return None
        ends = self.speech_ends + [e for e in self.tracker.flush() if isinstance(e, SpeechEnd)]
        return self.time_of_sample(ends[-1].sample_offset, self.rate) if ends else None

    @property
    def lags_ns(self) -> list[int]:
        return list(self._lags)


# -- the session ----------------------------------------------------------------------------
@dataclass
class LiveOptions:
    """How the session listens, answers and records."""

    ptt: bool = False
    barge_in: bool = True
    warmup: int = 1
    record: bool = False
    turns: int | None = None
    preroll_ms: int | None = None


@dataclass(eq=False)  # identity: turns live in a set
class _LiveTurn:
    turn_id: int
    planned: PlannedTurn
    rec: TurnRecorder
    source: LiveSource
    sink: Sink
    first_frame: int
    overflows_at_start: int
    task: asyncio.Task[None] | None = None
    body: asyncio.Task[None] | None = None
    interrupted: bool = False
    released: bool = False


@dataclass
class LiveOutcome:
    """What a session produced."""

    run_dir: Path
    turns: list[Turn]
    summary: dict[str, Any]
    recorded: list[Fixture] = field(default_factory=list)


class LiveSession:
    """One live session: capture, segment, run each turn through the pipeline, play, record."""

    def __init__(
        self,
        pipeline: Pipeline,
        out_dir: Path,
        source: FrameInput,
        output: ReplyOutput,
        *,
        options: LiveOptions | None = None,
        observer: Observer | None = None,
        argv: Sequence[str] = (),
        stack_info: dict[str, Any] | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.pipeline = pipeline
        #: Every stamp of the session (the devices given must stamp on the same clock).
        self.clock: Clock = clock if clock is not None else MonotonicClock()
        self.out_dir = out_dir
        self.input = source
        self.output = output
        self.options = options or LiveOptions()
        self.observer: Observer = observer or NullObserver()
        turn_pipeline = pipeline
        if self.options.ptt:
            # The key ends a push-to-talk turn, never a silence: the runner's endpointer then
            # only finds speech_start, and the session marks speech_end and the endpoint.
            ep = replace(pipeline.endpointing, mode="provider", hangover_ms=_NEVER_MS)
            turn_pipeline = replace(pipeline, endpointing=ep)
        self.runner = Runner(
            turn_pipeline,
            [],
            out_dir,
            observer=self.observer,
            argv=list(argv),
            stack_info=dict(stack_info or {}),
            clock=self.clock,
        )
        self.segmenter = Segmenter(
            pipeline.endpointing,
            ptt=self.options.ptt,
            barge_in=self.options.barge_in,
            preroll_ms=self.options.preroll_ms,
        )
        self.turns: list[Turn] = []
        self.recorded: list[Fixture] = []
        self._durations_ms: dict[str, int] = {}
        self._plan: list[PlannedTurn] = []
        self._current: _LiveTurn | None = None
        self._active: set[_LiveTurn] = set()
        self._interrupts: set[asyncio.Future[None]] = set()
        self._history: deque[LiveFrame] = deque()
        self._stages: StageSet | None = None
        self._engine: TurnEngine | None = None
        self._writer: TurnsWriter | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._stop_requested = threading.Event()
        self._listening_cb: list[Callable[[], None]] = []
        self.status = "starting"

    # -- control from other threads (the TUI, a key reader) ------------------------------------
    def request_stop(self) -> None:
        """Stop the session (any thread; returns at once). Finished turns are kept."""
        self._stop_requested.set()
        self._call(self._set_stop)

    def press(self) -> None:
        """The push-to-talk key (any thread)."""
        self._call(self._on_press)

    def on_listening(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (on the loop) once the microphone is open and listened to."""
        self._listening_cb.append(callback)

    def speech_end_rel_ns(self, index: int) -> int | None:
        """The in-flight turn ``index``'s speech_end relative to its t0, once known."""
        turn = self._current
        if turn is None or turn.rec.index != index:
            return None
        end = turn.rec.milestones().get("speech_end")
        return None if end is None else end - turn.rec.t0_ns

    def _call(self, fn: Callable[[], None]) -> None:
        # Always through the loop's self-pipe: safe from another thread and from a signal
        # handler that interrupted the loop's own thread mid-callback.
        loop = self._loop
        if loop is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop closed: the session is over
            loop.call_soon_threadsafe(fn)

    def _set_stop(self) -> None:
        if self._stop is not None:
            self._stop.set()

    # -- the run ------------------------------------------------------------------------------
    async def run(self) -> LiveOutcome:
        """Listen and answer until stopped; the summary is written however it ends."""
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        if self._stop_requested.is_set():
            self._stop.set()
        stages = StageSet.of(self.runner.build_stages()).use_clock(self.clock)
        self.output.validate()
        started_wall = time.time()
        self._writer = TurnsWriter(self.out_dir)
        status = "complete"
        error: AudioError | None = None
        lag_task: asyncio.Task[None] | None = None
        try:
            async with stages:
                self.runner.stages = self._stages = stages
                self._engine = self.runner.turn_engine()
                lag_task = asyncio.create_task(self.runner.probe_loop_lag())
                # As the runner does once set up: what lives now is out of the collector's
                # reach, so a full collection cannot stop the measuring loop for long.
                try:
                    with frozen_gc():
                        await self._listen()
                except AudioError as exc:
                    error = exc
                finally:
                    await self._abandon_turns()
                    self.input.close()
                    self.output.close()
        except (asyncio.CancelledError, KeyboardInterrupt):
            status = "interrupted"
            raise
        except BaseException:
            status = "failed"
            raise
        finally:
            self.input.close()
            self.output.close()
            if lag_task is not None:
                lag_task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await lag_task
            self._writer.close()
            if error is not None:
                status = "failed"
            self.status = status
            summary = self._summary(status, started_wall, error)
            write_summary(self.out_dir, summary)
            self.outcome = LiveOutcome(self.out_dir, list(self.turns), summary, list(self.recorded))
        if error is not None:
            kept = len(self.turns)
            raise AudioError(f"{error} ({kept} finished turn(s) saved in {self.out_dir})")
        return self.outcome

    async def _listen(self) -> None:
        assert self._stop is not None
        self.input.start()
        for callback in self._listening_cb:
            callback()
        pump = asyncio.create_task(self._pump())
        stop = asyncio.create_task(self._stop.wait())
        try:
            done, _ = await asyncio.wait({pump, stop}, return_when=asyncio.FIRST_COMPLETED)
            if pump in done:
                pump.result()
        finally:
            for task in (pump, stop):
                task.cancel()
            for task in (pump, stop):
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _pump(self) -> None:
        """Frames from the input to the segmenter, as they arrive; device errors end it."""
        while True:
            for frame in await self.input.read():
                self._dispatch(frame)
            if self.output.error is not None:
                raise AudioError(self.output.error)

    def _dispatch(self, frame: LiveFrame) -> None:
        if self.options.record:
            self._history.append(frame)
            keep = (self.pipeline.turn.timeout_s * 1000 + RING_MS + RECORD_TAIL_MS) // FRAME_MS
            while len(self._history) > keep:
                self._history.popleft()
        self._apply(self.segmenter.feed(frame))

    def _on_press(self) -> None:
        if self.options.ptt and self._stages is not None and not self._stop_is_set():
            self._apply(self.segmenter.press())

    def _stop_is_set(self) -> bool:
        return self._stop is not None and self._stop.is_set()

    def _apply(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, ToTurn):
                current = self._current
                if current is not None and current.turn_id == action.turn_id:
                    current.source.push(action.frame)
            elif isinstance(action, StartTurn):
                if action.barge_in:
                    self._barge_in()
                if self._stop_is_set():
                    continue
                self._start_turn(action)
            elif isinstance(action, EndInput):
                current = self._current
                if current is not None and current.turn_id == action.turn_id:
                    current.released = True
                    current.source.end(self.clock.now_ns())

    def _barge_in(self) -> None:
        """The user talked over the current turn: silence the speaker now, stop the reply."""
        turn = self._current
        if turn is None or turn.task is None or turn.task.done():
            return
        turn.interrupted = True
        sink = turn.sink
        heard_ms = played_ms(sink)
        sink.cancel()
        # A realtime model is told what its protocol says (OpenAI: response.cancel and
        # conversation.item.truncate at what was heard), as a call's interruption does
        # (engine/call.py); the stream the body holds, and the session with it, is closed
        # once that went out (the speaker is already quiet).
        hearing = getattr(self._stages, "hearing", None)
        interrupt = getattr(hearing, "interrupt", None)
        if interrupt is not None:
            task = asyncio.ensure_future(_tell(interrupt, heard_ms, turn.body))
            self._interrupts.add(task)
            task.add_done_callback(self._interrupts.discard)
        elif turn.body is not None:
            turn.body.cancel()

    def _start_turn(self, action: StartTurn) -> None:
        assert self._engine is not None
        index = len(self._plan)
        planned = PlannedTurn(index, f"live-{index + 1:04d}", 0, index < self.options.warmup)
        self._plan.append(planned)
        rec = self._engine.recorder(planned)
        source = LiveSource(
            action.frames,
            self.input.rate,
            on_end=lambda: self.segmenter.heard(action.turn_id),
            on_release=(lambda t: self._released(turn, t)) if self.options.ptt else None,
            tracker=self._tracker() if self.options.ptt else None,
            clock=self.clock,
        )
        record_path = None
        if self.options.record:
            record_path = self.out_dir / "audio" / f"turn-{index:04d}-{planned.fixture}.wav"
            record_path.parent.mkdir(parents=True, exist_ok=True)
        turn = _LiveTurn(
            action.turn_id,
            planned,
            rec,
            source,
            self.output.new_sink(record_path),
            action.frames[0].index,
            self.input.overflows,
        )
        self._current = turn
        self._active.add(turn)
        self.observer.turn_started(planned, len(self._plan))
        turn.task = asyncio.create_task(self._run_turn(turn))

    def _tracker(self) -> Endpointer:
        ep = self.pipeline.endpointing
        return Endpointer(
            threshold_dbfs=ep.threshold_dbfs,
            hangover_ms=ep.hangover_ms,
            min_speech_ms=ep.min_speech_ms,
            frame_ms=FRAME_MS,
        )

    def _released(self, turn: _LiveTurn, t_ns: int) -> None:
        """Push-to-talk: the key ended the input at ``t_ns``. Runs in the turn's task, once
        the frames before the release went to the turn."""
        rec, source = turn.rec, turn.source
        end = source.speech_end_ns()
        if end is None:
            rec.flag("ptt:no_speech_heard")
            last = source.frames[-1]
            end = last.t_ns + FRAME_MS * NS_PER_MS
        rec.mark("speech_end", min(end, t_ns))
        rec.mark("endpoint", t_ns)
        self.observer.milestone(rec.index, "endpoint", t_ns - rec.t0_ns)

    async def _run_turn(self, turn: _LiveTurn) -> None:
        assert self._stages is not None and self._engine is not None
        engine, rec = self._engine, turn.rec

        def hold(body: asyncio.Task[None]) -> None:
            turn.body = body  # a barge-in cancels it

        inp = TurnInput.live(turn.planned.fixture, self.input.rate)
        await engine.measure(
            turn.planned,
            self._stages,
            inp,
            source=turn.source,
            sink=turn.sink,
            rec=rec,
            hold=hold,
            scheduled=False,
        )
        if turn.interrupted:
            rec.flag(INTERRUPTED)
            if "output_first_audible" not in rec.milestones():
                rec.fail("user", "interrupted: the user spoke again before the reply was audible")
        rec.figure("input_latency_ns", self.input.latency_ns)
        latency = getattr(turn.sink, "latency_ns", None)
        rec.figure("output_latency_ns", latency if latency else self.output.latency_ns)
        rec.figure("input_overflows", self.input.overflows - turn.overflows_at_start)
        self._finish(turn, rec.finish())

    def _finish(self, turn: _LiveTurn, result: Turn) -> None:
        assert self._writer is not None
        self._writer.write(result)
        self.turns.append(result)
        self.runner.turns.append(result)
        self._active.discard(turn)
        if self.options.record:
            self._record_fixture(turn, result)
        self.observer.turn_finished(result, len(self._plan))
        self.segmenter.heard(turn.turn_id)
        self.segmenter.replied(turn.turn_id)
        if self._current is turn:
            self._current = None
        if self.options.turns is not None and len(self.turns) >= self.options.turns:
            self._set_stop()

    async def _abandon_turns(self) -> None:
        """Stopping: turns still in flight are cancelled and not written (as in ``run``)."""
        tasks = [t.task for t in self._active if t.task is not None and not t.task.done()]
        for turn in self._active:
            turn.sink.cancel()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._active.clear()
        self._current = None

    # -- recording fixtures -------------------------------------------------------------------
    def _record_fixture(self, turn: _LiveTurn, result: Turn) -> None:
        """Save the turn's input as a fixture (+ manifest) that ``voicelat run`` replays."""
        sent = turn.source.frames
        if not sent:
            return
        last = sent[-1].index + RECORD_TAIL_MS // FRAME_MS
        frames = [f for f in self._history if turn.first_frame <= f.index <= last]
        if not frames:
            frames = list(sent)
        directory = self.out_dir / "recorded"
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{result.fixture}.wav"
        pcm = PCM(b"".join(f.pcm for f in frames), self.input.rate)
        write_wav(path, pcm)
        data = path.read_bytes()
        start = result.milestones.get("speech_start")
        end = result.milestones.get("speech_end")
        start_ms = None if start is None else max(0, start // NS_PER_MS)
        end_ms = None if end is None else max(0, end // NS_PER_MS)
        if start_ms is None or end_ms is None or end_ms <= start_ms:
            start_ms = end_ms = None
        fixture = Fixture(
            id=result.fixture,
            path=path,
            text=result.transcript,
            speech_start_ms=start_ms,
            speech_end_ms=end_ms,
            sha256=hashlib.sha256(data).hexdigest(),
            voice="live",
            annotated=start_ms is not None,
        )
        self.recorded.append(fixture)
        self._durations_ms[fixture.id] = pcm.duration_ns // NS_PER_MS
        self._write_manifest(directory)

    def _write_manifest(self, directory: Path) -> None:
        """The manifest in the format of ``fixtures/manifest.json``, rewritten atomically
        after every turn (a session stopped at any time leaves a readable one)."""
        entries = []
        for f in self.recorded:
            entry: dict[str, Any] = {
                "id": f.id,
                "file": f.path.name,
                "text": f.text,
                "voice": f.voice,
                "speech_start_ms": f.speech_start_ms,
                "speech_end_ms": f.speech_end_ms,
                "duration_ms": self._durations_ms.get(f.id),
                "annotation": "vad",
                "sha256": f.sha256,
            }
            entries.append(entry)
        manifest = {
            "version": 1,
            "sample_rate": self.input.rate,
            "source": "voicelat live --record: text is the STT transcript and speech_start_ms/"
            "speech_end_ms come from the VAD; correct them by hand if needed (keep sha256: it "
            "pins the audio, not the annotations)",
            "fixtures": entries,
        }
        path = directory / "manifest.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, path)

    # -- summary ------------------------------------------------------------------------------
    def _summary(
        self, status: str, started_wall: float, error: AudioError | None
    ) -> dict[str, Any]:
        summary = self.runner.summary(self._plan, status, started_wall)
        # The runner saw the push-to-talk copy of the pipeline: report the one the user gave.
        summary["pipeline"] = self.pipeline.to_json()
        summary["live"] = {
            "input": self.input.describe(),
            "output": self.output.describe(),
            "ptt": self.options.ptt,
            "barge_in": self.options.barge_in,
            "warmup": self.options.warmup,
            "record": str(self.out_dir / "recorded") if self.options.record else None,
            "error": None if error is None else str(error),
        }
        if self.recorded:
            summary["fixtures"] = [f.to_json() for f in self.recorded]
            summary["fixture_set_sha256"] = fixture_set_hash(self.recorded)
        return summary


__all__ = [
    "DeviceInput",
    "DeviceOutput",
    "EndInput",
    "FrameInput",
    "LiveOptions",
    "LiveOutcome",
    "LiveSession",
    "LiveSource",
    "ReplyOutput",
    "Segmenter",
    "SimulatedOutput",
    "StartTurn",
    "ToTurn",
]


async def _tell(interrupt: Any, heard_ms: int, body: asyncio.Task[None] | None) -> None:
    """A barge-in's cancel to the provider (a session already gone has nothing to cancel);
    the turn's body then ends as the response does (its ``response.done``, the provider's
    drain seen), or is stopped after :data:`_DRAIN_WAIT_S`: closing the session at once
    could drop the cancel before the server read it."""
    try:
        with contextlib.suppress(Exception):
            await interrupt(heard_ms)
        if body is not None:
            await asyncio.wait({body}, timeout=_DRAIN_WAIT_S)
    finally:
        if body is not None:
            body.cancel()


#: How long a realtime reply told to stop may take to end before its turn is stopped.
_DRAIN_WAIT_S = 2.0
