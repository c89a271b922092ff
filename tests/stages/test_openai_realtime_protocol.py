"""The OpenAI Realtime protocol on literal GA (and beta) frames: what goes out, what comes back."""

from __future__ import annotations

import base64
import json

import pytest

from voicelat.core.base.errors import StageError
from voicelat.core.measure.events import (
    Audio,
    Delta,
    Done,
    Failed,
    Final,
    Interrupted,
    RequestSent,
    ResponseStarted,
    ServerSpeech,
)
from voicelat.stages.openai_realtime import OpenAIRealtime
from voicelat.stages.protocols.openai_realtime import (
    OpenAIRealtimeProtocol,
    session_update,
    usage_counts,
)

URL = "ws://127.0.0.1:1/v1/realtime?model=gpt-realtime"


def proto(*, manual: bool = False) -> OpenAIRealtimeProtocol:
    return OpenAIRealtimeProtocol(URL, manual=manual)


def test_audio_goes_out_as_base64_appends_and_manual_mode_commits() -> None:
    p = proto(manual=True)
    (send,) = list(p.send_input(b"\x01\x00" * 480))
    assert json.loads(send.data or "") == {
        "type": "input_audio_buffer.append",
        "audio": base64.b64encode(b"\x01\x00" * 480).decode(),
    }
    assert list(p.send_input(b"")) == []
    commit, create = list(p.send_end())
    assert commit.data == '{"type":"input_audio_buffer.commit"}'
    assert commit.event == RequestSent(0, "commit")
    assert create.data == '{"type":"response.create"}'
    assert list(proto(manual=False).send_end()) == []  # server VAD: the server answers


def test_session_update_is_the_ga_shape() -> None:
    msg = session_update(
        turn_detection="semantic_vad", voice="marin", instructions="Be brief.",
        vad={"eagerness": "low"},
    )  # fmt: skip
    s = msg["session"]
    assert msg["type"] == "session.update" and s["type"] == "realtime"
    assert s["audio"]["input"]["format"] == {"type": "audio/pcm", "rate": 24000}
    assert s["audio"]["input"]["turn_detection"] == {"type": "semantic_vad", "eagerness": "low"}
    assert s["audio"]["output"]["voice"] == "marin"
    assert "voice" not in s and "modalities" not in s  # no beta-named field
    none = session_update(turn_detection="none", voice="marin")
    assert none["session"]["audio"]["input"]["turn_detection"] is None


def test_a_server_vad_turn_parses_into_stage_events() -> None:
    p = proto()
    frames = [
        ('{"type":"input_audio_buffer.speech_started","event_id":"e1","item_id":"item_1","audio_start_ms":1180}', 1),
        ('{"type":"input_audio_buffer.speech_stopped","event_id":"e2","item_id":"item_1","audio_end_ms":2960}', 2),
        ('{"type":"input_audio_buffer.committed","event_id":"e3","item_id":"item_1","previous_item_id":null}', 3),
        ('{"type":"response.created","event_id":"e6","response":{"id":"resp_1","status":"in_progress","output":[]}}', 4),
        ('{"type":"response.output_audio_transcript.delta","response_id":"resp_1","delta":""}', 5),
        ('{"type":"response.output_audio_transcript.delta","response_id":"resp_1","delta":"Sure"}', 6),
        ('{"type":"response.output_audio.delta","response_id":"resp_1","delta":"AQACAAMA"}', 7),
        ('{"type":"conversation.item.input_audio_transcription.completed","transcript":"hi"}', 8),
        ('{"type":"rate_limits.updated","rate_limits":[]}', 9),
    ]  # fmt: skip
    events = [e for text, t in frames for e in p.receive(text, t)]
    assert events == [
        ServerSpeech(1, True, 1180),
        ServerSpeech(2, False, 2960),
        ResponseStarted(4, "resp_1"),
        Delta(6, content="Sure"),
        Audio(7, b"\x01\x00\x02\x00\x03\x00", 24000),
        Final(8, "hi"),
    ]
    assert not p.finished
    done = (
        '{"type":"response.done","response":{"id":"resp_1","status":"completed","status_details":null,'
        '"usage":{"total_tokens":310,"input_tokens":200,"output_tokens":110,'
        '"input_token_details":{"text_tokens":20,"audio_tokens":180,"cached_tokens":0},'
        '"output_token_details":{"text_tokens":25,"audio_tokens":85}}}}'
    )
    (ev,) = p.receive(done, 10)
    assert p.finished
    assert ev == Done(
        10,
        "completed",
        {
            "total_tokens": 310, "input_tokens": 200, "output_tokens": 110,
            "input_text_tokens": 20, "input_audio_tokens": 180, "cached_tokens": 0,
            "output_text_tokens": 25, "output_audio_tokens": 85,
        },
    )  # fmt: skip


