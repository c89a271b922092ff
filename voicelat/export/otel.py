"""``--otlp-endpoint``: each turn as OpenTelemetry spans, and latency histograms, over OTLP/HTTP.

Per turn, one ``invoke_agent`` span (t0 .. the last milestone) and, per kind of turn, its
children: a cascade's ``speech_to_text``, ``chat`` and ``text_to_speech``; a realtime model's
``generate_live_content`` (no STT span: there is no STT); a black-box agent none (the agent is
the turn). Every segment, milestone and numeric figure rides as an attribute; the first-response
moments are span events with their clock and origin named. A failed stage's span ends when it
failed, with status ERROR. GenAI names follow the conventions and their voice proposals
(:mod:`voicelat.export.genai_voice`, the one place they are spelled; drafts, so the schema URL
is pinned: :data:`SCHEMA_URL`); the rest lives under ``voicelat.``.

Times: milestones are ns relative to the turn's ``t0_ns`` on the monotonic clock. OTel wants wall
time, so ``t0`` is placed through a wall anchor: a ``(wall_ns, monotonic_ns)`` pair taken together
at run start when the caller has one, else the turn's own ``wall_time_ns``.

Everything here runs on the export thread. The collector being down or answering 4xx/5xx prints
one warning line; OTel export then stops for the run, and the results are untouched.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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

from voicelat.core.base.contract import ALL_SEGMENTS
from voicelat.core.base.turn import Turn
from voicelat.core.base.version import __version__
from voicelat.core.calls.bargein import BARGE_IN
from voicelat.core.calls.call import CALL_CONNECTED, CALL_GREETING, CALL_ID
from voicelat.core.judge.definitions import AGENT, CASCADE, S2S, kind_of
from voicelat.core.summaries.run_summary import RunSummary
from voicelat.export import genai_voice as gv
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
    "stt": gv.OP_STT,
    "llm": gv.OP_CHAT,
    "tts": gv.OP_TTS,
    "s2s": gv.OP_REALTIME,
}
TURN_SPAN = gv.OP_INVOKE_AGENT
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
    # The realtime model's generation: from the end of the user's speech (PR #394's anchor)
    # or, before it, from when it started listening, to the response's end.
    "s2s": (
        ("endpoint", "response_start", "speech_start"),
        ("response_done", "first_audible", "first_audio", "first_text", "response_start"),
    ),
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


def endpoint_problem(url: str) -> str | None:
    """Why ``url`` cannot be an OTLP/HTTP endpoint, in a few words (None: it can be). Checked
    before the first export, so a URL that can never work is one warning line that says what
    is wrong with it, not the HTTP client's parse error after the first batch."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises for a port out of range or not a number
    except ValueError as exc:  # "Invalid IPv6 URL", "Port out of range 0-65535"
        return str(exc).lower()
    if parts.scheme not in ("http", "https"):
        got = f"{parts.scheme}://" if parts.scheme else "no scheme"
        return f"OTLP/HTTP needs http:// or https://, not {got}"
    host = parts.hostname
    if not host:
        return "no host"
    with contextlib.suppress(ValueError):
        ipaddress.ip_address(host)
        return None
    try:
        host.encode("idna")
    except UnicodeError:  # an empty label, one over 63 characters
        return f"{host!r} is not a valid host name"
    if any(c.isspace() for c in host):
        return f"{host!r} is not a valid host name"
    return None


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
        self._calls = CallSpans()
        for url in dict.fromkeys(u for u in (traces, metrics) if u is not None):
            problem = endpoint_problem(url)
            if problem is not None and not self._disabled:
                self._disabled = True  # nothing is sent: one line now, none per batch later
                warn(
                    f"OTLP endpoint {url} is not usable ({problem}); OTel export is off for "
                    "this run (results are unaffected): give http(s)://HOST:PORT, e.g. "
                    "--otlp-endpoint http://127.0.0.1:4318"
                )
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
        self._instrument = meter.create_gauge(
            "voicelat.instrument.error",
            unit="s",
            description="The run's instrument error bar (± on every figure; --calibrate), by "
            "voicelat.quantile (p50, p99)",
        )

    # -- the Exporter protocol ---------------------------------------------------------------
    def on_turn(self, turn: Turn) -> None:
        if self._disabled:
            return
        self._record_metrics(turn)
        parent = self._calls.parent_of(self._tracer, turn, self.wall_anchor_ns)
        emit_turn_spans(self._tracer, turn, self.pipeline, self.wall_anchor_ns, parent=parent)
        now = time.monotonic()
        if len(self._collect.spans) >= _BATCH_SPANS or now - self._last_flush >= _FLUSH_EVERY_S:
            self._flush_spans()
            self._last_flush = now
        if now - self._last_metrics >= METRICS_EVERY_S:
            self._export_metrics()
            self._last_metrics = now

    def close(self, summary: RunSummary | None) -> None:
        self._calls.end_all()
        if not self._disabled:
            self._record_instrument(summary)
            self._flush_spans()
            self._export_metrics()
        _shutdown(self._span_exporter)
        _shutdown(self._metric_exporter)

    # -- internals ---------------------------------------------------------------------------
    def _record_instrument(self, summary: RunSummary | None) -> None:
        """The summary's instrument error bar as a gauge (nothing when uncalibrated)."""
        section = summary.extra.get("instrument") if summary is not None else None
        if not isinstance(section, Mapping) or section.get("status") != "calibrated":
            return
        base = {"voicelat.pipeline": str(self.pipeline.get("name") or "unnamed")}
        for q in ("p50", "p99"):
            value = section.get(f"error_{q}_ns")
            if isinstance(value, int | float) and not isinstance(value, bool):
                self._instrument.set(value / 1e9, base | {"voicelat.quantile": q})

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


