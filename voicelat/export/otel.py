"""``--otlp-endpoint``: each turn as OpenTelemetry spans, and latency histograms, over OTLP/HTTP.

Per turn, one ``invoke_agent`` span (t0 .. the last milestone) with three children,
``speech_to_text``, ``chat`` and ``text_to_speech``; every segment, milestone and numeric figure
rides as an attribute. GenAI semantic-convention names are used where they exist (development
status, so the schema URL is pinned: :data:`SCHEMA_URL`); the rest lives under ``voicelat.``.

Times: milestones are ns relative to the turn's ``t0_ns`` on the monotonic clock. OTel wants wall
time, so ``t0`` is placed through a wall anchor: a ``(wall_ns, monotonic_ns)`` pair taken together
at run start when the caller has one, else the turn's own ``wall_time_ns``.

Everything here runs on the export thread. The collector being down or answering 4xx/5xx prints
one warning line; OTel export then stops for the run, and the results are untouched.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, MetricExportResult
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.trace import SpanKind, Status, StatusCode, set_span_in_context

from voicelat.core.contract import ALL_SEGMENTS
from voicelat.core.turn import Turn
from voicelat.core.version import __version__
from voicelat.export.base import ExportOptions, Warn, warn_stderr
from voicelat.export.measures import (
    LATENCY_BUCKETS_S,
    LOOP_LAG_BUCKETS_S,
    failure_label,
    measures,
)

#: The semantic-conventions version the attribute names follow (GenAI names are development
#: status: a later version may rename them, the schema URL tells a backend which one this is).
SCHEMA_URL = "https://opentelemetry.io/schemas/1.44.0"
SCOPE = "voicelat"
#: Stage span names (the GenAI operation each stage performs).
STAGE_SPANS: dict[str, str] = {
    "stt": "speech_to_text",
    "llm": "chat",
    "tts": "text_to_speech",
}
TURN_SPAN = "invoke_agent"
DEFAULT_TIMEOUT_S = 5.0
_FLUSH_EVERY_S = 1.0
#: Cumulative metrics go out this often during a run (and once more at its end).
METRICS_EVERY_S = 10.0
# Spans per OTLP request. Encoding is pure Python holding the GIL (~30 us a span): small
# requests, with the GIL handed back between them, keep the measuring loop's thread from
# waiting behind one long encode (200 spans in one go delayed its wake-ups by up to 15 ms).
_BATCH_SPANS = 32
_ENV_TIMEOUTS = ("OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")
# Stage span bounds: first milestone that exists of each tuple (start, then end).
_STAGE_BOUNDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "stt": (("speech_start",), ("stt_final", "endpoint")),
    "llm": (("llm_request",), ("llm_done", "llm_first_token", "llm_first_delta")),
    "tts": (("tts_request",), ("tts_done", "tts_first_audible", "tts_first_byte")),
}


def otlp_urls(endpoint: str | None, env: Mapping[str, str]) -> tuple[str | None, str | None]:
    """``(traces_url, metrics_url)``: from ``endpoint`` (a base URL) when given, else from the
    standard variables read the standard way (a per-signal variable as is, the base one with
    ``/v1/<signal>`` appended). None: not set, the SDK's default applies."""
    if endpoint:
        return signal_urls(endpoint)
    base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    traces, metrics = signal_urls(base) if base else (None, None)
    return (
        env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or traces,
        env.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") or metrics,
    )


