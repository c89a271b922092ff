"""``voicelat import`` on REAL spans: the example Pipecat bot's own exports, one call of two
turns per transport, recorded by tests/data/traces/record.py (recorded.json says when and how)
in three of the formats import reads. Expected numbers come from the recorded spans by the
documented rules (docs/PRODUCTION.md), so a change of rule fails here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from voicelat.cli.main import main
from voicelat.core.base.contract import TRACED_SEGMENTS
from voicelat.core.base.errors import EXIT_GATE_FAILED, EXIT_OK
from voicelat.core.traces.agent_trace import AgentSpan
from voicelat.files.otlp import read_trace_file
from voicelat.files.results import load_run

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"
FILES = {
    "twilio": DATA / "pipecat-twilio.otlp.pb",
    "pipecat-ws": DATA / "pipecat-ws.collector.pb",
    "webrtc": DATA / "pipecat-webrtc.otlp.jsonl",
}
FORMATS = {"twilio": "otlp-protobuf", "pipecat-ws": "collector-proto", "webrtc": "otlp-jsonl"}


def _spans(transport: str) -> list[AgentSpan]:
    found = read_trace_file(FILES[transport])
    assert found.format == FORMATS[transport] and found.rejected_spans == 0
    return list(found.spans)


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("imp") / "run"
    assert main(["import", *(str(f) for f in FILES.values()), "--out", str(out)]) == EXIT_OK
    return out


def test_each_recorded_call_gives_two_turns_whose_segments_sum_to_e2e(imported: Path) -> None:
    run = load_run(imported)
    assert len(run.turns) == 6 and not any(t.failed for t in run.turns)
    by_conv: dict[str, list[int]] = {}
    for turn in run.turns:
        by_conv.setdefault(turn.fixture, []).append(turn.extra["turn_number"])
        assert turn.e2e_ns is not None and turn.e2e_ns > 0
        assert tuple(turn.segments) == TRACED_SEGMENTS
        assert sum(turn.segments.values()) == turn.e2e_ns
        assert all(v >= 0 for v in turn.segments.values())
        # The bot states its VAD's stop_secs (0.2): endpointing is that hangover.
        assert turn.segments["endpointing"] == 200_000_000
        assert turn.extra["end"] == "bot_started_speaking"
    assert sorted(by_conv.values()) == [[1, 2]] * 3
    traced = run.summary["traced"]  # type: ignore[index]
    assert traced["conversations"] == 3 and traced["turns_without_reply"] == 0
    assert "GET /health" in traced["unmapped_spans"]  # counted, named, left out


@pytest.mark.parametrize("transport", ["pipecat-ws", "webrtc"])
def test_e2e_is_pipecats_own_user_bot_latency(imported: Path, transport: str) -> None:
    spans = _spans(transport)
    turns = sorted((s for s in spans if s.name == "turn"), key=lambda s: s.start_ns)
    run = load_run(imported)
    mine = [t for t in run.turns if t.extra["trace_id"] == turns[0].trace_id]
    for container, turn in zip(turns, mine, strict=True):
        latency = float(container.attributes["turn.user_bot_latency_seconds"])
        assert turn.e2e_ns == round(latency * 1e9)
        stt = next(s for s in spans if s.name == "stt" and s.parent_id == container.span_id)
        # t=0: the stt span's end - its TTFB (Pipecat's VAD stop - stop_secs).
        assert turn.t0_ns == stt.end_ns - round(float(stt.attributes["metrics.ttfb"]) * 1e9)
        assert turn.extra["t0"] == "end_of_speech"


def test_the_real_first_twilio_turn_has_no_stt_ttfb_and_check_says_so(
    imported: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # What the bot really exported: its first turn's stt span came without metrics.ttfb
    # (the missing-TTFB reports against Pipecat). The turn is still timed, and labelled.
    run = load_run(imported)
    trace_id = next(s.trace_id for s in _spans("twilio") if s.name == "turn")
    first = next(t for t in run.turns if t.extra["trace_id"] == trace_id)
    assert first.extra["turn_number"] == 1
    assert first.extra["t0"] == "pipecat_latency_origin" and first.segments["transport"] == 0
    assert main(["import", str(FILES["twilio"]), "--check"]) == EXIT_GATE_FAILED
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("ttfb_missing: ") and "stt has no metrics.ttfb" in line
    assert main(["import", str(FILES["webrtc"]), "--check"]) == EXIT_OK


def test_view_ci_and_compare_accept_the_recorded_import(
    imported: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["view", str(imported)]) == EXIT_OK
    shown = capsys.readouterr().out
    assert "not the ear" in shown and "findings: ttfb_missing 1" in shown
    budget = tmp_path / "budget.toml"
    budget.write_text("[budget]\nmin_turns = 5\n[budget.e2e]\np50_ms = 20000\n")
    assert main(["ci", "--results", str(imported), "--budget", str(budget)]) == EXIT_OK
    ws = tmp_path / "ws"
    assert main(["import", str(FILES["pipecat-ws"]), "--out", str(ws)]) == EXIT_OK
    cmp_dir = tmp_path / "cmp"
    assert main(["compare", str(imported), str(ws), "--out", str(cmp_dir)]) == EXIT_OK
    doc = json.loads((cmp_dir / "comparison.json").read_text())
    assert len(doc["combinations"]) == 2


def test_the_import_passes_the_shipped_schemas_and_feeds_the_exporters(tmp_path: Path) -> None:
    from voicelat.engine.trace_receiver import TraceReceiver
    from voicelat.export.validate import schema_errors

    out = tmp_path / "run"
    with TraceReceiver(port=0) as rx:
        args = ["import", *(str(f) for f in FILES.values()), "--out", str(out)]
        assert main([*args, "--otlp-endpoint", rx.url]) == EXIT_OK
        received = rx.spans()
    for line in (out / "turns.jsonl").read_text().splitlines():
        assert schema_errors(json.loads(line), "turn.schema.json") == []
    summary = json.loads((out / "summary.json").read_text())
    assert schema_errors(summary, "summary.schema.json") == []
    rows = (out / "turns.csv").read_text().splitlines()
    assert len(rows) == 7 and rows[0].startswith("index,fixture")  # a header and six turns
    # voicelat's own OTel export of the six traced turns (its turn spans, on the bot's times).
    # (The receiver takes traces only: the metrics' 404 is warned about, not fatal.)
    assert len([s for s in received if s.name.startswith("invoke_agent")]) == 6, received


def test_definitions_read_a_traced_import_as_an_agent_without_the_ear(
    imported: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["view", str(imported), "--definitions"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "kinds of turn: agent" in out
    # What needs the ear is not computable; the agent's own first audio out is.
    assert "needs output_first_audible, absent from the turn" in out
    assert "formula: first_audio − speech_end" in out and "n=6" in out