@dataclass(frozen=True)
class SpanPlan:
    """One span of a turn, before it meets a tracer: name, kind, bounds (ns after t0),
    attributes and, for a failed one, its error."""

    name: str
    operation: str
    client: bool
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    error: str | None = None


def _end_reason(turn: Turn) -> dict[str, Any]:
    if turn.failed:
        return {}
    return {gv.END_REASON: "interrupted" if turn.interrupted else "complete"}


def turn_attributes(turn: Turn, pipeline: Mapping[str, Any]) -> dict[str, Any]:
    """The ``invoke_agent`` span's attributes: GenAI names, then voicelat's own."""
    attrs: dict[str, Any] = {
        gv.OPERATION: gv.OP_INVOKE_AGENT,
        gv.AGENT_NAME: str(pipeline.get("name") or "voicelat"),
        "voicelat.turn.kind": kind_of(turn),
        "voicelat.turn.index": turn.index,
        "voicelat.turn.fixture": turn.fixture,
        "voicelat.turn.repeat": turn.repeat,
        "voicelat.turn.warmup": turn.warmup,
        "voicelat.turn.cold": turn.cold,
        "voicelat.turn.failed": turn.failed,
        "voicelat.turn.headline": turn.headline,
        **_end_reason(turn),
    }
    if turn.e2e_ns is not None:
        attrs["voicelat.e2e_ns"] = turn.e2e_ns
    if turn.flags:
        attrs["voicelat.turn.flags"] = list(turn.flags)
    if turn.cold_stages:
        attrs["voicelat.turn.cold_stages"] = list(turn.cold_stages)
    if turn.failed:
        attrs.update(_failure_attributes(turn, pipeline))
    for name in ALL_SEGMENTS:
        if name in turn.segments:
            attrs[f"voicelat.segment.{name}_ns"] = turn.segments[name]
    for name, t in turn.milestones.items():
        attrs[f"voicelat.milestone.{name}_ns"] = t
    for name, v in turn.figures.items():
        if isinstance(v, int | float) and not isinstance(v, bool):
            attrs[f"voicelat.figure.{name}"] = v
    return attrs


def _failure_attributes(turn: Turn, pipeline: Mapping[str, Any]) -> dict[str, Any]:
    at, source = failure_end(turn, pipeline)
    return {
        gv.ERROR_TYPE: _error_type(turn),
        "voicelat.failure.stage": turn.failure_stage or "",
        "voicelat.failure.reason": turn.failure_reason or "",
        "voicelat.failure.at_ns": at,
        "voicelat.failure.at_source": source,
    }


def _error_type(turn: Turn) -> str:
    """``error.type``: low-cardinality, the reason's first word (an exception's class name)."""
    reason = (turn.failure_reason or "").strip()
    word = reason.split(":", 1)[0].split(" ", 1)[0] if reason else ""
    return word or "_OTHER"


