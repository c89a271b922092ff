"""What the engine does to and for the event loop that stamps events: the loop-lag probe
(scheduled vs actual wake-ups) and freezing the garbage collector's heap while measuring."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from array import array
from collections.abc import Iterator

from voicelat.core.clock import Clock, MonotonicClock
from voicelat.core.schedule import max_in_window, wake_lag_ns

NS_PER_MS = 1_000_000


class LoopLagProbe:
    """Scheduled-vs-actual wake-up probe of the event loop that stamps events.

    Wake-ups are stamped on ``clock``: the engine's clock, so a turn's window (stamped on the
    same clock) finds its samples with :meth:`max_between`.
    """

    def __init__(self, period_ms: float = 10.0, clock: Clock | None = None) -> None:
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
        """Sample until cancelled."""
        now_ns = self.clock.now_ns
        while True:
            t = now_ns()
            await asyncio.sleep(self.period_ns / 1e9)
            now = now_ns()
            self.times.append(now)
            self.lags.append(wake_lag_ns(t, now, self.period_ns))

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


__all__ = ["LoopLagProbe", "freeze_gc", "frozen_gc", "unfreeze_gc"]
