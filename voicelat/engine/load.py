"""Load shapes: sessions (one :class:`~voicelat.engine.stageset.StageSet` each, so their own
connections) and the two ways turns are started on them.

* :func:`closed_loop`: each session takes the next planned turn as soon as it is free;
* :func:`open_loop`: measured turns start on a schedule (Poisson or constant arrivals) whether
  or not earlier ones are done; a turn that finds no free session opens one.

Both take the turn itself as a callable (``run_turn(planned, session, intended_ns)``), so
they know nothing of what a turn does; the fixture runner passes the turn engine's.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Self

from voicelat.audio import sleep_until
from voicelat.core.base.plan import PlannedTurn
from voicelat.core.base.turn import Turn
from voicelat.core.measure.clock import Clock, MonotonicClock
from voicelat.core.measure.schedule import Load, arrival_offsets_ns, sessions_for_rate
from voicelat.engine.progress import Observer
from voicelat.engine.stageset import StageSet

#: Sessions opened at once (hundreds of simultaneous handshakes would measure the servers'
#: accept queues, not a warm start).
OPEN_PARALLEL = 32

#: Runs one planned turn on a session; ``intended_ns`` is its scheduled start (None: now).
RunTurn = Callable[[PlannedTurn, "Session", int | None], Awaitable[Turn]]
#: Receives every finished turn (written, kept, reported).
TurnDone = Callable[[Turn], None]
#: Awaited once the warm-up turns are done, before the first measured turn: returns the
#: measured phase's origin on the run's clock (None: now). Worker processes wait there for the
#: parent's shared epoch (:mod:`voicelat.engine.workers`).
Barrier = Callable[[], Awaitable[int | None]]


@dataclass(frozen=True)
class Session:
    """One simulated user: its own stage instances (so its own connections)."""

    id: int
    stages: StageSet


class SessionPool:
    """Opens sessions (builds and enters their stages, stamping on ``clock``) and closes every
    one it opened when it exits (an async context manager)."""

    def __init__(self, make_stages: Callable[[int], StageSet], clock: Clock | None = None) -> None:
        self._make = make_stages
        self._clock: Clock = clock if clock is not None else MonotonicClock()
        self._stack = AsyncExitStack()
        #: Sessions opened successfully so far (the summary's ``sessions_opened``).
        self.opened = 0

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()

    async def open(self, sid: int, stages: StageSet | None = None) -> Session:
        """Build (unless given) and enter one session's stages: connect and warm up."""
        chosen = (stages if stages is not None else self._make(sid)).use_clock(self._clock)
        await chosen.__aenter__()  # a stage that fails closes the ones entered before it
        self._stack.push_async_callback(chosen.aclose)
        self.opened += 1
        return Session(sid, chosen)

    async def open_many(self, ids: Sequence[int], parallel: int = OPEN_PARALLEL) -> list[Session]:
        """Open sessions ``ids``, ``parallel`` at a time. All or nothing."""
        gate = asyncio.Semaphore(parallel)
        opened: list[Session] = []

        async def one(sid: int) -> None:
            async with gate:
                opened.append(await self.open(sid))

        try:
            async with asyncio.TaskGroup() as tg:
                for sid in ids:
                    tg.create_task(one(sid))
        except BaseException as exc:
            for s in opened:
                with contextlib.suppress(Exception):
                    await s.stages.aclose()
            if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
                raise exc.exceptions[0] from None  # one clear error, as a single session gives
            raise
        return sorted(opened, key=lambda s: s.id)