def _last_seen(turn: Turn) -> int:
    return max([0, *turn.milestones.values(), *(s.end_ns for s in turn.spans)])


def failure_end(turn: Turn, pipeline: Mapping[str, Any]) -> tuple[int, str]:
    """When a failed turn's failing stage stopped (ns after t0) and how that is known:
    ``stage_event`` (its Failed event's stamp, exact), ``turn_timeout`` (the pipeline's turn
    timeout), ``last_event`` / ``last_seen`` (the stage's, or the turn's, last stamp: lower
    bounds)."""
    at = turn.extra.get("failure_at_ns")
    if isinstance(at, int) and turn.extra.get("failure_at_exact"):
        return at, "stage_event"
    reason = turn.failure_reason or ""
    timeout = (pipeline.get("turn") or {}).get("timeout_s")
    if turn.failure_stage == "turn" and reason.startswith("timed out") and timeout:
        return max(int(float(timeout) * 1e9), _last_seen(turn)), "turn_timeout"
    if isinstance(at, int):
        return at, "last_event"
    return _last_seen(turn), "last_seen"


def _table(pipeline: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    table = pipeline.get(kind)
    return table if isinstance(table, Mapping) else {}


def stage_attributes(turn: Turn, kind: str, pipeline: Mapping[str, Any]) -> dict[str, Any]:
    """A stage span's attributes: its GenAI operation, provider, model and voice options, the
    measured usage and first-chunk time, its network phases."""
    table = _table(pipeline, kind)
    attrs: dict[str, Any] = {gv.OPERATION: STAGE_SPANS[kind], "voicelat.stage": kind}
    stage = str(table.get("stage") or "")
    if stage:
        attrs["voicelat.stage.provider"] = stage
        provider = gv.provider_name(stage)
        if provider:
            attrs[gv.PROVIDER] = provider
    if table.get("model"):
        attrs[gv.REQUEST_MODEL] = str(table["model"])
    if kind in ("tts", "s2s"):
        attrs[gv.OUTPUT_TYPE] = "speech"
        if table.get("voice"):
            attrs[gv.VOICE] = str(table["voice"])
    if kind == "stt" and table.get("language"):
        attrs[gv.INPUT_LANGUAGE] = str(table["language"])
    attrs.update(_usage(turn, kind))
    first = _first_chunk_s(turn, kind)
    if first is not None:
        attrs[gv.TIME_TO_FIRST_CHUNK] = first
    if kind == "s2s":
        attrs.update(_end_reason(turn))
    for name, duration in turn.spans_of(kind).items():
        attrs[f"voicelat.phase.{name}_ns"] = duration
    return attrs


#: figure -> usage attribute, per stage kind (the provider's own counts).
_USAGE: dict[str, tuple[tuple[str, str], ...]] = {
    "llm": (("llm_prompt_tokens", gv.INPUT_TOKENS), ("llm_tokens", gv.OUTPUT_TOKENS)),
    "s2s": (
        ("s2s_usage_input_tokens", gv.INPUT_TOKENS),
        ("s2s_usage_output_tokens", gv.OUTPUT_TOKENS),
        ("s2s_usage_input_audio_tokens", gv.AUDIO_INPUT_TOKENS),
        ("s2s_usage_output_audio_tokens", gv.AUDIO_OUTPUT_TOKENS),
    ),
}


def _usage(turn: Turn, kind: str) -> dict[str, int]:
    out = {}
    for figure, attr in _USAGE.get(kind, ()):
        v = turn.figures.get(figure)
        if isinstance(v, int | float) and not isinstance(v, bool):
            out[attr] = int(v)
    return out


#: (request, first chunks) of each kind's ``gen_ai.response.time_to_first_chunk``.
_FIRST_CHUNK: dict[str, tuple[str, tuple[str, ...]]] = {
    "llm": ("llm_request", ("llm_first_delta",)),
    "s2s": ("endpoint", ("first_text", "first_audio")),
}


def _first_chunk_s(turn: Turn, kind: str) -> float | None:
    if kind not in _FIRST_CHUNK:
        return None
    start_name, firsts = _FIRST_CHUNK[kind]
    ms = turn.milestones
    start = ms.get(start_name)
    seen = [ms[n] for n in firsts if n in ms]
    return None if start is None or not seen else (min(seen) - start) / 1e9


def _first(milestones: Mapping[str, int], names: Sequence[str]) -> int | None:
    return next((milestones[n] for n in names if n in milestones), None)


def _stage_plan(turn: Turn, kind: str, pipeline: Mapping[str, Any]) -> SpanPlan | None:
    """The span of one stage, or None when the turn never reached it. A stage the turn's
    failure cut short ends where the failure is known to have happened (never at its start:
    a 0 ns span would say the stage took no time)."""
    starts, ends = _STAGE_BOUNDS[kind]
    ms = turn.milestones
    phase_starts = [s.start_ns for s in turn.spans if s.stage == kind]
    first = _first(ms, starts)
    candidates = [t for t in (first, *phase_starts) if t is not None]
    if not candidates:
        return None
    start = min(candidates)
    end = _first(ms, ends)
    error = None
    if turn.failed and (turn.failure_stage == kind or end is None):
        # Failing, or cut off by the failure while it ran: it ran until the failure.
        failed_at = failure_end(turn, pipeline)[0]
        if turn.failure_stage == kind or (turn.failure_stage in ("turn", "runner")):
            error = turn.failure_reason or "failed"
        end = max(end if end is not None else start, failed_at)
    end = max(start, end if end is not None else start)
    attrs = stage_attributes(turn, kind, pipeline)
    if error is not None:
        attrs[gv.ERROR_TYPE] = _error_type(turn)
    model = attrs.get(gv.REQUEST_MODEL)
    return SpanPlan(gv.span_name(STAGE_SPANS[kind], model), STAGE_SPANS[kind], True,
                    start, end, attrs, error)  # fmt: skip


def turn_span_plan(turn: Turn, pipeline: Mapping[str, Any]) -> list[SpanPlan]:
    """The turn's spans, root first: ``invoke_agent`` and, per kind, its children (a cascade:
    STT, LLM, TTS; a realtime turn: its model; a black-box agent: none, the agent is the
    turn)."""
    kind = kind_of(turn)
    attrs = turn_attributes(turn, pipeline)
    end = _last_seen(turn)
    if turn.failed:
        end = max(end, failure_end(turn, pipeline)[0])
    error = f"{turn.failure_stage}: {turn.failure_reason}" if turn.failed else None
    root = SpanPlan(
        gv.span_name(gv.OP_INVOKE_AGENT, attrs[gv.AGENT_NAME]), gv.OP_INVOKE_AGENT,
        kind == AGENT, 0, end, attrs, error,
    )  # fmt: skip
    stages = {CASCADE: ("stt", "llm", "tts"), S2S: ("s2s",), AGENT: ()}[kind]
    children = [p for k in stages if (p := _stage_plan(turn, k, pipeline)) is not None]
    return [root, *children]


def barge_in_events(turn: Turn) -> list[tuple[str, int, dict[str, Any]]]:
    """Speech during the turn's reply (``extra.barge_in``, core/calls/bargein.py) as span events:
    ``voicelat.barge_in`` at the overlay's onset with its kind and figures (the stop latency
    at the ear and each waterfall segment, never stopped, false barge-in, pause, talk-over),
    and ``voicelat.barge_in.stopped`` at the agent's last audible sample when it stopped."""
    b = turn.extra.get(BARGE_IN)
    if not isinstance(b, Mapping) or not isinstance(b.get("onset_ns"), int):
        return []
    attrs: dict[str, Any] = {"voicelat.barge_in.kind": str(b.get("kind", ""))}
    for key in ("stop_ns", "pause_ns", "talk_over_ns", "provider_drain_ns"):
        if isinstance(b.get(key), int):
            attrs[f"voicelat.barge_in.{key}"] = b[key]
    for key in ("never_stopped", "false_barge_in", "reply_ended_before"):
        if isinstance(b.get(key), bool):
            attrs[f"voicelat.barge_in.{key}"] = b[key]
    segments = b.get("segments")
    for name, value in segments.items() if isinstance(segments, Mapping) else ():
        attrs[f"voicelat.barge_in.segment.{name.replace('+', '_')}_ns"] = value
    out = [("voicelat.barge_in", int(b["onset_ns"]), attrs)]
    stopped = b.get("last_audible_ns")
    if isinstance(b.get("stop_ns"), int) and isinstance(stopped, int):
        out.append(
            ("voicelat.barge_in.stopped", stopped, {"voicelat.barge_in.stop_ns": b["stop_ns"]})
        )
    return out


def first_response_events(turn: Turn) -> list[tuple[str, int, dict[str, Any]]]:
    """openinference#3418's first-response moments the turn observed: ``(event name, t_ns after
    t0, attributes)``, each attribute set naming its clock and its origin explicitly."""
    origin = turn.milestones.get(gv.ORIGIN)
    origin_name, origin_ns = (gv.ORIGIN, origin) if origin is not None else ("t0", 0)
    out = []
    for m, milestone, t in gv.first_response_moments(kind_of(turn), turn.milestones, turn.extra):
        out.append((m.event, t, {
            "voicelat.moment": m.moment,
            "voicelat.milestone": milestone,
            "voicelat.clock": gv.CLOCK,
            "voicelat.clock.origin": origin_name,
            "voicelat.clock.since_origin_ns": t - origin_ns,
            "voicelat.observed_at": m.observed_at,
        }))  # fmt: skip
    return out


class CallSpans:
    """A run of whole calls: one span per call above its turns' spans (``voicelat.call``,
    ``gen_ai.conversation.id`` = the call id), started at the call's connection when its first
    turn arrives and ended at the last turn's end seen when the exporter closes."""

    def __init__(self) -> None:
        self._open: dict[str, tuple[Any, int]] = {}

    def parent_of(self, tracer: Any, turn: Turn, anchor: tuple[int, int] | None) -> Context | None:
        """The context of ``turn``'s call span (None for a turn outside any call)."""
        call_id = turn.extra.get(CALL_ID)
        if not isinstance(call_id, str):
            return None
        connected = turn.extra.get(CALL_CONNECTED)
        rel = connected - turn.t0_ns if isinstance(connected, int) and turn.t0_ns else 0
        end = wall_ns(turn, max(turn.milestones.values(), default=0), anchor)
        if call_id not in self._open:
            span = tracer.start_span(
                f"{gv.CALL_SPAN} {turn.extra.get('scenario') or call_id}",
                kind=SpanKind.INTERNAL,
                attributes={
                    "gen_ai.conversation.id": call_id,
                    "voicelat.call.scenario": str(turn.extra.get("scenario") or ""),
                },
                start_time=wall_ns(turn, rel, anchor),
            )
            self._open[call_id] = (span, end)
        span, last = self._open[call_id]
        self._open[call_id] = (span, max(last, end))
        greeting = turn.extra.get(CALL_GREETING)
        if isinstance(greeting, int):
            span.set_attribute("voicelat.call.greeting_ns", greeting)
        return set_span_in_context(span)

    def end_all(self) -> None:
        """End every call span at the latest turn end seen."""
        for span, end in self._open.values():
            span.end(end_time=end)
        self._open.clear()


def emit_turn_spans(
    tracer: Any,
    turn: Turn,
    pipeline: Mapping[str, Any],
    anchor: tuple[int, int] | None,
    *,
    parent: Context | None = None,
) -> None:
    """Start and end the turn span and its stage spans on ``tracer`` (explicit timestamps);
    ``parent``: the call span's context for a turn of a call."""
    root_plan, *children = turn_span_plan(turn, pipeline)
    # One wall base per turn: without an anchor or a wall stamp, each call of wall_ns would
    # read the wall clock again, and span lengths would no longer be the milestones' exact
    # differences.
    base = wall_ns(turn, 0, anchor)
    root = tracer.start_span(
        root_plan.name,
        context=parent,
        kind=SpanKind.CLIENT if root_plan.client else SpanKind.INTERNAL,
        attributes=root_plan.attributes,
        start_time=base,
    )
    for name, t, attrs in (*first_response_events(turn), *barge_in_events(turn)):
        root.add_event(name, attributes=attrs, timestamp=base + t)
    if root_plan.error is not None:
        root.set_status(Status(StatusCode.ERROR, root_plan.error))
    ctx: Context = set_span_in_context(root)
    for plan in children:
        span = tracer.start_span(
            plan.name,
            context=ctx,
            kind=SpanKind.CLIENT,
            attributes=plan.attributes,
            start_time=base + plan.start_ns,
        )
        if plan.error is not None:
            span.set_status(Status(StatusCode.ERROR, plan.error))
        span.end(end_time=base + plan.end_ns)
    root.end(end_time=base + root_plan.end_ns)
