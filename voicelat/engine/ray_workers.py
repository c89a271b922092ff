"""``--ray auto|ADDRESS``: the ``--workers`` workers as Ray async actors across a cluster's nodes.

The same split and the same merge as ``--workers`` (:class:`~voicelat.engine.workers.ShardedRun`:
the plan dealt round-robin, the closed loop's sessions and the open loop's ONE schedule shared
out, every finished turn tagged and written into ONE ``turns.jsonl``, ONE summary with every
worker's loop-lag samples); only the transport differs: each worker is an actor
(:class:`RayWorker`) placed on a node (round-robin over the cluster's alive nodes), running an
ordinary :class:`~voicelat.engine.runner.Runner` on the actor's event loop.

What crosses machines, and what does not:

* **durations never do**: every stamp of a turn is taken inside one worker on its own
  ``CLOCK_MONOTONIC``; a turn comes back finished, its figures already differences of stamps
  from one clock;
* **schedules do**: the plan and the open loop's arrivals as offsets (relative times) from an
  epoch, and the epoch itself, sent to each worker in *its* clock: the parent estimates each
  worker's clock offset (several round trips, the one with the shortest round trip kept,
  offset = worker's reading minus the round trip's midpoint, uncertainty = half that round
  trip) and stores it with its uncertainty in the summary's ``run.workers``. Two nodes' arrivals
  are aligned to within the sum of their uncertainties; one node's, exactly.

Why the actor's loop is fit to stamp on: Ray runs an async actor's coroutines on one event loop
in a thread of its own; a method call's arguments are deserialized and its return value
serialized by the task-executing thread, not on that loop. The only Ray calls the loop sees are
this module's: :meth:`RayWorker.take` (swaps a list of finished turns for an empty one) and
:meth:`RayWorker.go` (sets a future). The loop-lag probe runs inside the actor as in any runner
and its samples feed the summary's trust section (``run.workers[k].loop_lag_p99_ns`` per
worker).

Failures: no answer at the address is one line (exit 3, :class:`~voicelat.core.base.errors.InfraError`)
before anything starts; Ray not installed is exit 2 (install ``voicelat[ray]``); an actor or node
lost mid-run has its finished turns kept and the rest failed with the reason, the others go on;
Ctrl-C drains what the workers finished before stopping them.

Every node needs voicelat (and the stages' packages) installed, the pipeline's fixtures at the
same paths and the servers the pipeline names reachable from it; each worker's own runner files
are written under ``workers/w<k>/`` of the results directory's path on its node.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from voicelat.core.base.errors import ConfigError, InfraError
from voicelat.core.base.plan import PlannedTurn
from voicelat.core.base.region import REGION_ENV, check_region
from voicelat.core.base.turn import Turn
from voicelat.core.measure.schedule import Load
from voicelat.engine.probes import loop_kind
from voicelat.engine.runner import RunOutcome
from voicelat.engine.workers import (
    EPOCH_LEAD_NS,
    ShardedRun,
    WorkerJob,
    WorkerReport,
    worker_runner,
)
from voicelat.engine.writer import TurnsWriterThread
from voicelat.files.pipeline import Pipeline
from voicelat.files.results import TurnsWriter

#: How long a take() call waits on the actor for a finished turn before returning empty (it
#: returns at once when one finishes): a long poll, since every call costs the actor's process
#: ~2 ms of CPU in Ray's machinery (measured: an idle actor 6 ms/s, polled 5 times a second
#: 15.5 ms/s); a dead actor fails its call at once, whatever this is.
TAKE_WAIT_S = 1.0
#: How long the parent waits for any of its calls before it looks at the epoch and progress.
WAIT_S = 0.5
#: How long the parent waits for the actors to start (a worker process each) and answer.
START_TIMEOUT_S = 120.0
#: Round trips per worker for its clock offset (the shortest one is kept).
OFFSET_PINGS = 7
#: How often a progress line with each worker's counts is shown.
PROGRESS_EVERY_S = 5.0
INSTALL_HINT = "--ray needs Ray: install voicelat[ray] (pip install 'voicelat[ray]')"


def import_ray() -> Any:
    """The ``ray`` module, or ``ConfigError`` (exit 2) saying to install the extra."""
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise ConfigError(INSTALL_HINT) from None


# -- the address (checked before Ray is asked: its own connect retries for minutes) ----------
def resolve_address(address: str) -> str:
    """``host:port`` of the cluster ``address`` names; ``auto``: ``RAY_ADDRESS``, else the
    cluster this machine's last ``ray start`` joined (Ray's ``ray_current_cluster`` file)."""
    if address != "auto":
        return address
    env = os.environ.get("RAY_ADDRESS", "").strip()
    if env:
        return env
    current = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
    with contextlib.suppress(OSError):
        found = current.read_text().strip()
        if found:
            return found
    raise InfraError(
        "--ray auto: no Ray cluster found on this machine (RAY_ADDRESS unset, no `ray start` "
        "running): start one with `ray start --head` or give its address, --ray HOST:PORT"
    )


#: What an HTTP/2 client sends first (RFC 9113 section 3.4): the preface and an empty SETTINGS
#: frame. A Ray head's GCS is a gRPC server, so it answers with a SETTINGS frame of its own.
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
#: The type of an HTTP/2 SETTINGS frame (the fourth byte of a frame header).
HTTP2_SETTINGS = 0x04


def check_answers(address: str, timeout_s: float = 3.0) -> None:
    """``InfraError`` (exit 3) naming ``address`` unless its Ray head accepts a connection and
    answers the HTTP/2 preface a gRPC client opens with (a port that accepts TCP and never
    answers used to pass here and hang ``ray.init`` for minutes); ``ConfigError`` (exit 2)
    for an address that is not HOST:PORT or a host name that cannot be encoded."""
    host, sep, port = address.rpartition(":")
    if address.startswith("ray://"):
        raise ConfigError(
            f"--ray {address}: Ray Client addresses are not supported; give the "
            "head's GCS address, HOST:PORT (the port of `ray start --head --port`)"
        )
    if not sep or not port.isascii() or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--ray {address!r}: give HOST:PORT of the Ray head, or auto")
    host = host.strip("[]") or "127.0.0.1"
    try:
        sock = socket.create_connection((host, int(port)), timeout=timeout_s)
    except UnicodeError:  # the IDNA codec: an empty label, one over 63 characters, "xn--."
        raise ConfigError(
            f"--ray {address!r}: {host!r} is not a valid host name; give HOST:PORT of the Ray "
            "head (an IP address or a DNS name)"
        ) from None
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        if isinstance(exc, TimeoutError):
            why = f"no answer in {timeout_s:g} s"
        raise InfraError(
            f"Ray cluster at {address} does not answer ({why.lower()}): check the address and "
            "that `ray start --head` runs there"
        ) from None
    with sock:
        frame = _first_frame(sock, timeout_s)
    if frame is None:
        raise InfraError(
            f"Ray cluster at {address} accepts connections but does not answer (no gRPC reply "
            f"in {timeout_s:g} s): is it the GCS port of `ray start --head`, and the head alive?"
        )
    if len(frame) < 9 or frame[3] != HTTP2_SETTINGS:
        raise InfraError(
            f"{address} answers, but not as a Ray head (not gRPC): give the GCS port of "
            "`ray start --head` (6379 unless --port said otherwise)"
        )


def _first_frame(sock: socket.socket, timeout_s: float) -> bytes | None:
    """The first 9 bytes (a frame header) the server sends after the HTTP/2 preface: fewer when
    it closed the connection, None when it said nothing within ``timeout_s`` (bounded as a
    whole, however the bytes trickle in)."""
    deadline = time.monotonic() + timeout_s
    got = b""
    try:
        sock.sendall(HTTP2_PREFACE)
        while len(got) < 9:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            sock.settimeout(left)
            chunk = sock.recv(9 - len(got))
            if not chunk:
                return got
            got += chunk
    except TimeoutError:
        return None
    except OSError:  # reset by a server that is not HTTP/2
        return got
    return got


def worker_env(pipeline: Pipeline) -> dict[str, str]:
    """The variables a worker needs from this environment: every one a stage option
    ``*_env`` names (API keys: sent with the job, never logged or stored) and ``VOICELAT_*``
    (the loop choice, the embedded stack's ports)."""
    tables = [pipeline.stt, pipeline.llm, pipeline.tts, pipeline.s2s or {}]
    names = {v for t in tables for k, v in t.items() if k.endswith("_env") and isinstance(v, str)}
    names |= {n for n in os.environ if n.startswith("VOICELAT_")}
    # A node keeps its own region label (RayWorker.where): the run's is applied by the parent.
    names.discard(REGION_ENV)
    return {n: os.environ[n] for n in sorted(names) if n in os.environ}


# -- placement and clocks (pure) ---------------------------------------------------------------
def place_workers(nodes: Sequence[tuple[str, float]], workers: int) -> list[tuple[str, float]]:
    """Worker ``k`` goes to node ``k mod len(nodes)``; each reserves one CPU, or its share of
    the node's CPUs when more workers than CPUs land there. ``nodes``: (id, CPUs)."""
    counts = [len(range(i, workers, len(nodes))) for i in range(len(nodes))]
    out = []
    for k in range(workers):
        node, cpus = nodes[k % len(nodes)]
        per = counts[k % len(nodes)]
        out.append((node, 1.0 if cpus >= per else round(cpus / per, 4)))
    return out


def clock_offset(samples: Sequence[tuple[int, int, int]]) -> tuple[int, int]:
    """(offset, uncertainty) in ns from ``(parent_before, worker_reading, parent_after)``
    round trips: the shortest one's worker reading minus its midpoint, and half its length."""
    before, reading, after = min(samples, key=lambda s: s[2] - s[0])
    return reading - (before + after) // 2, (after - before + 1) // 2


# -- the actor ---------------------------------------------------------------------------------
class _BufferObserver:
    """Keeps each finished turn for the next :meth:`RayWorker.take` (a list append)."""

    def __init__(self, wake: Callable[[], None]) -> None:
        self.turns: list[Turn] = []
        self._wake = wake

    def turn_started(self, planned: PlannedTurn, total: int) -> None:
        return None

    def milestone(self, index: int, name: str, t_rel_ns: int) -> None:
        return None

    def turn_finished(self, turn: Turn, total: int) -> None:
        self.turns.append(turn)
        self._wake()


class RayWorker:
    """One worker as a Ray async actor: a runner on the actor's event loop (wrapped with
    ``ray.remote`` by :class:`RayPool`; plain methods here so it is testable without Ray)."""

    def __init__(self) -> None:
        self._wake = asyncio.Event()
        self._buffer = _BufferObserver(self._wake.set)
        self._ready = False
        self._finished = False
        self._go: asyncio.Future[int] | None = None

    async def where(self) -> dict[str, Any]:
        """This worker's node id, pid and region label: its node's ``VOICELAT_REGION`` (the
        raylet's environment, read before :meth:`run` sets the job's variables)."""
        ray = import_ray()
        node = ray.get_runtime_context().get_node_id()
        return {"node": node, "pid": os.getpid(), "region": os.environ.get(REGION_ENV)}

    async def clock(self) -> int:
        """This worker's clock (a round trip of :func:`clock_offset`)."""
        return time.perf_counter_ns()

    async def go(self, epoch_ns: int) -> None:
        """The shared epoch, in this worker's clock: the measured turns start from it."""
        if self._go is not None and not self._go.done():
            self._go.set_result(epoch_ns)

    async def take(self, wait_s: float) -> tuple[list[Turn], bool, bool]:
        """The turns finished since the last call (waiting up to ``wait_s`` for one), whether
        the warm-up is done (ready for the epoch) and whether the run has ended."""
        if not self._buffer.turns and not self._finished:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait_s)
        self._wake.clear()
        turns, self._buffer.turns = self._buffer.turns, []
        return turns, self._ready, self._finished and not self._buffer.turns

    async def run(
        self, job: WorkerJob, env: dict[str, str]
    ) -> tuple[list[int], int, str | None, str, float, list[dict[str, Any]]]:
        """Run ``job``'s share with ``env`` set (the key variables: a raylet's worker inherits
        the raylet's environment, not the parent's); returns the loop-lag samples, sessions
        opened, the error that ended it (None), the loop's kind, the process's CPU s and, for
        ``--scenario``, its finished calls (``CallRecord.to_json()`` each: a call never spans
        actors, as it never spans worker processes)."""
        os.environ.update(env)
        cpu0 = time.process_time()
        self._go = asyncio.get_running_loop().create_future()
        go = self._go

        async def barrier() -> int:
            self._ready = True
            self._wake.set()
            return await go

        runner = worker_runner(job, self._buffer, barrier)
        error = None
        try:
            await runner.run(job.plan, load=job.load)
        except InfraError:
            pass  # every turn failed: they come back as failed turns
        except Exception as exc:  # reported to the parent, which fails the missing turns
            error = f"{type(exc).__name__}: {exc}"
        finally:
            self._finished = True
            self._wake.set()
        loop = type(asyncio.get_running_loop()).__module__.split(".")[0]
        cpu = time.process_time() - cpu0  # every thread of the actor: Ray's own included
        calls = [r.to_json() for r in runner.call_records]
        return list(runner.loop_lag.lags), runner.sessions_opened, error, loop, cpu, calls


