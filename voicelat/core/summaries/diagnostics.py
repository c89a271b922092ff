"""Can a run's figures be trusted? Pure checks over turns and probe samples (no I/O, no clock).

A latency profiler measures with the same CPU and event loop it stamps events on. When that loop
is late to wake up, or the pacer could not send the input audio on time, every stamp of the run
may be late by as much: the figures then describe the profiler, not the pipeline. And a server
that writes small pieces without TCP_NODELAY meets the client's delayed ACK: the piece after a
short one waits ~40 ms in the kernel (Nagle + delayed ACK, MEASUREMENT.md §3.5). The client then
measures that wait faithfully, but it is an artifact of the server's socket options, not of the
model, so it is flagged as suspicious.

Thresholds (defaults of :class:`TrustThresholds`; documented in docs/BENCHMARKS.md):

=============================  ==========  ====================================================
check                          default     why
=============================  ==========  ====================================================
event-loop lag P99             > 5 ms      a stamp can be late by the loop's lag; 5 ms is
                                           several times the ~1 ms timer granularity of an
                                           idle loop, and larger than the accuracy voicelat
                                           claims (docs/BENCHMARKS.md)
pacer lag max, share of turns  > 10 ms on  the input audio reached the STT late, and the
                               > 5 %       endpoint with it; a few late turns are kept (each
                                           is flagged ``pacer_lag``), many are a trend
schedule lag P99               > 500 ms    an open-loop run did not offer the load it was
                                           asked for (AIPerf's "degraded" criterion)
header → first event gaps      ≥ 50 % of   gaps of a quantum near 40 ms, tightly clustered
                               ≥ 3 gaps in (P90 - P10 ≤ 5 ms): Linux's delayed-ACK timer (40 ms)
                               36-47 ms    holding a segment Nagle did not send (measured on
                                           loopback: 42-43 ms median, 44-47 ms P99,
                                           bench/accuracy.py --wire); check the server's
                                           TCP_NODELAY. Over a network the wait shows as
                                           40 ms + RTT, which this window does not look for.
LLM chunk gap max, per turn    > 10x the   the server was starved mid-reply (a loaded machine:
                               run's       1.4 tokens/s, 2.5 s gaps were seen with a 15 ms
                               median gap  median): that turn's figures describe the machine,
                               and 250 ms  not the model; the turns are named
machine load average (1 min)   > 1.5 per   more runnable work than cores: other processes
                               core        competed with the run for the CPU
CPU steal, share of CPU time   > 5 %       the hypervisor ran other guests on "our" CPUs
run-queue wait of voicelat's   > 20 % of   the process was runnable but waited for a CPU (Linux
measuring thread or a local    its CPU     schedstat): every burst of its work, and so every
server (share of wait + CPU)   and 10 ms/s latency it serves or stamps, came that much later
disk-I/O stall (PSI io some;   > 10 % of   tasks stalled on the disk (a slow or busy disk); the
else iowait share)             wall time   measuring loop never touches it, servers may
=============================  ==========  ====================================================

The machine checks use :class:`MachineSample` intervals sampled off the measuring loop
(``voicelat.engine.machine``); a turn whose window overlaps an interval over one of these
limits is named as distrusted.

A server that really takes a fixed ~40 ms between its headers and its first event (prompt
processing after the headers: llama-cpp-python's server sends its headers before the model runs)
gives the same gaps; timing alone cannot tell the two apart. The server can: a stage whose
server is known to set TCP_NODELAY on every connection (:data:`NODELAY_SERVERS`: the embedded
stack's LLM, identified by the stack, not by a header) cannot have Nagle hold its
first event, so such a cluster is the server's own time before its first event, correctly in
the figures: it is recorded in ``checks`` (``<stage>_first_event_gap_cluster_ns``,
``<stage>_first_event_server_nodelay``) and not held against the run. For any other server
the message says whose socket option it is, why, and what to do (docs/FAILURES.md).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from voicelat.core.base.display import NS_PER_MS, fmt_ms
from voicelat.core.base.stats import percentile
from voicelat.core.base.turn import Turn
from voicelat.core.summaries.sketch import ValueStream

#: Milestones that are the first event of each HTTP stage's response body.
FIRST_EVENT: Mapping[str, tuple[str, ...]] = {
    "stt": ("stt_first_partial", "stt_final"),
    "llm": ("llm_first_delta",),
    "tts": ("tts_first_byte",),
}


#: Servers known to set TCP_NODELAY on every connection: the embedded stack's packages (the
#: ``server`` of a stage the stack identified, ``engine/servers.py``). The stack starts
#: llama_cpp.server with ``--host``/``--port``, so uvicorn binds through the event loop, and
#: uvloop (asyncio too, for sockets it resolved itself) sets TCP_NODELAY on every accepted
#: socket: strace shows ``setsockopt(fd, SOL_TCP, TCP_NODELAY, [1])`` on each connection
#: (docs/FAILURES.md). A bare ``Server: uvicorn`` header is not enough: asyncio skips the option
#: on a socket handed over with ``proto`` 0 (``--fd``, ``--workers``, gunicorn), and aiohttp
#: lets the app turn it off.
NODELAY_SERVERS: frozenset[str] = frozenset({"llama-cpp-python"})


@dataclass(frozen=True)
class TrustThresholds:
    loop_lag_p99_ns: int = 5 * NS_PER_MS
    pacer_lag_max_ns: int = 10 * NS_PER_MS
    pacer_lag_turn_share: float = 0.05
    schedule_lag_p99_ns: int = 500 * NS_PER_MS
    quantum_lo_ns: int = 36 * NS_PER_MS
    quantum_hi_ns: int = 47 * NS_PER_MS
    quantum_min_count: int = 3
    quantum_min_share: float = 0.5
    quantum_max_spread_ns: int = 5 * NS_PER_MS
    starved_gap_factor: float = 10.0
    starved_gap_floor_ns: int = 250 * NS_PER_MS
    machine_load_per_core: float = 1.5
    machine_steal_share: float = 0.05
    machine_runq_wait_share: float = 0.20
    machine_runq_wait_floor_per_s_ns: int = 10 * NS_PER_MS
    machine_io_stall_share: float = 0.10


@dataclass(frozen=True, slots=True)
class ProcessSample:
    """One process over a sampling interval: the CPU time it used (every thread; for voicelat
    the measuring loop's thread only) and the time it was runnable but waited for a CPU."""

    name: str
    cpu_ns: int
    runq_wait_ns: int


@dataclass(frozen=True, slots=True)
class MachineSample:
    """The machine over one interval ``[start_ns, end_ns]`` of the run's clock (integers).

    ``cpu_ticks`` is every core's CPU time in /proc/stat ticks, ``steal_ticks`` and
    ``iowait_ticks`` the parts of it stolen by the hypervisor and idle waiting for I/O;
    ``io_stall_us`` the time some task stalled on I/O (PSI), None without PSI; ``load1_milli``
    the 1-minute load average x 1000 at the interval's end.
    """

    start_ns: int
    end_ns: int
    cores: int
    load1_milli: int
    cpu_ticks: int
    steal_ticks: int
    iowait_ticks: int
    io_stall_us: int | None = None
    processes: tuple[ProcessSample, ...] = ()


@dataclass(frozen=True)
class Quantization:
    """A cluster of gaps near the delayed-ACK quantum."""

    n_gaps: int
    n_near: int
    share: float
    median_ns: float
    spread_ns: float


def quantized_near_40ms(
    gaps_ns: Sequence[int], thresholds: TrustThresholds = TrustThresholds()
) -> Quantization | None:
    """Flag ``gaps_ns`` that cluster near 40 ms (Nagle on the server meeting delayed ACK).

    Flagged when at least ``quantum_min_count`` gaps, and at least ``quantum_min_share`` of
    all gaps, lie in ``[quantum_lo_ns, quantum_hi_ns]``, and those gaps are tightly packed (P90 -
    P10 within ``quantum_max_spread_ns``): a model's prefill time varies from request to
    request; a kernel timer does not. Returns None when the gaps look ordinary.
    """
    gaps = _Gaps(None, thresholds)
    for g in gaps_ns:
        gaps.add(g)
    return gaps.quantization()


class _Gaps:
    """One stage's header -> first-event gaps, as :func:`quantized_near_40ms` judges them:
    counts, and the gaps near the quantum (a bounded stream)."""

    def __init__(self, cap: int | None, t: TrustThresholds) -> None:
        self.t = t
        self.total = 0  # every gap, negative ones too (the checks' count)
        self.nonneg = 0
        self.near = ValueStream(cap)

    def add(self, gap: int) -> None:
        self.total += 1
        self.nonneg += gap >= 0
        if self.t.quantum_lo_ns <= gap <= self.t.quantum_hi_ns:
            self.near.add(gap)

    def merge(self, other: _Gaps) -> None:
        self.total += other.total
        self.nonneg += other.nonneg
        self.near.merge(other.near)

    def quantization(self) -> Quantization | None:
        t, n_near = self.t, self.near.n
        if not self.nonneg or n_near < t.quantum_min_count:
            return None
        share = n_near / self.nonneg
        spread = self.near.quantile(90) - self.near.quantile(10)
        if share < t.quantum_min_share or spread > t.quantum_max_spread_ns:
            return None
        return Quantization(self.nonneg, n_near, share, self.near.quantile(50), spread)


def first_event_gaps(turns: Iterable[Turn]) -> dict[str, list[int]]:
    """Per HTTP stage, the gap from the response headers to the first body event of each turn.

    When the server writes the headers and the first event as two small segments without
    TCP_NODELAY, this gap is where the ~40 ms shows (the headers arrive at once, the event waits
    for the client's delayed ACK). Stages without a ``response_headers`` span (Wyoming,
    websockets) give no gaps.
    """
    out: dict[str, list[int]] = {}
    for turn in turns:
        for stage, gap in _turn_gaps(turn):
            out.setdefault(stage, []).append(gap)
    return out


def _turn_gaps(turn: Turn) -> Iterator[tuple[str, int]]:
    """``(stage, gap)`` of one turn (see :func:`first_event_gaps`)."""
    headers: dict[str, int] = {}
    for span in turn.spans:
        if span.name == "response_headers":
            headers.setdefault(span.stage, span.end_ns)
    for stage, names in FIRST_EVENT.items():
        if stage not in headers:
            continue
        firsts = [turn.milestones[m] for m in names if m in turn.milestones]
        if firsts:
            yield stage, min(firsts) - headers[stage]


def _ms(ns: float) -> str:
    return fmt_ms(ns, decimals=1, unit=" ms")


_Reasons = list[dict[str, str]]
_Checks = dict[str, Any]


def _reason(code: str, message: str) -> dict[str, str]:
    return {"code": code, "message": message}


def _p99_over(p99: float | None, limit_ns: int, checks: _Checks, key: str) -> float | None:
    """Record ``p99`` under ``key``; return it when it is over ``limit_ns``."""
    if p99 is None:
        return None
    checks[key] = round(p99)
    return p99 if p99 > limit_ns else None


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


class TrustTally:
    """What the trust checks need from a run's measured turns, as bounded, mergeable tallies.

    The checks read a few figures of every measured turn; keeping the turns for them would make
    memory grow with the run. Here each check keeps what it judges: counts, and streams that are
    exact up to ``cap`` values (None: no cap) and then histograms
    (:class:`~voicelat.core.summaries.sketch.ValueStream`); the starved-server check keeps the turns over
    its floor (up to ``cap``; past it, their gaps in a histogram). The one thing that grows with
    the run is the machine check's turn windows (index, start, end: 24 bytes a measured turn),
    judged against the machine's samples, which grow with the run's duration themselves.
    ``merge`` adds another tally's turns after this one's (workers, nodes).
    """

    def __init__(
        self, thresholds: TrustThresholds = TrustThresholds(), cap: int | None = None
    ) -> None:
        self.t = thresholds
        self.cap = cap
        self.pacer_turns = 0
        self.pacer_late = 0
        self.schedule_lag = ValueStream(cap)
        self.gaps: dict[str, _Gaps] = {}
        self.gap_p50 = ValueStream(cap)
        self.starved: list[tuple[int, float]] = []  # (index, max gap) over the floor
        self.starved_more = ValueStream(0)  # their gaps past the cap, counted in a histogram
        self.windows: array[int] = array("q")  # index, start, end of each measured turn

    def add(self, turn: Turn) -> None:
        """Count one turn (warm-up turns are left out, as the checks leave them out)."""
        if turn.warmup:
            return
        t, f = self.t, turn.figures
        if (pacer := _number(f.get("pacer_lag_max_ns"))) is not None:
            self.pacer_turns += 1
            self.pacer_late += pacer > t.pacer_lag_max_ns
        if (lag := _number(f.get("schedule_lag_ns"))) is not None:
            self.schedule_lag.add(lag)
        if turn.ok:
            for stage, gap in _turn_gaps(turn):
                self.gaps.setdefault(stage, _Gaps(self.cap, t)).add(gap)
        if (median := _number(f.get("llm_chunk_gap_p50_ns"))) is not None:
            self.gap_p50.add(median)
        worst = _number(f.get("llm_chunk_gap_max_ns"))
        if worst is not None and worst > t.starved_gap_floor_ns:
            self._starved_gap(turn.index, worst)
        self.windows.extend(_turn_window_ns(turn))

    def _starved_gap(self, index: int, gap: float) -> None:
        if self.cap is None or len(self.starved) < self.cap:
            self.starved.append((index, gap))
        else:
            self.starved_more.add(gap)

    def merge(self, other: TrustTally) -> None:
        """Add ``other``'s turns after this tally's."""
        self.pacer_turns += other.pacer_turns
        self.pacer_late += other.pacer_late
        self.schedule_lag.merge(other.schedule_lag)
        for stage, gaps in other.gaps.items():
            self.gaps.setdefault(stage, _Gaps(self.cap, self.t)).merge(gaps)
        self.gap_p50.merge(other.gap_p50)
        for index, gap in other.starved:
            self._starved_gap(index, gap)
        self.starved_more.merge(other.starved_more)
        self.windows.extend(other.windows)

    def assess(
        self,
        loop_lag_p99_ns: float | None,
        machine: Sequence[MachineSample] = (),
        stages: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The ``trust`` section (see :func:`assess_trust`)."""
        t = self.t
        checks: _Checks = {}
        # Each check adds what it measured to ``checks`` (in this order: the section's key order).
        reasons = [
            *_loop_lag(loop_lag_p99_ns, t, checks),
            *_pacer_lag(self, checks),
            *_schedule_lag(self, checks),
            *_nagle(self, checks, stages),
            *_starved(self, checks),
            *_machine(self.windows, machine, t, checks),
        ]
        return {
            "trustworthy": not reasons,
            "reasons": reasons,
            "checks": checks,
            # Thresholds in ms (keys renamed to say so): people read this section.
            "thresholds": {
                (k[:-3] + "_ms" if k.endswith("_ns") else k): (
                    v / NS_PER_MS if k.endswith("_ns") else v
                )
                for k, v in asdict(t).items()
            },
        }


def _loop_lag(p99_ns: float | None, t: TrustThresholds, checks: _Checks) -> _Reasons:
    p99 = _p99_over(p99_ns, t.loop_lag_p99_ns, checks, "loop_lag_p99_ns")
    if p99 is None:
        return []
    return [
        _reason(
            "loop_lag",
            f"event-loop lag P99 {_ms(p99)} > {_ms(t.loop_lag_p99_ns)}: "
            "stamps may be late by as much (the measuring process is overloaded)",
        )
    ]


def _pacer_lag(tally: TrustTally, checks: _Checks) -> _Reasons:
    t, late, turns = tally.t, tally.pacer_late, tally.pacer_turns
    if not turns:
        return []
    share = late / turns
    checks["pacer_lag_late_turns"] = late
    checks["pacer_lag_turn_share"] = round(share, 4)
    if share <= t.pacer_lag_turn_share:
        return []
    return [
        _reason(
            "pacer_lag",
            f"pacer lag max > {_ms(t.pacer_lag_max_ns)} on {late} of "
            f"{turns} turns ({share:.0%} > {t.pacer_lag_turn_share:.0%}): the input "
            "audio was not sent in real time",
        )
    ]


def _schedule_lag(tally: TrustTally, checks: _Checks) -> _Reasons:
    t, lags = tally.t, tally.schedule_lag
    p99 = lags.quantile(99) if lags.n else None
    p99 = _p99_over(p99, t.schedule_lag_p99_ns, checks, "schedule_lag_p99_ns")
    if p99 is None:
        return []
    return [
        _reason(
            "schedule_lag",
            f"schedule lag P99 {_ms(p99)} > {_ms(t.schedule_lag_p99_ns)}: the "
            "client could not start turns on time; read latency from the intended start",
        )
    ]


def _server_product(description: object) -> str | None:
    """The product a stage's server names itself, lower case (``uvicorn`` of ``uvicorn/0.30``):
    the embedded stack's package, else the HTTP ``Server`` header (both under ``server``)."""
    if not isinstance(description, Mapping):
        return None
    value = description.get("server")
    if not isinstance(value, str):
        return None
    return value.split("/")[0].strip().lower() or None


def _nagle(tally: TrustTally, checks: _Checks, stages: Mapping[str, Any] | None = None) -> _Reasons:
    reasons: _Reasons = []
    for stage, gaps in sorted(tally.gaps.items()):
        found = gaps.quantization()
        checks[f"{stage}_first_event_gaps_near_40ms"] = gaps.near.n
        checks[f"{stage}_first_event_gaps"] = gaps.total
        if found is None:
            continue
        description = (stages or {}).get(stage)
        server = _server_product(description)
        if server in NODELAY_SERVERS:
            # Nagle cannot hold a segment on a TCP_NODELAY socket: the gap is the server's.
            checks[f"{stage}_first_event_gap_cluster_ns"] = round(found.median_ns)
            checks[f"{stage}_first_event_server_nodelay"] = 1
            continue
        where = ""
        if isinstance(description, Mapping):
            url = description.get("base_url") or description.get("url")
            where = f" ({server or 'server unnamed'} at {url})" if url else ""
        reasons.append(
            _reason(
                "nagle_40ms",
                f"{stage}: {found.n_near} of {found.n_gaps} header → first-event gaps cluster "
                f"at {_ms(found.median_ns)}, the Nagle + delayed-ACK signature: the server"
                f"{where} likely wrote its first event as a small segment after the headers "
                "without TCP_NODELAY, and the client's delayed ACK (40 ms on Linux) held it "
                "(voicelat's own sockets set TCP_NODELAY). The figures include this wait: set "
                "TCP_NODELAY on the server or send the headers with the first event. A server "
                "that computes that long before its first event gives the same gaps: gaps that "
                "grow with the prompt are compute",
            )
        )
    return reasons


def transport_judged(checks: Mapping[str, Any]) -> str | None:
    """For a passing trust line: a first-event gap cluster that is the server's own time
    (its server sets TCP_NODELAY), e.g. ``llm first events 41.3 ms after the headers are the
    server's own time (a TCP_NODELAY server: not Nagle)``; None when there is none."""
    parts = []
    for key, value in checks.items():
        if key.endswith("_first_event_gap_cluster_ns") and isinstance(value, int | float):
            stage = key.removesuffix("_first_event_gap_cluster_ns")
            parts.append(
                f"{stage} first events {_ms(value)} after the headers are the server's "
                "own time (a TCP_NODELAY server: not Nagle)"
            )
    return ", ".join(parts) or None


def _starved(tally: TrustTally, checks: _Checks) -> _Reasons:
    # Against the run's own median gap: a slow model streams slowly everywhere, a starved
    # server stops for seconds in some turns.
    t = tally.t
    if not tally.gap_p50.n:
        return []
    median = tally.gap_p50.quantile(50)
    limit = max(t.starved_gap_factor * median, t.starved_gap_floor_ns)
    starved = [(i, g) for i, g in tally.starved if g > limit]
    more = tally.starved_more
    extra = more.count_over(limit)
    checks["llm_chunk_gap_median_ns"] = round(median)
    checks["llm_starved_turns"] = len(starved) + extra
    if not starved and not extra:
        return []
    worst = max([g for _, g in starved] + ([more.distribution().max or 0.0] if extra else []))
    n = len(starved) + extra
    names = ", ".join(f"#{i}" for i, _ in starved[:8]) + (" ..." if n > 8 else "")
    return [
        _reason(
            "server_starved",
            f"llm: chunk gaps up to {_ms(worst)} on {n} turn(s) ({names}), over "
            f"{t.starved_gap_factor:g}x the run's median gap of {_ms(median)}: the server was "
            "starved mid-reply (a loaded machine?); distrust those turns",
        )
    ]


@dataclass(frozen=True)
class _Window:
    """Machine figures over some samples (the run's, or those a turn overlaps)."""

    wall_ns: int
    load_per_core: float
    steal_share: float
    io_share: float
    io_source: str
    runq: dict[str, tuple[float, int]]  # name -> (wait share, wait ns per second of wall)

    def over(self, t: TrustThresholds) -> list[str]:
        """What in this window is over its limit, as short phrases (empty: nothing)."""
        out = []
        if self.steal_share > t.machine_steal_share:
            out.append(f"CPU steal {self.steal_share:.0%}")
        if self.io_share > t.machine_io_stall_share:
            out.append(f"disk-I/O stall {self.io_share:.0%} ({self.io_source})")
        for name, (share, per_s) in sorted(self.runq.items()):
            if share > t.machine_runq_wait_share and per_s > t.machine_runq_wait_floor_per_s_ns:
                out.append(f"{name} waited for a CPU {share:.0%} of its run time")
        return out


def _window(samples: Sequence[MachineSample]) -> _Window | None:
    wall = sum(max(x.end_ns - x.start_ns, 0) for x in samples)
    if not samples or wall <= 0:
        return None
    ticks = sum(x.cpu_ticks for x in samples)
    steal = sum(x.steal_ticks for x in samples) / ticks if ticks > 0 else 0.0
    if all(x.io_stall_us is not None for x in samples):
        io = sum((x.io_stall_us or 0) * 1000 for x in samples) / wall
        source = "PSI io some"
    else:
        io = sum(x.iowait_ticks for x in samples) / ticks if ticks > 0 else 0.0
        source = "iowait"
    cpu: dict[str, int] = {}
    wait: dict[str, int] = {}
    for x in samples:
        for p in x.processes:
            cpu[p.name] = cpu.get(p.name, 0) + max(p.cpu_ns, 0)
            wait[p.name] = wait.get(p.name, 0) + max(p.runq_wait_ns, 0)
    runq = {
        n: (wait[n] / (wait[n] + cpu[n]), round(wait[n] * 1e9 / wall))
        for n in cpu
        if wait[n] + cpu[n] > 0
    }
    cores = max(max(x.cores for x in samples), 1)
    load = max(x.load1_milli for x in samples) / 1000 / cores
    return _Window(wall, load, steal, io, source, runq)


def _turn_window_ns(turn: Turn) -> tuple[int, int, int]:
    """``(index, start, end)``: the clock interval a turn ran in."""
    ends = [v for v in turn.milestones.values() if isinstance(v, int)]
    return turn.index, turn.t0_ns, turn.t0_ns + max([0, *ends])


def _machine(
    windows: Sequence[int], samples: Sequence[MachineSample], t: TrustThresholds, checks: _Checks
) -> _Reasons:
    """The machine the run ran on: load, steal, run-queue waits, disk-I/O stalls (``windows``:
    the measured turns' ``index, start, end``, flat)."""
    run = _window(samples)
    if run is None:
        return []
    checks["machine_samples"] = len(samples)
    checks["machine_load_per_core_max"] = round(run.load_per_core, 3)
    checks["machine_steal_share"] = round(run.steal_share, 4)
    checks["machine_io_stall_share"] = round(run.io_share, 4)
    for name, (share, per_s) in sorted(run.runq.items()):
        checks[f"{name}_runq_wait_share"] = round(share, 4)
        checks[f"{name}_runq_wait_per_s_ns"] = per_s
    reasons: _Reasons = []
    if run.load_per_core > t.machine_load_per_core:
        reasons.append(
            _reason(
                "machine_load",
                f"load average {run.load_per_core:.1f} per core > {t.machine_load_per_core:g}: "
                "other work competed with the run for the CPU; the figures may be inflated",
            )
        )
    over = run.over(t)
    if over:
        reasons.append(
            _reason(
                "machine_inflated",
                f"the machine inflated the figures: {', '.join(over)} over the run",
            )
        )
    ordered = sorted(samples, key=lambda x: x.start_ns)
    starts = [x.start_ns for x in ordered]
    ends = [x.end_ns for x in ordered]
    distrusted = [
        windows[j]
        for j in range(0, len(windows), 3)
        if _window_over(windows[j + 1], windows[j + 2], ordered, starts, ends, t)
    ]
    checks["machine_distrusted_turns"] = len(distrusted)
    if distrusted:
        names = ", ".join(f"#{i}" for i in distrusted[:8]) + (" ..." if len(distrusted) > 8 else "")
        reasons.append(
            _reason(
                "machine_turns",
                f"{len(distrusted)} turn(s) ran while the machine was over a limit (CPU steal, "
                f"run-queue waits or disk-I/O stalls): distrust {names}",
            )
        )
    return reasons


def _window_over(
    a: int,
    b: int,
    ordered: Sequence[MachineSample],
    starts: Sequence[int],
    ends: Sequence[int],
    t: TrustThresholds,
) -> bool:
    """Whether the samples overlapping ``[a, b]`` (``ordered`` by start, back to back, found by
    bisection: a long run has many of both) are over a limit."""
    window = _window(ordered[bisect_right(ends, a) : bisect_left(starts, b)])
    return window is not None and bool(window.over(t))


def machine_judged(checks: Mapping[str, Any]) -> str | None:
    """What the machine checks looked at, for a passing trust line (None: not sampled)."""
    if "machine_samples" not in checks:
        return None
    waits = [v for k, v in checks.items() if k.endswith("_runq_wait_share")]
    worst = f", CPU waits <= {max(waits):.0%}" if waits else ""
    return (
        f"machine load {checks.get('machine_load_per_core_max', 0):.1f}/core, "
        f"steal {checks.get('machine_steal_share', 0):.0%}{worst}, "
        f"disk stall {checks.get('machine_io_stall_share', 0):.0%}"
    )


def assess_trust(
    turns: Sequence[Turn],
    loop_lag_ns: Sequence[int],
    thresholds: TrustThresholds = TrustThresholds(),
    machine: Sequence[MachineSample] = (),
    stages: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``trust`` section of ``summary.json``: ``trustworthy``, ``reasons`` (each with a
    ``code`` and a one-line ``message``), the ``checks`` measured and the ``thresholds``.

    ``turns`` are the measured turns (warm-up turns are left out by the caller or here);
    ``machine`` the intervals the machine sampler recorded during the run (none: not judged);
    ``stages`` the summary's stage descriptions (kind -> ``describe()`` with the server's name),
    which tell a TCP_NODELAY server's own first-event time from a Nagle hold.
    A run summarized as it goes keeps a :class:`TrustTally` instead of its turns.
    """
    tally = TrustTally(thresholds)
    for turn in turns:
        tally.add(turn)
    p99 = percentile([float(v) for v in loop_lag_ns], 99) if loop_lag_ns else None
    return tally.assess(p99, machine, stages)


__all__ = [
    "FIRST_EVENT",
    "NODELAY_SERVERS",
    "MachineSample",
    "ProcessSample",
    "Quantization",
    "TrustTally",
    "TrustThresholds",
    "assess_trust",
    "first_event_gaps",
    "machine_judged",
    "quantized_near_40ms",
    "transport_judged",
]
