"""OTel export: real Turn objects -> real OTLP/HTTP protobuf -> a loopback receiver."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from otlp_sink import attributes as _attrs
from otlp_sink import otlp_receiver

from voicelat.core.base.turn import Turn
from voicelat.core.summaries.run_summary import RunSummary
from voicelat.export import ExportFanout, ExportOptions, build_exporters
from voicelat.export.otel import SCHEMA_URL, OtelExporter, otlp_urls, signal_urls, wall_ns
from voicelat.files.results import load_run

RUN = Path(__file__).resolve().parents[1] / "tui" / "data" / "run"


def _export(turns: tuple[Turn, ...], url: str, warnings: list[str]) -> None:
    pipeline = json.loads((RUN / "summary.json").read_text())["pipeline"]
    exporter = OtelExporter(url, pipeline=pipeline, warn=warnings.append)
    with ExportFanout([exporter], warn=warnings.append) as fan:
        for t in turns:
            fan.submit(t)


def test_one_turn_span_per_turn_with_stage_spans_and_exact_segments() -> None:
    run = load_run(RUN)
    lines = [json.loads(x) for x in (RUN / "turns.jsonl").read_text().splitlines()]
    warnings: list[str] = []
    with otlp_receiver() as sink:
        _export(run.turns, sink.url, warnings)
    assert warnings == []
    spans = sink.spans()
    roots = [s for s in spans if s.name == "invoke_agent local"]
    assert len(roots) == len(lines) == 15
    by_index = {_attrs(s)["voicelat.turn.index"]: s for s in roots}
    assert sorted(by_index) == [line["index"] for line in lines]
    for line in lines:
        root = by_index[line["index"]]
        a = _attrs(root)
        assert a["gen_ai.operation.name"] == "invoke_agent"
        assert a["voicelat.e2e_ns"] == line["e2e_ns"]
        segs = {k.removeprefix("voicelat.segment.").removesuffix("_ns"): v
                for k, v in a.items() if k.startswith("voicelat.segment.")}  # fmt: skip
        assert segs == line["segments_ns"]
        marks = {k.removeprefix("voicelat.milestone.").removesuffix("_ns"): v
                 for k, v in a.items() if k.startswith("voicelat.milestone.")}  # fmt: skip
        assert marks == line["milestones_ns"]
        children = [s for s in spans if s.parent_span_id == root.span_id]
        assert {s.trace_id for s in children} == {root.trace_id}
        assert sorted(_attrs(s)["gen_ai.operation.name"] for s in children) == [
            "chat", "speech_to_text", "text_to_speech",
        ]  # fmt: skip
        # Times go through the wall anchor: the turn starts at its wall_time_ns, and the chat
        # span opens exactly at llm_request after it.
        assert root.start_time_unix_nano == line["wall_time_ns"]
        chat = next(s for s in children if s.name.startswith("chat "))
        assert chat.start_time_unix_nano == (
            line["wall_time_ns"] + line["milestones_ns"]["llm_request"]
        )
        assert chat.end_time_unix_nano - chat.start_time_unix_nano == (
            line["milestones_ns"]["llm_done"] - line["milestones_ns"]["llm_request"]
        )
        assert _attrs(chat)["gen_ai.request.model"] == "gemma-3-270m"
    # The pinned schema URL travels with the resource and the scope.
    req = sink.traces[0]
    assert req.resource_spans[0].schema_url == SCHEMA_URL
    assert req.resource_spans[0].scope_spans[0].schema_url == SCHEMA_URL


def test_metrics_arrive_as_second_histograms_with_explicit_buckets() -> None:
    run = load_run(RUN)
    with otlp_receiver() as sink:
        _export(run.turns, sink.url, [])
    metrics = {
        m.name: m
        for req in sink.metrics
        for rm in req.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    }
    e2e = metrics["voicelat.turn.e2e"]
    assert e2e.unit == "s"
    point = e2e.histogram.data_points[0]
    headline = [t for t in run.turns if t.headline]
    assert point.count == len(headline) == 14
    assert abs(point.sum - sum(t.e2e_ns or 0 for t in headline) / 1e9) < 1e-6
    assert list(point.explicit_bounds)[:3] == [0.001, 0.0025, 0.005]
    segments = {
        next(kv.value.string_value for kv in p.attributes if kv.key == "voicelat.segment")
        for p in metrics["voicelat.turn.segment"].histogram.data_points
    }
    assert "llm_ttft" in segments and "playout" in segments
    assert {"voicelat.llm.ttft", "voicelat.tts.ttfa", "voicelat.turns"} <= set(metrics)
    assert metrics["voicelat.turns"].sum.data_points[0].as_int == 15


@pytest.mark.parametrize(
    ("status", "attempts", "said"), [(400, 1, "code: 400"), (503, 2, "Service Unavailable")]
)
def test_a_collector_answering_4xx_5xx_gives_one_warning_and_stops(
    status: int, attempts: int, said: str
) -> None:
    run = load_run(RUN)
    warnings: list[str] = []
    with otlp_receiver(status=status) as sink:
        exporter = OtelExporter(
            sink.url, pipeline={"name": "local"}, timeout_s=1.5, warn=warnings.append
        )
        with ExportFanout([exporter], warn=warnings.append) as fan:
            for t in run.turns:
                fan.submit(t)
    assert len(warnings) == 1, warnings
    assert "OTLP export of spans" in warnings[0] and sink.url in warnings[0]
    assert said in warnings[0]
    # 503 is retried once within the timeout (the SDK's policy); after the failure, the other
    # 14 turns and the metrics are not sent at all.
    assert sink.requests == attempts


def test_an_unreachable_endpoint_gives_one_warning(capsys: Any) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    run = load_run(RUN)
    warnings: list[str] = []
    exporter = OtelExporter(
        f"http://127.0.0.1:{port}", pipeline={}, timeout_s=0.5, warn=warnings.append
    )
    fan = ExportFanout([exporter], warn=warnings.append)
    fan.start()
    for t in run.turns:
        fan.submit(t)
    fan.close({"counts": {}})
    assert len(warnings) == 1, warnings
    assert f"127.0.0.1:{port}" in warnings[0]
    # The SDK's own log lines are swallowed: the one warning is all the user sees.
    assert capsys.readouterr().err == ""


def test_enabled_by_flag_or_standard_variable_only() -> None:
    assert build_exporters(ExportOptions(env={})) == []
    run = load_run(RUN)
    with otlp_receiver() as sink:
        options = ExportOptions(env={"OTEL_EXPORTER_OTLP_ENDPOINT": sink.url + "/"})
        built = build_exporters(options)
        assert [type(e).__name__ for e in built] == ["OtelExporter"]
        with ExportFanout(built) as fan:
            fan.submit(run.turns[1])
    assert len(sink.spans()) == 4 and len(sink.metrics) == 1
    assert signal_urls("http://c:4318/") == ("http://c:4318/v1/traces", "http://c:4318/v1/metrics")
    assert signal_urls("http://c:4318/v1/traces")[1] == "http://c:4318/v1/metrics"
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:1",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t/x",
    }
    assert otlp_urls(None, env) == ("http://t/x", "http://a:1/v1/metrics")
    assert otlp_urls("http://flag:2", env) == (
        "http://flag:2/v1/traces",
        "http://flag:2/v1/metrics",
    )
    assert otlp_urls(None, {}) == (None, None)


def test_a_run_wide_anchor_places_monotonic_times_on_the_wall_clock() -> None:
    turn = Turn(index=0, fixture="f", t0_ns=5_000, milestones={}, segments={}, e2e_ns=None,
                wall_time_ns=999)  # fmt: skip
    # anchor: wall 1_000_000 at monotonic 1_000 -> t0 (mono 5_000) is wall 1_004_000
    assert wall_ns(turn, 250, (1_000_000, 1_000)) == 1_004_250
    assert wall_ns(turn, 250, None) == 1_249


def test_metrics_also_go_out_during_a_long_run(monkeypatch: pytest.MonkeyPatch) -> None:
    from voicelat.export import otel

    monkeypatch.setattr(otel, "METRICS_EVERY_S", 0.0)
    run = load_run(RUN)
    with otlp_receiver() as sink:
        _export(run.turns[:3], sink.url, [])
    # One export per turn (cumulative: the counter climbs), then the final one.
    totals = [
        m.sum.data_points[0].as_int
        for req in sink.metrics
        for rm in req.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == "voicelat.turns"
    ]
    assert totals == [1, 2, 3, 3]


def test_a_calibrated_run_exports_its_instrument_error_as_a_gauge() -> None:
    """The summary's instrument section (--calibrate) goes out as voicelat.instrument.error,
    one point per quantile, in seconds; an uncalibrated run exports no such metric."""
    pipeline = json.loads((RUN / "summary.json").read_text())["pipeline"]
    section = {"status": "calibrated", "error_p50_ns": 400_000, "error_p99_ns": 1_500_000}

    def exported(summary: dict[str, Any]) -> dict[str, Any]:
        with otlp_receiver() as sink:
            # The exporter receives the typed summary (the fan-out types a summary.json once).
            typed = RunSummary.from_json(summary)
            OtelExporter(sink.url, pipeline=pipeline, warn=lambda _: None).close(typed)
        return {
            m.name: m
            for req in sink.metrics
            for rm in req.resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
        }

    gauge = exported({"instrument": section})["voicelat.instrument.error"]
    assert gauge.unit == "s"
    points = {
        next(kv.value.string_value for kv in p.attributes if kv.key == "voicelat.quantile"): (
            p.as_double
        )
        for p in gauge.gauge.data_points
    }
    assert points == {"p50": 0.0004, "p99": 0.0015}
    uncalibrated = {"status": "uncalibrated", "error_p50_ns": None, "error_p99_ns": None}
    assert "voicelat.instrument.error" not in exported({"instrument": uncalibrated})
