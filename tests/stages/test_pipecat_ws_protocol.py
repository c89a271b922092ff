"""Pipecat's protobuf frames, checked against pipecat's own frames_pb2 and serializer, and the
pipecat-ws protocol on literal frames (no sockets)."""

from __future__ import annotations

import asyncio
import json
import struct
from pathlib import Path

import pytest

from voicelat.core.base.errors import ConfigError, StageError
from voicelat.core.measure.events import (
    Audio,
    Delta,
    Done,
    Failed,
    Final,
    Interrupted,
    ServerSpeech,
)
from voicelat.stages.protocols.pipecat_ws import (
    PipecatWsProtocol,
    ReplyWatch,
    decode_frame,
    encode_audio,
    encode_message,
    frame_classes,
    is_bot_ready,
    rtvi_events,
    rtvi_message,
)

pb = pytest.importorskip("pipecat.frames.protobufs.frames_pb2")
ROOT = Path(__file__).resolve().parents[2]
MS = 1_000_000
URL = "ws://127.0.0.1:1/"
LOUD = struct.pack("<4h", 0, 900, -900, 5)


def _pipecat_bytes(**audio: object) -> bytes:
    frame = pb.Frame()
    for k, v in audio.items():
        setattr(frame.audio, k, v)
    return bytes(frame.SerializeToString())


def _rtvi(kind: str) -> bytes:
    frame = pb.Frame()
    frame.message.data = json.dumps({"label": "rtvi-ai", "type": kind})
    return bytes(frame.SerializeToString())


def _proto(idle_ms: int = 500, timeout_ms: int = 2000) -> PipecatWsProtocol:
    watch = ReplyWatch(idle_ns=idle_ms * MS, timeout_ns=timeout_ms * MS)
    return PipecatWsProtocol(URL, input_rate=16000, output_rate=24000, watch=watch)


def test_the_schema_is_pipecats_field_for_field() -> None:
    from google.protobuf import descriptor_pb2

    theirs, ours = descriptor_pb2.FileDescriptorProto(), descriptor_pb2.FileDescriptorProto()
    pb.DESCRIPTOR.CopyToProto(theirs)
    frame_classes()["_file"].CopyToProto(ours)
    ours.name = theirs.name
    assert ours == theirs


def test_literal_wire_bytes() -> None:
    # Frame{audio(2){audio(3)=0102, sample_rate(4)=24000, num_channels(5)=1}}, by hand.
    literal = bytes.fromhex("120a1a02010220c0bb012801")
    assert encode_audio(b"\x01\x02", 24000) == literal
    frame = decode_frame(literal)
    assert frame.kind == "audio"
    assert (frame.fields["audio"], frame.fields["sample_rate"], frame.fields["num_channels"]) == (
        b"\x01\x02",
        24000,
        1,
    )
    # Frame{message(4){data(1)="{}"}}
    assert decode_frame(bytes.fromhex("22040a027b7d")).fields == {"data": "{}"}


def test_our_audio_is_what_pipecats_serializer_reads_as_user_audio() -> None:
    from pipecat.frames.frames import InputAudioRawFrame
    from pipecat.serializers.protobuf import ProtobufFrameSerializer

    data = encode_audio(b"\x01\x02" * 320, 16000)
    frame = asyncio.run(ProtobufFrameSerializer().deserialize(data))
    assert isinstance(frame, InputAudioRawFrame)
    assert (frame.audio, frame.sample_rate, frame.num_channels) == (b"\x01\x02" * 320, 16000, 1)
    parsed = pb.Frame.FromString(encode_message({"label": "rtvi-ai", "type": "client-ready"}))
    assert json.loads(parsed.message.data)["type"] == "client-ready"


