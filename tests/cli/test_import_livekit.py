"""``voicelat import --mapping livekit``: LiveKit Agents' spans as traced turns.

Two kinds of input. REAL spans recorded from livekit-agents 1.8.9 by
tests/data/traces/record_livekit.py (recorded-livekit.json says how): voice turns (Silero VAD,
``user_turn`` / ``eou_wait`` beside each ``agent_turn``) and text turns (no ``user_turn``).
And literal spans written here with the names LiveKit's source uses (livekit/agents at
da6af86, 1.7.0; each cited where it is used), for exact numbers and planted defects."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.otlp_json import BASE_NS, MS, Span, sid, write
from voicelat.cli.main import main
from voicelat.core.base.contract import TRACED_SEGMENTS
from voicelat.core.base.errors import EXIT_GATE_FAILED, EXIT_OK
from voicelat.core.traces.agent_trace import AgentSpan
from voicelat.core.traces.framework_turns import split_window
from voicelat.files.otlp import read_trace_file
from voicelat.files.results import load_run

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"
VOICE = DATA / "livekit-voice.otlp.json"
TEXT = DATA / "livekit-text.otlp.json"


def _spans(path: Path) -> list[AgentSpan]:
    found = read_trace_file(path)
    assert found.rejected_spans == 0
    return sorted(found.spans, key=lambda s: s.start_ns)


def _import(tmp_path: Path, *files: Path, name: str = "run") -> Path:
    out = tmp_path / name
    args = ["import", *(str(f) for f in files), "--mapping", "livekit", "--out", str(out)]
    assert main(args) == EXIT_OK
    return out


def _ns(seconds: object) -> int:
    assert isinstance(seconds, float)
    return round(seconds * 1e9)


def test_real_voice_turns_end_at_livekits_own_e2e_and_split_its_turn_decision(
    tmp_path: Path,
) -> None:
    spans = _spans(VOICE)
    replies = [s for s in spans if s.name == "agent_turn"]
    run = load_run(_import(tmp_path, VOICE))
    assert len(run.turns) == len(replies) == 2
    for reply, turn in zip(replies, run.turns, strict=True):
        below = [s for s in spans if s.parent_id == reply.span_id]
        speaking = next(s for s in below if s.name == "agent_speaking")
        llm = next(s for s in below if s.name == "llm_node")
        # e2e is LiveKit's own lk.e2e_latency: its playback start - the user's end of speech.
        assert turn.e2e_ns == _ns(reply.attributes["lk.e2e_latency"])
        assert turn.t0_ns == speaking.start_ns - turn.e2e_ns
        assert turn.extra["t0"] == "livekit_end_of_speech"
        assert turn.extra["end"] == "livekit_agent_speaking"
        assert turn.extra["hangover_source"] == "framework"
        assert tuple(turn.segments) == TRACED_SEGMENTS
        assert sum(turn.segments.values()) == turn.e2e_ns
        assert all(v >= 0 for v in turn.segments.values())
        # endpointing: the eou_wait span's stated endpointing delay (0.5 s, LiveKit's default);
        # stt: what the final transcript took past it (lk.transcription_delay on user_turn).
        user = max(
            (s for s in spans if s.name == "user_turn" and s.end_ns <= speaking.start_ns),
            key=lambda s: s.end_ns,
        )
        wait = next(s for s in spans if s.name == "eou_wait" and s.parent_id == user.span_id)
        assert turn.segments["endpointing"] == _ns(wait.attributes["lk.eou.endpointing_delay"])
        stt = _ns(user.attributes["lk.transcription_delay"])
        assert turn.segments["stt"] == stt - turn.segments["endpointing"]
        first_token = llm.start_ns + _ns(llm.attributes["lk.response.ttft"])
        assert turn.milestones["agent_llm_first_token"] == first_token - turn.t0_ns
        assert turn.extra["findings"] == [] and turn.flags == ()
    traced = run.summary["traced"]  # type: ignore[index]
    assert traced["mapping"] == "livekit" and traced["findings_total"] == 0
    assert traced["unprompted_replies"] == 0
    assert "session_start" in traced["unmapped_spans"]  # counted, named, left out


def test_real_text_turns_start_at_the_reply(tmp_path: Path) -> None:
    spans = _spans(TEXT)
    replies = [s for s in spans if s.name == "agent_turn"]
    run = load_run(_import(tmp_path, TEXT))
    assert len(run.turns) == 2
    for reply, turn in zip(replies, run.turns, strict=True):
        speaking = next(
            s for s in spans if s.name == "agent_speaking" and s.parent_id == reply.span_id
        )
        assert turn.extra["t0"] == "livekit_text_input"
        assert turn.t0_ns == reply.start_ns
        assert turn.e2e_ns == speaking.start_ns - reply.start_ns
        assert turn.segments["endpointing"] == turn.segments["stt"] == 0
        assert sum(turn.segments.values()) == turn.e2e_ns
        # the silent TTS of the recording takes 80 ms to its first byte
        assert 80 * MS <= turn.segments["tts_ttfb"] < 150 * MS


def test_the_played_agent_split_reads_the_same_spans() -> None:
    """split_window (a played agent's window) maps a LiveKit turn as the import does."""
    spans = _spans(VOICE)
    first_reply = next(s for s in spans if s.name == "agent_turn")
    users = [s for s in spans if s.name == "user_turn"]
    split = split_window(spans, (users[0].start_ns, first_reply.end_ns), "livekit")
    assert split is not None and "trace_multiple_turns" not in split.flags
    assert split.milestones["agent_endpoint"] < split.milestones["agent_stt_final"]
    assert split.milestones["agent_tts_first_byte"] > split.milestones["agent_tts_request"]
    assert split.reported["agent_reported_endpointing_delay_ms"] == 500.0


def test_ci_and_compare_rank_a_livekit_import_beside_the_pipecat_bot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    livekit = _import(tmp_path, VOICE, name="livekit")
    pipecat = tmp_path / "pipecat"
    assert main(["import", str(DATA / "pipecat-twilio.otlp.pb"), "--out", str(pipecat)]) == 0
    budget = tmp_path / "budget.toml"
    budget.write_text("[budget]\nmin_turns = 2\n[budget.e2e]\np90_ms = 1100\n")
    assert main(["ci", "--results", str(livekit), "--budget", str(budget)]) == EXIT_OK
    capsys.readouterr()
    cmp_dir = tmp_path / "cmp"
    assert main(["compare", str(livekit), str(pipecat), "--out", str(cmp_dir)]) == EXIT_OK
    doc = json.loads((cmp_dir / "comparison.json").read_text())
    assert {c["name"] for c in doc["combinations"]} == {"livekit", "pipecat"}


# -- literal spans ------------------------------------------------------------------------------

SESSION, USER, EOU, REPLY = sid("session"), sid("user"), sid("eou"), sid("reply")


def _voice_turn() -> list[Span]:
    """One voice turn with round numbers: the user's speech ends at 3000 ms; e2e 1400 ms."""
    return [
        # voice/agent_session.py:935 tracer.start_span("agent_session")
        Span("agent_session", 0, 20_000, SESSION),
        # voice/agent_session.py:2001 "user_speaking" ends at last_speaking_time
        Span("user_speaking", 1_000, 3_000, sid("speaking"), SESSION),
        # voice/audio_recognition.py:1977 "user_turn"; :1773 lk.end_of_turn_delay (commit - end
        # of speech), lk.transcription_delay (final transcript - end of speech)
        Span(
            "user_turn",
            1_000,
            3_800,
            USER,
            SESSION,
            {"lk.end_of_turn_delay": 0.8, "lk.transcription_delay": 0.65},
        ),
        # voice/audio_recognition.py:1566 "eou_detection"; :1634 lk.eou.endpointing_delay
        Span("eou_detection", 3_000, 3_050, EOU, USER, {"lk.eou.endpointing_delay": 0.5}),
        # voice/agent_activity.py:3108 "agent_turn"; :3527 lk.e2e_latency
        Span("agent_turn", 3_790, 5_000, REPLY, SESSION, {"lk.e2e_latency": 1.4}),
        # voice/generation.py:177 "llm_node"; :323 lk.response.ttft
        Span("llm_node", 3_810, 4_300, sid("llm"), REPLY, {"lk.response.ttft": 0.2}),
        # voice/generation.py:374 "tts_node"; :430 lk.response.ttfb
        Span("tts_node", 3_811, 4_450, sid("tts"), REPLY, {"lk.response.ttfb": 0.12}),
        # tts/tts.py:273 "tts_request"; :365 lk.tts_metrics (TTSMetrics JSON, metrics/base.py:65)
        Span(
            "tts_request",
            4_100,
            4_450,
            sid("ttsreq"),
            sid("tts"),
            {"lk.tts_metrics": _tts(4_450, 0.33, 0.12)},
        ),
        # voice/agent_session.py:1943 "agent_speaking", started at the playback start
        Span("agent_speaking", 4_400, 5_000, sid("playing"), REPLY),
    ]


def _tts(stamp_ms: float, duration_s: float, ttfb_s: float) -> str:
    stamp = (BASE_NS + stamp_ms * MS) / 1e9
    return json.dumps(
        {"type": "tts_metrics", "timestamp": stamp, "duration": duration_s, "ttfb": ttfb_s}
    )


def test_literal_voice_turn_gives_the_documented_segments(tmp_path: Path) -> None:
    run = load_run(_import(tmp_path, write(tmp_path / "lk.json", _voice_turn())))
    (turn,) = run.turns
    assert turn.t0_ns == BASE_NS + 3_000 * MS and turn.e2e_ns == 1_400 * MS
    expected = {"endpointing": 500, "stt": 150, "llm_ttft": 360, "aggregation": 110,
                "tts_ttfb": 120, "transport": 160}  # fmt: skip
    for name, ms in expected.items():
        # TTSMetrics' timestamp is float unix seconds: sub-microsecond rounding
        assert abs(turn.segments[name] - ms * MS) < 1_000, name
    assert sum(turn.segments.values()) == turn.e2e_ns
    assert turn.figures["agent_reported_transcription_delay_ms"] == 650.0


def _broken() -> list[Span]:
    """A greeting, then a turn with every LiveKit defect the checks know."""
    t = "1bf7651916cd43dd8448eb211c80319c"
    g = sid("greet")
    return [
        Span("agent_session", 0, 20_000, SESSION, trace=t),
        # a greeting: no user_turn before it, no lk.pii.user_input (voice/agent_activity.py:3150)
        Span("agent_turn", 100, 900, g, SESSION, trace=t),
        Span("llm_node", 110, 400, sid("gllm"), g, {"lk.response.ttft": 0.1}, trace=t),
        Span("agent_speaking", 500, 900, sid("gplay"), g, trace=t),
        # LiveKit writes 0 when it cannot measure the delays (audio_recognition.py:1772-1773)
        Span(
            "user_turn",
            1_000,
            3_800,
            USER,
            SESSION,
            {"lk.end_of_turn_delay": 0.0, "lk.transcription_delay": 0.0},
            trace=t,
        ),
        Span("agent_turn", 3_810, 6_000, REPLY, SESSION, {"lk.pii.user_input": "hi"}, trace=t),
        # a TTFT longer than its node
        Span("llm_node", 3_820, 3_900, sid("llm"), REPLY, {"lk.response.ttft": 0.2}, trace=t),
        # a TTFB of exactly 0
        Span("tts_node", 3_821, 4_600, sid("tts"), REPLY, {"lk.response.ttfb": 0.0}, trace=t),
        # a request whose metrics say no audio came (ttfb -1: tts/tts.py:332)
        Span(
            "tts_request",
            3_900,
            3_950,
            sid("req1"),
            sid("tts"),
            {"lk.tts_metrics": _tts(3_950, 0.04, -1.0)},
            trace=t,
        ),
        # metrics that are not JSON (a truncating exporter): counted, the next request used
        Span(
            "tts_request",
            3_960,
            3_990,
            sid("req3"),
            sid("tts"),
            {"lk.tts_metrics": '{"ttfb": 0.'},
            trace=t,
        ),
        Span(
            "tts_request",
            4_000,
            4_600,
            sid("req2"),
            sid("tts"),
            {"lk.tts_metrics": _tts(4_600, 0.5, 0.2)},
            trace=t,
        ),
        # "playing" 100 ms before the first byte (4300) existed
        Span("agent_speaking", 4_200, 6_000, sid("play"), REPLY, trace=t),
    ]


def test_a_broken_span_set_is_timed_tolerantly_and_every_defect_is_a_finding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path / "broken.json", _broken())
    assert main(["import", str(path), "--mapping", "livekit", "--check"]) == EXIT_GATE_FAILED
    lines = capsys.readouterr().out.splitlines()
    found = {line.split(":", 1)[0] for line in lines}
    assert sum(line.startswith("ttfb_missing:") for line in lines) == 2, lines
    assert found == {
        "delay_zero",
        "ttfb_exceeds_span",
        "ttfb_zero",
        "ttfb_missing",
        "playback_before_audio",
    }, lines
    run = load_run(_import(tmp_path, path))
    (turn,) = run.turns  # the greeting is counted, not timed
    assert run.summary["traced"]["unprompted_replies"] == 1  # type: ignore[index]
    assert turn.extra["t0"] == "livekit_turn_commit" and "trace_eou_unmeasured" in turn.flags
    assert turn.t0_ns == BASE_NS + 3_800 * MS and turn.e2e_ns == 400 * MS
    assert "trace_clamped" in turn.flags  # the first byte after the playback start
    assert sum(turn.segments.values()) == turn.e2e_ns
    assert run.summary["traced"]["findings"]["delay_zero"] == 1  # type: ignore[index]


