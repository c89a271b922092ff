"""The Gemini Live protocol on literal BidiGenerateContent frames."""

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
    ServerSpeech,
)
from voicelat.stages.gemini_live import GeminiLive
from voicelat.stages.protocols.gemini_live import GeminiLiveProtocol, setup_message

URL = (
    "ws://127.0.0.1:1/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
)


def test_manual_activity_wraps_the_audio_and_ends_with_the_commit() -> None:
    p = GeminiLiveProtocol(URL, manual=True)
    first = list(p.send_input(b"\x01\x00" * 320))
    assert [json.loads(s.data or "") for s in first] == [
        {"realtimeInput": {"activityStart": {}}},
        {"realtimeInput": {"audio": {
            "data": base64.b64encode(b"\x01\x00" * 320).decode(), "mimeType": "audio/pcm;rate=16000",
        }}},
    ]  # fmt: skip
    assert len(list(p.send_input(b"\x00\x00"))) == 1  # activityStart only once
    (end,) = list(p.send_end())
    assert json.loads(end.data or "") == {"realtimeInput": {"activityEnd": {}}}
    assert end.event == RequestSent(0, "commit")
    auto = GeminiLiveProtocol(URL, manual=False)
    assert len(list(auto.send_input(b"\x00\x00"))) == 1 and list(auto.send_end()) == []


def test_setup_message() -> None:
    msg = setup_message(model="gemini-live-2.5-flash-preview", manual=True, voice="Puck")
    s = msg["setup"]
    assert s["model"] == "models/gemini-live-2.5-flash-preview"
    assert s["generationConfig"]["responseModalities"] == ["AUDIO"]
    assert s["generationConfig"]["speechConfig"]["voiceConfig"]["prebuiltVoiceConfig"] == {
        "voiceName": "Puck"
    }
    assert s["realtimeInputConfig"] == {"automaticActivityDetection": {"disabled": True}}
    auto = setup_message(model="models/m", manual=False, vad={"silenceDurationMs": 300})
    assert auto["setup"]["model"] == "models/m"
    detection = auto["setup"]["realtimeInputConfig"]["automaticActivityDetection"]
    assert detection == {"disabled": False, "silenceDurationMs": 300}


def test_a_turn_parses_into_stage_events() -> None:
    p = GeminiLiveProtocol(URL, manual=True)
    frames = [
        ('{"serverContent":{"inputTranscription":{"text":"book a table"}}}', 1),
        ('{"voiceActivity":{"voiceActivityType":"ACTIVITY_END"}}', 2),
        ('{"serverContent":{"modelTurn":{"parts":[{"inlineData":{"mimeType":"audio/pcm;rate=24000","data":"AQACAA=="}}]}}}', 3),
        ('{"serverContent":{"outputTranscription":{"text":"Sure"}}}', 4),
        ('{"serverContent":{"modelTurn":{"parts":[{"text":"thinking","thought":true},{"text":"ok"}]}}}', 5),
        ('{"serverContent":{"generationComplete":true}}', 6),
    ]  # fmt: skip
    events = [e for text, t in frames for e in p.receive(text, t)]
    assert events == [
        Final(1, "book a table"),
        ServerSpeech(2, False),
        Audio(3, b"\x01\x00\x02\x00", 24000),
        Delta(4, content="Sure"),
        Delta(5, content="ok"),
    ]
    assert not p.finished
    (done,) = p.receive(
        '{"serverContent":{"turnComplete":true},"usageMetadata":{"promptTokenCount":412,'
        '"responseTokenCount":96,"totalTokenCount":508,"responseTokensDetails":[]}}',
        7,
    )
    assert p.finished
    assert done == Done(
        7, "turnComplete", {"input_tokens": 412, "output_tokens": 96, "total_tokens": 508}
    )


def test_interrupted_and_bundled_messages() -> None:
    p = GeminiLiveProtocol(URL, manual=False)
    events = p.receive('{"serverContent":{"interrupted":true,"turnComplete":true}}', 9)
    assert events == [Interrupted(9), Done(9, "interrupted", {})]


def test_unknown_messages_fail_as_the_sdk_raises() -> None:
    p = GeminiLiveProtocol(URL, manual=False)
    (ev,) = p.receive('{"code":429,"message":"quota"}', 1)
    assert isinstance(ev, Failed) and "no known key" in ev.reason
    (ev,) = p.receive("[]", 2)
    assert isinstance(ev, Failed)
    p.receive('{"setupComplete":{}}', 3)
    assert "last message: setupComplete" in p.stalled(5)


def test_stage_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GM_KEY", "k")
    with pytest.raises(StageError, match="activity_detection must be one of"):
        GeminiLive({"stage": "gemini-live", "api_key_env": "GM_KEY", "activity_detection": "x"})
    with pytest.raises(StageError, match="rate must be 16000"):
        GeminiLive({"stage": "gemini-live", "api_key_env": "GM_KEY", "rate": 24000})
    stage = GeminiLive({"stage": "gemini-live", "api_key_env": "GM_KEY"})
    assert stage.endpoint_by_server and (stage.input_rate, stage.output_rate) == (16000, 24000)
    assert stage._url().endswith(
        "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
    )
    assert stage._headers() == {"x-goog-api-key": "k"}