def test_pipecats_reply_audio_decodes_with_its_rate() -> None:
    from pipecat.frames.frames import OutputAudioRawFrame
    from pipecat.serializers.protobuf import ProtobufFrameSerializer

    data = asyncio.run(ProtobufFrameSerializer().serialize(OutputAudioRawFrame(LOUD, 24000, 1)))
    assert isinstance(data, bytes)
    frame = decode_frame(data)
    assert frame.kind == "audio"
    assert frame.fields["audio"] == LOUD and frame.fields["sample_rate"] == 24000
    with pytest.raises(ValueError, match="not a pipecat protobuf Frame"):
        decode_frame(b"\xff\xff\xff")


def test_reply_audio_is_reported_from_its_first_sound_and_ends_after_the_idle_time() -> None:
    p = _proto(idle_ms=500)
    silent = _pipecat_bytes(audio=bytes(8), sample_rate=24000, num_channels=1)
    loud = _pipecat_bytes(audio=LOUD, sample_rate=24000, num_channels=1)
    assert p.receive(silent, 1 * MS) == []  # the line's silence is not the reply
    assert p.watch.deadline_ns() is None  # nothing due before the input ends
    p.input_ended(2 * MS)
    assert p.watch.deadline_ns() == 2002 * MS  # no reply within timeout -> failure then
    assert p.receive(loud, 10 * MS) == [Audio(10 * MS, LOUD, 24000)]
    assert p.receive(silent, 20 * MS) == []  # held: a pause, or the line after the reply
    # Sound again: the pause is reply audio, released with its own arrival stamp.
    assert p.receive(loud, 30 * MS) == [
        Audio(20 * MS, bytes(8), 24000),
        Audio(30 * MS, LOUD, 24000),
    ]
    assert p.receive(silent, 40 * MS) == []  # the line's silence after the reply: never reported
    assert p.watch.deadline_ns() == 530 * MS  # the last sound + idle
    assert not p.watch.expired(529 * MS) and p.watch.expired(530 * MS)
    (done,) = p.expire(530 * MS)
    assert done == Done(530 * MS, "idle", {"reply_chunks": 3}) and p.finished


def test_audio_from_before_the_turn_is_not_the_reply_and_bot_ready_is_recognized() -> None:
    p = _proto()
    p.turn_start_ns = 100
    loud = _pipecat_bytes(audio=LOUD, sample_rate=24000, num_channels=1)
    assert p.receive(loud, 99) == []  # a greeting on connect, queued before the turn
    assert not p.watch.started
    assert p.receive(loud, 100) == [Audio(100, LOUD, 24000)]
    assert is_bot_ready(_rtvi("bot-ready")) and not is_bot_ready(_rtvi("bot-started-speaking"))
    assert not is_bot_ready(loud) and not is_bot_ready(b"\xff")


def test_an_end_mark_ahead_of_the_audio_shortens_the_idle_wait() -> None:
    watch = ReplyWatch(idle_ns=1200 * MS, timeout_ns=5000 * MS)
    watch.audio(LOUD, 10 * MS)
    watch.end_mark(300 * MS)  # WebRTC: the data channel's bot-stopped-speaking came first
    watch.audio(LOUD, 50 * MS)  # the reply's last audio, still on the RTP path
    assert watch.deadline_ns() == 350 * MS and watch.reason == "bot-stopped-speaking"
    msg = rtvi_message(json.dumps({"label": "rtvi-ai", "type": "error", "data": {"error": "x"}}))
    assert msg is not None
    (failed,) = rtvi_events(msg, 1, watch, URL)
    assert isinstance(failed, Failed) and failed.reason == f"error from {URL}: x"
    assert rtvi_message('{"label": "other"}') is None and rtvi_message("not json") is None


def test_no_reply_fails_naming_the_last_event() -> None:
    p = _proto(timeout_ms=1500)
    assert p.receive(_rtvi("user-stopped-speaking"), 1 * MS) == [ServerSpeech(1 * MS, False)]
    p.input_ended(5 * MS)
    (failed,) = p.expire(1505 * MS)
    assert isinstance(failed, Failed)
    assert "no reply audio" in failed.reason and "1.5 s" in failed.reason
    assert "last event: RTVI user-stopped-speaking" in failed.reason