def test_livekit_spans_under_the_default_mapping_name_the_right_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["import", str(VOICE), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--mapping livekit" in err


def test_watch_takes_livekit_turns_as_the_import_does(tmp_path: Path) -> None:
    from voicelat.engine.watch import Watcher, WatchReceiver

    spans = _spans(VOICE)
    rx = WatchReceiver(port=0, mapping="livekit")
    watcher = Watcher(rx, tmp_path, window_s=60.0, settle_s=5.0)
    # agent_session, the replies' ancestor, is exported only when the session closes: until
    # then a reply is taken once it has settled
    rx.buffer.add([s for s in spans if s.name != "agent_session"], now=0.0)
    assert watcher.tick(now=1.0) == 0
    assert watcher.tick(now=5.0) == 2
    imported = load_run(_import(tmp_path, VOICE))
    summary = watcher.window_summary()
    assert summary.e2e.n == 2
    assert sorted([summary.e2e.min, summary.e2e.max]) == sorted(t.e2e_ns for t in imported.turns)


def test_the_generic_genai_mapping_finds_livekits_turns_but_cannot_time_them(
    tmp_path: Path,
) -> None:
    """LiveKit 1.8 marks agent_turn invoke_agent and llm_request chat, but tags no
    speech_to_text / text_to_speech operation: --mapping genai sees the turns, not their ends."""
    out = tmp_path / "genai"
    assert main(["import", str(VOICE), "--mapping", "genai", "--out", str(out)]) == EXIT_OK
    run = load_run(out)
    assert len(run.turns) == 2 and all(t.failed for t in run.turns)
    assert all("trace_partial" in t.flags for t in run.turns)


def test_a_placed_trace_places_the_tts_metrics_wall_timestamp_with_its_spans() -> None:
    """The trace receiver moves span times onto voicelat's monotonic clock; LiveKit's TTS
    milestones come from TTSMetrics' wall ``timestamp`` (an attribute, not a span time), so
    they must move by the same translation, or a played LiveKit turn's tts_ttfb is clamped
    away (found profiling examples/livekit-agent: every TTS milestone sat 1.8e12 ms off)."""
    from voicelat.files.otlp import convert, decode_request

    body = VOICE.read_bytes()
    as_exported, _ = convert(decode_request(body, "application/json", "identity"))
    shift = -1_796_000_000_000_000_000  # roughly unix epoch -> a perf_counter of minutes
    placed, _ = convert(decode_request(body, "application/json", "identity"), lambda t: t + shift)
    assert {s.placed_offset_ns for s in placed} == {shift}

    def split(spans: list[AgentSpan], offset: int) -> dict[str, int]:
        reply = next(s for s in spans if s.name == "agent_turn")
        user = next(s for s in spans if s.name == "user_turn")
        found = split_window(spans, (user.start_ns, reply.end_ns), "livekit")
        assert found is not None
        return {k: v - offset for k, v in found.milestones.items()}

    before, after = split(as_exported, 0), split(placed, shift)
    assert set(before) >= {"agent_tts_request", "agent_tts_first_byte", "agent_endpoint"}
    assert after == before
