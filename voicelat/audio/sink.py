"""A simulated speaker that plays in real time and stamps when the first audible sample plays.

Model: playback starts when the first audio arrives (its ``arrival_ns``) plus
``output_latency_ms`` (a device buffer), or when :meth:`SimulatedSink.play` gets to run if
that is later. Frames of ``frame_ms`` then start back to back on a schedule computed from the
samples played (no drift; a short tail plays as a short frame). Each frame's start is stamped
on the clock; ``first_audible_ns`` is the stamp of the frame holding the onset sample plus the
onset's offset inside it.

Underrun: a frame is due, nothing is buffered and the stream is not finished. The sink waits
for audio and restarts playback when it comes (plus the output latency, as a device whose
buffer ran dry would). ``underruns`` counts such gaps; ``underrun_total_ns`` sums the audible
silence, from the due time to the stamp of the frame that resumed.

The onset comes from the sink's own :class:`~voicelat.audio.onset.OnsetDetector`, run on the
audio as it is fed (the same samples it then plays), unless :meth:`SimulatedSink.set_onset`
gives one.
"""

from __future__ import annotations

import asyncio
import os
from collections import deque

from voicelat.audio.onset import OnsetDetector
from voicelat.audio.pacer import SPIN_NS, SleepFn, sleep_until
from voicelat.audio.wav import PCM, write_wav
from voicelat.core.clock import Clock, MonotonicClock
from voicelat.core.errors import AudioError

NS_PER_S = 1_000_000_000
NS_PER_MS = 1_000_000


