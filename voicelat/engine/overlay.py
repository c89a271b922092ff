"""Speech during a reply: the user's interruption, backchannel or noise, played and timed.

An overlay step (``core/calls/call.py``) plays its fixture ``after_ms`` after the reply became
audible at the sink; :class:`OverlayRun` collects its stamps into a
:class:`~voicelat.core.calls.bargein.OverlayOutcome`. Two ways to play it, by who hears the line:

* **voicelat's cascade** hears it itself: :class:`BargeInVad` (the ``[turn_taking]``
  policy) on the overlay's frames; on an interruption the call engine cancels the reply (LLM
  stream and TTS request closed) and flushes the sink. An ``interrupt``'s frames are the next
  turn's input (its STT hears them from the first), through :class:`TappedPacer`.
* **realtime and agents** hear it on the call's open line: :class:`LineOverlay` keeps the
  line going after the endpoint (silence, then the overlay's frames, in real time) while the
  reply plays, and watches the stage's events: ``speech_started`` / ``interrupted`` /
  ``clear`` is the detection; voicelat then does what the protocol says (flush the sink;
  OpenAI: ``response.cancel`` and ``conversation.item.truncate``). What is left of an
  interruption when the turn ends is the next turn's input, going on at its own times.

With ``[turn_taking] ignore_words`` the cascade also listens for words: :class:`OverlayWords`
feeds the overlay's frames, as they are sent, to a session of the pipeline's own STT stage
(a task on the loop, as a turn's listener does; nothing is stamped by it but the verdict), and
a VAD trigger stops the reply only once the words hold one outside the list.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from voicelat.audio import Pacer
from voicelat.audio.frames import bytes_dbfs
from voicelat.audio.pacer import sleep_until
from voicelat.core.calls.bargein import PAUSE_THRESHOLD_NS, OverlayOutcome, words_interrupt
from voicelat.core.calls.call import Step
from voicelat.core.measure.clock import Clock
from voicelat.core.measure.events import (
    Failed,
    Final,
    Interrupted,
    Partial,
    ServerSpeech,
    StageEvent,
)
from voicelat.engine.phases import closing
from voicelat.engine.turn_input import FRAME_MS, NS_PER_MS, TurnInput, silence_frame
from voicelat.files.pipeline import TurnTaking
from voicelat.stages.base import STTStage

__all__ = ["BargeInVad", "LineOverlay", "OverlayRun", "OverlayWords", "TappedPacer", "played_ms"]

_FRAME_NS = FRAME_MS * NS_PER_MS
#: A loud frame run is broken by this much silence (the gaps between syllables are shorter).
_BREAK_FRAMES = 10


def played_ms(sink: Any) -> int:
    """How much of the reply the ear heard (ms): where a truncate cuts the model's item."""
    rate = getattr(sink, "rate", None)
    return getattr(sink, "played_samples", 0) * 1000 // rate if rate else 0


@dataclass
class OverlayRun:
    """One overlay step's stamps as it plays (run clock, ns), made into its outcome."""

    step: Step
    inp: TurnInput
    call_turn: int
    t0_ns: int | None = None
    detected_ns: int | None = None
    cancel_ns: int | None = None
    last_byte_ns: int | None = None
    stopped: bool = False
    reply_ended_before: bool = False
    refused: str | None = None
    vad_ns: int | None = None
    words: str | None = None
    words_verdict: str | None = None
    words_fallback: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def started(self, t0_ns: int) -> None:
        """The overlay's first sample went out at ``t0_ns``."""
        self.t0_ns = t0_ns

    @property
    def onset_ns(self) -> int | None:
        """The overlay's ground-truth speech onset on the run clock."""
        if self.t0_ns is None or self.inp.speech_start_ms is None:
            return None
        return self.t0_ns + self.inp.speech_start_ms * NS_PER_MS

    @property
    def speech_end_ns(self) -> int | None:
        if self.t0_ns is None or self.inp.speech_end_ms is None:
            return None
        return self.t0_ns + self.inp.speech_end_ms * NS_PER_MS

    def outcome(self, spans: Sequence[tuple[int, int]]) -> OverlayOutcome:
        """The outcome, with the reply's audible spans at the sink (``spans``, play times)."""
        onset = self.onset_ns
        kept = tuple(s for s in spans if onset is None or s[1] >= onset - 2_000 * NS_PER_MS)
        last = spans[-1][1] if spans else None
        step = self.step
        pause = PAUSE_THRESHOLD_NS if step.pause_ms is None else step.pause_ms * NS_PER_MS
        return OverlayOutcome(
            kind=step.kind,  # type: ignore[arg-type]
            fixture=step.fixture or "",
            line=step.line,
            call_turn=self.call_turn,
            onset_ns=onset,
            speech_end_ns=self.speech_end_ns,
            detected_ns=self.detected_ns,
            cancel_ns=self.cancel_ns,
            last_byte_ns=self.last_byte_ns,
            last_audible_ns=last,
            stopped=self.stopped,
            reply_ended_before=self.reply_ended_before or onset is None,
            refused=self.refused,
            audible=kept,
            pause_threshold_ns=pause,
            vad_ns=self.vad_ns,
            words=self.words,
            words_verdict=self.words_verdict,
            words_fallback=self.words_fallback,
            extra=dict(self.extra),
        )


