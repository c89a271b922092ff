"""The runner: plays fixtures into the pipeline in real time and records each turn.

It owns concurrency: pacing the input audio, endpointing, streaming LLM deltas through the
chunker into TTS while the LLM still runs, playing the reply into the sink, timeouts and
cancellation. Every turn is written the moment it ends; Ctrl-C keeps every finished turn and
still writes the summary.

Load (:class:`~voicelat.core.schedule.Load`): by default one session runs the turns back to back.
``Load(concurrency=N)`` is a closed loop of N sessions, ``Load(rate_per_s=R)`` an open loop
(turns start on a Poisson or constant schedule, sessions opened on demand). Each session has
its own stage instances, so its own connections. Every turn records its intended and actual
start (``intended_start_ns``, ``schedule_lag_ns``) and its session (``extra["session"]``).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import platform
import queue
import statistics
import sys
import threading
import time
from array import array
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from voicelat.audio import (
    PCM,
    Endpoint,
    Endpointer,
    OnsetDetector,
    Pacer,
    SimulatedSink,
    SpeechEnd,
    SpeechStart,
    StopPacing,
    first_audible_sample,
    frames,
    load_for_stage,
    sleep_until,
)
from voicelat.core.chunker import Chunker
from voicelat.core.clock import MonotonicClock
from voicelat.core.errors import InfraError
from voicelat.core.events import Audio, Delta, Done, EndOfTurn, Failed, Final, StageEvent, StageName
from voicelat.core.plan import PlannedTurn
from voicelat.core.recorder import TurnRecorder
from voicelat.core.schedule import (
    Load,
    arrival_offsets_ns,
    max_in_window,
    schedule_lag_ns,
    sessions_for_rate,
    wake_lag_ns,
)
from voicelat.core.summary import build_summary
from voicelat.core.turn import Turn
from voicelat.core.version import __version__
from voicelat.files.fixtures import Fixture, fixture_set_hash
from voicelat.files.pipeline import Pipeline
from voicelat.files.results import TurnsWriter, write_summary
from voicelat.stages.base import LLMStage, STTStage, TTSStage, load_stage_class

FRAME_MS = 20
NS_PER_MS = 1_000_000


class Observer(Protocol):
    """Receives progress from the runner. Calls must be cheap: they run on the measuring loop."""

    def turn_started(self, planned: PlannedTurn, total: int) -> None: ...

    def milestone(self, index: int, name: str, t_rel_ns: int) -> None: ...

    def turn_finished(self, turn: Turn, total: int) -> None: ...


class NullObserver:
    def turn_started(self, planned: PlannedTurn, total: int) -> None:
        return None

    def milestone(self, index: int, name: str, t_rel_ns: int) -> None:
        return None

    def turn_finished(self, turn: Turn, total: int) -> None:
        return None


class FrameSource(Protocol):
    """Where a turn's input frames come from: the :class:`~voicelat.audio.Pacer` replaying a
    fixture in real time (the default), or a live microphone (``voicelat.engine.live``).

    ``run`` calls ``send(k, frame)`` for frame ``k`` of the turn as it becomes available and
    stops early when ``send`` raises :class:`~voicelat.audio.StopPacing`. ``t0_ns`` is the
    clock time of the turn's first sample (known before ``send(0, ...)``), ``time_of_sample``
    places a sample of the turn on the clock, ``lags_ns`` are the per-frame delivery lags.
    """

    t0_ns: int | None

    async def run(
        self, frames: Sequence[bytes], send: Callable[[int, bytes], Awaitable[None]]
    ) -> int: ...

    def time_of_sample(self, sample_index: int, rate: int) -> int: ...

    @property
    def lags_ns(self) -> list[int]: ...


class Sink(Protocol):
    """Where a reply plays: :class:`~voicelat.audio.SimulatedSink` (the default) or a real
    output device (``voicelat.audio.device.DeviceSink``). Times are on the measuring clock."""

    audible: asyncio.Event
    first_audible_ns: int | None
    started_ns: int | None
    underruns: int
    underrun_total_ns: int

    def feed(self, pcm_bytes: bytes, rate: int, arrival_ns: int) -> None: ...

    def finish(self) -> None: ...

    def cancel(self) -> None: ...

    async def play(self) -> None: ...


@dataclass
class _Input:
    fixture: Fixture
    pcm: PCM
    frames: list[bytes]
    speech_start_ms: int | None
    speech_end_ms: int | None


@dataclass
class RunOutcome:
    """What a run produced."""

    run_dir: Path
    turns: list[Turn]
    summary: dict[str, Any]
    interrupted: bool = False
    planned: int = 0


class _LoopLag:
    """Scheduled-vs-actual wake-up probe of the event loop that stamps events."""

    def __init__(self, period_ms: float = 10.0) -> None:
        self.period_ns = int(period_ms * NS_PER_MS)
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
        while True:
            t = time.perf_counter_ns()
            await asyncio.sleep(self.period_ns / 1e9)
            now = time.perf_counter_ns()
            self.times.append(now)
            self.lags.append(wake_lag_ns(t, now, self.period_ns))

    def max_between(self, a: int, b: int) -> int | None:
        return max_in_window(self.times, self.lags, a, b)


@dataclass
class _Session:
    """One simulated user: its own stage instances (so its own connections)."""

    id: int
    stt: STTStage
    llm: LLMStage
    tts: TTSStage
    stack: AsyncExitStack


class _WriterThread:
    """Writes finished turns (JSON + fsync) on a thread of its own: with several sessions,
    other turns are being stamped while one is written, and an fsync can block for
    milliseconds. Order is kept; :meth:`close` waits until every turn is on disk."""

    def __init__(self, writer: TurnsWriter) -> None:
        self._writer = writer
        self._queue: queue.SimpleQueue[Turn | None] = queue.SimpleQueue()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._work, name="voicelat-writer", daemon=True)
        self._thread.start()

    def write(self, turn: Turn) -> None:
        self._queue.put(turn)

    def _work(self) -> None:
        while (turn := self._queue.get()) is not None:
            try:
                self._writer.write(turn)
            except BaseException as exc:  # reported by close(), on the caller's thread
                self.error = self.error or exc

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()
        self._writer.close()
        if self.error is not None:
            raise self.error


@dataclass
class Runner:
    """Runs planned turns through a pipeline's stages on the current event loop."""

    pipeline: Pipeline
    fixtures: Sequence[Fixture]
    out_dir: Path
    observer: Observer = field(default_factory=NullObserver)
    argv: Sequence[str] = ()
    stack_info: dict[str, Any] = field(default_factory=dict)
    #: Builds session N's stages (default: :meth:`build_stages` for every session). Benches
    #: use it to tell sessions apart on the server (e.g. a model name per session).
    session_stages: Callable[[int], tuple[STTStage, LLMStage, TTSStage]] | None = None

    def __post_init__(self) -> None:
        self._by_id = {f.id: f for f in self.fixtures}
        self._inputs: dict[str, _Input] = {}
        self._stages: dict[str, Any] = {}
        self.turns: list[Turn] = []
        self._lag = _LoopLag()
        self._load = Load()
        self._sessions_opened = 0
        # How close to a frame's due time the pacer and the simulated sink busy-wait (None: their
        # default, 1 ms). A run with several sessions sets 0: see :meth:`run`.
        self._spin_ns: int | None = None

    # -- set-up ------------------------------------------------------------------------------
    def build_stages(self) -> tuple[STTStage, LLMStage, TTSStage]:
        """Construct (but do not connect) the pipeline's stages; config errors surface here."""
        p = self.pipeline
        stt = load_stage_class(p.stt["stage"], "stt")(p.stt)
        llm = load_stage_class(p.llm["stage"], "llm")(p.llm)
        tts = load_stage_class(p.tts["stage"], "tts")(p.tts)
        return stt, llm, tts

    def validate(self) -> None:
        """Build the stages and read every fixture: configuration and audio errors surface
        here, before any server is started or any timing begins."""
        stt, _, _ = self.build_stages()
        self.load_inputs(stt.input_rate)

    def load_inputs(self, rate: int) -> None:
        """Read and resample every fixture before any timing starts."""
        for fx in self.fixtures:
            pcm = load_for_stage(fx.path, rate)
            start, end = fx.speech_start_ms, fx.speech_end_ms
            if start is None or end is None:
                # Not annotated: the first and last audible samples stand in for ground truth.
                first = first_audible_sample(pcm)
                last = _last_audible_ms(pcm)
                start = None if first is None else first * 1000 // pcm.rate
                end = last
            self._inputs[fx.id] = _Input(fx, pcm, frames(pcm, FRAME_MS), start, end)

    # -- the run -----------------------------------------------------------------------------
    async def run(self, plan: Sequence[PlannedTurn], *, load: Load | None = None) -> RunOutcome:
        """Run ``plan``: one session back to back (the default), or as ``load`` says. Warm-up
        turns run first (spread over the sessions), then the measured turns."""
        self._load = load = load if load is not None else Load()
        # The pacer and the sink yield-spin the last 1 ms before each 20 ms frame for sub-ms
        # timing. One session can afford it; with many, the spinning alone cost ~23 ms of CPU
        # per turn (bench, 10 sessions), more than everything else the turn does, and it starves
        # the loop the sessions share. Then the pacer does not spin (a frame goes out up to ~1 ms
        # late, which shows in the pacer lag) and the sink spins only until the first audible
        # frame, the one output_first_audible (and so e2e) is stamped on.
        self._spin_ns = None if load.mode == "closed" and load.concurrency == 1 else 0
        stages0 = self._make_stages(0)
        if not self._inputs:
            self.load_inputs(stages0[0].input_rate)
        started_wall = time.time()
        writer = _WriterThread(TurnsWriter(self.out_dir))
        status = "complete"
        lag_task: asyncio.Task[None] | None = None
        frozen = False
        total = len(plan)

        def done(turn: Turn) -> None:
            writer.write(turn)
            self.turns.append(turn)
            self.observer.turn_finished(turn, total)

        def start_probe() -> None:
            # Probe the loop only once set-up work (client construction, handshakes) is done:
            # building a client's SSL context blocks the loop for ~40 ms, before any timing.
            nonlocal lag_task, frozen
            lag_task = asyncio.create_task(self._lag.run())
            _freeze_gc()
            frozen = True

        try:
            async with AsyncExitStack() as stack:
                sessions = [await self._open_session(0, stages0)]
                stack.push_async_callback(sessions[0].stack.aclose)
                self._stages.update(stt=stages0[0], llm=stages0[1], tts=stages0[2])
                if load.mode == "closed" and load.concurrency > 1:
                    more = await self._open_sessions(range(1, load.concurrency))
                    for s in more:
                        stack.push_async_callback(s.stack.aclose)
                    sessions += more
                if load.mode == "closed":
                    start_probe()
                    await self._closed_loop(plan, sessions, done)
                else:
                    await self._open_loop(plan, sessions, stack, load, done, start_probe)
        except (asyncio.CancelledError, KeyboardInterrupt):
            status = "interrupted"
            raise
        except BaseException:
            status = "failed"
            raise
        finally:
            if lag_task is not None:
                lag_task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await lag_task
            if frozen:
                _unfreeze_gc()
            writer.close()
            summary = self._summary(plan, status, started_wall)
            write_summary(self.out_dir, summary)
            self.outcome = RunOutcome(
                self.out_dir, list(self.turns), summary, status == "interrupted", len(plan)
            )
        if self.turns and all(t.failed for t in self.turns):
            first = self.turns[0]
            raise InfraError(
                f"every turn failed ({len(self.turns)}); the first: "
                f"{first.failure_stage}: {first.failure_reason} (results in {self.out_dir})"
            )
        return self.outcome

    # -- sessions and schedules --------------------------------------------------------------
    def _make_stages(self, session: int) -> tuple[STTStage, LLMStage, TTSStage]:
        if self.session_stages is not None:
            return self.session_stages(session)
        return self.build_stages()

    async def _open_session(
        self, sid: int, stages: tuple[STTStage, LLMStage, TTSStage] | None = None
    ) -> _Session:
        """Build (unless given) and enter one session's stages: connect and warm up."""
        stt, llm, tts = stages if stages is not None else self._make_stages(sid)
        stack = AsyncExitStack()
        try:
            for stage in (stt, llm, tts):
                await stack.enter_async_context(stage)
        except BaseException:
            await stack.aclose()
            raise
        self._sessions_opened += 1
        return _Session(sid, stt, llm, tts, stack)

    async def _open_sessions(self, ids: Sequence[int], parallel: int = 32) -> list[_Session]:
        """Open sessions ``ids``, ``parallel`` at a time (hundreds of simultaneous handshakes
        would measure the servers' accept queues, not a warm start). All or nothing."""
        gate = asyncio.Semaphore(parallel)
        opened: list[_Session] = []

        async def one(sid: int) -> None:
            async with gate:
                opened.append(await self._open_session(sid))

        try:
            async with asyncio.TaskGroup() as tg:
                for sid in ids:
                    tg.create_task(one(sid))
        except BaseException as exc:
            for s in opened:
                with contextlib.suppress(Exception):
                    await s.stack.aclose()
            if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
                raise exc.exceptions[0] from None  # one clear error, as a single session gives
            raise
        return sorted(opened, key=lambda s: s.id)

    async def _closed_loop(
        self,
        plan: Sequence[PlannedTurn],
        sessions: Sequence[_Session],
        done: Callable[[Turn], None],
    ) -> None:
        """Each session takes the next planned turn as soon as it is free. Warm-up turns first,
        all of them finished before the first measured turn starts (a steady load).

        With several sessions, session i starts its first measured turn ``i / N`` of a turn
        later (a turn's length: the warm-up turns' median, else the input audio's): N sessions
        started in lockstep would stay in lockstep, every turn of every session hitting each
        stage at the same instant, which measures a thundering herd, not N concurrent users.
        """
        total = len(plan)
        warm = [p for p in plan if p.warmup]
        durations: list[int] = []
        for phase in (warm, [p for p in plan if not p.warmup]):
            pending = list(reversed(phase))
            stagger_ns = 0
            if phase is not warm and len(sessions) > 1:
                stagger_ns = self._turn_length_ns(durations) // len(sessions)

            async def worker(
                s: _Session, pending: list[PlannedTurn] = pending, delay_ns: int = 0
            ) -> None:
                if delay_ns:
                    await asyncio.sleep(delay_ns / 1e9)
                while pending:
                    planned = pending.pop()
                    self.observer.turn_started(planned, total)
                    t = time.perf_counter_ns()
                    done(await self._run_turn(planned, s.stt, s.llm, s.tts, session=s.id))
                    durations.append(time.perf_counter_ns() - t)

            if len(sessions) == 1:
                await worker(sessions[0])  # no task: the plain sequential run, as before
                continue
            async with asyncio.TaskGroup() as tg:
                for i, s in enumerate(sessions):
                    tg.create_task(worker(s, delay_ns=i * stagger_ns))

    def _turn_length_ns(self, warmups_ns: Sequence[int]) -> int:
        """How long a turn takes: the warm-up turns' median, else the input audio's length."""
        if warmups_ns:
            return int(statistics.median(warmups_ns))
        lengths = [i.pcm.n_samples * 1_000_000_000 // i.pcm.rate for i in self._inputs.values()]
        return int(statistics.median(lengths)) if lengths else 0

    async def _open_loop(
        self,
        plan: Sequence[PlannedTurn],
        sessions: list[_Session],
        stack: AsyncExitStack,
        load: Load,
        done: Callable[[Turn], None],
        start_probe: Callable[[], None],
    ) -> None:
        """Measured turns start at their scheduled times whether or not earlier ones are done.

        Warm-up turns run first, back to back on session 0; their duration sizes the pool of
        sessions opened before the schedule starts (Little's law). A turn that finds no free
        session opens one (its set-up counts as schedule lag, and the client's construction
        shows as loop lag) up to ``load.max_sessions``, then waits for one to free up: late
        starts are recorded, never dropped.
        """
        assert load.rate_per_s is not None
        total = len(plan)
        warm = [p for p in plan if p.warmup]
        measured = [p for p in plan if not p.warmup]
        durations: list[int] = []
        for planned in warm:
            self.observer.turn_started(planned, total)
            t = time.perf_counter_ns()
            done(
                await self._run_turn(
                    planned, sessions[0].stt, sessions[0].llm, sessions[0].tts, session=0
                )
            )
            durations.append(time.perf_counter_ns() - t)
        if durations:
            want = sessions_for_rate(load.rate_per_s, int(statistics.median(durations)))
            want = min(want, load.max_sessions, max(1, len(measured)))
            more = await self._open_sessions(range(len(sessions), want))
            for s in more:
                stack.push_async_callback(s.stack.aclose)
            sessions += more
        start_probe()
        idle = list(reversed(sessions))
        freed = asyncio.Condition()
        n_sessions = len(sessions)

        async def take() -> _Session:
            nonlocal n_sessions
            if idle:
                return idle.pop()
            if n_sessions < load.max_sessions:
                n_sessions += 1  # reserved before the await: concurrent arrivals open one each
                s = await self._open_session(n_sessions - 1)
                stack.push_async_callback(s.stack.aclose)
                return s
            async with freed:
                await freed.wait_for(lambda: bool(idle))
                return idle.pop()

        async def arrival(planned: PlannedTurn, intended: int) -> None:
            self.observer.turn_started(planned, total)
            s = await take()
            try:
                done(
                    await self._run_turn(
                        planned, s.stt, s.llm, s.tts, intended_ns=intended, session=s.id
                    )
                )
            finally:
                idle.append(s)
                async with freed:
                    freed.notify()

        offsets = arrival_offsets_ns(len(measured), load.rate_per_s, load.arrival, load.seed)
        clock = MonotonicClock()
        origin = clock.now_ns()
        async with asyncio.TaskGroup() as tg:
            for planned, offset in zip(measured, offsets, strict=True):
                await sleep_until(origin + offset, clock)
                tg.create_task(arrival(planned, origin + offset))

    # -- one turn at a time: ``voicelat compare`` interleaves several runners on one loop -------
    async def run_one(
        self, planned: PlannedTurn, stt: STTStage, llm: LLMStage, tts: TTSStage
    ) -> Turn:
        """Run ONE planned turn on stages the caller has entered; keep it in ``turns`` (for
        :meth:`summary`) and return it. The caller owns the stages, writing and the loop-lag
        probe (:meth:`probe_loop_lag`)."""
        if not self._inputs:
            self.load_inputs(stt.input_rate)
        self._stages.update(stt=stt, llm=llm, tts=tts)
        turn = await self._run_turn(planned, stt, llm, tts)
        self.turns.append(turn)
        return turn

    def summary(
        self, plan: Sequence[PlannedTurn], status: str, started_wall: float
    ) -> dict[str, Any]:
        """The ``summary.json`` document of the turns run so far (as :meth:`run` writes it)."""
        return self._summary(plan, status, started_wall)

    def share_loop_lag(self, other: Runner) -> None:
        """Use ``other``'s loop-lag probe: runners on one event loop need one probe, not one
        each (every probe wakes the loop it measures)."""
        self._lag = other._lag

    async def probe_loop_lag(self) -> None:
        """Run the loop-lag probe until cancelled (:meth:`run` starts its own)."""
        await self._lag.run()

    def _summary(
        self, plan: Sequence[PlannedTurn], status: str, started_wall: float
    ) -> dict[str, Any]:
        return build_summary(
            self.turns,
            run={
                "tool": "voicelat",
                "version": __version__,
                "status": status,
                "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started_wall)),
                "duration_s": round(time.time() - started_wall, 3),
                "planned_turns": len(plan),
                "load": self._load.to_json()
                | {"sessions_opened": self._sessions_opened, "spin": self._spin_ns is None},
                "argv": list(self.argv),
                "python": sys.version.split()[0],
                "platform": platform.platform(),
                "stack": self.stack_info,
            },
            pipeline=self.pipeline.to_json(),
            fixtures=[f.to_json() for f in self.fixtures],
            stages={k: v.describe() for k, v in self._stages.items()},
            loop_lag_ns=list(self._lag.lags),
            budget=self.pipeline.budget,
        ) | {"fixture_set_sha256": fixture_set_hash(list(self.fixtures))}

    # -- one turn ----------------------------------------------------------------------------
    async def _run_turn(
        self,
        planned: PlannedTurn,
        stt: STTStage,
        llm: LLMStage,
        tts: TTSStage,
        *,
        intended_ns: int | None = None,
        session: int | None = None,
    ) -> Turn:
        """One turn. ``intended_ns``: when it was meant to start (an open-loop arrival); by
        default now, i.e. the moment its session was free (a closed loop). The actual start is
        the first sample of its input audio (``t0_ns``); the difference is its schedule lag."""
        intended = time.perf_counter_ns() if intended_ns is None else intended_ns
        inp = self._inputs[planned.fixture]
        rec = TurnRecorder(
            index=planned.index,
            fixture=planned.fixture,
            t0_ns=0,
            repeat=planned.repeat,
            warmup=planned.warmup,
            expected=inp.fixture.text,
            wall_time_ns=time.time_ns(),
        )
        await self._prepare(rec, stt)
        turn_start = time.perf_counter_ns()
        try:
            async with asyncio.timeout(self.pipeline.turn.timeout_s):
                await self._turn_body(planned, inp, rec, stt, llm, tts)
        except TimeoutError:
            last = list(rec.milestones())[-1:] or ["start"]
            rec.fail(
                "turn",
                f"timed out after {self.pipeline.turn.timeout_s:g} s (last milestone: {last[0]})",
            )
        except Exception as exc:
            rec.fail("runner", f"{type(exc).__name__}: {exc}")
        rec.figure("loop_lag_max_ns", self._lag.max_between(turn_start, time.perf_counter_ns()))
        if rec.t0_ns:  # 0 until the first frame went out: a turn that never started has no lag
            rec.figure("intended_start_ns", intended)
            rec.figure("schedule_lag_ns", schedule_lag_ns(intended, rec.t0_ns))
        if session is not None:
            rec.extra("session", session)
        return rec.finish()

    async def _prepare(self, rec: TurnRecorder, *stages: Any) -> None:
        for stage in stages:
            try:
                await stage.prepare()
            except Exception as exc:  # a warm-up that fails shows again in the turn itself
                rec.flag(f"prepare_failed:{type(exc).__name__}")

    def _live(self, rec: TurnRecorder, name: str, t_ns: int) -> None:
        self.observer.milestone(rec.index, name, t_ns - rec.t0_ns)

    async def _turn_body(
        self,
        planned: PlannedTurn,
        inp: _Input,
        rec: TurnRecorder,
        stt: STTStage,
        llm: LLMStage,
        tts: TTSStage,
        *,
        source: FrameSource | None = None,
        sink: Sink | None = None,
    ) -> None:
        """Listen (frames from ``source``, a real-time :class:`Pacer` over the fixture by
        default), endpoint, transcribe, then reply into ``sink`` (see :meth:`_reply`)."""
        ep = self.pipeline.endpointing
        endpointer = Endpointer(
            threshold_dbfs=ep.threshold_dbfs,
            hangover_ms=ep.hangover_ms,
            min_speech_ms=ep.min_speech_ms,
            frame_ms=FRAME_MS,
        )
        audio_q: asyncio.Queue[bytes | None] = asyncio.Queue()
        stt_done = asyncio.Event()
        provider_eot = asyncio.Event()

        async def audio_iter() -> AsyncIterator[bytes]:
            while (frame := await audio_q.get()) is not None:
                yield frame

        async def run_stt() -> None:
            try:
                async for ev in stt.transcribe(audio_iter()):
                    self._record(rec, "stt", ev)
                    if isinstance(ev, Final):
                        self._live(rec, "stt_final", ev.t_ns)
                    if isinstance(ev, EndOfTurn):
                        provider_eot.set()
                    # A streaming recognizer finalizes long utterances in pieces: a Final is not
                    # the end of the turn's transcript. Only a failure stops the audio early.
                    if isinstance(ev, Failed):
                        stt_done.set()
            except Exception as exc:
                rec.fail("stt", f"{type(exc).__name__}: {exc}")
            finally:
                stt_done.set()
                provider_eot.set()

        stt_task = asyncio.create_task(run_stt())
        pacer: FrameSource
        default_pacer: Pacer | None = None
        if source is None:
            pacer = default_pacer = Pacer(frame_ms=FRAME_MS)
        else:
            pacer = source
        endpoint_seen = False
        vad_mode = ep.mode == "vad"

        async def send(k: int, frame: bytes) -> None:
            nonlocal endpoint_seen
            if k == 0:
                t0 = pacer.t0_ns
                assert t0 is not None
                rec.t0_ns = t0
                if inp.speech_start_ms is not None:
                    rec.mark("speech_start", t0 + inp.speech_start_ms * NS_PER_MS)
                if inp.speech_end_ms is not None:
                    rec.mark("speech_end", t0 + inp.speech_end_ms * NS_PER_MS)
            t = time.perf_counter_ns()
            audio_q.put_nowait(frame)
            for event in endpointer.feed(frame, k):
                if isinstance(event, SpeechStart) and inp.speech_start_ms is None:
                    # Live input has no annotation: the VAD onset is the speech start.
                    rec.mark(
                        "speech_start", pacer.time_of_sample(event.sample_offset, inp.pcm.rate)
                    )
                if isinstance(event, SpeechEnd) and inp.speech_end_ms is None:
                    # The VAD confirms an offset only at the endpoint: place it where it was.
                    rec.mark("speech_end", pacer.time_of_sample(event.sample_offset, inp.pcm.rate))
                if isinstance(event, Endpoint) and vad_mode:
                    endpoint_seen = True
                    rec.mark("endpoint", t)
                    self._live(rec, "endpoint", t)
                    raise StopPacing
            if not vad_mode and provider_eot.is_set():
                raise StopPacing
            if stt_done.is_set():
                raise StopPacing

        if default_pacer is not None:
            await default_pacer.run(inp.frames, send, spin_ns=self._spin_ns)
        else:
            await pacer.run(inp.frames, send)
        # Re-warm the next stages' connections while STT finalizes (servers drop idle
        # keep-alive connections after a few seconds; a real agent keeps them warm too).
        warm = asyncio.create_task(self._prepare(rec, llm, tts))
        if not endpoint_seen and vad_mode:
            t = time.perf_counter_ns()
            rec.mark("endpoint", t)
            rec.flag("endpoint:end_of_audio")
        audio_q.put_nowait(None)
        lags = pacer.lags_ns
        if lags:
            lag_max = max(lags)
            rec.figure("pacer_lag_max_ns", lag_max)
            rec.figure("pacer_lag_p50_ns", sorted(lags)[len(lags) // 2])
            if lag_max > self.pipeline.turn.pacer_lag_limit_ms * NS_PER_MS:
                rec.flag("pacer_lag")
        await stt_task
        await warm
        if rec.failed:
            return
        transcript = rec.transcript()
        if not transcript:
            rec.fail("stt", "empty transcript (no speech recognized)")
            return
        await self._reply(planned, rec, transcript, llm, tts, sink=sink)

    async def _reply(
        self,
        planned: PlannedTurn,
        rec: TurnRecorder,
        transcript: str,
        llm: LLMStage,
        tts: TTSStage,
        sink: Sink | None = None,
    ) -> None:
        """LLM -> chunker -> TTS -> ``sink`` (a :class:`SimulatedSink` by default), all
        streaming; marks ``output_first_audible`` when the sink says the first audible sample
        played. Cancelling it (a timeout, a barge-in) cancels its TTS and playback tasks."""
        text_q: asyncio.Queue[str | None] = asyncio.Queue()
        chunker = Chunker(self.pipeline.chunker.mode, self.pipeline.chunker.min_chars)  # type: ignore[arg-type]
        if sink is None:
            record_path = None
            if self.pipeline.output.save_audio:
                record_path = (
                    self.out_dir / "audio" / f"turn-{planned.index:04d}-{planned.fixture}.wav"
                )
                record_path.parent.mkdir(parents=True, exist_ok=True)
            sink = SimulatedSink(
                output_latency_ms=self.pipeline.output.latency_ms,
                record_path=record_path,
                # Several sessions: busy-wait only up to the first audible frame (the e2e stamp).
                spin_after_audible=self._spin_ns is None,
            )
        out: Sink = sink
        onset = OnsetDetector()
        seen_samples = 0

        async def text_iter() -> AsyncIterator[str]:
            while (piece := await text_q.get()) is not None:
                yield piece

        async def run_tts() -> None:
            nonlocal seen_samples
            first = True
            try:
                async for ev in tts.synthesize(text_iter()):
                    self._record(rec, "tts", ev)
                    if isinstance(ev, Audio) and ev.pcm:
                        if first:
                            first = False
                            self._live(rec, "tts_first_byte", ev.t_ns)
                        out.feed(ev.pcm, ev.rate, ev.t_ns)
                        found = onset.feed(ev.pcm, ev.rate)
                        if found is not None:
                            rec.set_onset(found)
                        seen_samples += ev.n_samples
                    elif isinstance(ev, Failed):
                        break
            except Exception as exc:
                rec.fail("tts", f"{type(exc).__name__}: {exc}")
            finally:
                out.finish()

        async def watch_sink() -> None:
            await out.audible.wait()
            if out.first_audible_ns is not None:
                rec.mark("output_first_audible", out.first_audible_ns)
                self._live(rec, "output_first_audible", out.first_audible_ns)

        tts_task = asyncio.create_task(run_tts())
        play_task = asyncio.create_task(out.play())
        watch_task = asyncio.create_task(watch_sink())
        # Everything from here is inside try/finally: a cancelled reply (turn timeout, barge-in)
        # must not leave its TTS and playback tasks running on the loop.
        try:
            first_speakable = True
            first_token = True
            try:
                async for ev in llm.complete(transcript):
                    self._record(rec, "llm", ev)
                    if isinstance(ev, Delta) and ev.content:
                        if first_token:
                            first_token = False
                            self._live(rec, "llm_first_token", ev.t_ns)
                        for piece in chunker.feed(ev.content):
                            if first_speakable:
                                first_speakable = False
                                t = time.perf_counter_ns()
                                rec.mark("llm_first_speakable", t)
                                self._live(rec, "llm_first_speakable", t)
                            text_q.put_nowait(piece)
                    elif isinstance(ev, Done | Failed):
                        break
            except Exception as exc:
                rec.fail("llm", f"{type(exc).__name__}: {exc}")
            if not rec.failed:
                for piece in chunker.flush():
                    if first_speakable:
                        first_speakable = False
                        t = time.perf_counter_ns()
                        rec.mark("llm_first_speakable", t)
                        self._live(rec, "llm_first_speakable", t)
                    text_q.put_nowait(piece)
                if first_speakable:
                    rec.fail("llm", "empty reply: the model produced no speakable text")
            text_q.put_nowait(None)
            await tts_task
            await play_task
        finally:
            for task in (tts_task, play_task, watch_task):
                if not task.done():
                    task.cancel()
            for task in (tts_task, play_task, watch_task):
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        rec.figure("sink_underruns", out.underruns)
        rec.figure("sink_underrun_total_ns", out.underrun_total_ns)
        if out.started_ns is not None:
            # Where the played audio (``save_audio``) starts on the turn's timeline: sample i of
            # the recording played at playout_started + i / rate (bench/audio_truth.py).
            rec.extra("playout_started_ns", out.started_ns - rec.t0_ns)
        if out.started_ns is not None and out.first_audible_ns is None and not rec.failed:
            rec.fail("tts", "the reply audio is silent (no sample above the onset threshold)")

    def _record(self, rec: TurnRecorder, stage: StageName, ev: StageEvent) -> None:
        rec.on_event(stage, ev)


_frozen_runs = 0


def _freeze_gc() -> None:
    """Move every object alive at the start of measuring (modules, clients, stages, fixtures)
    out of the garbage collector's reach, as vLLM's ``freeze_gc_heap`` does: a full collection
    scanning them stopped the measuring loop for ~50 ms in a 100-session bench. Objects made
    during the run are still collected."""
    global _frozen_runs
    if _frozen_runs == 0:
        gc.collect()  # before the freeze (and before timing): garbage is not frozen
        gc.freeze()
    _frozen_runs += 1  # nested runs in one process: the outermost one unfreezes


def _unfreeze_gc() -> None:
    global _frozen_runs
    _frozen_runs -= 1
    if _frozen_runs == 0:
        gc.unfreeze()


def _last_audible_ms(pcm: PCM) -> int | None:
    reversed_pcm = PCM(pcm.to_array()[::-1].tobytes(), pcm.rate)
    idx = first_audible_sample(reversed_pcm)
    if idx is None:
        return None
    return (pcm.n_samples - idx) * 1000 // pcm.rate


__all__ = ["FrameSource", "NullObserver", "Observer", "RunOutcome", "Runner", "Sink"]
