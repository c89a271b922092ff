"""The machine during a run, sampled off the measuring loop: load average, CPU steal and
iowait (/proc/stat), disk-I/O stalls (PSI, /proc/pressure/io), and the CPU time and run-queue
wait (/proc/PID/schedstat) of the measuring loop's thread and of each local server's process.

A thread of its own wakes once a second and reads a few small /proc files (tens of
microseconds; /proc is not a disk); the measuring loop never waits for it. Each wake-up makes
one :class:`~voicelat.core.summaries.diagnostics.MachineSample` of the deltas since the previous one,
stamped on the run's clock so that a turn's window finds the intervals it overlaps. The
verdict is pure and lives in :func:`voicelat.core.summaries.diagnostics.assess_trust`.

Linux only: elsewhere (no /proc) the sampler records nothing and trust does not judge the
machine. A server whose process ended is left out from then on.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from voicelat.core.summaries.diagnostics import MachineSample, ProcessSample

__all__ = ["PERIOD_S", "MachineSampler", "read_counters", "server_pids"]

#: One sample a second: a turn lasts a few seconds, and the cost stays negligible.
PERIOD_S = 1.0

_PROC = Path("/proc")


@dataclass(frozen=True)
class _Counters:
    """Cumulative counters at one instant (deltas of two make a sample)."""

    t_ns: int
    load1_milli: int
    cpu_ticks: int
    steal_ticks: int
    iowait_ticks: int
    io_stall_us: int | None
    processes: Mapping[str, tuple[int, int]]  # name -> (cpu ns, run-queue wait ns)


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (OSError, ValueError):
        return None


def _schedstat(path: Path) -> tuple[int, int] | None:
    """(ns on a CPU, ns runnable waiting for one) of one thread."""
    text = _read(path)
    if text is None:
        return None
    parts = text.split()
    if len(parts) < 2:
        return None
    return int(parts[0]), int(parts[1])


def _process(pid: int) -> tuple[int, int] | None:
    """A whole process (every thread): CPU ns and run-queue wait ns."""
    cpu = wait = 0
    found = False
    try:
        tasks = list((_PROC / str(pid) / "task").iterdir())
    except OSError:
        return None
    for task in tasks:
        got = _schedstat(task / "schedstat")
        if got is not None:
            found = True
            cpu, wait = cpu + got[0], wait + got[1]
    return (cpu, wait) if found else None


def _cpu_line() -> tuple[int, int, int] | None:
    """(all ticks, steal, iowait) of every core from /proc/stat."""
    text = _read(_PROC / "stat")
    if not text or not text.startswith("cpu "):
        return None
    # user nice system idle iowait irq softirq steal guest guest_nice; guest time is already
    # counted in user and nice.
    fields = [int(v) for v in text.split("\n", 1)[0].split()[1:]]
    fields += [0] * (8 - len(fields))
    return sum(fields[:8]), fields[7], fields[4]


def _io_stall_us() -> int | None:
    text = _read(_PROC / "pressure" / "io")
    if not text:
        return None
    for line in text.splitlines():
        if line.startswith("some "):
            for part in line.split():
                if part.startswith("total="):
                    return int(part[6:])
    return None


def _load1_milli() -> int:
    text = _read(_PROC / "loadavg")
    return round(float(text.split()[0]) * 1000) if text else 0


def read_counters(
    now_ns: Callable[[], int], loop_tid: int | None, servers: Mapping[str, int]
) -> _Counters | None:
    """The cumulative counters now (None where /proc cannot be read: not Linux)."""
    cpu = _cpu_line()
    if cpu is None:
        return None
    processes: dict[str, tuple[int, int]] = {}
    if loop_tid is not None:
        # The measuring loop's thread alone: the writer's and exporters' threads may wait for
        # a CPU without delaying any stamp.
        own = _schedstat(_PROC / str(os.getpid()) / "task" / str(loop_tid) / "schedstat")
        if own is not None:
            processes["voicelat"] = own
    for name, pid in servers.items():
        got = _process(pid)
        if got is not None:
            processes[name] = got
    return _Counters(
        t_ns=now_ns(),
        load1_milli=_load1_milli(),
        cpu_ticks=cpu[0],
        steal_ticks=cpu[1],
        iowait_ticks=cpu[2],
        io_stall_us=_io_stall_us(),
        processes=processes,
    )


def server_pids(stack_info: Mapping[str, object]) -> dict[str, int]:
    """The local servers' pids from a run's ``stack`` info (``{name: {"pid": ...}}``)."""
    pids: dict[str, int] = {}
    for name, info in stack_info.items():
        pid = info.get("pid") if isinstance(info, Mapping) else None
        if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0:
            pids[str(name)] = pid
    return pids


def _delta(a: _Counters, b: _Counters, cores: int) -> MachineSample:
    io = None
    if a.io_stall_us is not None and b.io_stall_us is not None:
        io = max(b.io_stall_us - a.io_stall_us, 0)
    return MachineSample(
        start_ns=a.t_ns,
        end_ns=b.t_ns,
        cores=cores,
        load1_milli=b.load1_milli,
        cpu_ticks=max(b.cpu_ticks - a.cpu_ticks, 0),
        steal_ticks=max(b.steal_ticks - a.steal_ticks, 0),
        iowait_ticks=max(b.iowait_ticks - a.iowait_ticks, 0),
        io_stall_us=io,
        processes=tuple(
            ProcessSample(
                name, max(cpu - a.processes[name][0], 0), max(w - a.processes[name][1], 0)
            )
            for name, (cpu, w) in b.processes.items()
            if name in a.processes  # a server that ended (or started) mid-interval: left out
        ),
    )


class MachineSampler:
    """Samples the machine on a daemon thread from :meth:`start` to :meth:`stop`.

    ``servers`` maps a name (``stt``, ``llm``, ``tts``) to the pid of a local server; the
    measuring loop's thread is the thread that calls :meth:`start`.
    """

    def __init__(
        self,
        now_ns: Callable[[], int],
        servers: Mapping[str, int] | None = None,
        period_s: float = PERIOD_S,
    ) -> None:
        self._now_ns = now_ns
        self._servers = dict(servers or {})
        self._period_s = period_s
        self._cores = os.cpu_count() or 1
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop_tid: int | None = None
        self._last: _Counters | None = None
        self._lock = threading.Lock()
        self._samples: list[MachineSample] = []

    @property
    def samples(self) -> list[MachineSample]:
        """The intervals sampled so far, in time order."""
        with self._lock:
            return list(self._samples)

    def start(self) -> None:
        """Start sampling (call it from the measuring loop's thread)."""
        if self._thread is not None:
            return
        self._loop_tid = threading.get_native_id()
        self._last = read_counters(self._now_ns, self._loop_tid, self._servers)
        if self._last is None:
            return  # no /proc: nothing to sample
        self._thread = threading.Thread(target=self._run, name="voicelat-machine", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._period_s):
            self._take()

    def _take(self) -> None:
        now = read_counters(self._now_ns, self._loop_tid, self._servers)
        if now is None or self._last is None:
            return
        sample = _delta(self._last, now, self._cores)
        self._last = now
        with self._lock:
            self._samples.append(sample)

    def stop(self) -> list[MachineSample]:
        """Stop, with a last sample for the time since the previous one; the samples."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
            with contextlib.suppress(Exception):
                self._take()  # the run's last partial second
            self._thread = None
        return self.samples