def test_a_reply_at_another_rate_fails_with_both_rates() -> None:
    p = _proto()
    (failed,) = p.receive(_pipecat_bytes(audio=LOUD, sample_rate=16000, num_channels=1), 1)
    assert isinstance(failed, Failed)
    assert "16000 Hz" in failed.reason and "expects 24000 Hz" in failed.reason
    assert "set output_rate = 16000" in failed.reason
    (stereo,) = p.receive(_pipecat_bytes(audio=LOUD, sample_rate=24000, num_channels=2), 2)
    assert isinstance(stereo, Failed) and "2-channel" in stereo.reason


def test_rtvi_events_text_and_interruptions() -> None:
    p = _proto()
    assert p.receive(_rtvi("user-started-speaking"), 1) == [ServerSpeech(1, True)]
    assert p.receive(_rtvi("bot-stopped-speaking"), 2) == []  # no reply yet: not its end
    assert p.receive(_rtvi("bot-ready"), 3) == []
    text = pb.Frame()
    text.text.text = "Hello"
    assert p.receive(text.SerializeToString(), 4) == [Delta(4, content="Hello")]
    tr = pb.Frame()
    tr.transcription.text = "turn on the lights"
    assert p.receive(tr.SerializeToString(), 5) == [Final(5, "turn on the lights")]
    inter = pb.Frame()
    inter.interruption.name = "x"
    # Pipecat sends one as the user starts speaking: before a reply it drops nothing.
    assert p.receive(inter.SerializeToString(), 6) == []
    p.receive(_pipecat_bytes(audio=LOUD, sample_rate=24000, num_channels=1), 7)
    assert p.receive(inter.SerializeToString(), 7) == [Interrupted(7)]  # a barge-in
    (done,) = p.receive(_rtvi("bot-stopped-speaking"), 8)
    assert isinstance(done, Done) and done.finish_reason == "bot-stopped-speaking"


def test_garbage_fails_the_turn_with_a_reason() -> None:
    p = _proto()
    (text,) = p.receive('{"event": "media"}', 1)
    assert isinstance(text, Failed) and "ProtobufFrameSerializer" in text.reason
    (bad,) = p.receive(b"\x12\xff", 2)
    assert isinstance(bad, Failed) and "not a pipecat protobuf Frame" in bad.reason
    assert p.receive(pb.Frame().SerializeToString(), 3) == []  # an empty Frame: nothing


def test_user_audio_goes_out_as_one_frame_each() -> None:
    p = _proto()
    (send,) = list(p.send_input(b"\x00\x01" * 320))
    assert pb.Frame.FromString(send.data).audio.sample_rate == 16000
    assert list(p.send_input(b"")) == []


def test_the_shipped_pipeline_and_bad_options(tmp_path: Path) -> None:
    from voicelat.files.pipeline import load_pipeline
    from voicelat.stages.pipecat_ws import PipecatWs

    p = load_pipeline(ROOT / "pipelines" / "agent-pipecat-ws.toml")
    stage = PipecatWs(p.agent or {})
    assert stage.kind == "agent" and stage.endpoint_by_server
    assert (stage.input_rate, stage.output_rate) == (16000, 24000)
    assert p.agent_traces.mapping == "pipecat"  # the engine's keys, not the stage's
    with pytest.raises(StageError, match="url must start with ws:// or wss://"):
        PipecatWs({"url": "http://127.0.0.1:1/"})
    with pytest.raises(ConfigError, match="unknown key"):
        PipecatWs({"url": "ws://127.0.0.1:1/", "traces": "pipecat"})
    with pytest.raises(StageError, match="reply_idle_ms must be at least 100"):
        PipecatWs({"url": "ws://127.0.0.1:1/", "reply_idle_ms": 50})
