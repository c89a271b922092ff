"""AssemblyAI's sans-I/O protocol on literal frames (PROTOCOLS.md §7): no socket, no clock."""

from __future__ import annotations

import json
from typing import Any

from voicelat.core.events import Done, EndOfTurn, Failed, Final, Partial, RequestSent
from voicelat.stages.protocols.assemblyai import TERMINATE, AssemblyAIProtocol

URL = "wss://streaming.assemblyai.com/v3/ws"
CHUNK = 16000 * 60 // 1000 * 2  # 60 ms of 16 kHz s16le


def turn(order: int, text: str, *, end: bool = False, formatted: bool = False) -> str:
    body: dict[str, Any] = {
        "type": "Turn",
        "turn_order": order,
        "turn_is_formatted": formatted,
        "end_of_turn": end,
        "transcript": text,
        "end_of_turn_confidence": 0.001037,
        "words": [{"start": 1920, "end": 2000, "text": "hi", "confidence": 0.87}],
        "utterance": "",
    }
    return json.dumps(body)


def test_frames_are_grouped_into_chunks_and_the_last_is_padded() -> None:
    p = AssemblyAIProtocol(URL, chunk_bytes=CHUNK)
    frame = bytes(640)  # 20 ms
    assert list(p.send_input(frame)) == [] and list(p.send_input(frame)) == []
    (chunk,) = list(p.send_input(frame))
    assert chunk.data == bytes(CHUNK)
    list(p.send_input(b"\x01\x00"))
    padded, force = p.send_end()
    assert padded.data == b"\x01\x00" + bytes(CHUNK - 2)
    assert json.loads(str(force.data)) == {"type": "ForceEndpoint"}
    assert force.event == RequestSent(0, "audio_end")


def test_turns_partials_then_end_of_turn_and_final() -> None:
    p = AssemblyAIProtocol(URL, chunk_bytes=CHUNK)
    begin = {"type": "Begin", "id": "de5d9927", "expires_at": 1759796682}
    assert p.receive(json.dumps(begin), 1) == []
    assert p.receive(turn(0, ""), 2) == []  # one non-final word, no finalized text yet
    assert p.receive(turn(0, "hi my"), 3) == [Partial(3, "hi my")]
    events = p.receive(turn(0, "hi my name is sonny", end=True), 4)
    assert events == [EndOfTurn(4), Final(4, "hi my name is sonny")]
    assert p.next_order == 1 and not p.finished
    # The server ended the turn: nothing to force at the end of the audio.
    (end,) = list(p.send_end())
    assert end.data is None and end.event == RequestSent(0, "audio_end")
    assert p.input_ended(9) == [Done(9)] and p.finished


def test_a_turn_ended_after_the_audio_ends_the_request() -> None:
    p = AssemblyAIProtocol(URL, chunk_bytes=CHUNK)
    p.receive(turn(0, "hi"), 1)
    assert p.input_ended(2) == []
    assert p.receive(turn(0, "hi", end=True), 5) == [EndOfTurn(5), Final(5, "hi"), Done(5)]


def test_wait_formatted_takes_the_formatted_copy_as_final() -> None:
    p = AssemblyAIProtocol(URL, chunk_bytes=CHUNK, wait_formatted=True)
    assert p.receive(turn(0, "hi my name is sonny", end=True), 4) == [EndOfTurn(4)]
    formatted = turn(0, "Hi, my name is Sonny.", end=True, formatted=True)
    assert p.receive(formatted, 6) == [Final(6, "Hi, my name is Sonny.")]


def test_turns_of_earlier_requests_are_ignored() -> None:
    p = AssemblyAIProtocol(URL, chunk_bytes=CHUNK, next_order=2)
    assert p.receive(turn(1, "Late formatted copy.", end=True, formatted=True), 1) == []
    assert p.receive(turn(2, "new"), 2) == [Partial(2, "new")]


def test_errors_and_other_messages() -> None:
    p = AssemblyAIProtocol(URL, chunk_bytes=CHUNK)
    error = {"type": "Error", "error_code": 3006, "error": "Invalid speech_model: nano"}
    assert p.receive(json.dumps(error), 7) == [
        Failed(7, f"error from {URL}: Invalid speech_model: nano (3006)")
    ]
    assert p.receive(json.dumps({"error": "Unauthorized"}), 8) == [
        Failed(8, f"error from {URL}: Unauthorized")
    ]
    termination = {"type": "Termination", "audio_duration_seconds": 12}
    assert p.receive(json.dumps(termination), 9) == []
    assert p.receive(b"\x00", 9) == []
    assert "no end of turn from" in p.stalled(3)
    assert json.loads(TERMINATE) == {"type": "Terminate"}
