"""``--workers N``: a run's sessions sharded over N worker processes, one event loop each.

One process's loop keeps its stamps within ~1-2 ms only up to a point (docs/BENCHMARKS.md:
about 20 turns/s on this 2-core machine); past it every stamp is late by the loop's lag. Here
each worker is a process of its own (``multiprocessing``, *spawn*: no inherited loop, threads
or sockets) with its own event loop, loop-lag probe and stages, running an ordinary
:class:`~voicelat.engine.runner.Runner` on its share of the plan and of the load:

* **the plan**: warm-up and measured turns dealt round-robin (each turn runs exactly once,
  under its own index);
* **a closed loop** of C sessions: C / N sessions each; worker ``k`` shifts its sessions by
  ``k / N`` of a stagger step so that all the workers' sessions interleave;
* **an open loop** at R turns/s: ONE schedule is drawn here (the run's seed) and worker ``k``
  gets the arrivals ``k, k + N, ...``, as offsets from a shared epoch.

Every worker does its set-up and warm-up turns, then reports ready; once all are, the parent
sends them one epoch, a CLOCK_MONOTONIC time shortly ahead (one clock for every process on one
machine), and the measured turns start from it. Each finished turn streams back to the parent
(a ``multiprocessing`` queue: pickled on the queue's feeder thread, not on the measuring loop),
which writes ONE ``turns.jsonl`` and ONE summary; every worker's loop-lag samples are merged
into the summary's ``loop_lag`` (so its trust section judges the worst loop of all), and the
turns carry their own pacer lag. A turn records its worker (``extra.worker``) and a global
session id (``extra.session`` = local session x N + worker).

A worker that dies (a crash, a kill, an exception the runner does not catch) is reported: every
turn of its share that did not come back is recorded as failed with the reason (stage
``worker``), the run goes on with the others, and the summary's ``workers`` section says how
each ended. Each worker's own runner files (its turns and summary) are kept under
``workers/w<k>/`` of the results directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import dataclasses
import multiprocessing as mp
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing import connection as mp_connection
from pathlib import Path
from typing import Any, cast

from voicelat.core.base.errors import InfraError
from voicelat.core.base.plan import PlannedTurn
from voicelat.core.base.region import REGION
from voicelat.core.base.turn import Turn
from voicelat.core.calls.call import CALL_ID, CallRecord
from voicelat.core.measure.clock import MonotonicClock
from voicelat.core.measure.recorder import TurnRecorder
from voicelat.core.measure.schedule import Load, arrival_offsets_ns
from voicelat.core.summaries.streaming_summary import RecentTurns
from voicelat.engine.call import PlannedCall
from voicelat.engine.load import Barrier
from voicelat.engine.probes import loop_kind, run_measuring_loop
from voicelat.engine.progress import NullObserver, Observer
from voicelat.engine.runner import Runner, RunOutcome, StageFactory, raise_if_every_turn_failed
from voicelat.engine.stageset import StageSet
from voicelat.engine.writer import TurnsWriterThread
from voicelat.files.fixtures import Fixture
from voicelat.files.pipeline import Pipeline
from voicelat.files.results import TurnsWriter, write_calls, write_summary

#: How far ahead of "all workers ready" the shared epoch is set: the go message must reach
#: every worker (a queue hop and a thread wake-up each) before it.
EPOCH_LEAD_NS = 200_000_000
#: How often the parent checks whether a worker died while waiting for messages.
POLL_S = 0.2


@dataclass(frozen=True)
class WorkerJob:
    """What worker ``index`` of ``workers`` runs (picklable: it crosses to a spawned process)."""

    index: int
    workers: int
    pipeline: Pipeline
    fixtures: Sequence[Fixture]
    plan: Sequence[PlannedTurn]
    load: Load
    out_dir: Path
    #: Open loop: this worker's arrivals, offsets from the shared epoch (None: closed loop).
    schedule_ns: Sequence[int] | None = None
    #: Builds a session's stages from its GLOBAL id (a picklable callable; None: the
    #: pipeline's stages), as ``Runner.session_stages`` does (benches: a model per session).
    session_stages: StageFactory | None = None
    #: ``--scenario``: this worker's whole calls (a call never spans workers); ``plan`` is
    #: then their turns.
    calls: Sequence[PlannedCall] = ()


@dataclass
class WorkerReport:
    """How one worker ended, as the summary's ``workers`` section shows it."""

    index: int
    planned: int
    pid: int | None = None
    turns: int = 0
    exitcode: int | None = None
    error: str | None = None
    lost: int = 0
    sessions_opened: int = 0
    loop_lag_ns: list[int] = field(default_factory=list)
    ready: bool = False
    done: bool = False
    #: Ray (:mod:`voicelat.engine.ray_workers`): the node the worker ran on, and the estimated
    #: offset of its clock from the parent's (worker minus parent) with its uncertainty.
    node: str | None = None
    clock_offset_ns: int | None = None
    clock_offset_uncertainty_ns: int | None = None
    #: The worker process's CPU time over its run, every thread (None: not reported).
    cpu_s: float | None = None
    #: ``--scenario``: the worker's finished calls (``CallRecord.to_json()`` each).
    calls: list[dict[str, Any]] = field(default_factory=list)
    #: Ray: the label of the worker's node (its raylet's ``VOICELAT_REGION``); None: the run's.
    region: str | None = None

    def where(self) -> str:
        """``worker 1 (pid 1234)``, with its node under Ray."""
        node = f"node {self.node[:8]}, " if self.node else ""
        return f"worker {self.index} ({node}pid {self.pid})"

    def to_json(self) -> dict[str, Any]:
        """The report as JSON (loop-lag P99 instead of the samples)."""
        lags = sorted(self.loop_lag_ns)
        p99 = lags[min(len(lags) - 1, len(lags) * 99 // 100)] if lags else None
        return {
            "worker": self.index,
            "pid": self.pid,
            "planned_turns": self.planned,
            "turns_returned": self.turns,
            "turns_lost": self.lost,
            "exitcode": self.exitcode,
            "error": self.error,
            "sessions_opened": self.sessions_opened,
            "loop_lag_p99_ns": p99,
            "cpu_s": self.cpu_s,
        } | (
            {
                "node": self.node,
                "clock_offset_ns": self.clock_offset_ns,
                "clock_offset_uncertainty_ns": self.clock_offset_uncertainty_ns,
                # The node's own label (None: its turns carry the run's).
                "region": self.region,
            }
            if self.node is not None
            else {}
        )


# -- sharding (pure) ---------------------------------------------------------------------------
def shard_plan(plan: Sequence[PlannedTurn], workers: int) -> list[list[PlannedTurn]]:
    """Deal warm-up turns, then measured turns, round-robin over ``workers`` shares."""
    shares: list[list[PlannedTurn]] = [[] for _ in range(workers)]
    for phase in ([p for p in plan if p.warmup], [p for p in plan if not p.warmup]):
        for j, planned in enumerate(phase):
            shares[j % workers].append(planned)
    return shares


def shard_load(load: Load, workers: int, index: int) -> Load:
    """Worker ``index``'s share of ``load``: its sessions (closed) or its rate (open)."""
    if load.mode == "closed":
        share = load.concurrency // workers + (1 if index < load.concurrency % workers else 0)
        return dataclasses.replace(load, concurrency=max(1, share))
    assert load.rate_per_s is not None
    return dataclasses.replace(
        load,
        rate_per_s=load.rate_per_s / workers,
        max_sessions=max(1, load.max_sessions // workers),
    )


def shard_schedule(plan: Sequence[PlannedTurn], load: Load, workers: int) -> list[list[int]]:
    """ONE open-loop schedule (the run's seed) for the measured turns, dealt as
    :func:`shard_plan` deals them: worker ``k`` gets arrivals ``k, k + N, ...``."""
    assert load.rate_per_s is not None
    measured = [p for p in plan if not p.warmup]
    offsets = arrival_offsets_ns(len(measured), load.rate_per_s, load.arrival, load.seed)
    shares: list[list[int]] = [[] for _ in range(workers)]
    for j, offset in enumerate(offsets):
        shares[j % workers].append(offset)
    return shares


def effective_workers(load: Load, workers: int, turns: int | None = None) -> tuple[int, str | None]:
    """How many workers make sense for ``load`` and a plan of ``turns`` measured turns on this
    machine, and a warning if fewer (or more than the cores) were asked for: a worker without
    a session or a turn of its own would only start an idle process (and its stages)."""
    n, notes = workers, []
    if load.mode == "closed" and n > load.concurrency:
        n = load.concurrency
        notes.append(
            f"--workers {workers} is more than the {n} session(s): "
            f"using {n} worker(s) (one session each)"
        )
    if turns is not None and n > max(1, turns):
        n = max(1, turns)
        notes.append(
            f"--workers {workers} is more than the plan's {turns} measured turn(s): "
            f"using {n} worker(s)"
        )
    cores = os.cpu_count() or 1
    if not notes and n > cores:
        notes.append(
            f"--workers {workers} is more than this machine's {cores} cores: the workers "
            "will share cores and their loop lag will show it (the trust section checks it)"
        )
    return n, "; ".join(notes) or None


# -- the worker process ------------------------------------------------------------------------
class _StreamingObserver:
    """Sends every finished turn to the parent (a queue put: the feeder thread pickles it)."""

    def __init__(self, out: Any, index: int) -> None:
        self._out, self._index = out, index

    def turn_started(self, planned: PlannedTurn, total: int) -> None:
        return None

    def milestone(self, index: int, name: str, t_rel_ns: int) -> None:
        return None

    def turn_finished(self, turn: Turn, total: int) -> None:
        self._out.put(("turn", self._index, turn))


def worker_runner(job: WorkerJob, observer: Observer, barrier: Barrier) -> Runner:
    """The runner of worker ``job.index``: its share, its stagger, its part of the schedule,
    its sessions' global ids; ``barrier`` waits for the shared epoch (any transport's)."""
    runner = Runner(
        job.pipeline,
        job.fixtures,
        job.out_dir,
        observer=observer,
        barrier=barrier,
        stagger_offset=job.index / job.workers,
        schedule_ns=job.schedule_ns,
        calls=job.calls,
    )
    if job.session_stages is not None:
        factory = job.session_stages
        runner.session_stages = lambda local: factory(local * job.workers + job.index)
    return runner


#: ``prctl(2)`` option: the signal the kernel sends this process when its parent dies.
PR_SET_PDEATHSIG = 1
#: How often a worker without ``prctl`` (not Linux) checks that its parent is still there.
PARENT_POLL_S = 1.0


def die_with_parent(parent_pid: int | None) -> None:
    """End this worker when its parent ends, however it ends (SIGKILL included: the parent's
    clean-up never runs then, and a worker left behind keeps loading the servers and holding
    its connections, with nobody to read its turns). On Linux the kernel sends SIGKILL at the
    parent's death (``PR_SET_PDEATHSIG``, through ctypes: no dependency); elsewhere a daemon
    thread watches the parent pid. A parent already gone by now ends the worker at once."""
    if parent_pid is None:
        return
    armed = False
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            armed = libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    if os.getppid() != parent_pid:  # the parent died before the signal was armed
        _end_now()
    if armed:
        return

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_S)
        _end_now()

    threading.Thread(target=watch, name="voicelat-parent-watch", daemon=True).start()


def _end_now() -> None:
    """End this process at once, as the parent-death signal does (nothing to clean up: no one
    is left to read what it would write)."""
    os.kill(os.getpid(), signal.SIGKILL)


def worker_main(job: WorkerJob, out: Any, inbox: Any) -> None:
    """A worker process: its runner on its own loop; reports ready, waits for the epoch."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    parent = mp.parent_process()
    die_with_parent(parent.pid if parent is not None else None)

    async def barrier() -> int:
        out.put(("ready", job.index, os.getpid()))
        message = await asyncio.to_thread(inbox.get)
        return int(message[1])

    runner = worker_runner(job, _StreamingObserver(out, job.index), barrier)
    error = None
    cpu0 = time.process_time()
    try:
        run_measuring_loop(runner.run(job.plan, load=job.load))
    except InfraError:
        pass  # every turn failed: they came back as failed turns already
    except BaseException as exc:  # reported to the parent, which fails the missing turns
        error = f"{type(exc).__name__}: {exc}"
    cpu = round(time.process_time() - cpu0, 3)
    calls = [r.to_json() for r in runner.call_records]
    out.put(
        ("done", job.index, list(runner.loop_lag.lags), runner.sessions_opened, error, cpu, calls)
    )


# -- the parent: the plan split and the merge (shared by the process pool and Ray) ---------------
@dataclass
class ShardedRun:
    """A plan split over ``workers`` and their turns merged into ONE ``turns.jsonl`` and ONE
    summary. The transport (processes here, Ray actors in :mod:`voicelat.engine.ray_workers`)
    is the subclass's; the split, tagging, lost-turn accounting and summary are here."""

    pipeline: Pipeline
    fixtures: Sequence[Fixture]
    out_dir: Path
    workers: int
    observer: Observer = field(default_factory=NullObserver)
    argv: Sequence[str] = ()
    stack_info: dict[str, Any] = field(default_factory=dict)
    #: Passed to every worker (see :attr:`WorkerJob.session_stages`).
    session_stages: StageFactory | None = None
    #: ``--scenario``: the run's calls, dealt whole to the workers (round-robin).
    calls: Sequence[PlannedCall] = ()
    #: ``--region LABEL``: on every worker's turns, unless its (Ray) node has its own.
    region: str | None = None

    def __post_init__(self) -> None:
        #: The most recent turns; ``turns.summary`` accumulates every worker's (bounded).
        self.turns = RecentTurns()
        #: Which planned turns came back, by index (a worker that dies is accounted by it).
        self._returned = bytearray()
        self.reports: list[WorkerReport] = []
        self._clock = MonotonicClock()
        #: The workers' event loop (the parent runs none) and what the summary's ``run``
        #: section says about the transport (Ray: its address and nodes).
        self.event_loop = loop_kind()
        self.run_info: dict[str, Any] = {}
        #: The run's instrument error bar (``engine/calibrate.py``), timed in the parent.
        self.calibration: Any = None

    def jobs(self, plan: Sequence[PlannedTurn], load: Load) -> list[WorkerJob]:
        """Each worker's share of ``plan`` and ``load`` (of whole calls, with ``calls``)."""
        shares = shard_plan(plan, self.workers)
        call_shares: list[list[PlannedCall]] = [[] for _ in range(self.workers)]
        if self.calls:
            call_shares = [list(self.calls[k :: self.workers]) for k in range(self.workers)]
            mine = [{c.first_index + i for c in cs for i in range(len(c.scenario.says))}
                    for cs in call_shares]  # fmt: skip
            shares = [[p for p in plan if p.index in mine[k]] for k in range(self.workers)]
        schedules: list[list[int]] | list[None] = [None] * self.workers
        if load.mode == "open":
            schedules = shard_schedule(plan, load, self.workers)
        return [
            WorkerJob(
                k,
                self.workers,
                self.pipeline,
                list(self.fixtures),
                shares[k],
                shard_load(load, self.workers, k),
                self.out_dir / "workers" / f"w{k}",
                schedules[k],
                self.session_stages,
                call_shares[k],
            )
            for k in range(self.workers)
        ]

    def accept(self, turn: Turn, k: int, writer: TurnsWriterThread, total: int) -> None:
        """Worker ``k``'s finished turn: tagged, written, kept, shown."""
        turn = self._tag(turn, k)
        self.reports[k].turns += 1
        writer.write(turn)
        self._keep(turn)
        self.observer.turn_finished(turn, total)

    def _keep(self, turn: Turn) -> None:
        self.turns.append(turn)
        if turn.index >= len(self._returned):
            self._returned.extend(bytes(turn.index + 1 - len(self._returned)))
        self._returned[turn.index] = 1

    def returned(self, index: int) -> bool:
        """Whether planned turn ``index`` came back (or was recorded lost)."""
        return 0 <= index < len(self._returned) and bool(self._returned[index])

    def _tag(self, turn: Turn, k: int) -> Turn:
        extra = dict(turn.extra)
        extra["worker"] = k
        node = self.reports[k].node
        if node is not None:
            extra["node"] = node
        if isinstance(extra.get("session"), int):
            extra["session"] = extra["session"] * self.workers + k
        if (region := self.region_of(k)) is not None:
            extra[REGION] = region
        return dataclasses.replace(turn, extra=extra)

    def region_of(self, k: int) -> str | None:
        """Worker ``k``'s region: its node's label, else the run's."""
        return self.reports[k].region or self.region

    def fail_lost(
        self, jobs: list[WorkerJob], writer: TurnsWriterThread, total: int, record: bool = True
    ) -> None:
        """Record every planned turn that did not come back as failed, with the reason (only
        counted when not ``record``: an interrupted run keeps what finished, as one runner
        does, and invents no failures for the turns it never ran)."""
        for job, report in zip(jobs, self.reports, strict=True):
            lost = [planned for planned in job.plan if not self.returned(planned.index)]
            report.lost = len(lost)
            if not lost or not record:
                continue
            why = report.error or f"exit code {report.exitcode}"
            reason = f"{report.where()} ended before this turn: {why}"
            for planned in lost:
                rec = TurnRecorder(
                    index=planned.index,
                    fixture=planned.fixture,
                    t0_ns=0,
                    repeat=planned.repeat,
                    warmup=planned.warmup,
                    wall_time_ns=time.time_ns(),
                )
                rec.fail("worker", reason)
                rec.extra("worker", job.index)
                if report.node is not None:
                    rec.extra("node", report.node)
                if (region := self.region_of(job.index)) is not None:
                    rec.extra(REGION, region)
                turn = rec.finish()
                writer.write(turn)
                self._keep(turn)
                self.observer.turn_finished(turn, total)

    def finish(
        self,
        jobs: list[WorkerJob],
        writer: TurnsWriterThread,
        plan: Sequence[PlannedTurn],
        load: Load,
        status: str,
        started_wall: float,
    ) -> RunOutcome:
        """Account for the lost turns, close the turns file, write the one summary."""
        self.fail_lost(jobs, writer, len(plan), record=status != "interrupted")
        writer.close()
        summary = self.summary(plan, load, status, started_wall)
        if self.calls:
            write_calls(self.out_dir, self.call_records())
        write_summary(self.out_dir, summary)
        self.outcome = RunOutcome.of(self.out_dir, self.turns, summary, status, len(plan))
        return self.outcome

    def call_records(self) -> list[CallRecord]:
        """Every worker's finished calls, their sessions made global as their turns' are."""
        out = []
        for r in self.reports:
            for data in r.calls:
                record = CallRecord.from_json(data)
                if record.session is not None:
                    record = dataclasses.replace(
                        record, session=record.session * self.workers + r.index
                    )
                out.append(record)
        return out

    def raise_if_all_failed(self) -> None:
        """``InfraError`` (exit 3) when every turn failed, as a single runner does."""
        raise_if_every_turn_failed(self.turns, self.out_dir)

    def summary(
        self, plan: Sequence[PlannedTurn], load: Load, status: str, started_wall: float
    ) -> dict[str, Any]:
        """The one ``summary.json``: every worker's turns and loop-lag samples merged."""
        # The parent's runner only builds the document: the turns' accumulated summary (every
        # worker's turns, merged as they came), every worker's loop lag.
        runner = Runner(
            self.pipeline,
            self.fixtures,
            self.out_dir,
            argv=self.argv,
            stack_info=self.stack_info,
            region=self.region,
        )
        runner.turns = self.turns
        for r in self.reports:
            runner.loop_lag.lags.extend(r.loop_lag_ns)
        runner.sessions_opened = sum(r.sessions_opened for r in self.reports)
        runner.load = load  # the summary's load section
        runner.calibration = self.calibration
        if self.calls:
            runner.calls = self.calls
            runner.call_records = self.call_records()
            runner.call_turns = [t for t in self.turns if CALL_ID in t.extra]
        with contextlib.suppress(Exception):  # describing stages builds them; never fatal here
            runner.stages = StageSet.of(runner.build_stages())
        summary = runner.summary(plan, status, started_wall)
        summary["run"]["workers"] = [r.to_json() for r in self.reports]
        summary["run"]["event_loop"] = self.event_loop
        summary["run"].update(self.run_info)
        return summary


class WorkerPool(ShardedRun):
    """Runs a plan over worker processes and collects one result (see the module docstring)."""

    def run(self, plan: Sequence[PlannedTurn], load: Load) -> RunOutcome:
        """Start the workers, stream their turns into one ``turns.jsonl``, write one summary."""
        ctx = mp.get_context("spawn")
        jobs = self.jobs(plan, load)
        # One result queue per worker: a queue's writers share one lock and one pipe, and a
        # worker killed while its feeder thread held the lock (just after a put the parent had
        # already read) left it held forever; the other worker's next put, and so its exit,
        # then blocked, and the run never ended (CI, under load).
        outs: list[Any] = [ctx.Queue() for _ in jobs]
        inboxes: list[Any] = [ctx.Queue() for _ in jobs]
        self.reports = [WorkerReport(j.index, len(j.plan)) for j in jobs]
        procs = [
            ctx.Process(
                target=worker_main,
                args=(j, outs[j.index], inboxes[j.index]),
                name=f"voicelat-w{j.index}",
            )
            for j in jobs
        ]
        started_wall = time.time()
        writer = TurnsWriterThread(TurnsWriter(self.out_dir))
        status = "complete"
        try:
            for p in procs:
                p.start()
            for p, r in zip(procs, self.reports, strict=True):
                r.pid = p.pid
            self._collect(outs, inboxes, procs, writer, len(plan))
        except KeyboardInterrupt:
            status = "interrupted"
            raise
        finally:
            for p in procs:
                if status == "complete" and p.pid is not None:
                    p.join(10)  # done: let it flush its queue and exit on its own
                if p.is_alive():
                    p.terminate()
                if p.pid is not None:
                    p.join(5)
            for p, r in zip(procs, self.reports, strict=True):
                if r.exitcode is None:
                    r.exitcode = p.exitcode
            self.finish(jobs, writer, plan, load, status, started_wall)
        self.raise_if_all_failed()
        return self.outcome

    def _collect(
        self,
        outs: list[Any],
        inboxes: list[Any],
        procs: list[Any],
        writer: TurnsWriterThread,
        total: int,
    ) -> None:
        """Take the workers' messages until every worker is done or dead."""
        go_sent = False
        while True:
            # A queue's reading end (``_reader``, the stdlib's own name for years) is what
            # ``connection.wait`` can wait on: no polling while the workers run.
            ready = mp_connection.wait([q._reader for q in outs], timeout=POLL_S)
            for q, p, r in zip(outs, procs, self.reports, strict=True):
                if r.done:
                    continue
                message = _take(q) if q._reader in ready else None
                if message is not None:
                    self._handle(message, writer, total)
                elif not p.is_alive() and _take(q) is None:
                    r.exitcode = p.exitcode
                    r.done = True  # died without saying so (nothing left in its queue)
            if not go_sent and all(r.ready or r.done for r in self.reports):
                epoch = self._clock.now_ns() + EPOCH_LEAD_NS
                for r, inbox in zip(self.reports, inboxes, strict=True):
                    if not r.done:
                        inbox.put(("go", epoch))
                go_sent = True
            if all(r.done for r in self.reports):
                return

    def _handle(self, message: tuple[Any, ...], writer: TurnsWriterThread, total: int) -> None:
        kind, k = message[0], message[1]
        report = self.reports[k]
        if kind == "ready":
            report.ready, report.pid = True, message[2]
        elif kind == "turn":
            self.accept(message[2], k, writer, total)
        elif kind == "done":
            report.loop_lag_ns, report.sessions_opened, report.error, report.cpu_s = message[2:6]
            report.calls = list(message[6]) if len(message) > 6 else []
            report.done = True


def _take(q: Any) -> tuple[Any, ...] | None:
    """The next message of a worker's queue, or None when there is none yet."""
    try:
        return cast(tuple[Any, ...], q.get(timeout=0.01))
    except queue.Empty:
        return None


__all__ = [
    "EPOCH_LEAD_NS",
    "ShardedRun",
    "WorkerJob",
    "WorkerPool",
    "WorkerReport",
    "die_with_parent",
    "effective_workers",
    "shard_load",
    "shard_plan",
    "shard_schedule",
    "worker_main",
    "worker_runner",
]
