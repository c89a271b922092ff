"""A real run (the runner, the emulated OpenAI twin on loopback) exported to a real OTLP/HTTP
receiver, Prometheus /metrics and turns.csv, all at once, as the CLI wires it."""

from __future__ import annotations

import csv
import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from otlp_sink import attributes as _attrs
from otlp_sink import otlp_receiver

from tests.helpers import ROOT
from voicelat.core.base.plan import plan_turns
from voicelat.emulate import Emulators
from voicelat.engine.runner import Runner
from voicelat.export import (
    SUMMARY_SCHEMA,
    TURN_SCHEMA,
    ExportFanout,
    ExportObserver,
    ExportOptions,
    build_exporters,
    validate,
)
from voicelat.export.prometheus import PrometheusExporter
from voicelat.files.fixtures import default_fixtures_dir, load_fixtures
from voicelat.files.pipeline import load_pipeline

PROFILE = {
    "openai": {
        "latency": {"headers": 5, "ttft": 60, "token": 5, "stt_first": 30, "stt_final": 60,
                    "tts_first_audio": 50, "tts_chunk": 5},
        "content": {"leading_silence_ms": 30.0, "reply": "Sure thing.", "ms_per_char": 10.0},
    }
}  # fmt: skip


def _pipeline(em: Emulators) -> Any:
    from dataclasses import replace

    pipeline = load_pipeline(ROOT / "pipelines" / "emulated-openai.toml")
    server = em.servers["openai"]
    default = f"127.0.0.1:{server.emulator.default_port}"
    tables = {
        k: dict(getattr(pipeline, k))
        | {
            "base_url": getattr(pipeline, k)["base_url"].replace(
                default, f"127.0.0.1:{server.port}"
            )
        }
        for k in ("stt", "llm", "tts")
    }
    return replace(pipeline, **tables)


async def test_a_run_exports_spans_metrics_and_csv_matching_turns_jsonl(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    fixtures = [
        f for f in load_fixtures(default_fixtures_dir()) if f.id in ("book_table", "call_mom")
    ]
    warnings: list[str] = []
    with otlp_receiver() as sink:
        async with Emulators(["openai"], profile=PROFILE, seed=1) as em:
            pipeline = _pipeline(em)
            options = ExportOptions(
                pipeline=pipeline.to_json(), run_dir=tmp_path, otlp_endpoint=sink.url,
                metrics_port=0, csv=True, env={},
                wall_anchor_ns=(time.time_ns(), time.perf_counter_ns()),
            )  # fmt: skip
            exporters = build_exporters(options)
            assert [type(e).__name__ for e in exporters] == [
                "PrometheusExporter", "TurnsCsvExporter", "OtelExporter"
            ]  # fmt: skip
            fan = ExportFanout(exporters, warn=warnings.append)
            fan.start()
            runner = Runner(pipeline, fixtures, tmp_path, observer=ExportObserver(None, fan))
            outcome = await runner.run(plan_turns([f.id for f in fixtures], warmup=1))
            prom = exporters[0]
            assert isinstance(prom, PrometheusExporter)
            port = prom.port
            time.sleep(0.3)  # the export thread catches up (it is not the loop's business)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                page = r.read().decode()
            fan.close(outcome.summary)
    assert warnings == []
    lines = [json.loads(x) for x in (tmp_path / "turns.jsonl").read_text().splitlines()]
    assert len(lines) == len(outcome.turns) == 3
    assert all(not line["failed"] for line in lines)
    # Spans: one turn span per turn, its stage spans, segments equal to turns.jsonl exactly.
    spans = sink.spans()
    roots = {_attrs(s)["voicelat.turn.index"]: s for s in spans
             if _attrs(s)["gen_ai.operation.name"] == "invoke_agent"}  # fmt: skip
    assert sorted(roots) == [0, 1, 2]
    for line in lines:
        root = roots[line["index"]]
        a = _attrs(root)
        segs = {k[len("voicelat.segment.") : -3]: v for k, v in a.items()
                if k.startswith("voicelat.segment.")}  # fmt: skip
        assert segs == line["segments_ns"] and a["voicelat.e2e_ns"] == line["e2e_ns"]
        kids = sorted(_attrs(s)["gen_ai.operation.name"] for s in spans
                      if s.parent_span_id == root.span_id)  # fmt: skip
        assert kids == ["chat", "speech_to_text", "text_to_speech"]
        assert root.name == "invoke_agent emulated-openai"
        # The run-wide anchor: the span starts within a second of the turn's wall stamp.
        assert abs(root.start_time_unix_nano - line["wall_time_ns"]) < 1_000_000_000
    # Prometheus saw every turn while the run was on; headline turns in the histogram.
    assert 'voicelat_turns_total{pipeline="emulated-openai"} 3.0' in page
    # (This twin opens a new STT connection per turn, so its turns count as cold: the headline
    # histograms may well be empty; test_export_prometheus checks their contents.)
    head = outcome.summary["counts"]["headline"]
    assert head == sum(t.headline for t in outcome.turns)
    assert f'voicelat_turn_e2e_seconds_count{{pipeline="emulated-openai"}} {head:.1f}' in page
    # turns.csv beside turns.jsonl, row for row.
    rows = list(csv.DictReader((tmp_path / "turns.csv").open(newline="")))
    assert [int(r["e2e_ns"]) for r in rows] == [line["e2e_ns"] for line in lines]
    # And what the run wrote validates against the shipped schemas.
    validate(json.loads((tmp_path / "summary.json").read_text()), SUMMARY_SCHEMA)
    for line in lines:
        validate(line, TURN_SCHEMA)