def test_beta_names_and_text_mode_deltas_are_understood() -> None:
    p = proto()
    assert p.receive('{"type":"response.audio.delta","delta":"AAA="}', 1) == [
        Audio(1, b"\x00\x00", 24000)
    ]
    assert p.receive('{"type":"response.text.delta","delta":"x"}', 2) == [Delta(2, content="x")]
    assert p.receive('{"type":"response.output_text.delta","delta":"y"}', 3) == [
        Delta(3, content="y")
    ]


def test_cancel_by_a_detected_turn_is_interrupted_then_done() -> None:
    p = proto()
    events = p.receive(
        '{"type":"response.done","response":{"id":"r","status":"cancelled",'
        '"status_details":{"type":"cancelled","reason":"turn_detected"}}}',
        5,
    )
    assert events == [Interrupted(5), Done(5, "cancelled:turn_detected", {})]


def test_errors_and_failed_responses_keep_the_servers_message() -> None:
    p = proto()
    (ev,) = p.receive(
        '{"type":"error","event_id":"e9","error":{"type":"rate_limit_error",'
        '"code":"rate_limit_exceeded","message":"Rate limit reached.","param":null}}',
        9,
    )
    assert isinstance(ev, Failed)
    assert ev.reason == f"error from {URL}: Rate limit reached. (rate_limit_exceeded)"
    benign = '{"type":"error","error":{"code":"response_cancel_not_active","message":"x"}}'
    assert p.receive(benign, 10) == []
    (ev,) = p.receive(
        '{"type":"response.done","response":{"status":"failed","status_details":{"type":"failed",'
        '"error":{"type":"server_error","message":"The model crashed."}}}}',
        11,
    )
    assert isinstance(ev, Failed) and "The model crashed. (server_error)" in ev.reason
    (ev,) = p.receive("not json", 12)
    assert isinstance(ev, Failed) and "not a JSON object" in ev.reason
    (ev,) = p.receive('{"type":"response.output_audio.delta","delta":"@@@"}', 13)
    assert isinstance(ev, Failed) and "base64" in ev.reason


def test_a_stall_names_the_last_event_seen() -> None:
    p = proto()
    p.receive('{"type":"input_audio_buffer.committed"}', 1)
    assert "last event: input_audio_buffer.committed" in p.stalled(10)
    assert usage_counts(None) == {}


def test_stage_options_are_checked_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RT_KEY", "k")
    with pytest.raises(StageError, match=r"\[s2s\] turn_detection must be one of"):
        OpenAIRealtime({"stage": "openai-realtime", "api_key_env": "RT_KEY", "turn_detection": "x"})
    with pytest.raises(StageError, match="rate must be 24000"):
        OpenAIRealtime({"stage": "openai-realtime", "api_key_env": "RT_KEY", "rate": 16000})
    stage = OpenAIRealtime({"stage": "openai-realtime", "api_key_env": "RT_KEY"})
    assert stage.endpoint_by_server and stage.input_rate == stage.output_rate == 24000
    assert stage._url() == "wss://api.openai.com/v1/realtime?model=gpt-realtime"
    manual = OpenAIRealtime(
        {"stage": "openai-realtime", "api_key_env": "RT_KEY", "turn_detection": "none"}
    )
    assert not manual.endpoint_by_server


def test_missing_key_variable_is_an_error_before_any_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:

    monkeypatch.delenv("RT_MISSING", raising=False)
    with pytest.raises(StageError, match=r"\$RT_MISSING, which is not set") as info:
        OpenAIRealtime({"stage": "openai-realtime", "api_key_env": "RT_MISSING"})
    assert info.value.exit_code == 2