class SimulatedSink:
    """Plays fed audio in real time (simulated), records first-audible time and underruns."""

    def __init__(
        self,
        *,
        frame_ms: int = 20,
        output_latency_ms: float = 0,
        threshold_dbfs: float = -40.0,
        window_ms: int = 10,
        record_path: str | os.PathLike[str] | None = None,
        clock: Clock | None = None,
        sleep: SleepFn | None = None,
        spin_ns: int | None = None,
        spin_after_audible: bool = True,
    ) -> None:
        if frame_ms <= 0 or output_latency_ms < 0:
            raise ValueError("frame_ms must be positive and output_latency_ms not negative")
        self.frame_ms = frame_ms
        self.output_latency_ns = round(output_latency_ms * NS_PER_MS)
        self.record_path = record_path
        self._clock: Clock = clock if clock is not None else MonotonicClock()
        self._sleep: SleepFn = sleep if sleep is not None else asyncio.sleep
        self._spin = spin_ns if spin_ns is not None else (SPIN_NS if sleep is None else 0)
        # Only the frame holding the first audible sample is a measurement; later frames can
        # wake on the plain timer (~1 ms late) and save the busy-wait's CPU when many sinks
        # share one loop (``spin_after_audible=False``, as the runner's multi-session runs do).
        self._spin_after_audible = spin_after_audible
        self._detector = OnsetDetector(threshold_dbfs, window_ms)
        self._onset_override: int | None = None

        self.rate: int | None = None
        self.first_arrival_ns: int | None = None
        self.started_ns: int | None = None
        self.ended_ns: int | None = None
        self.first_audible_ns: int | None = None
        self.underruns = 0
        self.underrun_total_ns = 0
        self.played_samples = 0
        self.fed_samples = 0
        self.audible = asyncio.Event()
        """Set once ``first_audible_ns`` is known (never, if the audio stays silent)."""

        self._buf = bytearray()
        self._odd = b""  # half a sample split across feeds
        self._finished = False
        self._cancelled = False
        self._playing = False
        self._wake = asyncio.Event()
        self._last_arrival_ns = 0
        # (first sample, n samples, stamp) of recent frames: the onset can be decided a little
        # after its frame played (a window straddling frames, a final partial window).
        self._history: deque[tuple[int, int, int]] = deque(maxlen=32)
        self._recorded: list[bytes] = []

    @property
    def finished(self) -> bool:
        """:meth:`finish` was called."""
        return self._finished

    @property
    def cancelled(self) -> bool:
        """:meth:`cancel` was called."""
        return self._cancelled

    @property
    def onset_sample(self) -> int | None:
        """Index of the first audible sample in the fed stream, once known."""
        if self._onset_override is not None:
            return self._onset_override
        return self._detector.onset

    def feed(self, pcm_bytes: bytes, rate: int, arrival_ns: int) -> None:
        """Queue int16 mono audio that arrived at ``arrival_ns``; ignored after :meth:`cancel`."""
        if self._cancelled or not pcm_bytes:
            return
        if self._finished:
            raise RuntimeError("SimulatedSink.feed() after finish()")
        if self.rate is None:
            self.rate = rate
        elif rate != self.rate:
            raise AudioError(
                f"the sink got {rate} Hz audio after {self.rate} Hz audio in the same stream; "
                "resample it to one rate before playing"
            )
        data = self._odd + pcm_bytes
        cut = len(data) - len(data) % 2
        self._odd = data[cut:]
        if cut == 0:
            return
        if self.first_arrival_ns is None:
            self.first_arrival_ns = arrival_ns
        self._last_arrival_ns = arrival_ns
        self._buf += data[:cut]
        self.fed_samples += cut // 2
        if self._onset_override is None and self._detector.onset is None:
            self._detector.feed(data[:cut], rate)
            self._check_audible()
        self._wake.set()

    def set_onset(self, sample_index: int) -> None:
        """Use this onset (sample index in the fed stream) instead of the sink's own detector."""
        self._onset_override = sample_index
        self.first_audible_ns = None
        self.audible.clear()
        self._check_audible()

    def finish(self) -> None:
        """No more audio will come; :meth:`play` returns once the buffer has played."""
        self._finished = True
        if self._onset_override is None:
            self._detector.flush()
            self._check_audible()
        self._wake.set()

    def cancel(self) -> None:
        """Stop now (barge-in): no further frame starts and :meth:`play` returns."""
        self._cancelled = True
        if self.started_ns is not None and self.ended_ns is None:
            self.ended_ns = self._clock.now_ns()
        self._buf.clear()
        self._wake.set()

    async def play(self) -> None:
        """Play the stream in real time until it is finished and played, or cancelled."""
        if self._playing:
            raise RuntimeError("SimulatedSink.play() is already running")
        self._playing = True
        try:
            await self._play()
        finally:
            self._playing = False
            self._write_record()

    async def _play(self) -> None:
        await self._wait_for_audio()
        if self._cancelled or not self._buf or self.rate is None or self.first_arrival_ns is None:
            return
        rate = self.rate
        frame = max(1, rate * self.frame_ms // 1000)
        anchor_ns = max(self.first_arrival_ns + self.output_latency_ns, self._clock.now_ns())
        anchor_sample = 0
        while True:
            due = anchor_ns + (self.played_samples - anchor_sample) * NS_PER_S // rate
            now = await sleep_until(due, self._clock, self._sleep, self._spin_ns())
            if self._cancelled:
                return
            if not self._buf:
                if self._finished:
                    break
                self.underruns += 1
                await self._wait_for_audio()
                if self._cancelled:
                    return
                if not self._buf:
                    break
                anchor_ns = (
                    max(self._last_arrival_ns, self._clock.now_ns()) + self.output_latency_ns
                )
                anchor_sample = self.played_samples
                now = await sleep_until(anchor_ns, self._clock, self._sleep, self._spin_ns())
                if self._cancelled:
                    return
                self.underrun_total_ns += now - due
                if self.record_path is not None:
                    self._recorded.append(bytes(2 * ((now - due) * rate // NS_PER_S)))
            n = min(frame, len(self._buf) // 2)
            chunk = bytes(self._buf[: 2 * n])
            del self._buf[: 2 * n]
            if self.started_ns is None:
                self.started_ns = now
            self._history.append((self.played_samples, n, now))
            self.played_samples += n
            if self.record_path is not None:
                self._recorded.append(chunk)
            self._check_audible()
        end = anchor_ns + (self.played_samples - anchor_sample) * NS_PER_S // rate
        self.ended_ns = await sleep_until(end, self._clock, self._sleep, self._spin_ns())

    def _spin_ns(self) -> int:
        if self.first_audible_ns is not None and not self._spin_after_audible:
            return 0
        return self._spin

    async def _wait_for_audio(self) -> None:
        while not (self._buf or self._finished or self._cancelled):
            self._wake.clear()
            await self._wake.wait()

    def _check_audible(self) -> None:
        onset = self.onset_sample
        if onset is None or self.first_audible_ns is not None or self.rate is None:
            return
        for first, n, stamp in self._history:
            if first <= onset < first + n:
                self.first_audible_ns = stamp + (onset - first) * NS_PER_S // self.rate
                self.audible.set()
                return

    def _write_record(self) -> None:
        if self.record_path is None or self.rate is None:
            return
        write_wav(self.record_path, PCM(b"".join(self._recorded), self.rate))
