"""turns.csv, --json and the --benchmark-json formats, on a real saved run."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from synthetic_turns import synthetic_turns

from voicelat.export import (
    CSV_COLUMNS,
    ExportError,
    ExportFanout,
    TurnsCsvExporter,
    bencher_metrics,
    benchmark_json,
    github_benchmark,
    summary_json,
    write_turns_csv,
)
from voicelat.files.results import load_run

RUN = Path(__file__).resolve().parents[1] / "tui" / "data" / "run"

#: The published column order (docs/EXPORT.md): changing it breaks users' scripts.
EXPECTED_HEADER = (
    "index,fixture,repeat,warmup,cold,headline,failed,failure_stage,failure_reason,flags,"
    "wall_time_ns,t0_ns,e2e_ns,endpointing_ns,stt_ns,handoff_ns,llm_ttft_ns,aggregation_ns,"
    "tts_ttfb_ns,leading_silence_ns,playout_ns,ttft_ns,ttfa_ns,speech_start_ns,speech_end_ns,"
    "endpoint_ns,stt_first_partial_ns,stt_final_ns,llm_request_ns,llm_first_delta_ns,"
    "llm_first_token_ns,llm_first_speakable_ns,llm_done_ns,tts_request_ns,tts_first_byte_ns,"
    "tts_first_audible_ns,tts_done_ns,output_first_audible_ns,transcript,expected,reply"
)


def test_csv_columns_are_stable() -> None:
    assert ",".join(CSV_COLUMNS) == EXPECTED_HEADER


def test_csv_rows_carry_turns_jsonl_exactly(tmp_path: Path) -> None:
    run = load_run(RUN)
    lines = [json.loads(x) for x in (RUN / "turns.jsonl").read_text().splitlines()]
    exporter = TurnsCsvExporter(tmp_path)
    with ExportFanout([exporter]) as fan:
        for t in run.turns:
            fan.submit(t)
    with (tmp_path / "turns.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(lines) == 15
    for row, line in zip(rows, lines, strict=True):
        assert int(row["index"]) == line["index"] and row["fixture"] == line["fixture"]
        assert int(row["e2e_ns"]) == line["e2e_ns"]
        assert row["warmup"] == ("true" if line["warmup"] else "false")
        assert row["flags"] == ";".join(line["flags"])
        for seg, v in line["segments_ns"].items():
            assert int(row[f"{seg}_ns"]) == v
        for m, v in line["milestones_ns"].items():
            assert int(row[f"{m}_ns"]) == v
        assert row["stt_first_partial_ns"] == ""  # absent milestone: empty cell
        assert int(row["ttft_ns"]) == line["figures"]["llm_ttft_ns"]
        ms = line["milestones_ns"]
        assert int(row["ttfa_ns"]) == ms["tts_first_byte"] - ms["tts_request"]
        assert row["reply"] == line["reply"]
    # The whole-run writer gives the same file.
    write_turns_csv(tmp_path / "again.csv", run.turns)
    assert (tmp_path / "again.csv").read_text() == (tmp_path / "turns.csv").read_text()


def test_csv_of_a_failed_turn(tmp_path: Path) -> None:
    turns = synthetic_turns(3, failed_every=2)
    write_turns_csv(tmp_path / "t.csv", turns)
    rows = list(csv.DictReader((tmp_path / "t.csv").open(newline="")))
    assert rows[2]["failed"] == "true" and rows[2]["failure_stage"] == "llm"
    assert rows[2]["e2e_ns"] == "" and rows[2]["headline"] == "false"


def test_json_prints_the_summary_and_nothing_else() -> None:
    summary = json.loads((RUN / "summary.json").read_text())
    text = summary_json(summary)
    assert json.loads(text) == summary and text.endswith("}\n")
    assert text == (RUN / "summary.json").read_text()  # byte for byte what was saved


def test_github_action_benchmark_custom_smaller_is_better() -> None:
    summary = json.loads((RUN / "summary.json").read_text())
    entries = github_benchmark(summary)
    by_name = {e["name"]: e for e in entries}
    assert by_name["local: e2e p50"] == {
        "name": "local: e2e p50", "unit": "ms", "value": 1066.027, "extra": "n=14"
    }  # fmt: skip
    assert by_name["local: segment llm_ttft p90"]["value"] == 53.649
    assert by_name["local: llm ttft p99"]["value"] == 116.241
    assert by_name["local: failure rate"] == {
        "name": "local: failure rate",
        "unit": "%",
        "value": 0.0,
    }
    # 1 e2e + 8 segments + TTFT, 3 percentiles each, + failure rate; each entry well formed.
    assert len(entries) == 10 * 3 + 1
    for e in entries:
        assert set(e) <= {"name", "unit", "value", "range", "extra"}
        assert isinstance(e["value"], float) and e["value"] >= 0
    assert json.loads(benchmark_json(summary, "github")) == entries


BMF_SCHEMA = {  # https://bencher.dev/bmf.json (draft-07)
    "type": "object",
    "patternProperties": {
        ".+": {
            "type": "object",
            "patternProperties": {
                ".+": {
                    "type": "object",
                    "properties": {
                        "value": {"type": "number"},
                        "lower_value": {"type": "number"},
                        "upper_value": {"type": "number"},
                    },
                    "required": ["value"],
                }
            },
        }
    },
}


def test_bencher_metric_format() -> None:
    import jsonschema

    summary = json.loads((RUN / "summary.json").read_text())
    doc = bencher_metrics(summary)
    jsonschema.validate(doc, BMF_SCHEMA)
    assert doc["local: e2e p50"] == {
        "latency": {"value": 1066027372.0, "lower_value": 958685209.0, "upper_value": 1255179026.0}
    }
    assert doc["local: e2e p90"] == {"latency": {"value": 1185729096.0}}
    assert doc["local: turns"] == {"failure-rate": {"value": 0.0}}
    assert json.loads(benchmark_json(summary, "bencher")) == doc


def test_the_typed_summary_gives_the_same_documents() -> None:
    from voicelat.core.summaries.run_summary import RunSummary

    summary = json.loads((RUN / "summary.json").read_text())
    typed = RunSummary.from_json(summary)
    assert github_benchmark(typed) == github_benchmark(summary)
    assert bencher_metrics(typed) == bencher_metrics(summary)
    assert json.loads(summary_json(typed)) == json.loads(summary_json(summary))


def test_failure_rate_counts_measured_turns_and_empty_series_are_left_out() -> None:
    summary = {
        "pipeline": {"name": "p"},
        "counts": {"turns": 11, "warmup": 1, "failed": 10},
        "e2e": {"n": 0, "p50": None},
        "segments": {},
        "figures": {},
    }
    assert github_benchmark(summary) == [{"name": "p: failure rate", "unit": "%", "value": 100.0}]
    assert bencher_metrics(summary) == {"p: turns": {"failure-rate": {"value": 100.0}}}
    with pytest.raises(ExportError, match="unknown benchmark format"):
        benchmark_json(summary, "junit")
