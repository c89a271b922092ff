"""A simulated speaker that plays in real time and stamps when the first audible sample plays.

Model: playback starts when the first audio arrives (its ``arrival_ns``) plus
``output_latency_ms`` (a device buffer), or when :meth:`SimulatedSink.play` was called if that
is later. Samples then play back to back on a timeline computed from the samples fed (no
drift), as a device's own clock would play them: sample ``i`` of a stretch of playback that
started at ``anchor`` with sample ``s`` plays at ``anchor + (i - s) / rate``.
``first_audible_ns`` is the time of the onset sample on that timeline. ``frame_ms`` is the
device's period: a cancel lets the frame that already started finish counting as played.

The timeline is computed, not waited for: the sink does not wake once per frame (that cost a
wake-up per 20 ms per session and a copy of every frame, and each stamp carried the timer's
~1 ms lateness). :meth:`play` sleeps only until the end of the audio buffered so far, until the
first audible sample plays (to set :attr:`audible` at that moment) and, after
:meth:`finish`, until the last sample has played; a feed, finish or cancel wakes it early only
when it is waiting for audio or must stop.

Underrun: the buffered audio has played, the stream is not finished, and the next audio
arrives later. Playback restarts at that arrival plus the output latency (as a device whose
buffer ran dry would). ``underruns`` counts such gaps; ``underrun_total_ns`` sums the audible
silence, from when the buffer ran dry to the restart.

Continuity at the ear, per reply: ``longest_gap_ns`` (the longest underrun's silence),
``late_chunks`` (chunks that arrived after their first sample was due on the reply's first
schedule: the timeline playback started on, had it never paused; a stream slower than real
time makes every later chunk late, a jittery one some) and :attr:`realtime_factor` (the
stream's arrival span over the audio it had to cover: above 1 the stream cannot keep up).

The onset comes from the sink's own :class:`~voicelat.audio.onset.OnsetDetector`, run on the
audio as it is fed (the same samples it then plays), unless :meth:`SimulatedSink.set_onset`
gives one.
"""

from __future__ import annotations

import asyncio
import os

from voicelat.audio.audible import AudibleRuns
from voicelat.audio.onset import OnsetDetector
from voicelat.audio.pacer import SleepFn, sleep_until
from voicelat.audio.wav import PCM, write_wav
from voicelat.core.base.errors import AudioError
from voicelat.core.measure.clock import Clock, MonotonicClock

NS_PER_S = 1_000_000_000
NS_PER_MS = 1_000_000