async def closed_loop(
    plan: Sequence[PlannedTurn],
    sessions: Sequence[Session],
    run_turn: RunTurn,
    done: TurnDone,
    *,
    observer: Observer,
    clock: Clock,
    input_length_ns: int = 0,
    barrier: Barrier | None = None,
    stagger_offset: float = 0.0,
) -> None:
    """Each session takes the next planned turn as soon as it is free. Warm-up turns first,
    all of them finished before the first measured turn starts (a steady load); then
    ``barrier`` (if any) is awaited and the measured turns start at the origin it returns.
    ``stagger_offset`` (0 to 1) shifts this loop's sessions by that fraction of one stagger
    step: worker ``k`` of ``n`` passes ``k / n`` so that all workers' sessions interleave.

    With several sessions, session i starts its first measured turn ``i / N`` of a turn
    later (a turn's length: the warm-up turns' median, else ``input_length_ns``): N sessions
    started in lockstep would stay in lockstep, every turn of every session hitting each
    stage at the same instant, which measures a thundering herd, not N concurrent users.
    """
    total = len(plan)
    warm = [p for p in plan if p.warmup]
    durations: list[int] = []
    for phase in (warm, [p for p in plan if not p.warmup]):
        pending = list(reversed(phase))
        stagger_ns = 0
        origin = None
        if phase is not warm and barrier is not None:
            origin = await barrier()
        if phase is not warm and (len(sessions) > 1 or stagger_offset):
            turn_ns = int(statistics.median(durations)) if durations else input_length_ns
            stagger_ns = turn_ns // len(sessions)
        lead_ns = round(stagger_offset * stagger_ns)
        if origin is not None:
            lead_ns += max(0, origin - clock.now_ns())

        async def worker(
            s: Session,
            pending: list[PlannedTurn] = pending,
            delay_ns: int = 0,
            timed: bool = phase is warm,
        ) -> None:
            if delay_ns:
                await asyncio.sleep(delay_ns / 1e9)
            while pending:
                planned = pending.pop()
                observer.turn_started(planned, total)
                t = clock.now_ns()
                done(await run_turn(planned, s, None))
                if timed:  # only the warm-up's durations set the stagger: no list per turn
                    durations.append(clock.now_ns() - t)

        if len(sessions) == 1:
            await worker(sessions[0], delay_ns=lead_ns)  # no task: the plain sequential run
            continue
        async with asyncio.TaskGroup() as tg:
            for i, s in enumerate(sessions):
                tg.create_task(worker(s, delay_ns=lead_ns + i * stagger_ns))


async def open_loop(
    plan: Sequence[PlannedTurn],
    pool: SessionPool,
    sessions: list[Session],
    load: Load,
    run_turn: RunTurn,
    done: TurnDone,
    *,
    observer: Observer,
    clock: Clock,
    start_probe: Callable[[], None],
    barrier: Barrier | None = None,
    schedule_ns: Sequence[int] | None = None,
) -> None:
    """Measured turns start at their scheduled times whether or not earlier ones are done.

    The schedule is drawn here from ``load`` (offsets from the measured phase's origin: now,
    or what ``barrier`` returns), unless ``schedule_ns`` gives each measured turn's offset
    from that origin (worker processes get their share of one schedule drawn by the parent).

    Warm-up turns run first, back to back on session 0; their duration sizes the pool of
    sessions opened before the schedule starts (Little's law). A turn that finds no free
    session opens one (its set-up counts as schedule lag, and the client's construction
    shows as loop lag) up to ``load.max_sessions``, then waits for one to free up: late
    starts are recorded, never dropped.
    """
    assert load.rate_per_s is not None
    total = len(plan)
    measured = [p for p in plan if not p.warmup]
    durations: list[int] = []
    for planned in (p for p in plan if p.warmup):
        observer.turn_started(planned, total)
        t = clock.now_ns()
        done(await run_turn(planned, sessions[0], None))
        durations.append(clock.now_ns() - t)
    if durations:
        want = sessions_for_rate(load.rate_per_s, int(statistics.median(durations)))
        want = min(want, load.max_sessions, max(1, len(measured)))
        sessions += await pool.open_many(range(len(sessions), want))
    start_probe()
    free = _FreeSessions(pool, sessions, load.max_sessions)

    async def arrival(planned: PlannedTurn, intended: int) -> None:
        observer.turn_started(planned, total)
        s = await free.take()
        try:
            done(await run_turn(planned, s, intended))
        finally:
            await free.give_back(s)

    if schedule_ns is not None:
        offsets = list(schedule_ns)
    else:
        offsets = arrival_offsets_ns(len(measured), load.rate_per_s, load.arrival, load.seed)
    given = await barrier() if barrier is not None else None
    origin = clock.now_ns() if given is None else given
    async with asyncio.TaskGroup() as tg:
        for planned, offset in zip(measured, offsets, strict=True):
            await sleep_until(origin + offset, clock)
            tg.create_task(arrival(planned, origin + offset))


class _FreeSessions:
    """The open loop's idle sessions: take one, open one, or wait for one."""

    def __init__(self, pool: SessionPool, sessions: Sequence[Session], limit: int) -> None:
        self._pool = pool
        self._idle = list(reversed(sessions))
        self._freed = asyncio.Condition()
        self._count = len(sessions)
        self._limit = limit

    async def take(self) -> Session:
        if self._idle:
            return self._idle.pop()
        if self._count < self._limit:
            self._count += 1  # reserved before the await: concurrent arrivals open one each
            return await self._pool.open(self._count - 1)
        async with self._freed:
            await self._freed.wait_for(lambda: bool(self._idle))
            return self._idle.pop()

    async def give_back(self, s: Session) -> None:
        self._idle.append(s)
        async with self._freed:
            self._freed.notify()


__all__ = [
    "OPEN_PARALLEL",
    "Barrier",
    "RunTurn",
    "Session",
    "SessionPool",
    "TurnDone",
    "closed_loop",
    "open_loop",
]
