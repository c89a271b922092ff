"""Cartesia's sans-I/O protocol on literal frames (PROTOCOLS.md §5): no socket, no clock."""

from __future__ import annotations

import base64
import json

from voicelat.core.measure.events import Audio, Done, Failed, ProviderTiming, TextSent
from voicelat.stages.protocols.cartesia import CartesiaProtocol, CartesiaVoice

URL = "wss://api.cartesia.ai/tts/websocket"
VOICE = CartesiaVoice(model="sonic-3", voice="6ccbfb76", rate=24000, max_buffer_delay_ms=0)


def chunk(context: str, pcm: bytes, *, done: bool = False, step_time: object = 123) -> str:
    body = {
        "type": "chunk",
        "data": base64.b64encode(pcm).decode(),
        "done": done,
        "status_code": 206,
        "step_time": step_time,
        "context_id": context,
    }
    return json.dumps(body)


def test_pieces_are_continuations_of_one_context() -> None:
    p = CartesiaProtocol(URL, context="ctx-1", voice=VOICE)
    assert list(p.send_input("")) == []
    (piece,) = list(p.send_input("Hello, "))
    body = json.loads(str(piece.data))
    assert body == {
        "context_id": "ctx-1",
        "model_id": "sonic-3",
        "transcript": "Hello, ",
        "continue": True,
        "voice": {"mode": "id", "id": "6ccbfb76"},
        "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000},
        "max_buffer_delay_ms": 0,
    }
    assert piece.event == TextSent(0, "Hello, ")
    (end,) = list(p.send_end())
    last = json.loads(str(end.data))
    assert (last["transcript"], last["continue"]) == ("", False) and end.event is None


def test_chunks_of_this_context_are_audio_and_done_ends() -> None:
    p = CartesiaProtocol(URL, context="ctx-1", voice=VOICE)
    assert p.receive(chunk("ctx-1", b"\x01\x02\x03"), 10) == [
        Audio(10, b"\x01\x02", 24000),
        # The first chunk's step_time is the provider's clock, from the first text sent.
        ProviderTiming(10, "cartesia.step_time", 123.0),
    ]
    assert p.receive(chunk("ctx-0", b"\x01\x02"), 11) == []  # a previous turn's straggler
    # Later chunks' step times are not the first audio's: one report per request.
    assert p.receive(chunk("ctx-1", b"\x01\x02", step_time=7.5), 11) == [
        Audio(11, b"\x01\x02", 24000)
    ]
    stamps = {"type": "timestamps", "done": False, "context_id": "ctx-1"}
    assert p.receive(json.dumps(stamps), 12) == []
    done = {"type": "done", "done": True, "status_code": 206, "context_id": "ctx-1"}
    assert p.receive(json.dumps(done), 20) == [Done(20)] and p.finished


def test_a_last_chunk_marked_done_ends_too() -> None:
    p = CartesiaProtocol(URL, context="c", voice=VOICE)
    assert p.receive(chunk("c", b"\x05\x06", done=True), 3) == [
        Audio(3, b"\x05\x06", 24000),
        ProviderTiming(3, "cartesia.step_time", 123.0),
        Done(3),
    ]


def test_a_missing_or_bad_step_time_reports_no_provider_clock() -> None:
    for bad in (None, "12", True, -4):
        p = CartesiaProtocol(URL, context="c", voice=VOICE)
        events = p.receive(chunk("c", b"\x05\x06", step_time=bad), 3)
        assert events == [Audio(3, b"\x05\x06", 24000)], bad


def test_errors_of_this_context_or_none_fail() -> None:
    p = CartesiaProtocol(URL, context="ctx-1", voice=VOICE)
    error = {
        "type": "error",
        "done": True,
        "title": "Invalid model",
        "message": "model sonic-9 not found",
        "error_code": "model_not_found",
        "status_code": 400,
    }
    reason = f"error from {URL}: Invalid model: model sonic-9 not found (model_not_found)"
    assert p.receive(json.dumps(error), 5) == [Failed(5, reason)]
    assert p.receive(json.dumps({**error, "context_id": "other"}), 6) == []
    bad = {"type": "chunk", "data": "!!!", "context_id": "ctx-1"}
    assert p.receive(json.dumps(bad), 7) == [Failed(7, f"{URL}: chunk data is not valid base64")]
