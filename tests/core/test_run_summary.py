"""The typed run summary: summary.json round-trips unchanged, older summaries still load."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from voicelat.core.base.turn import INTERRUPTED, Turn
from voicelat.core.summaries.run_summary import (
    SCHEMA_VERSION,
    Counts,
    DistSummary,
    RunSummary,
    Trust,
    WaterfallBand,
)
from voicelat.core.summaries.summary import build_summary, summarize
from voicelat.files.results import load_run, turn_from_json
from voicelat.report.text import summary_table

SAVED_RUN = Path(__file__).parents[1] / "tui" / "data" / "run"
MS = 1_000_000


def saved_summaries() -> list[Path]:
    """Every summary.json kept under tests/ (each must round-trip)."""
    return sorted(Path(__file__).parents[1].rglob("summary.json"))


def saved_turns() -> list[Turn]:
    lines = (SAVED_RUN / "turns.jsonl").read_text(encoding="utf-8").splitlines()
    return [turn_from_json(json.loads(line)) for line in lines if line.strip()]


def built(**kw: Any) -> dict[str, Any]:
    """A summary with every section, as today's runner writes it, plus keys added after."""
    saved = json.loads((SAVED_RUN / "summary.json").read_text(encoding="utf-8"))
    turns = [
        dataclasses.replace(t, figures={**t.figures, "schedule_lag_ns": (t.index % 3) * MS})
        for t in saved_turns()
    ]
    turns[3] = dataclasses.replace(turns[3], flags=(INTERRUPTED,))
    turns[4] = dataclasses.replace(turns[4], failed=True, failure_stage="llm", failure_reason="x")
    doc = build_summary(
        turns,
        run=saved["run"] | {"load": {"mode": "closed", "concurrency": 1}, "stack": None},
        pipeline=saved["pipeline"],
        fixtures=saved["fixtures"],
        stages=saved["stages"],
        loop_lag_ns=[100_000, 2 * MS, 7 * MS],
        budget=saved["budget"],
    )
    return doc | {"fixture_set_sha256": "ab" * 32, "live": {"ptt": True}} | kw


def test_every_saved_summary_round_trips_to_the_same_bytes() -> None:
    paths = saved_summaries()
    assert SAVED_RUN / "summary.json" in paths
    for path in paths:
        doc = json.loads(path.read_text(encoding="utf-8"))
        again = RunSummary.from_json(doc).to_json()
        assert again == doc, path
        # Byte-compatible too: key order and int/float kept (0.0 stays 0.0, ns stay int).
        assert json.dumps(again, indent=2) == json.dumps(doc, indent=2), path


def test_a_summary_with_every_section_round_trips() -> None:
    doc = built(setup_error="boom", comparison={"name": "c", "combination": "a"})
    assert {"trust", "schedule_lag", "e2e_from_intended"} <= set(doc)
    assert doc["counts"]["interrupted"] == 1
    typed = RunSummary.from_json(doc)
    assert json.dumps(typed.to_json(), indent=2) == json.dumps(doc, indent=2)
    assert typed.counts.interrupted == 1
    assert typed.trust is not None and not typed.trust.trustworthy
    assert typed.trust.reasons[0].code == "loop_lag"
    assert typed.fixture_set_sha256 == "ab" * 32
    assert typed.extra["live"] == {"ptt": True}
    assert typed.run.extra["stack"] is None


def test_summarize_is_build_summary_typed() -> None:
    doc = built()
    turns = saved_turns()
    typed = summarize(turns, run={}, pipeline={}, fixtures=[], stages={})
    assert typed.to_json() == build_summary(turns, run={}, pipeline={}, fixtures=[], stages={})
    assert RunSummary.from_json(doc).schema_version == SCHEMA_VERSION


def test_an_older_summary_without_the_newer_sections_still_loads() -> None:
    # The saved run predates trust, schedule_lag and e2e_from_intended.
    run = load_run(SAVED_RUN)
    typed = run.run_summary
    assert typed is not None and run.summary is not None
    assert "trust" not in run.summary
    assert typed.trust is None and typed.schedule_lag is None and typed.e2e_from_intended is None
    assert typed.counts == Counts(turns=15, headline=14, warmup=1, cold=0, failed=0, flagged=1)
    assert typed.e2e.p50 == 1066027372 and isinstance(typed.e2e.p50, int)
    band = typed.band(50)
    assert isinstance(band, WaterfallBand)
    assert sum(band.segments_ns.values()) == band.mean_e2e_ns
    assert typed.run.status == "complete" and typed.run.planned_turns == 15
    assert typed.run.load is None and "load" not in typed.to_json()["run"]
    assert typed.pipeline_name == "local"
    text = summary_table(typed)
    assert text == summary_table(run.summary)
    assert "trust:" not in text


def test_a_partial_document_reads_with_empty_defaults() -> None:
    typed = RunSummary.from_json({"counts": {"turns": 4, "failed": 1}, "e2e": {"n": 3, "p90": 5}})
    assert typed.counts.failure_rate == 0.25
    assert typed.metric("e2e") == DistSummary(n=3, p90=5)
    assert typed.metric("stt") == DistSummary()
    assert typed.band(50) is None and typed.trust is None
    assert RunSummary.coerce(typed) is typed


def test_trust_and_dists_write_back_what_they_read() -> None:
    trust = {
        "trustworthy": False,
        "reasons": [{"code": "loop_lag", "message": "m"}],
        "checks": {"loop_lag_p99_ns": 6 * MS},
        "thresholds": {"loop_lag_p99_ms": 5.0},
    }
    assert Trust.from_json(trust).to_json() == trust
    dist = {"n": 2, "p50": 0.5, "p90": 1, "p99": None, "min": 0, "max": 1, "mean": 0.5}
    assert DistSummary.from_json(dist).to_json() == dist
    assert DistSummary.from_json(dist).at(100) == 1
