"""What the engine does to and for the event loop that stamps events: the loop-lag probe
(scheduled vs actual wake-ups) and freezing the garbage collector's heap while measuring."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib.util
import os
from array import array
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

from voicelat.core.measure.clock import Clock, MonotonicClock
from voicelat.core.measure.schedule import max_in_window, wake_lag_ns

NS_PER_MS = 1_000_000
T = TypeVar("T")

#: The probe's period: a sample at least every 20 ms (the input frame's length). At 10 ms the
#: probe alone cost ~5.5 ms of CPU per second on this machine, more than a whole idle session.
PERIOD_MS = 20.0

#: Environment variable choosing the loop-lag probe: ``wakeups`` (the default: the wake-ups the
#: loop makes anyway, its own timer only in their gaps) or ``timer`` (a wake-up of its own every
#: period, the probe before the wakeups kind; kept for the A/B in bench/loop_probe.py).
PROBE_ENV = "VOICELAT_LOOP_PROBE"
PROBE_KINDS = ("wakeups", "timer")

#: An outside wake-up is kept as a sample only this long (a fraction of the period) after the
#: last sample: the pacer's 20 ms frames each count at one session, and 100 sessions' 5,000
#: frames a second do not become 5,000 samples a second (16 bytes each, held for the run) but
#: about one per 15 ms, the density the own timer gives. 0.75, not 1: a frame wakes up to ~1 ms
#: late and the next on its grid then comes 19 ms later; at 1.0 every other frame would be
#: dropped and the own timer would fire between them.
NOTE_GAP = 0.75

#: Environment variable choosing the measuring process's event loop: ``asyncio`` (the default),
#: ``uvloop`` or ``auto`` (uvloop when it is installed, the ``uvloop`` extra). uvloop is opt-in:
#: measured, it saved no CPU per turn here, and its signal handling differs from asyncio's
#: (a SIGTERM in a background job with SIGINT ignored surfaced as a traceback under it).
LOOP_ENV = "VOICELAT_LOOP"


def probe_kind() -> str:
    """The loop-lag probe a run uses (see :data:`PROBE_ENV`)."""
    want = os.environ.get(PROBE_ENV, "wakeups").strip().lower() or "wakeups"
    if want not in PROBE_KINDS:
        raise ValueError(f"{PROBE_ENV}={want!r}: use {' or '.join(PROBE_KINDS)}")
    return want


class LoopLagProbe:
    """Scheduled-vs-actual wake-up probe of the event loop that stamps events.

    A sample is a wake-up's lateness: how much later than it was due a timed callback ran.
    ``timer``: the probe's own timer every period, whatever else the loop does. ``wakeups``
    (default): timed wake-ups the loop makes anyway are samples too (:meth:`note`: the
    pacer's frames, each due on a 20 ms grid), and the own timer is pushed back by each, so it
    fires only in their gaps (waiting for a reply, playback): a sample still comes at least
    every period, but a wake-up that costs CPU only where nothing else woke the loop. Waking
    the loop is what the probe cost (~45 us of CPU each in a 1-session run on this machine,
    ~100 us on an idle loop: epoll, the timer heap, a context switch), not reading the clock; both kinds stamp one loop iteration
    after the timer fired, where a task woken by that timer runs (the pacer's coroutine is
    such a task): the lag a stage's coroutine sees.

    Wake-ups are stamped on ``clock``: the engine's clock, so a turn's window (stamped on the
    same clock) finds its samples with :meth:`max_between`.
    """

    def __init__(
        self, period_ms: float = PERIOD_MS, clock: Clock | None = None, kind: str | None = None
    ) -> None:
        self.period_ns = int(period_ms * NS_PER_MS)
        self.clock: Clock = clock if clock is not None else MonotonicClock()
        self.kind = kind if kind is not None else probe_kind()
        if self.kind not in PROBE_KINDS:
            raise ValueError(f"loop-lag probe kind {self.kind!r}: use {' or '.join(PROBE_KINDS)}")
        # Two flat arrays of int64, in time order: a turn's maximum is found by bisection (a
        # long run has hundreds of thousands of samples, and the query runs on the measuring
        # loop), and a sample costs 16 bytes, not the ~70 of two int objects in lists (100
        # samples a second: what a long run's memory grew by).
        self.times: array[int] = array("q")
        self.lags: array[int] = array("q")
        #: Samples that came from :meth:`note` (the rest are the own timer's).
        self.noted = 0
        self._note_gap_ns = int(self.period_ns * NOTE_GAP)
        self._last_ns = -(1 << 62)
        # While :meth:`run` runs (wakeups kind): re-arms the own timer one period after a note.
        self._rearm: Callable[[], None] | None = None

    @property
    def samples(self) -> list[tuple[int, int]]:
        """(t_ns, lag_ns) pairs."""
        return list(zip(self.times, self.lags, strict=True))

    def note(self, due_ns: int, woke_ns: int) -> None:
        """A timed wake-up the loop made anyway: due at ``due_ns``, ran at ``woke_ns`` (both
        on :attr:`clock`). Kept as a sample while :meth:`run` runs, at most one per
        :data:`NOTE_GAP` of a period; the own timer then waits a period from here. The caller
        must have waited for ``due_ns`` (a frame already overdue when asked for is the
        schedule's lag, not the loop's)."""
        # (A wake-up stamped before the last sample and handed in after it is dropped here
        # too: the arrays stay in time order.)
        if self._rearm is None or woke_ns - self._last_ns < self._note_gap_ns:
            return
        self._last_ns = woke_ns
        self.times.append(woke_ns)
        self.lags.append(max(0, woke_ns - due_ns))
        self.noted += 1
        self._rearm()

    async def run(self) -> None:
        """Sample until cancelled.

        Each own wake-up is a timer callback, not a coroutine's ``asyncio.sleep``: no future,
        no task step, no coroutine resume per sample (~20 % of the probe's CPU, measured on an
        idle loop: 5.3 vs 6.8 ms per second at 20 ms). The stamp still runs one loop iteration
        after the timer fires (``call_soon``), where a task woken by that timer would run: the
        lag is the one a stage's coroutine sees, as before."""
        loop = asyncio.get_running_loop()
        now_ns = self.clock.now_ns
        period_ns, period_s = self.period_ns, self.period_ns / 1e9
        times, lags = self.times.append, self.lags.append
        slept_at = now_ns()
        handle: asyncio.Handle | None = None

        def stamp() -> None:
            nonlocal slept_at, handle
            now = now_ns()
            if now >= self._last_ns:
                times(now)
                lags(wake_lag_ns(slept_at, now, period_ns))
                self._last_ns = now
            slept_at = now
            handle = loop.call_later(period_s, fired)

        def fired() -> None:
            nonlocal handle
            handle = loop.call_soon(stamp)

        def rearm() -> None:
            # A note was a sample: the own timer waits a whole period from now. Cancelling a
            # timer is a flag and a counter (asyncio drops cancelled timers at the heap's head
            # without waking for them); the wake-up it saves is the probe's cost.
            nonlocal slept_at, handle
            if handle is not None:
                handle.cancel()
            slept_at = now_ns()
            handle = loop.call_later(period_s, fired)

        handle = loop.call_later(period_s, fired)
        if self.kind == "wakeups":
            self._rearm = rearm
        try:
            await loop.create_future()  # until cancelled
        finally:
            self._rearm = None
            if handle is not None:
                handle.cancel()

    def max_between(self, a: int, b: int) -> int | None:
        """The largest lag sampled between clock times ``a`` and ``b`` (None: no sample)."""
        return max_in_window(self.times, self.lags, a, b)


_frozen_runs = 0


def freeze_gc() -> None:
    """Move every object alive at the start of measuring (modules, clients, stages, fixtures)
    out of the garbage collector's reach, as vLLM's ``freeze_gc_heap`` does: a full collection
    scanning them stopped the measuring loop for ~50 ms in a 100-session bench. Objects made
    during the run are still collected. Pair with :func:`unfreeze_gc`."""
    global _frozen_runs
    if _frozen_runs == 0:
        gc.collect()  # before the freeze (and before timing): garbage is not frozen
        gc.freeze()
    _frozen_runs += 1  # nested runs in one process: the outermost one unfreezes


def unfreeze_gc() -> None:
    """Undo one :func:`freeze_gc` (the outermost one unfreezes the heap)."""
    global _frozen_runs
    _frozen_runs -= 1
    if _frozen_runs == 0:
        gc.unfreeze()


@contextlib.contextmanager
def frozen_gc() -> Iterator[None]:
    """:func:`freeze_gc` for the duration of the ``with`` block."""
    freeze_gc()
    try:
        yield
    finally:
        unfreeze_gc()


def loop_kind() -> str:
    """The event loop a run uses: ``uvloop`` or ``asyncio`` (see :data:`LOOP_ENV`)."""
    want = os.environ.get(LOOP_ENV, "asyncio").strip().lower() or "asyncio"
    if want not in ("auto", "uvloop", "asyncio"):
        raise ValueError(f"{LOOP_ENV}={want!r}: use auto, uvloop or asyncio")
    if want == "asyncio":
        return "asyncio"
    if importlib.util.find_spec("uvloop") is None:
        if want == "uvloop":
            raise ValueError(f"{LOOP_ENV}=uvloop but uvloop is not installed: pip install uvloop")
        return "asyncio"
    return "uvloop"


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """A new-loop factory for :class:`asyncio.Runner` (None: asyncio's default loop)."""
    if loop_kind() != "uvloop":
        return None
    import uvloop

    return uvloop.new_event_loop


def run_measuring_loop(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on the loop :func:`loop_kind` picks (uvloop: less CPU per turn
    on the loop that stamps events; bench/overhead.py measures both)."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)


__all__ = [
    "LOOP_ENV",
    "PERIOD_MS",
    "PROBE_ENV",
    "PROBE_KINDS",
    "LoopLagProbe",
    "freeze_gc",
    "frozen_gc",
    "loop_factory",
    "loop_kind",
    "probe_kind",
    "run_measuring_loop",
    "unfreeze_gc",
]
