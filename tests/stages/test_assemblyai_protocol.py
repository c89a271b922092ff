"""AssemblyAI's sans-I/O protocol on literal frames (PROTOCOLS.md §7): no socket, no clock."""

from __future__ import annotations

import json
from typing import Any

from voicelat.core.measure.events import Done, EndOfTurn, Failed, Final, Partial, RequestSent
from voicelat.stages.protocols.assemblyai import (
    TERMINATE,
    AssemblyAIProtocol,
    LeftoverTurn,
    words_end_ms,
)

URL = "wss://streaming.assemblyai.com/v3/ws"
CHUNK = 16000 * 60 // 1000 * 2  # 60 ms of 16 kHz s16le


def turn(
    order: int,
    text: str,
    *,
    end: bool = False,
    formatted: bool = False,
    words: tuple[int, int] = (1920, 2000),
) -> str:
    body: dict[str, Any] = {
        "type": "Turn",
        "turn_order": order,
        "turn_is_formatted": formatted,
        "end_of_turn": end,
        "transcript": text,
        "end_of_turn_confidence": 0.001037,
        "words": [{"start": words[0], "end": words[1], "text": "hi", "confidence": 0.87}],
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


# -- a provider cut-off's leftover: ended, not waited for, never this turn's or the next's --
FRAME = bytes(640)  # 20 ms at 16 kHz


def test_audio_after_the_end_of_turn_is_force_ended_but_not_waited_for() -> None:
    p = AssemblyAIProtocol(URL, chunk_bytes=CHUNK)
    assert p.receive(turn(0, "book me a flight", end=True), 10) == [
        EndOfTurn(10),
        Final(10, "book me a flight"),
    ]
    list(p.send_input(FRAME))  # the frame the caller had in hand when the end of turn came
    padded, force = p.send_end()
    assert padded.data == FRAME + bytes(CHUNK - len(FRAME))
    assert json.loads(str(force.data)) == {"type": "ForceEndpoint"} and p.flushed_leftover
    assert force.event == RequestSent(0, "audio_end")
    assert p.input_ended(30) == [Done(30)] and p.finished
    assert p.sent_bytes == CHUNK  # the stream time the session carries on


def test_a_leftover_turn_does_not_reopen_a_turn_the_audio_ended_on() -> None:
    # The user spoke on before the end of turn arrived: the next turn's first Turn comes
    # after it, then the audio ends (provider endpointing stopped on the EndOfTurn).
    p = AssemblyAIProtocol(URL, chunk_bytes=CHUNK)
    p.receive(turn(0, "book me a flight", end=True), 10)
    list(p.send_input(FRAME))
    assert p.receive(turn(1, ""), 12) == [] and p.open_turn
    list(p.send_input(FRAME))
    _, force = p.send_end()
    assert json.loads(str(force.data)) == {"type": "ForceEndpoint"} and p.flushed_leftover
    assert p.input_ended(30) == [Done(30)]
    # The ForceEndpoint's answer before the request's end is not this turn's.
    assert p.receive(turn(1, "to", end=True), 40) == []


def test_a_caller_that_listened_on_after_the_end_of_turn_waits_for_it() -> None:
    # Its own VAD ended the turn 200 ms after the server's end of turn: the words after it
    # are the turn's, as before.
    p = AssemblyAIProtocol(URL, chunk_bytes=CHUNK)
    p.receive(turn(0, "book me a flight", end=True), 10)
    for _ in range(10):
        list(p.send_input(FRAME))
    p.receive(turn(1, "to"), 20)
    (_, force) = p.send_end()
    assert json.loads(str(force.data)) == {"type": "ForceEndpoint"} and not p.flushed_leftover
    assert p.input_ended(30) == []
    assert p.receive(turn(1, "to denver", end=True), 50) == [
        EndOfTurn(50),
        Final(50, "to denver"),
        Done(50),
    ]


def test_turns_whose_words_ended_before_the_request_are_ignored() -> None:
    # 3000 ms of audio went over the session before this request: the leftover's turn (its
    # words end by then) must not end it; its formatted copy is skipped by its order.
    p = AssemblyAIProtocol(URL, chunk_bytes=CHUNK, next_order=1, stream_start_ms=3000)
    assert p.receive(turn(1, "to", words=(2700, 2990)), 1) == []
    assert p.receive(turn(1, "to", end=True, words=(2700, 3005)), 2) == []
    assert p.next_order == 2 and p.ended == 0
    assert p.receive(turn(1, "To.", end=True, formatted=True, words=(2700, 3005)), 3) == []
    assert p.receive(turn(2, "will it", words=(3400, 3800)), 4) == [Partial(4, "will it")]
    # A Turn without words is not judged by time.
    assert p.receive(turn(2, "will it be", words=(3400, 3800)).replace(
        '"words": [{"start": 3400, "end": 3800, "text": "hi", "confidence": 0.87}]',
        '"words": []',
    ), 5) == [Partial(5, "will it be")]  # fmt: skip


def test_leftover_turn_reader_and_word_times_on_literal_frames() -> None:
    reader = LeftoverTurn(next_order=1)
    assert not reader.answered(turn(1, "to"))  # a partial: the answer is still to come
    assert not reader.answered(turn(0, "Book me a flight.", end=True, formatted=True))
    assert not reader.answered(json.dumps({"type": "Termination"})) and not reader.answered(b"")
    assert reader.answered(turn(1, "to", end=True)) and reader.next_order == 2
    assert words_end_ms(json.loads(turn(0, "hi", words=(100, 350)))) == 350
    assert words_end_ms({"type": "Turn", "words": []}) is None
