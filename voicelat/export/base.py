"""The exporter contract and the fan-out that keeps exporting off the measuring loop.

The measuring loop stamps events; anything slower than appending to a queue there would show in
the figures. So the loop only calls :meth:`ExportFanout.submit` (one ``SimpleQueue.put``) and a
background thread converts each turn and hands it to every exporter. An exporter that fails
(collector down, disk full) prints ONE warning line and the run goes on: exports never change
results.
"""

from __future__ import annotations

import contextlib
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from voicelat.core.base.errors import EXIT_INFRA, VoicelatError
from voicelat.core.base.turn import Turn
from voicelat.core.summaries.run_summary import RunSummary

#: Entry-point group third-party exporters register under (``name = "pkg.mod:factory"``); the
#: factory takes :class:`ExportOptions` and returns an :class:`Exporter` or ``None`` (not enabled
#: by these options).
ENTRY_POINT_GROUP = "voicelat.exporters"

Warn = Callable[[str], None]

#: The standard variables that name an OTLP endpoint (either one turns OTel export on).
OTLP_ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def warn_stderr(message: str) -> None:
    """The default warning sink: one line on stderr, prefixed like voicelat's other warnings."""
    print(f"warning: {message}", file=sys.stderr, flush=True)


class ExportError(VoicelatError):
    """An export that cannot be set up as asked (bad endpoint, missing extra)."""


class MetricsPortInUse(ExportError):
    """``--metrics-port`` names a port another process listens on (exit 3, before the run)."""

    exit_code = EXIT_INFRA

    def __init__(self, host: str, port: int, reason: str) -> None:
        super().__init__(
            f"metrics port {port} on {host} is not available ({reason}): "
            f"pick another --metrics-port or stop what listens on {port}"
        )
        self.host = host
        self.port = port


@runtime_checkable
class Exporter(Protocol):
    """Receives finished turns, then the run summary, typed (None: the run ended before it
    had one). Called on the export thread only."""

    def on_turn(self, turn: Turn) -> None: ...

    def close(self, summary: RunSummary | None) -> None: ...


@runtime_checkable
class LoopLagSink(Protocol):
    """Optional: an exporter that also takes the loop-lag probe's samples (ns)."""

    def on_loop_lag(self, lag_ns: int) -> None: ...


@dataclass(frozen=True)
class ExportOptions:
    """What the command line asked for; every built-in exporter reads its part.

    ``pipeline`` is the pipeline's JSON form (``Pipeline.to_json()``, as summary.json carries
    it); ``otlp_endpoint`` None means "use the OTEL_EXPORTER_OTLP_* variables if set";
    ``wall_anchor_ns`` is a ``(time.time_ns(), time.perf_counter_ns())`` pair taken together at
    run start (None: each turn's own ``wall_time_ns`` anchors it).
    """

    pipeline: Mapping[str, Any] = field(default_factory=dict)
    run_dir: Path | None = None
    otlp_endpoint: str | None = None
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    #: After the run, keep /metrics up until it is scraped once more, at most this long: a run
    #: shorter than the scrape interval would otherwise end before its last turns are seen.
    metrics_linger_s: float = 0.0
    csv: bool = False
    service_name: str = "voicelat"
    wall_anchor_ns: tuple[int, int] | None = None
    env: Mapping[str, str] | None = None

    @property
    def pipeline_name(self) -> str:
        return str(self.pipeline.get("name") or "unnamed")

    def environ(self) -> Mapping[str, str]:
        return os.environ if self.env is None else self.env

    @property
    def otel_enabled(self) -> bool:
        """``otlp_endpoint`` given, or a standard OTLP endpoint variable set."""
        env = self.environ()
        return self.otlp_endpoint is not None or any(env.get(k) for k in OTLP_ENDPOINT_VARS)


_STOP = object()


class _Guarded:
    """One exporter and whether it already failed (after which it gets no more turns)."""

    def __init__(self, exporter: Exporter, warn: Warn) -> None:
        self.exporter = exporter
        self.warn = warn
        self.failed = False

    def call(self, what: str, fn: Callable[[], None]) -> None:
        if self.failed:
            return
        try:
            fn()
        except Exception as exc:  # an exporter bug or outage must never end the run
            self.failed = True
            name = type(self.exporter).__name__
            self.warn(f"{name} stopped exporting ({what}: {type(exc).__name__}: {exc})")

    def close(self, summary: RunSummary | None) -> None:
        if not self.failed:
            self.call("close", partial(self.exporter.close, summary))
            return
        # Already warned about: still release its port or file, quietly.
        with contextlib.suppress(Exception):
            self.exporter.close(summary)