class BargeInVad:
    """voicelat's cascade listening while it speaks (``[turn_taking]``): speech of at least
    ``min_speech_ms`` (loud 20 ms frames, a run broken only by 200 ms of quiet) interrupts.
    ``feed`` returns True on the frame that makes it an interruption (once)."""

    def __init__(self, taking: TurnTaking) -> None:
        self.taking = taking
        self.need = max(1, -(-taking.min_speech_ms // FRAME_MS))
        self._loud = 0
        self._quiet = 0
        self.fired = False

    def feed(self, frame: bytes) -> bool:
        if self.fired or not self.taking.barge_in:
            return False
        if bytes_dbfs(frame) >= self.taking.threshold_dbfs:
            self._loud, self._quiet = self._loud + 1, 0
        else:
            self._quiet += 1
            if self._quiet >= _BREAK_FRAMES:
                self._loud = 0
        if self._loud >= self.need:
            self.fired = True
        return self.fired


class OverlayWords:
    """The overlay's words (``[turn_taking] ignore_words``): its frames, fed as they are sent,
    go to a session of the pipeline's STT stage (:meth:`run`, a task). Its audio ends at the
    VAD trigger (:meth:`close`): the speech that triggered it is what is judged, so a stage
    that transcribes a finished recording (OpenAI's) answers at once, and a streaming one
    finalizes. :attr:`decided` is set on the verdict: ``interrupt`` as soon as a partial or
    final holds a word outside the list; ``ignored`` when the stream ends holding none (an
    empty transcript, a cough, is none); ``fallback`` when the stage failed (the reason kept).
    """

    def __init__(self, stt: STTStage, ignore: Sequence[str]) -> None:
        self.stt, self.ignore = stt, tuple(ignore)
        self._q: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._closed = False
        self.transcript = ""
        self.verdict: str | None = None
        self.reason: str | None = None
        self.decided = asyncio.Event()

    def feed(self, frame: bytes) -> None:
        if not self._closed:
            self._q.put_nowait(frame)

    def close(self) -> None:
        """No more audio: the STT judges what it heard."""
        if not self._closed:
            self._closed = True
            self._q.put_nowait(None)

    async def _audio(self) -> Any:
        while (frame := await self._q.get()) is not None:
            yield frame

    def _decide(self, verdict: str, reason: str | None = None) -> None:
        if self.verdict is None:
            self.verdict, self.reason = verdict, reason
            self.decided.set()

    async def run(self) -> None:
        try:
            async with closing(self.stt.transcribe(self._audio())) as stream:
                async for ev in stream:
                    if isinstance(ev, Partial | Final) and ev.text:
                        self.transcript = ev.text
                        if words_interrupt(ev.text, self.ignore):
                            self._decide("interrupt")
                    elif isinstance(ev, Failed):
                        self._decide("fallback", f"the STT failed: {ev.reason}")
                    if self.verdict is not None:
                        break
        except Exception as exc:
            self._decide("fallback", f"the STT failed: {type(exc).__name__}: {exc}")
        self._decide("ignored")


class TappedPacer(Pacer):
    """A pacer whose every sent frame is also handed to ``tap`` (the cascade's barge-in VAD
    hears an interruption's frames as its next turn's STT does)."""

    def __init__(self, tap: Callable[[int, bytes], None], clock: Clock) -> None:
        super().__init__(FRAME_MS, clock)
        self.tap = tap

    async def run(  # type: ignore[override,unused-ignore]
        self, frames: Sequence[bytes], send: Callable[[int, bytes], Awaitable[None]], **kw: Any
    ) -> int:
        async def tapped(k: int, frame: bytes) -> None:
            self.tap(k, frame)
            await send(k, frame)

        return await super().run(frames, tapped, **kw)


class LineOverlay:
    """An overlay on a realtime or agent call's open line (see the module docstring).

    :meth:`keep_line` runs as a task from the turn's endpoint: it sends silence every 20 ms,
    the overlay's frames from their due time on (``after_ms`` after the reply's first audible
    sample), then silence, until :meth:`stop`. :meth:`on_event` sees the turn's stage events.
    ``interrupt``: called once at the detection, with the run (voicelat's side of the stop:
    flush the sink, the provider's cancel)."""

    def __init__(
        self,
        run: OverlayRun,
        rate: int,
        clock: Clock,
        first_audible: Callable[[], int | None],
        reply_over: Callable[[], bool],
        interrupt: Callable[[OverlayRun], Awaitable[None]],
    ) -> None:
        self.run, self.clock = run, clock
        self.frames = run.inp.frames
        self.silence = silence_frame(rate)
        self._first_audible, self._reply_over, self._interrupt = (
            first_audible,
            reply_over,
            interrupt,
        )
        self.sent = 0  # overlay frames on the line
        self.next_due_ns: int | None = None  # when the line's next frame is due
        self._stopped = False
        self._handling: asyncio.Task[None] | None = None

    def stop(self) -> None:
        """The turn is over: no further frame goes on the line."""
        self._stopped = True

    @property
    def remainder(self) -> list[bytes]:
        """The overlay's frames not sent yet (the next turn's input, for an interruption)."""
        return list(self.frames[self.sent :]) if self.run.t0_ns is not None else []

    def resume_point(self) -> tuple[int, int] | None:
        """Where the rest goes on (``Listener`` ``resume``): the overlay's ``t0``, and the
        next frame's due time minus a frame; None when the overlay never started."""
        if self.run.t0_ns is None or self.next_due_ns is None:
            return None
        return self.run.t0_ns, self.next_due_ns - _FRAME_NS

    async def keep_line(self, line: asyncio.Queue[bytes | None]) -> None:
        clock = self.clock
        due = clock.now_ns() + _FRAME_NS
        while not self._stopped:
            await sleep_until(due, clock, asyncio.sleep, 0)
            if self._stopped:
                break
            frame = self.silence
            if self.run.t0_ns is None and not self.run.reply_ended_before:
                heard = self._first_audible()
                if heard is None and self._reply_over():
                    self.run.reply_ended_before = True
                elif heard is not None and due >= heard + self.run.step.after_ms * NS_PER_MS:
                    if self._reply_over():
                        self.run.reply_ended_before = True
                    else:
                        self.run.started(due - _FRAME_NS)  # the frame's first sample
            if self.run.t0_ns is not None and self.sent < len(self.frames):
                frame = self.frames[self.sent]
                self.sent += 1
            line.put_nowait(frame)
            due += _FRAME_NS
            self.next_due_ns = due
        if self._handling is not None:
            with contextlib.suppress(Exception):
                await self._handling

    def on_event(self, ev: StageEvent) -> None:
        """A stage event of the turn: the detection (``speech_started``, ``interrupted``).
        The drain's end (the last audio byte) is the playback's, taken when the turn ends."""
        run = self.run
        t_ns = getattr(ev, "t_ns", None)
        if run.t0_ns is None or not isinstance(t_ns, int) or t_ns < run.t0_ns:
            return
        speech = isinstance(ev, ServerSpeech) and ev.started
        if (speech or isinstance(ev, Interrupted)) and run.detected_ns is None:
            run.detected_ns = t_ns
            run.stopped = True
            self._handling = asyncio.ensure_future(self._interrupt(run))
