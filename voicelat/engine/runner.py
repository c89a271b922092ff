"""The fixture runner: plays fixtures into the pipeline in real time and records each turn.

It composes the engine's parts: the stage sets (:mod:`voicelat.engine.stageset`), the turn
engine (:mod:`voicelat.engine.turn`: pacing the input audio, endpointing, streaming LLM deltas
through the chunker into TTS while the LLM still runs, playing the reply into the sink,
timeouts and cancellation), the load shapes (:mod:`voicelat.engine.load`), the loop-lag probe
and the garbage-collector freeze (:mod:`voicelat.engine.probes`) and the turns writer thread
(:mod:`voicelat.engine.writer`). Every turn is written the moment it ends; Ctrl-C keeps every
finished turn and still writes the summary.

Load (:class:`~voicelat.core.measure.schedule.Load`): by default one session runs the turns back to back.
``Load(concurrency=N)`` is a closed loop of N sessions, ``Load(rate_per_s=R)`` an open loop
(turns start on a Poisson or constant schedule, sessions opened on demand). Each session has
its own stage instances, so its own connections. Every turn records its intended and actual
start (``intended_start_ns``, ``schedule_lag_ns``) and its session (``extra["session"]``).
"""

from __future__ import annotations

import asyncio
import contextlib
import platform
import statistics
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from voicelat.core.base.errors import InfraError, only_interrupts
from voicelat.core.base.plan import PlannedTurn
from voicelat.core.base.region import REGION
from voicelat.core.base.turn import Turn
from voicelat.core.base.version import __version__
from voicelat.core.calls.call import CallRecord, calls_section
from voicelat.core.calls.caller import caller_section
from voicelat.core.measure.clock import Clock, MonotonicClock
from voicelat.core.measure.schedule import Load
from voicelat.core.summaries.diagnostics import MachineSample
from voicelat.core.summaries.streaming_summary import RecentTurns
from voicelat.engine.agent_turn import TraceSource
from voicelat.engine.call import CallEngine, PlannedCall
from voicelat.engine.load import Barrier, Session, SessionPool, closed_loop, open_loop
from voicelat.engine.machine import MachineSampler, server_pids
from voicelat.engine.phone_leg import band_limited, phone_leg
from voicelat.engine.probes import LoopLagProbe, freeze_gc, unfreeze_gc
from voicelat.engine.progress import NullObserver, Observer
from voicelat.engine.servers import with_stack_servers
from voicelat.engine.shapes import turn_engine_for
from voicelat.engine.stageset import StageSet
from voicelat.engine.turn import FRAME_MS, FrameSource, Sink, TurnEngine, TurnInput
from voicelat.engine.writer import TurnsWriterThread
from voicelat.files.fixtures import Fixture, fixture_set_hash
from voicelat.files.pipeline import Pipeline
from voicelat.files.results import TurnsWriter, load_run, write_calls, write_summary

NS_PER_MS = 1_000_000

#: What builds a session's stages: a StageSet, or a plain ``(stt, llm, tts)`` triple.
StageFactory = Callable[[int], "StageSet | tuple[Any, Any, Any]"]


@dataclass
class RunOutcome:
    """What a run produced.

    ``turns`` are the turns the run kept in memory: every one, unless the run finished more
    than its window of recent turns (``kept_all`` False); :meth:`every_turn` has them all.
    """

    run_dir: Path
    turns: list[Turn]
    summary: dict[str, Any]
    interrupted: bool = False
    planned: int = 0
    kept_all: bool = True

    def every_turn(self) -> list[Turn]:
        """Every finished turn: the kept ones, else read back from the run's turns.jsonl.

        Only after the run (never on the stamping loop): a gate or a regression check must
        judge every turn, not the window a long run keeps.
        """
        if self.kept_all:
            return self.turns
        return list(load_run(self.run_dir).turns)

    @classmethod
    def of(
        cls, run_dir: Path, turns: RecentTurns, summary: dict[str, Any], status: str, planned: int
    ) -> RunOutcome:
        """The outcome of a run that kept ``turns`` (its window of recent turns)."""
        return cls(
            run_dir,
            list(turns),
            summary,
            status == "interrupted",
            planned,
            kept_all=len(turns) == turns.appended,
        )