class ExportFanout:
    """Takes turns from the measuring loop at O(1) cost; a daemon thread feeds the exporters.

    Use as a context manager or call :meth:`start` then :meth:`close`. ``submit`` and
    ``loop_lag`` are safe from any thread and never block.
    """

    def __init__(self, exporters: Sequence[Exporter], *, warn: Warn = warn_stderr) -> None:
        self._exporters = [_Guarded(e, warn) for e in exporters]
        self._warn = warn
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._closed = False

    @property
    def exporters(self) -> tuple[Exporter, ...]:
        return tuple(g.exporter for g in self._exporters)

    def __enter__(self) -> ExportFanout:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(None)

    def start(self) -> None:
        """Start the export thread (idempotent)."""
        if self._thread is None and self._exporters:
            self._thread = threading.Thread(target=self._drain, name="voicelat-export", daemon=True)
            self._thread.start()

    def submit(self, turn: Turn) -> None:
        """Queue a finished turn (the measuring loop's whole cost of exporting)."""
        if self._exporters and not self._closed:
            self._queue.put(turn)

    def loop_lag(self, lag_ns: int) -> None:
        """Queue one loop-lag sample for the exporters that take them."""
        if self._exporters and not self._closed:
            self._queue.put(int(lag_ns))

    def close(
        self, summary: RunSummary | Mapping[str, Any] | None, *, timeout_s: float = 30.0
    ) -> None:
        """Flush the queued turns, hand every exporter the summary, wait for the thread.

        ``summary`` may be the ``summary.json`` document (a run's outcome holds it so): it is
        typed here, once, so every exporter receives a :class:`RunSummary`."""
        if self._closed:
            return
        self._closed = True
        typed = RunSummary.from_json(summary) if isinstance(summary, Mapping) else summary
        self._queue.put((_STOP, typed))
        if self._thread is None:
            self._drain()  # never started: export what was queued, here
            return
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            self._warn(f"exports still running after {timeout_s:g} s; left unfinished")

    def _drain(self) -> None:
        while True:
            item = self._queue.get()
            if isinstance(item, tuple) and item and item[0] is _STOP:
                for g in self._exporters:
                    g.close(item[1])
                return
            self._dispatch(item)

    def _dispatch(self, item: object) -> None:
        for g in self._exporters:
            if isinstance(item, Turn):
                g.call("turn", partial(g.exporter.on_turn, item))
            elif isinstance(item, int) and isinstance(g.exporter, LoopLagSink):
                g.call("loop lag", partial(g.exporter.on_loop_lag, item))
            # Hand the GIL back between pieces of work: the measuring loop's thread, if it is
            # waiting for it, runs now rather than after the interpreter's 5 ms switch interval.
            time.sleep(0)


class _TurnObserver(Protocol):
    def turn_started(self, planned: Any, total: int) -> None: ...

    def milestone(self, index: int, name: str, t_rel_ns: int) -> None: ...

    def turn_finished(self, turn: Turn, total: int) -> None: ...


class ExportObserver:
    """A runner ``Observer`` that forwards to ``inner`` and queues each finished turn.

    Structural (it imports nothing from the engine), so ``Runner(observer=ExportObserver(
    PrintObserver(), fanout))`` wires exporting without the engine knowing about it.
    """

    def __init__(self, inner: _TurnObserver | None, fanout: ExportFanout) -> None:
        self.inner = inner
        self.fanout = fanout

    def turn_started(self, planned: Any, total: int) -> None:
        if self.inner is not None:
            self.inner.turn_started(planned, total)

    def milestone(self, index: int, name: str, t_rel_ns: int) -> None:
        if self.inner is not None:
            self.inner.milestone(index, name, t_rel_ns)

    def turn_finished(self, turn: Turn, total: int) -> None:
        self.fanout.submit(turn)
        if self.inner is not None:
            self.inner.turn_finished(turn, total)
