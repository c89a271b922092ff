"""``--metrics-port``: a Prometheus ``/metrics`` endpoint that lives while a run or load runs.

Metrics (every one labelled ``pipeline``; the only other label is a bounded ``segment`` or
``stage``, never a turn, fixture or transcript):

* ``voicelat_turn_e2e_seconds`` histogram, headline turns
* ``voicelat_turn_segment_seconds{segment}`` histogram, one series per critical-path segment
* ``voicelat_llm_ttft_seconds`` / ``voicelat_tts_ttfa_seconds`` histograms
* ``voicelat_turns_total`` / ``voicelat_turn_failures_total{stage}`` counters (every turn)
* ``voicelat_loop_lag_seconds`` histogram (the probe's samples, or each turn's max without them)

The registry is the exporter's own: nothing else in the process leaks into the scrape.
"""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server

from voicelat.core.base.contract import SEGMENTS
from voicelat.core.base.turn import Turn
from voicelat.core.calls.bargein import BARGE_IN
from voicelat.core.calls.call import CALL_GREETING, CALL_TURN, index_label
from voicelat.core.summaries.run_summary import RunSummary
from voicelat.export.base import ExportOptions, MetricsPortInUse
from voicelat.export.measures import (
    FAILURE_STAGES,
    LATENCY_BUCKETS_S,
    LOOP_LAG_BUCKETS_S,
    failure_label,
    measures,
    seconds,
)

PREFIX = "voicelat"


