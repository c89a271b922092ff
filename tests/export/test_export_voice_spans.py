"""OTLP voice spans against the GenAI proposals' names (semantic-conventions-genai PRs #390 and
#394, openinference#3418's first-response moments): each kind of turn gets its own span shape,
a realtime turn a model span and no STT span, a failed stage its real duration and ERROR."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from otlp_sink import attributes, otlp_receiver

from tests.core.test_core_agent import agent_turn
from tests.core.test_core_s2s import server_vad_turn
from voicelat.core.base.turn import Turn
from voicelat.core.measure.events import Audio, Delta, Done, Failed, Final, RequestSent, TextSent
from voicelat.core.measure.recorder import TurnRecorder
from voicelat.export import ExportFanout
from voicelat.export import genai_voice as gv
from voicelat.export.otel import OtelExporter, first_response_events, turn_span_plan
from voicelat.files.results import load_run

MS = 1_000_000
T0 = 10_000 * MS
RUNS = Path(__file__).resolve().parent / "data" / "kinds"
CASCADE = {
    "name": "p",
    "stt": {"stage": "openai-stt", "model": "gpt-4o-mini-transcribe", "language": "en"},
    "llm": {"stage": "openai", "model": "gpt-4o-mini"},
    "tts": {"stage": "deepgram-tts", "model": "aura-2-thalia-en", "voice": "thalia"},
    "turn": {"timeout_s": 2.0},
}
REALTIME = {"name": "rt", "s2s": {"stage": "openai-realtime", "model": "gpt-realtime",
            "voice": "marin"}}  # fmt: skip


def at(ms: float) -> int:
    return T0 + int(ms * MS)


def test_the_names_are_the_proposals() -> None:
    # PR #390 (cascade STT/TTS, speech attributes, turn end reason), PR #394 (realtime), the
    # merged GenAI names: spelled exactly as the proposals spell them.
    assert (gv.OP_STT, gv.OP_TTS, gv.OP_CHAT, gv.OP_INVOKE_AGENT) == (
        "speech_to_text", "text_to_speech", "chat", "invoke_agent"
    )  # fmt: skip
    assert gv.OP_REALTIME == "generate_live_content"
    assert (gv.VOICE, gv.INPUT_LANGUAGE) == ("gen_ai.speech.voice", "gen_ai.speech.input.language")
    assert gv.END_REASON == "gen_ai.conversation.turn.end_reason"
    assert (gv.AUDIO_INPUT_TOKENS, gv.AUDIO_OUTPUT_TOKENS) == (
        "gen_ai.usage.audio.input_tokens", "gen_ai.usage.audio.output_tokens"
    )  # fmt: skip
    assert gv.TIME_TO_FIRST_CHUNK == "gen_ai.response.time_to_first_chunk"
    assert gv.span_name("chat", "gpt-4o") == "chat gpt-4o" and gv.span_name("chat", None) == "chat"
    assert gv.provider_name("gemini-live") == "gcp.gemini" and gv.provider_name("wyoming") is None
    assert [m.moment for m in gv.FIRST_RESPONSE] == [
        "response created", "first text", "first audio generated / received",
        "first audio submitted to the transport", "first audio audible",
    ]  # fmt: skip


def test_docs_export_states_every_attribute_and_its_status() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "EXPORT.md").read_text()
    for a in gv.ATTRIBUTES:
        row = next((line for line in doc.splitlines() if line.startswith(f"| `{a.name}`")), None)
        assert row is not None, a.name
        assert a.status in row, (a.name, row)
    for m in gv.FIRST_RESPONSE:
        assert f"`{m.event}`" in doc, m.event


def cascade_turn(*, tts_fails: bool = False, timeout: bool = False) -> Turn:
    """speech 100..1000 ms, endpoint 1200, final 1250, LLM 1260..1500, TTS from 1410."""
    rec = TurnRecorder(index=0, fixture="fx", t0_ns=T0)
    rec.mark("speech_start", at(100))
    rec.mark("speech_end", at(1000))
    rec.mark("endpoint", at(1200))
    rec.on_event("stt", Final(at(1250), "book a table"))
    rec.on_event("llm", RequestSent(at(1260)))
    rec.on_event("llm", Delta(at(1380), content="Sure."))
    rec.on_event("llm", Done(at(1500)))
    rec.mark("llm_first_speakable", at(1400))
    rec.on_event("tts", TextSent(at(1410), "Sure."))
    if timeout:
        rec.fail("turn", "timed out after 2 s (last milestone: tts_request)")
    elif tts_fails:
        rec.on_event("tts", Failed(at(1730), "HTTPStatusError: 500 from the TTS"))
    else:
        rec.on_event("tts", Audio(at(1500), b"\x10\x27" * 800, 16000))
        rec.mark("tts_first_audible", at(1500))
        rec.on_event("tts", Done(at(1900)))
        rec.mark("output_first_audible", at(1530))
        rec.extra("playout_started_ns", 1505 * MS)
    return rec.finish()


def _ops(plans: list[Any]) -> list[str]:
    return [p.operation for p in plans]


def test_a_cascade_turn_is_invoke_agent_over_stt_chat_tts() -> None:
    root, stt, llm, tts = turn_span_plan(cascade_turn(), CASCADE)
    assert root.name == "invoke_agent p" and not root.client and root.error is None
    assert root.attributes[gv.END_REASON] == "complete"
    assert (stt.name, llm.name, tts.name) == (
        "speech_to_text gpt-4o-mini-transcribe", "chat gpt-4o-mini", "text_to_speech aura-2-thalia-en"
    )  # fmt: skip
    assert stt.attributes[gv.INPUT_LANGUAGE] == "en" and stt.attributes[gv.PROVIDER] == "openai"
    assert (stt.start_ns, stt.end_ns) == (100 * MS, 1250 * MS)
    assert llm.attributes[gv.TIME_TO_FIRST_CHUNK] == pytest.approx(0.12)
    assert (tts.attributes[gv.VOICE], tts.attributes[gv.OUTPUT_TYPE]) == ("thalia", "speech")
    assert tts.attributes[gv.PROVIDER] == "deepgram"
    assert (tts.start_ns, tts.end_ns) == (1410 * MS, 1900 * MS)


def test_a_realtime_turn_exports_a_model_span_and_no_stt_span() -> None:
    turn = server_vad_turn().finish()  # server VAD ends 2520, response 2560, first audio 2900
    plans = turn_span_plan(turn, REALTIME)
    assert _ops(plans) == ["invoke_agent", "generate_live_content"]
    model = plans[1]
    assert model.name == "generate_live_content gpt-realtime" and model.client
    ms = turn.milestones
    assert (model.start_ns, model.end_ns) == (ms["endpoint"], ms["response_done"])
    a = model.attributes
    assert a[gv.PROVIDER] == "openai" and a[gv.VOICE] == "marin" and a[gv.OUTPUT_TYPE] == "speech"
    assert a[gv.INPUT_TOKENS] == 200 and a[gv.OUTPUT_TOKENS] == 110
    # endpoint 2520 -> first text 2850: the first chunk of any kind.
    assert a[gv.TIME_TO_FIRST_CHUNK] == pytest.approx(0.33)
    assert a[gv.END_REASON] == "complete"


def test_an_agent_turn_is_one_client_invoke_agent_span() -> None:
    (root,) = turn_span_plan(agent_turn().finish(), {"name": "bot", "agent": {"stage": "twilio"}})
    assert root.operation == "invoke_agent" and root.client and root.name == "invoke_agent bot"


def test_a_failed_stage_exports_its_real_duration_and_error() -> None:
    turn = cascade_turn(tts_fails=True)
    assert turn.extra["failure_at_ns"] == 1730 * MS and turn.extra["failure_at_exact"] is True
    root, _stt, llm, tts = turn_span_plan(turn, CASCADE)
    # TTS asked at 1410 and failed at 1730: 320 ms, not a 0 ns span.
    assert (tts.start_ns, tts.end_ns) == (1410 * MS, 1730 * MS)
    assert tts.error == "HTTPStatusError: 500 from the TTS"
    assert tts.attributes[gv.ERROR_TYPE] == "HTTPStatusError"
    assert llm.error is None and root.error is not None and gv.END_REASON not in root.attributes
    assert root.end_ns >= 1730 * MS
    assert root.attributes["voicelat.failure.at_source"] == "stage_event"
    # A turn timeout cuts the running TTS at the pipeline's timeout (2 s), with ERROR.
    _, _, _, tts = turn_span_plan(cascade_turn(timeout=True), CASCADE)
    assert (tts.start_ns, tts.end_ns) == (1410 * MS, 2000 * MS) and tts.error is not None


def test_the_five_first_response_moments_name_their_clock_and_origin() -> None:
    events = first_response_events(cascade_turn())
    names = [name for name, _, _ in events]
    assert names == [m.event for m in gv.FIRST_RESPONSE]
    by_name = {name: (t, a) for name, t, a in events}
    t, a = by_name["voicelat.first_response.audio_submitted"]
    assert t == 1505 * MS and a["voicelat.milestone"] == "playout_started"
    assert a["voicelat.clock.origin"] == "speech_end"
    assert a["voicelat.clock.since_origin_ns"] == 505 * MS
    assert "CLOCK_MONOTONIC" in a["voicelat.clock"]
    assert by_name["voicelat.first_response.created"][1]["voicelat.milestone"] == "llm_first_delta"
    # A black-box agent observes three of them; response created and first text need traces.
    agent = [n for n, _, _ in first_response_events(agent_turn().finish())]
    assert agent == ["voicelat.first_response.audio_received",
                     "voicelat.first_response.audio_audible"]  # fmt: skip


def _export(turns: Any, pipeline: dict[str, Any]) -> list[Any]:
    warnings: list[str] = []
    with otlp_receiver() as sink:
        exporter = OtelExporter(sink.url, pipeline=pipeline, warn=warnings.append)
        with ExportFanout([exporter]) as fan:
            for t in turns:
                fan.submit(t)
    assert warnings == []
    return sink.spans()


def test_a_saved_realtime_run_over_real_otlp() -> None:
    run = load_run(RUNS / "realtime")
    pipeline = json.loads((RUNS / "realtime" / "summary.json").read_text())["pipeline"]
    spans = _export(run.turns, pipeline)
    ops = sorted(attributes(s)["gen_ai.operation.name"] for s in spans)
    assert ops == ["generate_live_content"] * len(run.turns) + ["invoke_agent"] * len(run.turns)
    assert not any(s.name.startswith("speech_to_text") for s in spans)
    root = next(s for s in spans if s.name.startswith("invoke_agent"))
    events = {e.name: e for e in root.events}
    audible = events["voicelat.first_response.audio_audible"]
    ev = {kv.key: kv.value for kv in audible.attributes}
    assert ev["voicelat.clock.origin"].string_value == "speech_end"
    index = attributes(root)["voicelat.turn.index"]
    turn = next(t for t in run.turns if t.index == index)
    # The event sits on the wall clock exactly where the milestone is after the span's start.
    assert (
        audible.time_unix_nano - root.start_time_unix_nano
        == turn.milestones["output_first_audible"]
    )
    assert ev["voicelat.clock.since_origin_ns"].int_value == turn.e2e_ns


def test_a_failed_stage_over_real_otlp() -> None:
    (root, *kids) = sorted(_export([cascade_turn(tts_fails=True)], CASCADE),
                           key=lambda s: s.start_time_unix_nano)  # fmt: skip
    tts = next(s for s in kids if s.name.startswith("text_to_speech"))
    assert tts.end_time_unix_nano - tts.start_time_unix_nano == 320 * MS
    assert tts.status.code == 2  # STATUS_CODE_ERROR
    assert attributes(tts)["error.type"] == "HTTPStatusError"
    assert root.status.code == 2


@pytest.mark.parametrize(
    ("kind", "children", "root_kind"),
    [("cascade", ["chat", "speech_to_text", "text_to_speech"], 1),
     ("realtime", ["generate_live_content"], 1), ("agent", [], 3)],
)  # fmt: skip
def test_each_saved_run_exports_its_own_span_shape(
    kind: str, children: list[str], root_kind: int
) -> None:
    run = load_run(RUNS / kind)
    pipeline = json.loads((RUNS / kind / "summary.json").read_text())["pipeline"]
    spans = _export(run.turns, pipeline)
    roots = [s for s in spans if attributes(s)["gen_ai.operation.name"] == "invoke_agent"]
    assert len(roots) == len(run.turns)
    for root in roots:
        assert root.kind == root_kind  # 1 INTERNAL (voicelat runs the agent), 3 CLIENT (remote)
        kids = sorted(attributes(s)["gen_ai.operation.name"] for s in spans
                      if s.parent_span_id == root.span_id)  # fmt: skip
        assert kids == children
        for s in spans:
            if s.parent_span_id == root.span_id:
                assert s.end_time_unix_nano > s.start_time_unix_nano, s.name  # never 0 ns
        assert {e.name for e in root.events} >= {"voicelat.first_response.audio_received",
                                                 "voicelat.first_response.audio_audible"}  # fmt: skip