# -- the parent --------------------------------------------------------------------------------
@dataclass
class _Actor:
    """The parent's handle on one worker and its calls in flight."""

    handle: Any
    run_ref: Any = None
    take_ref: Any = None
    drained: bool = False
    ran: bool = False


@dataclass
class RayPool(ShardedRun):
    """Runs a plan over Ray actors across a cluster's nodes, one result (module docstring).

    ``workers`` 0 means one worker per alive node."""

    address: str = "auto"
    progress: Callable[[str], None] | None = None

    def run(self, plan: Sequence[PlannedTurn], load: Load) -> RunOutcome:
        """Connect, place the actors, stream their turns into one ``turns.jsonl``."""
        ray = import_ray()
        address = resolve_address(self.address)
        check_answers(address)
        started_here = not ray.is_initialized()
        if started_here:
            ray.init(address=address, logging_level="ERROR", log_to_driver=False)
            _ray_messages_to_stderr()
        try:
            return self._run_on(ray, address, plan, load)
        finally:
            if started_here:
                ray.shutdown()

    def _run_on(
        self, ray: Any, address: str, plan: Sequence[PlannedTurn], load: Load
    ) -> RunOutcome:
        nodes = [
            (n["NodeID"], float(n["Resources"].get("CPU", 0.0)))
            for n in ray.nodes()
            if n.get("Alive")
        ]
        if not nodes:
            raise InfraError(f"Ray cluster at {address} has no alive node")
        self.workers = self.workers or len(nodes)
        if load.mode == "closed":  # a worker needs a session at least (as --workers cuts)
            self.workers = min(self.workers, load.concurrency)
        # ... and a measured turn: an actor without one only holds a node's CPU.
        self.workers = min(self.workers, max(1, sum(1 for p in plan if not p.warmup)))
        jobs = self.jobs(plan, load)
        self.reports = [WorkerReport(j.index, len(j.plan)) for j in jobs]
        self.run_info = {"ray": {"address": address, "version": ray.__version__,
                                 "nodes": len(nodes)}}  # fmt: skip
        started_wall = time.time()
        writer = TurnsWriterThread(TurnsWriter(self.out_dir))
        status = "complete"
        actors: list[_Actor] = []
        try:  # from the actors' start: a Ctrl-C or a start that fails still ends in a summary
            self._start(ray, place_workers(nodes, self.workers), actors)
            env = worker_env(self.pipeline)
            for actor, job in zip(actors, jobs, strict=True):
                actor.run_ref = actor.handle.run.remote(job, env)
            self._collect(ray, actors, writer, len(plan))
        except KeyboardInterrupt:
            status = "interrupted"
            self._drain(ray, actors, writer, len(plan))
            raise
        finally:
            for actor in actors:
                with contextlib.suppress(Exception):
                    ray.kill(actor.handle, no_restart=True)
            self.finish(jobs, writer, plan, load, status, started_wall)
        self.raise_if_all_failed()
        return self.outcome

    def _start(self, ray: Any, placement: list[tuple[str, float]], actors: list[_Actor]) -> None:
        """Create the actors on their nodes (into ``actors``, so that the caller stops them
        whatever happens here); learn their pids and clock offsets."""
        strategies = importlib.import_module("ray.util.scheduling_strategies")
        affinity = strategies.NodeAffinitySchedulingStrategy
        remote = ray.remote(RayWorker)
        # The actor's loop is the stamping loop: the same kind as any run's (VOICELAT_LOOP,
        # asyncio by default), not Ray's default (uvloop whenever it is importable).
        uvloop = "1" if loop_kind() == "uvloop" else "0"
        actors += [
            _Actor(
                remote.options(
                    num_cpus=cpus,
                    scheduling_strategy=affinity(node, soft=False),
                    max_restarts=0,
                    runtime_env={"env_vars": {"RAY_USE_UVLOOP": uvloop}},
                ).remote()
            )
            for node, cpus in placement
        ]
        try:
            where = ray.get([a.handle.where.remote() for a in actors], timeout=START_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError:
            for report in self.reports:
                report.error = f"the Ray actor did not start within {START_TIMEOUT_S:g} s"
            raise InfraError(
                f"the Ray actors did not start within {START_TIMEOUT_S:g} s "
                "(`ray status`: are the nodes' resources taken?)"
            ) from None
        except ray.exceptions.RayError as exc:  # e.g. voicelat not importable on a node
            why = _first_line(exc)
            for report in self.reports:
                report.error = f"a Ray actor did not start: {why}"
            raise InfraError(
                f"a Ray actor did not start ({why}): is voicelat installed on every node?"
            ) from None
        for report, info in zip(self.reports, where, strict=True):
            report.node, report.pid = info["node"], info["pid"]
            report.region = self._node_region(report, info.get("region"))
            samples = []
            for _ in range(OFFSET_PINGS):
                before = self._clock.now_ns()
                reading = ray.get(actors[report.index].handle.clock.remote())
                samples.append((before, reading, self._clock.now_ns()))
            report.clock_offset_ns, report.clock_offset_uncertainty_ns = clock_offset(samples)
        self._say(
            f"ray: {len(actors)} worker(s) on {len({r.node for r in self.reports})} node(s): "
            + ", ".join(
                f"w{r.index}@{(r.node or '')[:8]} (pid {r.pid}{', ' + r.region if r.region else ''})"
                for r in self.reports
            )
        )

    def _node_region(self, report: WorkerReport, label: object) -> str | None:
        """A node's region label, checked; a bad one is said and the run's label used. The
        label this process has itself is inherited (a cluster ``ray.init`` started here), not
        the node's own: the run's ``--region`` wins over it."""
        if not isinstance(label, str) or not label or label == os.environ.get(REGION_ENV):
            return None
        try:
            return check_region(label)
        except ValueError as exc:
            self._say(f"warning: {report.where()}: {REGION_ENV} ignored: {exc}")
            return None

    def _collect(
        self, ray: Any, actors: list[_Actor], writer: TurnsWriterThread, total: int
    ) -> None:
        """Take the actors' turns until every one has ended or died."""
        go_sent = False
        last_progress = time.monotonic()
        while not all(r.done for r in self.reports):
            for actor, report in zip(actors, self.reports, strict=True):
                if not (report.done or actor.drained) and actor.take_ref is None:
                    actor.take_ref = actor.handle.take.remote(TAKE_WAIT_S)
            pending = [a.take_ref for a in actors if a.take_ref is not None]
            pending += [a.run_ref for a in actors if a.run_ref is not None and not a.ran]
            ready, _ = ray.wait(pending, num_returns=1, timeout=WAIT_S)
            ready_set = set(ready)
            for actor, report in zip(actors, self.reports, strict=True):
                if actor.take_ref is not None and actor.take_ref in ready_set:
                    self._took(ray, actor, report, writer, total)
                if actor.run_ref is not None and not actor.ran and actor.run_ref in ready_set:
                    self._ran(ray, actor, report)
                report.done = report.done or (actor.ran and actor.drained)
            if not go_sent and all(r.ready or r.done for r in self.reports):
                self._send_epoch(actors)
                go_sent = True
            if time.monotonic() - last_progress >= PROGRESS_EVERY_S:
                last_progress = time.monotonic()
                self._say(self.progress_line(total))

    def _took(
        self, ray: Any, actor: _Actor, report: WorkerReport, writer: TurnsWriterThread, total: int
    ) -> None:
        ref, actor.take_ref = actor.take_ref, None
        try:
            turns, ready, finished = ray.get(ref)
        except ray.exceptions.RayError as exc:
            self._lost(actor, report, exc)
            return
        for turn in turns:
            self.accept(turn, report.index, writer, total)
        report.ready = report.ready or ready
        actor.drained = finished

    def _ran(self, ray: Any, actor: _Actor, report: WorkerReport) -> None:
        actor.ran = True
        try:
            lags, report.sessions_opened, report.error, self.event_loop, cpu, calls = ray.get(
                actor.run_ref
            )
            report.calls = list(calls)
            report.loop_lag_ns, report.cpu_s = lags, round(cpu, 3)
            report.exitcode = 0
        except ray.exceptions.RayError as exc:
            self._lost(actor, report, exc)

    def _lost(self, actor: _Actor, report: WorkerReport, exc: BaseException) -> None:
        """A dead actor (or node): what it finished is kept; the rest fails with this."""
        report.error = f"Ray actor lost: {_first_line(exc)}"
        report.done = actor.ran = actor.drained = True
        actor.take_ref = None

    def _send_epoch(self, actors: list[_Actor]) -> None:
        """ONE epoch, shortly ahead, sent to each worker in its own clock."""
        epoch = self._clock.now_ns() + EPOCH_LEAD_NS
        for actor, report in zip(actors, self.reports, strict=True):
            if not report.done:
                actor.handle.go.remote(epoch + (report.clock_offset_ns or 0))

    def _drain(self, ray: Any, actors: list[_Actor], writer: TurnsWriterThread, total: int) -> None:
        """Ctrl-C: keep what the workers finished (one last take each, briefly)."""
        with contextlib.suppress(Exception):
            alive = [a for a, r in zip(actors, self.reports, strict=True) if not r.done]
            refs = [a.take_ref or a.handle.take.remote(0.0) for a in alive]
            for actor, result in zip(alive, ray.get(refs, timeout=5.0), strict=True):
                k = actors.index(actor)
                for turn in result[0]:
                    self.accept(turn, k, writer, total)

    def progress_line(self, total: int) -> str:
        """Each worker's count so far, by node: ``ray: 12/40 turns; w0@1a2b3c4d 7/20, ...``."""
        done = sum(r.turns for r in self.reports)
        parts = [
            f"w{r.index}@{(r.node or '?')[:8]} {r.turns}/{r.planned}" + (" lost" if r.error else "")
            for r in self.reports
        ]
        return f"ray: {done}/{total} turns; " + ", ".join(parts)

    def _say(self, line: str) -> None:
        if self.progress is not None:
            self.progress(line)


def _ray_messages_to_stderr() -> None:
    """Ray's driver prints the cluster's error messages (``(raylet) A worker died ...``) on
    stdout, where ``--json`` writes the summary and nothing else: send them to stderr. (Ray's
    listener thread looks the printer up by name on each message; a Ray without it is left
    as it is.)"""
    module = sys.modules.get("ray._private.worker")
    original = getattr(module, "print_to_stdstream", None)
    if module is None or original is None or getattr(original, "_voicelat", False):
        return

    def to_stderr(data: dict[str, Any], ignore_prefix: bool) -> None:
        original({**data, "is_err": True}, ignore_prefix)

    to_stderr._voicelat = True  # type: ignore[attr-defined]
    module.print_to_stdstream = to_stderr  # type: ignore[attr-defined]


def _first_line(exc: BaseException) -> str:
    """``ActorDiedError: The actor died ...``: the error's type and first line."""
    text = str(exc).strip()
    return type(exc).__name__ + (f": {text.splitlines()[0]}" if text else "")


def preflight(address: str) -> str:
    """Before any server starts: Ray importable (exit 2) and the cluster answering (exit 3);
    returns the ``host:port`` it resolved to."""
    import_ray()
    resolved = resolve_address(address)
    check_answers(resolved)
    return resolved


__all__ = [
    "INSTALL_HINT",
    "RayPool",
    "RayWorker",
    "check_answers",
    "clock_offset",
    "import_ray",
    "place_workers",
    "preflight",
    "resolve_address",
    "worker_env",
]
