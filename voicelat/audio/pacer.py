"""Real-time pacing of audio frames on asyncio, like a microphone would deliver them.

Timing: a frame is due when its last sample has been "recorded", ``t0 + (k + 1) * frame_ns``.
:func:`sleep_until` sleeps with ``asyncio.sleep`` until ``spin_ns`` (1 ms) before the target,
because the event loop's timers fire up to ~1 ms late (epoll has millisecond resolution), then
yields with ``asyncio.sleep(0)`` until the target. The yield loop still lets every other task
run, so nothing is starved, but it keeps one core busy for up to ~1 ms per frame (about 5 % of a
core at 20 ms frames): a fair price for sub-millisecond send times on a 2-core machine.

The schedule is anchored to ``t0``: a late frame never shifts the next ones, so there is no
drift; when the sender falls behind, frames go out back to back until it catches up (a real
microphone buffers them too) and the lag shows in :attr:`Pacer.lags_ns`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import numpy as np

from voicelat.core.measure.clock import Clock, MonotonicClock

SleepFn = Callable[[float], Awaitable[None]]
SendFn = Callable[[int, bytes], Awaitable[None]]
#: Told of each frame the pacer waited for: (due, woke) on its clock (the loop-lag probe's note).
WakeFn = Callable[[int, int], None]

SPIN_NS = 1_000_000
NS_PER_S = 1_000_000_000


class StopPacing(Exception):
    """Raise from the send callback to stop pacing after this frame (e.g. at the endpoint)."""


async def sleep_until(
    target_ns: int, clock: Clock, sleep: SleepFn = asyncio.sleep, spin_ns: int = SPIN_NS
) -> int:
    """Wait until ``clock`` reads at least ``target_ns``; returns the clock reading then.

    With a fake clock, pass ``spin_ns=0`` and a ``sleep`` that advances it: the yield loop
    waits for the clock to move, which a fake clock only does when told.
    """
    now = clock.now_ns()
    while now < target_ns:
        remaining = target_ns - now
        if remaining > spin_ns:
            await sleep((remaining - spin_ns) / NS_PER_S)
        else:
            await sleep(0)
        now = clock.now_ns()
    return now


class Pacer:
    """Sends frames in real time and records when each one was meant to go and actually went.

    Every time is read on ``clock`` (default: the monotonic measuring clock); :meth:`run` can
    be given another one for a single run."""

    def __init__(
        self, frame_ms: int = 20, clock: Clock | None = None, on_wake: WakeFn | None = None
    ) -> None:
        if frame_ms <= 0:
            raise ValueError("frame_ms must be positive")
        self.clock: Clock = clock if clock is not None else MonotonicClock()
        #: Told ``(due, woke)`` of each frame it had to wait for: a timed wake-up the loop
        #: makes anyway, so the loop-lag probe needs no wake-up of its own for it.
        self.on_wake = on_wake
        self.frame_ms = frame_ms
        self.frame_ns = frame_ms * 1_000_000
        self.t0_ns: int | None = None
        self.intended_ns: list[int] = []
        self.actual_ns: list[int] = []
        self._stopped = False
        self._running = False

    async def run(
        self,
        frames: Sequence[bytes],
        send: SendFn,
        *,
        clock: Clock | None = None,
        sleep: SleepFn | None = None,
        spin_ns: int | None = None,
        start_ns: int | None = None,
    ) -> int:
        """Send ``frames[k]`` at ``t0 + (k + 1) * frame_ns`` via ``send(k, frame)``.

        ``start_ns``: ``t0`` itself, instead of now (a stream that goes on where another
        pacer left it: a call's interruption heard by one turn, then the next; a frame
        already due goes at once).

        ``t0_ns`` is stamped when the run starts: it is the time of the first sample. Stops
        after the last frame, after a ``send`` that raised :class:`StopPacing` (that frame
        counts as sent), or at the first due time after :meth:`stop`. Returns the frames sent.
        ``spin_ns`` defaults to :data:`SPIN_NS` with the real ``asyncio.sleep``, 0 otherwise.
        """
        if self._running:
            raise RuntimeError("this Pacer is already running")
        clk = clock if clock is not None else self.clock
        slp = sleep if sleep is not None else asyncio.sleep
        spin = spin_ns if spin_ns is not None else (SPIN_NS if sleep is None else 0)
        self._running = True
        self._stopped = False
        self.intended_ns = []
        self.actual_ns = []
        on_wake = self.on_wake
        try:
            t0 = clk.now_ns() if start_ns is None else start_ns
            self.t0_ns = t0
            for k, frame in enumerate(frames):
                if self._stopped:
                    break
                intended = t0 + (k + 1) * self.frame_ns
                # Only a frame it waited for is a wake-up's lateness: one already due when
                # asked for (a resumed stream, a sender behind) is the schedule's lag.
                waited = on_wake is not None and clk.now_ns() < intended
                actual = await sleep_until(intended, clk, slp, spin)
                if waited and on_wake is not None:
                    on_wake(intended, actual)
                if self._stopped:
                    break
                self.intended_ns.append(intended)
                self.actual_ns.append(actual)
                try:
                    await send(k, frame)
                except StopPacing:
                    self._stopped = True
                    break
        finally:
            self._running = False
        return len(self.actual_ns)

    def stop(self) -> None:
        """Send no further frame (takes effect before the next frame is due)."""
        self._stopped = True

    @property
    def stopped(self) -> bool:
        """True when the run ended early (:meth:`stop` or :class:`StopPacing`)."""
        return self._stopped

    @property
    def frames_sent(self) -> int:
        """Frames handed to ``send``."""
        return len(self.actual_ns)

    @property
    def lags_ns(self) -> list[int]:
        """Per frame: actual minus intended send time (never negative)."""
        return [a - i for a, i in zip(self.actual_ns, self.intended_ns, strict=True)]

    @property
    def lag_p50_ns(self) -> int | None:
        """Median lag (linear interpolation), None before any frame."""
        lags = self.lags_ns
        return round(float(np.percentile(lags, 50))) if lags else None

    @property
    def lag_max_ns(self) -> int | None:
        """Largest lag, None before any frame."""
        lags = self.lags_ns
        return max(lags) if lags else None

    def time_of_sample(self, sample_index: int, rate: int) -> int:
        """Clock time of input sample ``sample_index`` (an annotated speech_end, a VAD offset)."""
        if self.t0_ns is None:
            raise RuntimeError("the pacer has not started")
        return self.t0_ns + sample_index * NS_PER_S // rate
