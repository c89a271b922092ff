"""``voicelat import --mapping openai-agents``: the OpenAI Agents SDK's voice pipeline spans.

REAL spans recorded by tests/data/traces/record_openai_agents.py: the SDK's own VoicePipeline
(its OpenAI STT, LLM and TTS models on voicelat's OpenAI emulator) bridged to OpenTelemetry by
openinference's processor, which keeps ``first_content_at`` only through the recipe of
docs/PRODUCTION.md (stripped here: what openinference alone exports). And literal spans of a
streamed session, written with the names of the SDK's source (openai-agents-python at 7f7a44f;
cited where used)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.otlp_json import BASE_NS, MS, Span, sid, write
from voicelat.cli.main import main
from voicelat.core.base.contract import TRACED_SEGMENTS
from voicelat.core.base.errors import EXIT_GATE_FAILED, EXIT_OK
from voicelat.core.traces.agent_trace import AgentSpan
from voicelat.core.traces.openai_agents_trace import first_content_ns
from voicelat.files.otlp import read_trace_file
from voicelat.files.results import load_run

RECORDED = Path(__file__).resolve().parents[1] / "data" / "traces" / "openai-agents.otlp.json"
KEPT = "openai_agents.first_content_at"


def _import(tmp_path: Path, path: Path, name: str = "run") -> Path:
    out = tmp_path / name
    args = ["import", str(path), "--mapping", "openai-agents", "--out", str(out)]
    assert main(args) == EXIT_OK
    return out


def _recorded() -> list[AgentSpan]:
    found = read_trace_file(RECORDED)
    assert found.rejected_spans == 0
    return sorted(found.spans, key=lambda s: s.start_ns)


def test_real_single_turn_calls_run_from_the_audio_in_to_the_first_audio_chunk(
    tmp_path: Path,
) -> None:
    spans = _recorded()
    run = load_run(_import(tmp_path, RECORDED))
    assert len(run.turns) == 2  # two calls, a trace each
    for turn in run.turns:
        mine = [s for s in spans if s.trace_id == turn.extra["trace_id"]]
        heard = next(s for s in mine if s.name == "transcription")
        group = next(s for s in mine if s.name == "speech_group")
        first = min((s for s in mine if s.name == "speech"), key=lambda s: s.start_ns)
        byte = first_content_ns(first)
        assert byte is not None
        assert turn.extra["t0"] == "openai_audio_in" and turn.extra["end"] == "tts_first_byte"
        assert turn.t0_ns == heard.start_ns and turn.e2e_ns == byte - heard.start_ns
        assert turn.segments["endpointing"] == 0
        assert turn.segments["stt"] == heard.end_ns - heard.start_ns
        assert turn.milestones["agent_llm_first_token"] == group.start_ns - heard.start_ns
        assert turn.segments["tts_ttfb"] == byte - first.start_ns
        assert tuple(turn.segments) == TRACED_SEGMENTS
        assert sum(turn.segments.values()) == turn.e2e_ns
        assert turn.extra["findings"] == []
    assert run.summary["traced"]["unmapped_spans"].keys() >= {"assistant", "turn"}  # type: ignore[index]


def test_without_first_content_at_the_end_is_an_upper_bound_and_said_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads(RECORDED.read_text())
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                span["attributes"] = [a for a in span["attributes"] if a["key"] != KEPT]
    bare = tmp_path / "openinference.json"
    bare.write_text(json.dumps(doc))
    run = load_run(_import(tmp_path, bare))
    spans = _recorded()
    for turn in run.turns:
        first = min(
            (s for s in spans if s.trace_id == turn.extra["trace_id"] and s.name == "speech"),
            key=lambda s: s.start_ns,
        )
        assert turn.extra["end"] == "openai_first_speech_done"
        assert turn.e2e_ns == first.end_ns - turn.t0_ns and "trace_no_ttfb" in turn.flags
        assert sum(turn.segments.values()) == turn.e2e_ns
    capsys.readouterr()
    assert main(["import", str(bare), "--mapping", "openai-agents", "--check"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and all(line.startswith("ttfb_missing:") for line in lines)


def _iso(ms: float) -> str:
    """An SDK time_iso() (datetime.now(timezone.utc).isoformat(), tracing/util.py:4)."""
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    return (epoch + timedelta(microseconds=(BASE_NS + round(ms * MS)) // 1000)).isoformat()


ROOT = sid("root")


def _streamed() -> list[Span]:
    """A streamed session (StreamedAudioInput): a greeting, then two turns."""
    g0, g1, g2 = sid("g0"), sid("g1"), sid("g2")
    return [
        # openinference _processor.py:107: the trace's root span, named by the workflow
        Span("Voice Agent", 0, 20_000, ROOT),
        # voice/result.py:82 speech_group_span() at the first text; :122 speech_span();
        # :142 first_content_at = time_iso() at the first audio chunk
        Span("speech_group", 50, 1_500, g0, ROOT),
        Span("speech", 60, 1_500, sid("s0"), g0, {KEPT: _iso(200)}),
        # voice/models/openai_stt.py:148 transcription_span() per turn, from the previous
        # transcript to this one's
        Span("transcription", 0, 4_000, sid("t1"), ROOT),
        Span("generation", 4_010, 4_600, sid("llm1"), ROOT, {"openinference.span.kind": "LLM"}),
        Span("speech_group", 4_300, 6_000, g1, ROOT),
        Span("speech", 4_450, 6_000, sid("s1"), g1, {KEPT: _iso(4_700)}),
        Span("speech", 4_500, 5_000, sid("s1b"), g1, {KEPT: _iso(4_650)}),
        Span("transcription", 4_000, 9_000, sid("t2"), ROOT),
        Span("generation", 9_010, 9_500, sid("llm2"), ROOT),
        Span("speech_group", 9_200, 11_000, g2, ROOT),
        # a first audio chunk stamped before its speech span began
        Span("speech", 9_300, 11_000, sid("s2"), g2, {KEPT: _iso(9_250)}),
    ]


def test_a_streamed_session_starts_each_turn_at_its_transcript(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path / "streamed.json", _streamed())
    run = load_run(_import(tmp_path, path))
    assert run.summary["traced"]["unprompted_replies"] == 1  # type: ignore[index]
    first, second = run.turns
    assert first.extra["t0"] == "openai_transcript_ready"
    assert first.t0_ns == BASE_NS + 4_000 * MS and first.e2e_ns == 700 * MS
    expected = {"endpointing": 0, "stt": 0, "llm_ttft": 300, "aggregation": 150,
                "tts_ttfb": 250, "transport": 0}  # fmt: skip
    assert first.segments == {k: v * MS for k, v in expected.items()}
    # the second's first chunk before its request: timed, clamped and found
    assert second.e2e_ns == 250 * MS and "trace_clamped" in second.flags
    assert sum(second.segments.values()) == second.e2e_ns
    capsys.readouterr()
    assert main(["import", str(path), "--mapping", "openai-agents", "--check"]) == EXIT_GATE_FAILED
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("first_byte_before_request:") and sid("s2") in line
