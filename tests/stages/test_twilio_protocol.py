"""The Twilio Media Streams protocol on literal frames: what voicelat sends, what the agent's
messages mean, and the deadlines (mark echoes, reply end, no answer)."""

from __future__ import annotations

import base64
import json

from voicelat.core.measure.events import Audio, Done, Failed, Interrupted
from voicelat.stages.protocols.twilio import TwilioProtocol

MS = 1_000_000
T0 = 7_000_000_000
URL = "ws://127.0.0.1:9100/twilio"


def proto(**kw: object) -> TwilioProtocol:
    p = TwilioProtocol(URL, stream_sid="MZ1", call_sid="CA1", **kw)  # type: ignore[arg-type]
    p.started_ns = T0
    return p


def media(payload: bytes) -> str:
    b64 = base64.b64encode(payload).decode()
    return json.dumps({"event": "media", "streamSid": "MZ1", "media": {"payload": b64}})


def test_handshake_messages_are_twilios() -> None:
    p = proto()
    assert json.loads(p.connected()) == {
        "event": "connected",
        "protocol": "Call",
        "version": "1.0.0",
    }
    start = json.loads(p.start({"from_number": "+15550100"}))
    assert start["event"] == "start" and start["sequenceNumber"] == "1"
    assert start["streamSid"] == start["start"]["streamSid"] == "MZ1"
    assert start["start"]["callSid"] == "CA1"
    assert start["start"]["mediaFormat"] == {
        "encoding": "audio/x-mulaw",
        "sampleRate": 8000,
        "channels": 1,
    }
    assert start["start"]["customParameters"] == {"from_number": "+15550100"}


def test_each_frame_is_one_media_message_numbered_as_twilio_does() -> None:
    p = proto()
    p.start({})
    frames = [json.loads(s.data) for i in range(3) for s in p.send_input(bytes(320))]  # type: ignore[arg-type]
    assert [f["sequenceNumber"] for f in frames] == ["2", "3", "4"]
    assert [f["media"]["chunk"] for f in frames] == ["1", "2", "3"]
    assert [f["media"]["timestamp"] for f in frames] == ["0", "20", "40"]
    # 20 ms of PCM16 silence = 160 mu-law bytes of 0xFF.
    assert base64.b64decode(frames[0]["media"]["payload"]) == b"\xff" * 160
    stop = json.loads(p.stop())
    assert stop["event"] == "stop" and stop["stop"]["callSid"] == "CA1"


def test_reply_media_is_pcm_at_its_arrival_and_ends_after_the_idle_time() -> None:
    p = proto(reply_idle_ms=500)
    (ev,) = p.receive(media(b"\xff" * 320), T0 + 900 * MS)
    assert isinstance(ev, Audio) and ev.rate == 8000 and ev.pcm == b"\x00\x00" * 320
    assert ev.t_ns == T0 + 900 * MS
    p.receive(media(b"\x80" * 320), T0 + 940 * MS)
    assert p.tick(T0 + 1400 * MS) == []  # 460 ms of quiet: not yet
    (done,) = p.tick(T0 + 1440 * MS)
    assert isinstance(done, Done) and done.t_ns == T0 + 940 * MS and p.finished


def test_a_mark_is_echoed_once_the_audio_before_it_has_played() -> None:
    p = proto()
    p.receive(media(b"\x80" * 800), T0 + 1000 * MS)  # 100 ms of audio: plays until +1100
    p.receive(json.dumps({"event": "mark", "mark": {"name": "m1"}}), T0 + 1010 * MS)
    p.tick(T0 + 1050 * MS)
    assert [s.data for s in p.send_input(bytes(320))][:-1] == []  # not played yet
    p.tick(T0 + 1100 * MS)
    sent = [json.loads(s.data) for s in p.send_input(bytes(320))]  # type: ignore[arg-type]
    assert sent[0]["event"] == "mark" and sent[0]["mark"] == {"name": "m1"}
    assert sent[1]["event"] == "media"


def test_end_mark_ends_the_reply_when_it_has_played() -> None:
    p = proto(end_mark="bye")
    p.receive(media(b"\x80" * 400), T0 + 1000 * MS)  # 50 ms
    assert p.receive(json.dumps({"event": "mark", "mark": {"name": "bye"}}), T0 + 1001 * MS) == []
    (done,) = p.tick(T0 + 1050 * MS)
    assert isinstance(done, Done) and done.finish_reason == "end_mark"


def test_clear_drops_the_queue_echoes_pending_marks_and_is_interrupted() -> None:
    p = proto()
    p.receive(media(b"\x80" * 8000), T0 + 1000 * MS)  # a second of audio
    p.receive(json.dumps({"event": "mark", "mark": {"name": "after"}}), T0 + 1001 * MS)
    events = p.receive(json.dumps({"event": "clear", "streamSid": "MZ1"}), T0 + 1200 * MS)
    assert events == [Interrupted(T0 + 1200 * MS)]
    sent = [json.loads(s.data) for s in p.send_input(bytes(320))]  # type: ignore[arg-type]
    assert sent[0] == {
        "event": "mark",
        "sequenceNumber": "1",
        "streamSid": "MZ1",
        "mark": {"name": "after"},
    }


def test_no_answer_fails_naming_the_last_message() -> None:
    p = proto(answer_timeout_s=2.0)
    p.receive(json.dumps({"event": "mark", "mark": {"name": "x"}}), T0 + 100 * MS)
    p.user_audio_ended(T0 + 1000 * MS)
    assert p.tick(T0 + 2900 * MS) == []
    (failed,) = p.tick(T0 + 3000 * MS)
    assert isinstance(failed, Failed)
    assert failed.reason == (
        f"{URL}: no reply audio within 2 s of the end of the user's audio "
        "(last message from the agent: 'mark' at +100 ms)"
    )


def test_wrong_media_format_fails_with_a_reason() -> None:
    p = proto()
    (binary,) = p.receive(b"\x08\x01\x12\x00", T0)
    assert isinstance(binary, Failed) and "binary websocket message (4 bytes)" in binary.reason
    (bad,) = p.receive('{"event": "media", "media": {"payload": "%%%"}}', T0)
    assert isinstance(bad, Failed) and "not base64" in bad.reason
    (junk,) = p.receive("hello", T0)
    assert isinstance(junk, Failed) and "not a Media Streams message" in junk.reason


def test_a_clear_with_nothing_queued_interrupts_nothing() -> None:
    # Pipecat sends clear whenever the user starts speaking, reply or not.
    p = proto()
    assert p.receive(json.dumps({"event": "clear", "streamSid": "MZ1"}), T0 + 300 * MS) == []
    p.receive(media(b"\x80" * 80), T0 + 1000 * MS)  # 10 ms, played by +1010
    assert p.receive(json.dumps({"event": "clear"}), T0 + 1020 * MS) == []


def test_media_before_the_turn_is_not_its_reply() -> None:
    p = proto()
    assert p.receive(media(b"\x80" * 160), T0 - 5 * MS) == []
    assert p.pre_turn_media == 1
