"""A streaming, sans-I/O energy VAD and endpointer.

It reads no clock: the caller feeds fixed-length frames with their index and turns the events'
frame indexes or sample offsets into times (with the pacer: ``t0_ns + sample_offset * 1e9 //
rate``; the :class:`Endpoint` itself happens when the frame that triggered it was fed).

Rules, per frame (``voiced`` = frame RMS above the threshold, strictly):

* A turn starts once ``min_speech_ms`` worth of voiced frames have been seen with no silent
  run of ``min_speech_ms`` or more between them (so a short word followed by a dip, like
  "What's ...", counts from its first frame). :class:`SpeechStart` is emitted on the frame that
  completes the count but carries the first voiced frame. Isolated blips (clicks, pops) never
  start a turn.
* Inside a turn any voiced frame keeps it going, so pauses between words shorter than
  ``hangover_ms`` do not end it.
* On the frame where ``hangover_ms`` of continuous silence follows the last voiced frame,
  :class:`SpeechEnd` (carrying the last voiced frame; the offset is the end of that frame) and
  :class:`Endpoint` are emitted together: only then is it known that the speech really ended.
* Missing frame indexes count as silence. After an endpoint a new turn can start.

``detected_frame`` (and an :class:`Endpoint`'s ``frame_index``) is the frame on whose
:meth:`Endpointer.feed` the event came out.

Noise floor: off by default (``noise_floor_ms=0``). When on, the lowest frame level over the
first ``noise_floor_ms`` sets the threshold to ``max(threshold_dbfs, floor + noise_margin_db)``.
Decisions on those first frames are held until the floor is known and then replayed with the
adapted threshold, so events from that window come out (with their true frame indexes) on the
window's last frame, at most ``noise_floor_ms`` late. It is off by default because fixtures
are clean and may start right on speech, where the lowest frame level is speech and would
raise the threshold into it; turn it on for live microphones with a noisy floor
(``noise_floor_ms=200``), which otherwise may never see the hangover silence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from voicelat.audio.frames import bytes_dbfs


@dataclass(frozen=True, slots=True)
class SpeechStart:
    """Speech began at the first sample of frame ``frame_index`` (emitted on ``detected_frame``)."""

    frame_index: int
    sample_offset: int
    detected_frame: int


@dataclass(frozen=True, slots=True)
class SpeechEnd:
    """Speech ended with frame ``frame_index``; ``sample_offset`` is the end of that frame.

    Emitted with the :class:`Endpoint`, on ``detected_frame``: only the hangover confirms it.
    Place it on the clock from ``sample_offset``, not from when it was emitted.
    """

    frame_index: int
    sample_offset: int
    detected_frame: int


@dataclass(frozen=True, slots=True)
class Endpoint:
    """The turn is over: ``hangover_ms`` of silence was complete at frame ``frame_index``."""

    frame_index: int
    sample_offset: int


VadEvent = SpeechStart | SpeechEnd | Endpoint


class Endpointer:
    """Energy VAD plus silence-hangover endpointing over fixed-length int16 mono frames."""

    def __init__(
        self,
        *,
        threshold_dbfs: float = -40.0,
        hangover_ms: int = 600,
        min_speech_ms: int = 100,
        frame_ms: int = 20,
        noise_floor_ms: int = 0,
        noise_margin_db: float = 15.0,
    ) -> None:
        if frame_ms <= 0:
            raise ValueError("frame_ms must be positive")
        if hangover_ms < 0 or min_speech_ms < 0 or noise_floor_ms < 0:
            raise ValueError("hangover_ms, min_speech_ms and noise_floor_ms cannot be negative")
        self.threshold_dbfs = threshold_dbfs
        self.frame_ms = frame_ms
        self.hangover_frames = max(1, math.ceil(hangover_ms / frame_ms))
        self.min_speech_frames = max(1, math.ceil(min_speech_ms / frame_ms))
        self.noise_margin_db = noise_margin_db
        self._calibration_frames = math.ceil(noise_floor_ms / frame_ms)
        self.reset()

    def reset(self) -> None:
        """Forget everything, including the measured noise floor."""
        self._threshold = self.threshold_dbfs
        self._floor = math.inf
        self._calibrated = self._calibration_frames == 0
        self._frame_samples: int | None = None
        self._prev: int | None = None
        self._held: list[tuple[int, float]] = []
        self._state = "silence"  # silence | pending | speech
        self._run_start = 0
        self._run_len = 0
        self._last_voiced = 0
        self.last_dbfs = -math.inf

    @property
    def in_speech(self) -> bool:
        """True between a :class:`SpeechStart` and its :class:`SpeechEnd`."""
        return self._state == "speech"

    @property
    def effective_threshold_dbfs(self) -> float:
        """The threshold in use (raised by the noise floor when that is on)."""
        return self._threshold

    @property
    def noise_floor_dbfs(self) -> float | None:
        """The measured noise floor, once the calibration window is over (None when off)."""
        if self._calibration_frames == 0 or not self._calibrated:
            return None
        return self._floor

    def feed(self, frame: bytes, frame_index: int) -> list[VadEvent]:
        """Process one frame; ``frame_index`` must increase (gaps count as silence)."""
        if self._prev is not None and frame_index <= self._prev:
            raise ValueError(f"frame_index must increase: got {frame_index} after {self._prev}")
        if self._frame_samples is None:
            self._frame_samples = len(frame) // 2
        level = bytes_dbfs(frame)
        self.last_dbfs = level
        if self._calibrated:
            events = self._step(frame_index, level, frame_index)
        else:
            # Hold decisions until the floor is known, then replay the window with the adapted
            # threshold: a noisy line must not open a turn before calibration could see it.
            self._held.append((frame_index, level))
            self._floor = min(self._floor, level)
            events = []
            if frame_index >= self._calibration_frames - 1:
                self._calibrated = True
                self._threshold = max(self.threshold_dbfs, self._floor + self.noise_margin_db)
                held, self._held = self._held, []
                for index, lvl in held:
                    events += self._step(index, lvl, frame_index)
        self._prev = frame_index
        return events

    def _step(self, frame_index: int, level: float, emitted_on: int) -> list[VadEvent]:
        fs = self._frame_samples or 0
        voiced = level > self._threshold
        events: list[VadEvent] = []

        if self._state == "speech":
            silent = frame_index - self._last_voiced - (1 if voiced else 0)
            if silent >= self.hangover_frames:
                end = (self._last_voiced + 1) * fs
                events.append(SpeechEnd(self._last_voiced, end, emitted_on))
                events.append(Endpoint(emitted_on, (emitted_on + 1) * fs))
                self._state = "silence"
            elif voiced:
                self._last_voiced = frame_index

        if self._state != "speech" and voiced:
            gap = frame_index - self._last_voiced - 1
            if self._state == "pending" and gap < self.min_speech_frames:
                self._run_len += 1
            else:
                self._state = "pending"
                self._run_start = frame_index
                self._run_len = 1
            self._last_voiced = frame_index
            if self._run_len >= self.min_speech_frames:
                events.append(SpeechStart(self._run_start, self._run_start * fs, emitted_on))
                self._state = "speech"
        elif self._state == "pending" and frame_index - self._last_voiced >= self.min_speech_frames:
            self._state = "silence"
        return events

    def flush(self) -> list[VadEvent]:
        """End of input: a turn still open gets its :class:`SpeechEnd` (no :class:`Endpoint`)."""
        if self._prev is None:
            return []
        events: list[VadEvent] = []
        if not self._calibrated:
            # The stream ended inside the calibration window: decide with what was seen.
            self._calibrated = True
            self._threshold = max(self.threshold_dbfs, self._floor + self.noise_margin_db)
            held, self._held = self._held, []
            for index, lvl in held:
                events += self._step(index, lvl, self._prev)
        if self._state == "speech":
            fs = self._frame_samples or 0
            end = (self._last_voiced + 1) * fs
            events.append(SpeechEnd(self._last_voiced, end, self._prev))
        self._state = "silence"
        return events