class PrometheusExporter:
    """Serves ``/metrics`` on ``host:port`` from construction until :meth:`close`.

    The port is bound in the constructor, so a port in use raises :class:`MetricsPortInUse`
    (exit 3) before any turn runs. ``port=0`` picks a free port (see :attr:`port`).
    """

    def __init__(
        self, port: int, *, pipeline: str, host: str = "127.0.0.1", linger_s: float = 0.0
    ) -> None:
        self.pipeline = pipeline
        self.linger_s = linger_s
        self.registry = CollectorRegistry(auto_describe=True)
        self._define_metrics()
        self._scraped = threading.Condition()
        self._scrapes = 0
        self.registry.register(_ScrapeCounter(self._on_scrape))
        try:
            self._server, self._thread = start_http_server(port, addr=host, registry=self.registry)
        except OSError as exc:
            reason = "in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
            raise MetricsPortInUse(host, port, reason) from None
        self.host = host
        self.port: int = int(self._server.server_port)
        self._probe_samples = False

    @classmethod
    def from_options(cls, options: ExportOptions) -> PrometheusExporter | None:
        """The entry-point factory: enabled by ``metrics_port``."""
        if options.metrics_port is None:
            return None
        return cls(
            options.metrics_port,
            pipeline=options.pipeline_name,
            host=options.metrics_host,
            linger_s=options.metrics_linger_s,
        )

    def _on_scrape(self) -> None:
        with self._scraped:
            self._scrapes += 1
            self._scraped.notify_all()

    @property
    def scrapes(self) -> int:
        """How many times ``/metrics`` has been collected."""
        return self._scrapes

    def _linger(self) -> None:
        """Wait for one scrape that starts after every turn was observed (``linger_s`` at most)."""
        seen = self._scrapes
        deadline = time.monotonic() + self.linger_s
        with self._scraped:
            while self._scrapes == seen and (left := deadline - time.monotonic()) > 0:
                self._scraped.wait(left)

    def _define_metrics(self) -> None:
        reg, lat = self.registry, LATENCY_BUCKETS_S
        self.e2e = Histogram(
            f"{PREFIX}_turn_e2e_seconds",
            "Speech end to first audible reply (headline turns)",
            ["pipeline"],
            buckets=lat,
            registry=reg,
        )
        self.segment = Histogram(
            f"{PREFIX}_turn_segment_seconds",
            "One critical-path segment of a turn (the segments sum to e2e)",
            ["pipeline", "segment"],
            buckets=lat,
            registry=reg,
        )
        self.ttft = Histogram(
            f"{PREFIX}_llm_ttft_seconds", "LLM time to first token", ["pipeline"], buckets=lat,
            registry=reg,
        )  # fmt: skip
        self.ttfa = Histogram(
            f"{PREFIX}_tts_ttfa_seconds", "TTS time to first audio", ["pipeline"], buckets=lat,
            registry=reg,
        )  # fmt: skip
        self.turns = Counter(f"{PREFIX}_turns", "Turns finished", ["pipeline"], registry=reg)
        self.failures = Counter(
            f"{PREFIX}_turn_failures", "Turns failed, by stage", ["pipeline", "stage"], registry=reg
        )
        # Runs of whole calls (run --scenario): every ok turn's e2e by its index in its call
        # ("1".."9", "10+"), and each call's greeting (connected -> first audible at the ear).
        self.call_turn_e2e = Histogram(
            f"{PREFIX}_call_turn_e2e_seconds",
            "Speech end to first audible reply, by the turn's index in its call",
            ["pipeline", "call_turn"],
            buckets=lat,
            registry=reg,
        )
        self.greeting = Histogram(
            f"{PREFIX}_call_greeting_seconds",
            "A call connected to its greeting's first audible sample at the ear",
            ["pipeline"],
            buckets=lat,
            registry=reg,
        )
        # Speech during replies (core/calls/bargein.py): each interruption's stop at the ear, and
        # every overlay counted by kind and outcome (stopped, never_stopped, false_barge_in,
        # kept_talking, reply_ended_before).
        self.barge_in_stop = Histogram(
            f"{PREFIX}_barge_in_stop_seconds",
            "An interruption's onset to the agent's last audible sample at the ear",
            ["pipeline"],
            buckets=lat,
            registry=reg,
        )
        self.overlays = Counter(
            f"{PREFIX}_overlays",
            "Speech during a reply, by kind and what the agent did",
            ["pipeline", "kind", "outcome"],
            registry=reg,
        )
        self.loop_lag = Histogram(
            f"{PREFIX}_loop_lag_seconds",
            "Lag of the measuring event loop",
            ["pipeline"],
            buckets=LOOP_LAG_BUCKETS_S,
            registry=reg,
        )
        # Every series exists from the first scrape, at 0: rate() and absent() need no special
        # case for "nothing failed yet".
        for metric in (self.turns, self.e2e, self.ttft, self.ttfa, self.loop_lag):
            metric.labels(self.pipeline)
        for stage in FAILURE_STAGES:
            self.failures.labels(self.pipeline, stage)
        for s in SEGMENTS:
            self.segment.labels(self.pipeline, s)

    def on_turn(self, turn: Turn) -> None:
        p = self.pipeline
        self.turns.labels(p).inc()
        if turn.failed:
            self.failures.labels(p, failure_label(turn.failure_stage)).inc()
        m = measures(turn)
        if m.e2e_s is not None:
            self.e2e.labels(p).observe(m.e2e_s)
        for name, value in m.segments_s.items():
            self.segment.labels(p, name).observe(value)
        if m.ttft_s is not None:
            self.ttft.labels(p).observe(m.ttft_s)
        if m.ttfa_s is not None:
            self.ttfa.labels(p).observe(m.ttfa_s)
        if m.loop_lag_max_s is not None and not self._probe_samples:
            self.loop_lag.labels(p).observe(m.loop_lag_max_s)
        self._on_call_turn(turn)

    def _on_call_turn(self, turn: Turn) -> None:
        index, greeting = turn.extra.get(CALL_TURN), turn.extra.get(CALL_GREETING)
        if isinstance(index, int) and turn.ok and turn.e2e_ns is not None:
            self.call_turn_e2e.labels(self.pipeline, index_label(index)).observe(
                seconds(turn.e2e_ns)
            )
        if isinstance(greeting, int):
            self.greeting.labels(self.pipeline).observe(seconds(greeting))
        b = turn.extra.get(BARGE_IN)
        if isinstance(b, Mapping):
            self._on_overlay(b)

    def _on_overlay(self, b: Mapping[str, Any]) -> None:
        kind = str(b.get("kind", "interrupt"))
        if isinstance(b.get("stop_ns"), int):
            self.barge_in_stop.labels(self.pipeline).observe(seconds(b["stop_ns"]))
        if b.get("reply_ended_before"):
            outcome = "reply_ended_before"
        elif kind == "interrupt":
            outcome = "never_stopped" if b.get("never_stopped") else "stopped"
        else:
            outcome = "false_barge_in" if b.get("false_barge_in") else "kept_talking"
        self.overlays.labels(self.pipeline, kind, outcome).inc()

    def on_loop_lag(self, lag_ns: int) -> None:
        """A probe sample; once these arrive, the per-turn maxima are no longer counted."""
        self._probe_samples = True
        self.loop_lag.labels(self.pipeline).observe(seconds(lag_ns))

    def close(self, summary: RunSummary | None) -> None:
        """Stop serving, after one more scrape when ``linger_s`` asks for it (called once the
        fan-out has handed over every turn, off the measuring loop)."""
        if self.linger_s > 0:
            self._linger()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


class _ScrapeCounter:
    """A collector with no metrics: the registry calls ``collect`` once per scrape, which is
    how the exporter knows a scrape happened (``prometheus_client`` has no hook for it)."""

    def __init__(self, on_collect: Any) -> None:
        self._on_collect = on_collect

    def collect(self) -> Iterator[Any]:
        self._on_collect()
        return iter(())