def raise_if_every_turn_failed(turns: RecentTurns, run_dir: Path) -> None:
    """``InfraError`` (exit 3) when every turn of the run failed: a server down, not a result."""
    if turns.all_failed and (first := turns.first) is not None:
        raise InfraError(
            f"every turn failed ({turns.appended}); the first: "
            f"{first.failure_stage}: {first.failure_reason} (results in {run_dir})"
        )


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
    session_stages: StageFactory | None = None
    #: The clock every stamp of the run is taken on (the stages' too, where they have one).
    clock: Clock = field(default_factory=MonotonicClock)
    #: Worker processes (:mod:`voicelat.engine.workers`): awaited after the warm-up turns, it
    #: returns the shared epoch the measured turns start from; this worker's stagger share;
    #: its part of the open-loop schedule (offsets from the epoch).
    barrier: Barrier | None = None
    stagger_offset: float = 0.0
    schedule_ns: Sequence[int] | None = None
    #: An agent pipeline's trace receiver (its spans split agent turns; None: black-box).
    trace_source: TraceSource | None = None
    #: Whole calls instead of single turns (``run --scenario``): each a scenario run as one
    #: call on one session (``engine/call.py``); the plan is then their turns.
    calls: Sequence[PlannedCall] = ()
    #: The simulated callers of scenarios with a ``[caller]`` (``engine/caller.py``
    #: SimulatedCallers; None: every call is scripted).
    callers: Any = None
    #: The instrument error bar's reference passes (``engine/calibrate.py``'s Calibration:
    #: ``before()`` the measured turns, ``after()`` them, its ``section()`` in the summary).
    calibration: Any = None
    #: ``--region LABEL``: where this profiler runs, recorded on every turn
    #: (``extra["region"]``) and in the summary's ``run`` (docs/NETWORK.md, "Regions").
    region: str | None = None

    def __post_init__(self) -> None:
        #: Each fixture's prepared input, by fixture id (:meth:`load_inputs`).
        self.inputs: dict[str, TurnInput] = {}
        #: The stages the summary describes (session 0's, or the caller's).
        self.stages: StageSet | None = None
        #: The most recent finished turns; ``turns.summary`` accumulates every one (constant
        #: memory whatever the run's length: core/summaries/streaming_summary.py).
        self.turns = RecentTurns()
        self.loop_lag = LoopLagProbe(clock=self.clock)
        #: The machine during the run (engine/machine.py), judged by the trust verdict.
        self.machine_samples: list[MachineSample] = []
        self.sessions_opened = 0
        #: The run's load shape (the summary's load section).
        self.load = Load()
        #: Each finished call's record (``calls.jsonl``) and its turns (the per-index figures).
        self.call_records: list[CallRecord] = []
        self.call_turns: list[Turn] = []
        # How close to a frame's due time the pacer and the simulated sink busy-wait (None: their
        # default, 1 ms). A run with several sessions sets 0: see :meth:`run`.
        self._spin_ns: int | None = None

    # -- set-up ------------------------------------------------------------------------------
    def build_stages(self) -> StageSet:
        """Construct (but do not connect) the pipeline's stages; config errors surface here."""
        return StageSet.from_pipeline(self.pipeline)

    def validate(self) -> None:
        """Build the stages and read every fixture: configuration and audio errors surface
        here, before any server is started or any timing begins."""
        self.load_inputs(StageSet.of(self.build_stages()).input_rate)

    def load_inputs(self, rate: int) -> None:
        """Read and resample every fixture before any timing starts."""
        leg = phone_leg(self.pipeline)
        for fx in self.fixtures:
            inp = TurnInput.from_fixture(fx, rate)
            # A phone leg: the caller's audio through G.711, once, here (engine/phone_leg.py).
            self.inputs[fx.id] = band_limited(inp) if leg is not None else inp

    def turn_engine(self) -> TurnEngine:
        """The engine that runs this runner's turns (its clock, observer, probe, out_dir), of
        the pipeline's shape (``engine/shapes.py``)."""
        return turn_engine_for(
            self.pipeline,
            trace_source=self.trace_source,
            clock=self.clock,
            observer=self.observer,
            loop_lag=self.loop_lag,
            out_dir=self.out_dir,
            spin_ns=self._spin_ns,
        )

    # -- the run -----------------------------------------------------------------------------
    async def run(self, plan: Sequence[PlannedTurn], *, load: Load | None = None) -> RunOutcome:
        """Run ``plan``: one session back to back (the default), or as ``load`` says. Warm-up
        turns run first (spread over the sessions), then the measured turns."""
        self.load = load = load if load is not None else Load()
        # Busy-waiting (the pacer yield-spins the last 1 ms before each 20 ms frame: sub-ms
        # send times) is the pipeline's ``[turn] busy_wait``, off by default: it cost ~50 ms of
        # CPU per turn at one session and starves a loop shared by many (docs/BENCHMARKS.md).
        # The simulated sink computes its timeline and never spins.
        self._spin_ns = None if self.pipeline.turn.busy_wait else 0
        stages0 = self._make_stages(0)
        if not self.inputs:
            self.load_inputs(stages0.input_rate)
        if self.calibration is not None:
            await self.calibration.before()  # never raises: a failed pass is "uncalibrated"
        started_wall = time.time()
        writer = TurnsWriterThread(TurnsWriter(self.out_dir))
        status = "complete"
        total = len(plan)

        def done(turn: Turn) -> None:
            turn = self.stamp(turn)
            writer.write(turn)
            self.record(turn)
            self.observer.turn_finished(turn, total)

        probe = _Probe(self.loop_lag)
        machine = MachineSampler(self.clock.now_ns, server_pids(self.stack_info))
        machine.start()
        try:
            if self.calls:
                await self._measure_calls(load, stages0, done, probe)
            else:
                await self._measure(plan, load, stages0, done, probe)
        except (asyncio.CancelledError, KeyboardInterrupt):
            status = "interrupted"
            raise
        except BaseException as exc:
            if only_interrupts(exc):
                # A stop signal inside a library's task group: still an interruption.
                status = "interrupted"
                raise KeyboardInterrupt from exc
            status = "failed"
            raise
        finally:
            await probe.stop()
            self.machine_samples = machine.stop()
            if self.calibration is not None and status == "complete":
                await self.calibration.after()  # once the probe is off: its lag is not the run's
            # A failed turns write (a full disk) must not stop the summary from being tried.
            with contextlib.suppress(InfraError):
                writer.close()
            summary = self.summary(plan, status, started_wall)
            if self.calls:
                write_calls(self.out_dir, self.call_records)
            write_summary(self.out_dir, summary)
            self.outcome = RunOutcome.of(self.out_dir, self.turns, summary, status, len(plan))
        if writer.error is not None:
            raise writer.error  # the last turn's write failed: the run did not keep it
        raise_if_every_turn_failed(self.turns, self.out_dir)
        return self.outcome

    async def _measure(
        self,
        plan: Sequence[PlannedTurn],
        load: Load,
        stages0: StageSet,
        done: Callable[[Turn], None],
        probe: _Probe,
    ) -> None:
        """Open the sessions, then run the plan in ``load``'s shape."""
        engine = self.turn_engine()

        async def run_turn(planned: PlannedTurn, s: Session, intended: int | None) -> Turn:
            inp = self.inputs[planned.fixture]
            return await engine.run(planned, s.stages, inp, intended_ns=intended, session=s.id)

        pool = SessionPool(self._make_stages, self.clock)
        try:
            async with pool:
                sessions = [await pool.open(0, stages0)]
                self.stages = stages0
                if load.mode == "closed" and load.concurrency > 1:
                    sessions += await pool.open_many(range(1, load.concurrency))
                if load.mode == "closed":
                    probe.start()
                    await closed_loop(
                        plan,
                        sessions,
                        run_turn,
                        done,
                        observer=self.observer,
                        clock=self.clock,
                        input_length_ns=self._input_length_ns(),
                        barrier=self.barrier,
                        stagger_offset=self.stagger_offset,
                    )
                else:
                    await open_loop(
                        plan,
                        pool,
                        sessions,
                        load,
                        run_turn,
                        done,
                        observer=self.observer,
                        clock=self.clock,
                        start_probe=probe.start,
                        barrier=self.barrier,
                        schedule_ns=self.schedule_ns,
                    )
        finally:
            self.sessions_opened += pool.opened

    async def _measure_calls(
        self, load: Load, stages0: StageSet, done: Callable[[Turn], None], probe: _Probe
    ) -> None:
        """Run :attr:`calls`, ``load.concurrency`` at once, each on a session of its own
        (a call never shares its session)."""
        calls = CallEngine(self.turn_engine(), self.inputs)
        todo = deque(self.calls)
        pool = SessionPool(self._make_stages, self.clock)
        callers = self.callers

        async def caller(s: Session) -> None:
            while todo:
                planned = todo.popleft()
                # A simulated caller decides the call's lines between its turns.
                source = None if callers is None else callers.source(planned, s.stages.input_rate)
                record = await calls.run(
                    planned.scenario,
                    s.stages,
                    call_id=planned.call_id,
                    first_index=planned.first_index,
                    done=done,
                    session=s.id,
                    source=source,
                )
                if source is not None:
                    record = callers.finished(source, record)
                self.call_records.append(record)

        try:
            # The callers' stages are entered before any session or turn (their set-up is
            # never a turn's); on the way out they write conversation.jsonl.
            async with callers if callers is not None else contextlib.nullcontext(), pool:
                sessions = [await pool.open(0, stages0)]
                self.stages = stages0
                n = min(load.concurrency, len(self.calls))
                if n > 1:
                    sessions += await pool.open_many(range(1, n))
                if self.barrier is not None:
                    await self.barrier()  # worker processes: every worker's calls start together
                probe.start()
                await asyncio.gather(*(caller(s) for s in sessions))
                if callers is not None:
                    # The judge, once every call is over (no turn is running).
                    self.call_records[:] = await callers.settle(self.call_records)
        finally:
            self.sessions_opened += pool.opened

    def _make_stages(self, session: int) -> StageSet:
        if self.session_stages is not None:
            return StageSet.of(self.session_stages(session))
        return StageSet.of(self.build_stages())

    def _input_length_ns(self) -> int:
        """The median length of the input audio (a turn's length before any turn ran)."""
        lengths = [i.duration_ns for i in self.inputs.values()]
        return int(statistics.median(lengths)) if lengths else 0

    # -- one turn at a time: ``voicelat compare`` interleaves several runners on one loop -------
    async def run_one(
        self,
        planned: PlannedTurn,
        stages: StageSet,
        *,
        extra: Mapping[str, Any] | None = None,
    ) -> Turn:
        """Run ONE planned turn on stages the caller has entered; keep it (:meth:`record`, for
        :meth:`summary`) and return it, with ``extra`` added to its ``extra`` (the comparison's
        slot and combination: the turn is kept as it is written). The caller owns the stages,
        writing and the loop-lag probe (:meth:`probe_loop_lag`)."""
        if not self.inputs:
            self.load_inputs(stages.input_rate)
        self.stages = stages
        if self.turns.maxlen is not None and not self.turns.appended:
            # The comparison resamples every turn it ran (a plan's worth): keep them all.
            self.turns = RecentTurns(self.turns.summary, maxlen=None)
        turn = await self.turn_engine().run(planned, stages, self.inputs[planned.fixture])
        if extra:
            turn = replace(turn, extra={**turn.extra, **extra})
        turn = self.stamp(turn)
        self.record(turn)
        return turn

    def stamp(self, turn: Turn) -> Turn:
        """``turn`` with this run's region on it (as it is unless the run has one; a turn that
        already names one, a Ray node's, keeps it)."""
        if self.region is None or REGION in turn.extra:
            return turn
        return replace(turn, extra={**turn.extra, REGION: self.region})

    def record(self, turn: Turn) -> None:
        """Keep a finished turn: in ``turns`` (and the summary they accumulate) and, in a run of
        calls, among its calls' turns. For callers that drive turns themselves (the comparison's
        calls); :meth:`run` and :meth:`run_one` record theirs."""
        self.turns.append(turn)
        if self.calls:
            self.call_turns.append(turn)

    def summary(
        self, plan: Sequence[PlannedTurn], status: str, started_wall: float
    ) -> dict[str, Any]:
        """The ``summary.json`` document of the turns run so far (as :meth:`run` writes it)."""
        return (
            self.turns.summary.finish(
                run={
                    "tool": "voicelat",
                    "version": __version__,
                    "status": status,
                    "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started_wall)),
                    "duration_s": round(time.time() - started_wall, 3),
                    "planned_turns": len(plan),
                    "load": self.load.to_json()
                    | {"sessions_opened": self.sessions_opened, "spin": self._spin_ns is None},
                    "argv": list(self.argv),
                    "event_loop": _loop_name(),
                    "python": sys.version.split()[0],
                    "platform": platform.platform(),
                    "stack": self.stack_info,
                }
                | ({REGION: self.region} if self.region is not None else {}),
                pipeline=self.pipeline.to_json(),
                fixtures=[f.to_json() for f in self.fixtures],
                stages=(
                    with_stack_servers(self.stages.describe(), self.stack_info)
                    if self.stages is not None
                    else {}
                ),
                loop_lag_ns=self.loop_lag.lags,
                budget=self.pipeline.budget,
                machine=self.machine_samples,
            )
            | {"fixture_set_sha256": fixture_set_hash(list(self.fixtures))}
            | self._calls_part()
            | ({"instrument": self.calibration.section()} if self.calibration is not None else {})
        )

    def _calls_part(self) -> dict[str, Any]:
        """The summary's ``calls`` section of a run of calls (nothing for single turns)."""
        if not self.calls:
            return {}
        part: dict[str, Any] = {"calls": calls_section(self.call_records, self.call_turns)}
        caller = caller_section(c.extra["caller"] for c in self.call_records if "caller" in c.extra)
        if caller is not None:
            part["caller"] = caller  # the simulated callers (core/calls/caller.py)
        return part

    def share_loop_lag(self, other: Runner) -> None:
        """Use ``other``'s loop-lag probe: runners on one event loop need one probe, not one
        each (every probe wakes the loop it measures)."""
        self.loop_lag = other.loop_lag

    async def probe_loop_lag(self) -> None:
        """Run the loop-lag probe until cancelled (:meth:`run` starts its own)."""
        await self.loop_lag.run()


def _loop_name() -> str:
    """The running event loop's module (``uvloop`` or ``asyncio``), for the summary."""
    try:
        return type(asyncio.get_running_loop()).__module__.split(".")[0]
    except RuntimeError:
        return "none"


class _Probe:
    """The run's loop-lag probe task and GC freeze, started once set-up work is done."""

    def __init__(self, probe: LoopLagProbe) -> None:
        self._probe = probe
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        # Probe the loop only once set-up work (client construction, handshakes) is done:
        # building a client's SSL context blocks the loop for ~40 ms, before any timing.
        self._task = asyncio.create_task(self._probe.run())
        freeze_gc()

    async def stop(self) -> None:
        if self._task is None:
            return
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        unfreeze_gc()


__all__ = [
    "FRAME_MS",
    "FrameSource",
    "NullObserver",
    "Observer",
    "RunOutcome",
    "Runner",
    "Sink",
    "StageFactory",
]