class SimulatedSink:
    """Plays fed audio in real time (simulated), records first-audible time and underruns.

    ``spin_ns``: how close to the first audible sample :meth:`play` busy-waits before setting
    :attr:`audible` (0 by default: the stamp is computed, so spinning only makes the event's
    wake-up punctual, for a caller that reacts to it, e.g. a barge-in test).
    ``spin_after_audible`` is accepted for compatibility and has no effect (no frame timer).
    """

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
        del spin_after_audible  # no per-frame timer left to spin on
        self.frame_ms = frame_ms
        self.output_latency_ns = round(output_latency_ms * NS_PER_MS)
        self.record_path = record_path
        self._clock: Clock = clock if clock is not None else MonotonicClock()
        # A caller's sleep (a fake clock's) is not interruptible: waits then use the event only.
        self._fake_sleep = sleep
        self._spin = spin_ns or 0
        self._detector = OnsetDetector(threshold_dbfs, window_ms)
        self._threshold_dbfs, self._window_ms = threshold_dbfs, window_ms
        self._audible: AudibleRuns | None = None
        self._onset_override: int | None = None

        self.rate: int | None = None
        #: The ear was on the line from this time (a call's greeting: what arrived since the
        #: call connected plays from its arrival, as a phone would have played it).
        self.open_since_ns: int | None = None
        self.first_arrival_ns: int | None = None
        self.started_ns: int | None = None
        self.ended_ns: int | None = None
        self.first_audible_ns: int | None = None
        self.underruns = 0
        self.underrun_total_ns = 0
        self.longest_gap_ns = 0
        self.late_chunks = 0
        self.fed_samples = 0
        self._last_arrival_ns: int | None = None
        self._samples_before_last = 0  # samples fed before the last chunk
        self.audible = asyncio.Event()
        """Set once ``first_audible_ns`` has played (never, if the audio stays silent)."""

        self._odd = b""  # half a sample split across feeds
        self._finished = False
        self._cancelled = False
        self._playing = False
        self._play_called_ns: int | None = None
        self._wake = asyncio.Event()
        self._waiting = False  # play() waits for audio: a feed must wake it
        # Stretches of playback, (first sample, anchor ns): a new one after each underrun.
        self._segments: list[tuple[int, int]] = []
        self._dry_since_ns: int | None = None  # the buffer ran dry at this time (an underrun)
        self._played_final: int | None = None
        self._recorded: list[bytes] = []
        self._record_silence = 0  # samples of underrun silence in the recording

    @property
    def finished(self) -> bool:
        """:meth:`finish` was called."""
        return self._finished

    @property
    def cancelled(self) -> bool:
        """:meth:`cancel` was called."""
        return self._cancelled

    @property
    def last_arrival_ns(self) -> int | None:
        """When the last audio fed so far arrived."""
        return self._last_arrival_ns

    @property
    def onset_sample(self) -> int | None:
        """Index of the first audible sample in the fed stream, once known."""
        if self._onset_override is not None:
            return self._onset_override
        return self._detector.onset

    @property
    def played_samples(self) -> int:
        """Samples whose frame has started playing by now (all of them once played)."""
        if self._played_final is not None:
            return self._played_final
        return self._played_by(self._clock.now_ns())

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
        data = self._odd + pcm_bytes if self._odd else pcm_bytes
        cut = len(data) - len(data) % 2
        if cut == 0:
            self._odd = data
            return
        self._odd = data[cut:]
        if cut != len(data):
            data = data[:cut]
        if self.first_arrival_ns is None:
            self.first_arrival_ns = arrival_ns
        if self._segments:
            self._count_late(arrival_ns)
            self._resume_if_dry(arrival_ns)
        self._last_arrival_ns = arrival_ns
        self._samples_before_last = self.fed_samples
        self.fed_samples += cut // 2
        if self.record_path is not None:
            self._recorded.append(data)
        if self._onset_override is None and self._detector.onset is None:
            self._detector.feed(data, rate)
        if self._audible is None:
            self._audible = AudibleRuns(rate, self._threshold_dbfs, self._window_ms)
        self._audible.feed(data)
        if self.first_audible_ns is None:
            self._check_audible()
        if self._waiting:
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
        if self._cancelled:
            return
        now = self._clock.now_ns()
        self._played_final = self._played_by(now)
        self._cancelled = True
        if self.started_ns is not None and self.started_ns > now:
            self.started_ns = None  # cancelled before the device started
        if self.started_ns is not None and self.ended_ns is None:
            self.ended_ns = now
        if self.first_audible_ns is not None and self.first_audible_ns > now:
            self.first_audible_ns = None  # it would have played after the cancel: it never did
        self._wake.set()

    async def play(self) -> None:
        """Play the stream in real time until it is finished and played, or cancelled."""
        if self._playing:
            raise RuntimeError("SimulatedSink.play() is already running")
        self._playing = True
        self._play_called_ns = self._clock.now_ns()
        try:
            await self._play()
        finally:
            self._playing = False
            await self._write_record()

    async def _play(self) -> None:
        await self._wait_for_audio()
        if self._cancelled or not self.fed_samples or self.first_arrival_ns is None:
            return
        assert self._play_called_ns is not None
        listening = self._play_called_ns
        if self.open_since_ns is not None:
            listening = min(listening, self.open_since_ns)
        anchor = max(self.first_arrival_ns + self.output_latency_ns, listening)
        self._segments.append((0, anchor))
        self.started_ns = anchor
        self._check_audible()
        while not self._cancelled:
            end = self._end_of_buffer_ns()
            target = end
            if self.first_audible_ns is not None and not self.audible.is_set():
                target = min(target, self.first_audible_ns)
            now = await self._nap_until(target)
            if self._cancelled:
                return
            self._announce_audible(now)
            if now < self._end_of_buffer_ns():
                continue  # more audio came, or the audible moment: keep playing
            if self._finished:
                break
            # Ran dry with the stream still open: an underrun (playback resumes on the next feed).
            self.underruns += 1
            self._dry_since_ns = end
            await self._wait_for_audio(dry=True)
        self._played_final = self.fed_samples
        self.ended_ns = self._end_of_buffer_ns()

    def sample_time_ns(self, index: int) -> int | None:
        """When sample ``index`` of the fed stream plays (None: not placed on the device's
        timeline yet)."""
        if self.rate is None:
            return None
        for first, anchor in reversed(self._segments):
            if first <= index:
                return anchor + (index - first) * NS_PER_S // self.rate
        return None

    def audible_spans_ns(self) -> list[tuple[int, int]]:
        """The reply's audible stretches as they played (or will play) at the ear: play times
        ``(start, end)`` of the loud runs, cut at a cancel (``core/calls/bargein.py``)."""
        if self._audible is None:
            return []
        played = self._played_final if self._played_final is not None else self.fed_samples
        spans = []
        for first, end in self._audible.clipped(played):
            # The end is the last sample's own end: at a run's end an underrun may follow,
            # and the next segment's anchor is not when this sample stopped playing.
            a, b = self.sample_time_ns(first), self.sample_time_ns(end - 1)
            if a is not None and b is not None and self.rate:
                spans.append((a, b + NS_PER_S // self.rate))
        return spans

    @property
    def last_audible_ns(self) -> int | None:
        """When the reply's last audible sample (so far) ends at the ear."""
        spans = self.audible_spans_ns()
        return spans[-1][1] if spans else None

    def _end_of_buffer_ns(self) -> int:
        """When the last sample fed so far finishes playing."""
        assert self.rate is not None
        first, anchor = self._segments[-1]
        return anchor + (self.fed_samples - first) * NS_PER_S // self.rate

    @property
    def realtime_factor(self) -> float | None:
        """The reply stream's arrival span over the audio it had to cover before its last
        chunk (``(last arrival - first arrival) / duration fed before the last chunk``): below
        1 it streams faster than real time, above 1 it cannot keep up. None for one chunk."""
        first, last = self.first_arrival_ns, self._last_arrival_ns
        if first is None or last is None or not self.rate or not self._samples_before_last:
            return None
        return (last - first) * self.rate / (self._samples_before_last * NS_PER_S)

    def _count_late(self, arrival_ns: int) -> None:
        """A chunk is late when it arrives after its first sample was due on the first schedule."""
        assert self.rate is not None
        due = self._segments[0][1] + self.fed_samples * NS_PER_S // self.rate
        if arrival_ns > due:
            self.late_chunks += 1

    def _resume_if_dry(self, arrival_ns: int) -> None:
        """Audio arrives: if the buffer has run dry (counted by play() or seen only now), the
        device restarts at its arrival plus the output latency."""
        due = self._dry_since_ns
        if due is None:
            end = self._end_of_buffer_ns()
            if arrival_ns <= end:
                return
            self.underruns += 1  # play() has not woken to see it yet
            due = end
        restart = max(arrival_ns, due) + self.output_latency_ns
        self._segments.append((self.fed_samples, restart))
        self.underrun_total_ns += restart - due
        self.longest_gap_ns = max(self.longest_gap_ns, restart - due)
        self._dry_since_ns = None
        if self.record_path is not None and self.rate is not None:
            # Silence up to the restart's place on the recording's sample grid (sample i at
            # started + i / rate): each gap's own length rounded would lose up to a sample
            # per underrun, and a reply streamed in real time underruns at most chunks.
            anchor = self._segments[0][1]
            at = ((restart - anchor) * self.rate + NS_PER_S // 2) // NS_PER_S
            silence = at - self.fed_samples - self._record_silence
            self._record_silence += max(0, silence)
            self._recorded.append(bytes(2 * max(0, silence)))

    def _played_by(self, t_ns: int) -> int:
        """Samples whose frame started at or before ``t_ns`` (a frame: ``frame_ms`` of audio)."""
        if not self._segments or self.rate is None:
            return 0
        frame = max(1, self.rate * self.frame_ms // 1000)
        for first, anchor in reversed(self._segments):
            if t_ns >= anchor:
                frames_started = (t_ns - anchor) * self.rate // NS_PER_S // frame + 1
                return min(self.fed_samples, first + frames_started * frame)
        return 0

    async def _nap_until(self, target_ns: int) -> int:
        """Sleep until ``target_ns`` or until woken (finish, cancel); returns the clock then."""
        now = self._clock.now_ns()
        if now >= target_ns:
            return now
        if self._fake_sleep is not None:
            return await sleep_until(target_ns, self._clock, self._fake_sleep, 0)
        self._wake.clear()
        delay = (target_ns - now - self._spin) / NS_PER_S
        if delay > 0:
            try:
                async with asyncio.timeout(delay):
                    await self._wake.wait()
            except TimeoutError:
                pass
        if self._spin and not self._cancelled:
            return await sleep_until(target_ns, self._clock, asyncio.sleep, self._spin)
        return self._clock.now_ns()

    def _announce_audible(self, now: int) -> None:
        if self.first_audible_ns is not None and now >= self.first_audible_ns:
            self.audible.set()

    async def _wait_for_audio(self, dry: bool = False) -> None:
        seen = self.fed_samples
        self._waiting = True
        try:
            while not (self._finished or self._cancelled) and (
                self.fed_samples == seen if dry else not self.fed_samples
            ):
                self._wake.clear()
                await self._wake.wait()
        finally:
            self._waiting = False

    def _check_audible(self) -> None:
        onset = self.onset_sample
        if onset is None or self.first_audible_ns is not None or self.rate is None:
            return
        if onset >= self.fed_samples or not self._segments:
            return  # not fed yet (an override ahead of the audio) or not playing yet
        for first, anchor in reversed(self._segments):
            if first <= onset:
                self.first_audible_ns = anchor + (onset - first) * NS_PER_S // self.rate
                return

    async def _write_record(self) -> None:
        if self.record_path is None or self.rate is None:
            return
        data = b"".join(self._recorded)
        if self._played_final is not None:
            # Cut at what played (a cancel); silence gaps count as played time.
            gaps = sum(len(b) for b in self._recorded) - 2 * self.fed_samples
            data = data[: 2 * self._played_final + max(0, gaps)]
        # On a thread: this runs on the measuring loop, and a busy disk held a write for
        # seconds there, stalling every other session's stamps (a 2.3 s loop stall was seen in
        # a 10-session run with save_audio on a busy disk).
        await asyncio.to_thread(write_wav, self.record_path, PCM(data, self.rate))
