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

#: The probe's period: one wake-up every 20 ms (the input frame's length). At 10 ms the probe
#: alone cost ~5.5 ms of CPU per second on this machine, more than a whole idle session.
PERIOD_MS = 20.0

#: Environment variable choosing the measuring process's event loop: ``asyncio`` (the default),
#: ``uvloop`` or ``auto`` (uvloop when it is installed, the ``uvloop`` extra). uvloop is opt-in:
#: measured, it saved no CPU per turn here, and its signal handling differs from asyncio's
#: (a SIGTERM in a background job with SIGINT ignored surfaced as a traceback under it).
LOOP_ENV = "VOICELAT_LOOP"


class LoopLagProbe:
    """Scheduled-vs-actual wake-up probe of the event loop that stamps events.

    Wake-ups are stamped on ``clock``: the engine's clock, so a turn's window (stamped on the
    same clock) finds its samples with :meth:`max_between`.
    """

    def __init__(self, period_ms: float = PERIOD_MS, clock: Clock | None = None) -> None:
        self.period_ns = int(period_ms * NS_PER_MS)
        self.clock: Clock = clock if clock is not None else MonotonicClock()
        # Two flat arrays of int64, in time order: a turn's maximum is found by bisection (a
        # long run has hundreds of thousands of samples, and the query runs on the measuring
        # loop), and a sample costs 16 bytes, not the ~70 of two int objects in lists (100
        # samples a second: what a long run's memory grew by).
        self.times: array[int] = array("q")
        self.lags: array[int] = array("q")

    @property
    def samples(self) -> list[tuple[int, int]]:
        """(t_ns, lag_ns) pairs."""
        return list(zip(self.times, self.lags, strict=True))

    async def run(self) -> None:
        """Sample until cancelled.

        Each wake-up is a timer callback, not a coroutine's ``asyncio.sleep``: no future, no
        task step, no coroutine resume per sample (~20 % of the probe's CPU, measured on an idle
        loop: 5.3 vs 6.8 ms per second at 20 ms). The stamp still runs one loop iteration after
        the timer fires (``call_soon``), where a task woken by that timer would run: the lag
        is the one a stage's coroutine sees, as before."""
        loop = asyncio.get_running_loop()
        now_ns = self.clock.now_ns
        period_ns, period_s = self.period_ns, self.period_ns / 1e9
        times, lags = self.times.append, self.lags.append
        slept_at = now_ns()
        handle: asyncio.Handle | None = None

        def stamp() -> None:
            nonlocal slept_at, handle
            now = now_ns()
            times(now)
            lags(wake_lag_ns(slept_at, now, period_ns))
            slept_at = now
            handle = loop.call_later(period_s, fired)

        def fired() -> None:
            nonlocal handle
            handle = loop.call_soon(stamp)

        handle = loop.call_later(period_s, fired)
        try:
            await loop.create_future()  # until cancelled
        finally:
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
    "LoopLagProbe",
    "freeze_gc",
    "frozen_gc",
    "loop_factory",
    "loop_kind",
    "run_measuring_loop",
    "unfreeze_gc",
]