def signal_urls(endpoint: str) -> tuple[str, str]:
    """``(traces_url, metrics_url)`` for a base URL such as ``http://collector:4318`` (the
    ``/v1/traces`` form is accepted too), as OTEL_EXPORTER_OTLP_ENDPOINT is read."""
    base = endpoint.rstrip("/")
    for suffix in ("/v1/traces", "/v1/metrics"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    return f"{base}/v1/traces", f"{base}/v1/metrics"


class _Collect(SpanProcessor):
    """Keeps ended spans for the next batch (the export thread sends them itself)."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


class _LastError(logging.Handler):
    """Catches the OTLP client's log lines: their reason goes into our one warning, and they
    are not printed themselves (Python would print an unhandled warning to stderr)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            self.lines.append(record.getMessage())

    def reason(self) -> str:
        """The first line (what went wrong) and the last (how it ended), since the last call."""
        lines, self.lines = self.lines, []
        if not lines:
            return "no answer"
        return lines[0] if len(lines) == 1 else f"{lines[0]} {lines[-1]}"


class OtelExporter:
    """Turns to spans and histograms, sent with OTLP/HTTP protobuf.

    ``endpoint`` is a base URL (``/v1/traces`` and ``/v1/metrics`` are appended); without it the
    ``OTEL_EXPORTER_OTLP_(TRACES_|METRICS_)ENDPOINT`` variables of ``env`` (default: the
    process environment) apply; the SDK reads the other OTLP variables (headers, TLS,
    compression, timeout) from the process environment.
    """

    def __init__(
        self,
        endpoint: str | None = None,
        *,
        pipeline: Mapping[str, Any] | None = None,
        service_name: str = "voicelat",
        wall_anchor_ns: tuple[int, int] | None = None,
        timeout_s: float | None = DEFAULT_TIMEOUT_S,
        warn: Warn = warn_stderr,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.pipeline = dict(pipeline or {})
        traces, metrics = otlp_urls(endpoint, os.environ if env is None else env)
        self.endpoint = traces
        self.wall_anchor_ns = wall_anchor_ns
        self._warn = warn
        self._disabled = False
        self._log = _LastError()
        self._silence_sdk_logs()
        self._span_exporter = OTLPSpanExporter(endpoint=traces, timeout=timeout_s)
        self._metric_exporter = OTLPMetricExporter(endpoint=metrics, timeout=timeout_s)
        resource = Resource.create(
            {"service.name": service_name, "service.version": __version__}, schema_url=SCHEMA_URL
        )
        self._collect = _Collect()
        self._tracer_provider = TracerProvider(resource=resource)
        self._tracer_provider.add_span_processor(self._collect)
        self._tracer = self._tracer_provider.get_tracer(SCOPE, __version__, schema_url=SCHEMA_URL)
        self._reader = InMemoryMetricReader()
        self._meter_provider = MeterProvider(resource=resource, metric_readers=[self._reader])
        self._define_metrics()
        self._last_flush = self._last_metrics = time.monotonic()

    @classmethod
    def from_options(cls, options: ExportOptions) -> OtelExporter | None:
        """Built from the options when they enable OTel (``otlp_endpoint`` or a variable)."""
        if not options.otel_enabled:
            return None
        env = options.environ()
        timeout = None if any(env.get(k) for k in _ENV_TIMEOUTS) else DEFAULT_TIMEOUT_S
        return cls(
            options.otlp_endpoint,
            pipeline=options.pipeline,
            service_name=options.service_name,
            wall_anchor_ns=options.wall_anchor_ns,
            timeout_s=timeout,
            env=env,
        )

    def _silence_sdk_logs(self) -> None:
        logger = logging.getLogger("opentelemetry.exporter.otlp")
        if not any(isinstance(h, _LastError) for h in logger.handlers):
            logger.addHandler(self._log)
            logger.propagate = False
        else:
            self._log = next(h for h in logger.handlers if isinstance(h, _LastError))

    def _define_metrics(self) -> None:
        meter = self._meter_provider.get_meter(SCOPE, __version__, schema_url=SCHEMA_URL)
        lat = list(LATENCY_BUCKETS_S)

        def hist(name: str, desc: str, buckets: list[float] = lat) -> Any:
            return meter.create_histogram(
                name, unit="s", description=desc, explicit_bucket_boundaries_advisory=buckets
            )

        self._e2e = hist("voicelat.turn.e2e", "Speech end to first audible reply")
        self._segment = hist("voicelat.turn.segment", "One critical-path segment of a turn")
        self._ttft = hist("voicelat.llm.ttft", "LLM time to first token")
        self._ttfa = hist("voicelat.tts.ttfa", "TTS time to first audio")
        self._loop_lag = hist(
            "voicelat.loop.lag", "Max lag of the measuring loop per turn", list(LOOP_LAG_BUCKETS_S)
        )
        self._turns = meter.create_counter("voicelat.turns", unit="{turn}")
        self._failures = meter.create_counter("voicelat.turn.failures", unit="{turn}")

    # -- the Exporter protocol ---------------------------------------------------------------
    def on_turn(self, turn: Turn) -> None:
        if self._disabled:
            return
        self._record_metrics(turn)
        emit_turn_spans(self._tracer, turn, self.pipeline, self.wall_anchor_ns)
        now = time.monotonic()
        if len(self._collect.spans) >= _BATCH_SPANS or now - self._last_flush >= _FLUSH_EVERY_S:
            self._flush_spans()
            self._last_flush = now
        if now - self._last_metrics >= METRICS_EVERY_S:
            self._export_metrics()
            self._last_metrics = now

    def close(self, summary: Mapping[str, Any] | None) -> None:
        self._flush_spans()
        self._export_metrics()
        _shutdown(self._span_exporter)
        _shutdown(self._metric_exporter)

    # -- internals ---------------------------------------------------------------------------
    def _record_metrics(self, turn: Turn) -> None:
        base = {"voicelat.pipeline": str(self.pipeline.get("name") or "unnamed")}
        self._turns.add(1, base)
        if turn.failed:
            self._failures.add(1, base | {"voicelat.stage": failure_label(turn.failure_stage)})
        m = measures(turn)
        if m.e2e_s is not None:
            self._e2e.record(m.e2e_s, base)
        for name, value in m.segments_s.items():
            self._segment.record(value, base | {"voicelat.segment": name})
        if m.ttft_s is not None:
            self._ttft.record(m.ttft_s, base)
        if m.ttfa_s is not None:
            self._ttfa.record(m.ttfa_s, base)
        if m.loop_lag_max_s is not None:
            self._loop_lag.record(m.loop_lag_max_s, base)

    def _export_metrics(self) -> None:
        data = self._reader.get_metrics_data()
        if not self._disabled and data is not None:
            self._log.lines.clear()
            if self._metric_exporter.export(data) is not MetricExportResult.SUCCESS:
                self._fail("metrics")

    def _flush_spans(self) -> None:
        batch, self._collect.spans = self._collect.spans, []
        for i in range(0, len(batch), _BATCH_SPANS):
            if self._disabled:
                return
            self._log.lines.clear()
            if (
                self._span_exporter.export(batch[i : i + _BATCH_SPANS])
                is not SpanExportResult.SUCCESS
            ):
                self._fail("spans")
            time.sleep(0)  # hand the GIL back between requests (see _BATCH_SPANS)

    def _fail(self, what: str) -> None:
        self._disabled = True
        where = self.endpoint or "the default OTLP endpoint"
        reason = self._log.reason()
        self._warn(
            f"OTLP export of {what} to {where} failed ({reason}); OTel export is off for the "
            "rest of this run (results are unaffected)"
        )


def _shutdown(exporter: Any) -> None:
    # The SDK exporters' shutdown() carries no annotations (mypy strict would reject the call).
    exporter.shutdown()


# -- turn -> spans (pure apart from the tracer) ---------------------------------------------
def wall_ns(turn: Turn, rel_ns: int, anchor: tuple[int, int] | None) -> int:
    """Wall-clock ns of a t0-relative time of ``turn``."""
    if anchor is not None and turn.t0_ns:
        wall0, mono0 = anchor
        return wall0 + (turn.t0_ns - mono0) + rel_ns
    base = turn.wall_time_ns if turn.wall_time_ns is not None else time.time_ns()
    return base + rel_ns


def turn_attributes(turn: Turn, pipeline: Mapping[str, Any]) -> dict[str, Any]:
    """The ``invoke_agent`` span's attributes: GenAI names, then voicelat's own."""
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": str(pipeline.get("name") or "voicelat"),
        "voicelat.turn.index": turn.index,
        "voicelat.turn.fixture": turn.fixture,
        "voicelat.turn.repeat": turn.repeat,
        "voicelat.turn.warmup": turn.warmup,
        "voicelat.turn.cold": turn.cold,
        "voicelat.turn.failed": turn.failed,
        "voicelat.turn.headline": turn.headline,
    }
    if turn.e2e_ns is not None:
        attrs["voicelat.e2e_ns"] = turn.e2e_ns
    if turn.flags:
        attrs["voicelat.turn.flags"] = list(turn.flags)
    if turn.cold_stages:
        attrs["voicelat.turn.cold_stages"] = list(turn.cold_stages)
    if turn.failed:
        attrs["voicelat.failure.stage"] = turn.failure_stage or ""
        attrs["voicelat.failure.reason"] = turn.failure_reason or ""
    for name in ALL_SEGMENTS:
        if name in turn.segments:
            attrs[f"voicelat.segment.{name}_ns"] = turn.segments[name]
    for name, t in turn.milestones.items():
        attrs[f"voicelat.milestone.{name}_ns"] = t
    for name, v in turn.figures.items():
        if isinstance(v, int | float) and not isinstance(v, bool):
            attrs[f"voicelat.figure.{name}"] = v
    return attrs


def stage_attributes(turn: Turn, kind: str, pipeline: Mapping[str, Any]) -> dict[str, Any]:
    """A stage span's attributes: its GenAI operation, provider and model, its network phases."""
    table = pipeline.get(kind)
    table = table if isinstance(table, Mapping) else {}
    attrs: dict[str, Any] = {"gen_ai.operation.name": STAGE_SPANS[kind], "voicelat.stage": kind}
    if table.get("stage"):
        attrs["voicelat.stage.provider"] = str(table["stage"])
    model = table.get("model") or table.get("voice")
    if model:
        attrs["gen_ai.request.model"] = str(model)
    for name, duration in turn.spans_of(kind).items():
        attrs[f"voicelat.phase.{name}_ns"] = duration
    return attrs


def _first(milestones: Mapping[str, int], names: Sequence[str]) -> int | None:
    return next((milestones[n] for n in names if n in milestones), None)


def emit_turn_spans(
    tracer: Any, turn: Turn, pipeline: Mapping[str, Any], anchor: tuple[int, int] | None
) -> None:
    """Start and end the turn span and its stage spans on ``tracer`` (explicit timestamps)."""
    ms = turn.milestones
    end_rel = max([0, *ms.values(), *(s.end_ns for s in turn.spans)])
    root = tracer.start_span(
        TURN_SPAN,
        kind=SpanKind.INTERNAL,
        attributes=turn_attributes(turn, pipeline),
        start_time=wall_ns(turn, 0, anchor),
    )
    if turn.failed:
        root.set_status(Status(StatusCode.ERROR, f"{turn.failure_stage}: {turn.failure_reason}"))
    ctx: Context = set_span_in_context(root)
    for kind, (starts, ends) in _STAGE_BOUNDS.items():
        phase_starts = [s.start_ns for s in turn.spans if s.stage == kind]
        start = _first(ms, starts)
        start = (
            min([start, *phase_starts]) if start is not None else min(phase_starts, default=None)
        )
        if start is None:
            continue  # the stage never started (a turn that failed before it)
        end = _first(ms, ends)
        end = max(start, end if end is not None else start)
        span = tracer.start_span(
            STAGE_SPANS[kind],
            context=ctx,
            kind=SpanKind.CLIENT,
            attributes=stage_attributes(turn, kind, pipeline),
            start_time=wall_ns(turn, start, anchor),
        )
        if turn.failed and turn.failure_stage == kind:
            span.set_status(Status(StatusCode.ERROR, turn.failure_reason or "failed"))
        span.end(end_time=wall_ns(turn, end, anchor))
    root.end(end_time=wall_ns(turn, end_rel, anchor))
