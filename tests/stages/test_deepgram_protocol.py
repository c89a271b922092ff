"""Deepgram's sans-I/O protocols on literal frames (PROTOCOLS.md §3): no socket, no clock."""

from __future__ import annotations

import json

from voicelat.core.measure.events import (
    Audio,
    Done,
    EndOfTurn,
    Failed,
    Final,
    Partial,
    RequestSent,
    TextSent,
)
from voicelat.stages.protocols.deepgram import (
    CLOSE_STREAM,
    KEEPALIVE,
    DeepgramSTTProtocol,
    DeepgramTTSProtocol,
    audio_end_s,
    flush_answered,
    metadata_usage,
)

URL = "wss://api.deepgram.com/v1/listen"


def results(text: str, *, is_final: bool, speech_final: bool = False, fin: bool = False) -> str:
    """A ``Results`` frame as Deepgram sends it (abridged metadata)."""
    return json.dumps(
        {
            "type": "Results",
            "channel_index": [0, 1],
            "duration": 1.02,
            "start": 0.0,
            "is_final": is_final,
            "speech_final": speech_final,
            "from_finalize": fin,
            "channel": {"alternatives": [{"transcript": text, "confidence": 0.98, "words": []}]},
            "metadata": {"request_id": "5b7c", "model_info": {"name": "general-nova-3"}},
        }
    )


def test_interims_are_partials_of_the_finalized_text_plus_the_interim() -> None:
    p = DeepgramSTTProtocol(URL)
    assert p.receive(results("hello", is_final=False), 10) == [Partial(10, "hello")]
    assert p.receive(results("hello there", is_final=True), 20) == [Final(20, "hello there")]
    assert p.receive(results("how are", is_final=False), 30) == [Partial(30, "hello there how are")]
    assert p.receive(results("", is_final=False), 35) == []  # an empty interim says nothing
    assert not p.finished


def test_speech_final_is_final_and_end_of_turn_with_one_stamp() -> None:
    p = DeepgramSTTProtocol(URL)
    events = p.receive(results("What's the weather", is_final=True, speech_final=True), 40)
    assert events == [Final(40, "What's the weather"), EndOfTurn(40)]


def test_finalize_then_from_finalize_ends_the_request() -> None:
    p = DeepgramSTTProtocol(URL)
    p.receive(results("hello", is_final=False), 10)
    (end,) = list(p.send_end())
    assert json.loads(str(end.data)) == {"type": "Finalize"}
    assert end.event == RequestSent(0, "audio_end")
    assert p.input_ended(50) == []
    events = p.receive(results("hello", is_final=True, fin=True), 90)
    assert events == [Final(90, "hello"), Done(90)] and p.finished


def test_nothing_to_flush_after_a_speech_final() -> None:
    p = DeepgramSTTProtocol(URL)
    p.receive(results("hi", is_final=True, speech_final=True), 10)
    (end,) = list(p.send_end())
    assert end.data is None and end.event == RequestSent(0, "audio_end")  # reported, not sent
    assert p.input_ended(55) == [Done(55)] and p.finished


def test_close_stream_ends_on_metadata_after_the_audio() -> None:
    p = DeepgramSTTProtocol(URL, close_stream=True)
    (end,) = list(p.send_end())
    assert end.data == CLOSE_STREAM
    metadata = json.dumps({"type": "Metadata", "transaction_key": "deprecated", "duration": 2.0})
    assert p.receive(metadata, 5) == []  # before the end of audio: not ours to end on
    p.input_ended(6)
    # The closing Metadata's duration is what Deepgram processed (and bills): the usage.
    assert p.receive(metadata, 70) == [Done(70, usage={"audio_ms": 2000})]
    assert p.finished


def test_metadata_usage_is_the_duration_in_ms_and_nothing_without_one() -> None:
    assert metadata_usage({"type": "Metadata", "duration": 25.6049}) == {"audio_ms": 25605}
    assert metadata_usage({"type": "Metadata"}) == {}
    assert metadata_usage({"type": "Metadata", "duration": "2.0"}) == {}
    assert metadata_usage({"type": "Metadata", "duration": -1}) == {}
    assert metadata_usage({"type": "Metadata", "duration": True}) == {}


def test_utterance_end_only_after_words_of_this_request() -> None:
    late = json.dumps({"type": "UtteranceEnd", "channel": [0, 1], "last_word_end": 2.39})
    p = DeepgramSTTProtocol(URL)
    assert p.receive(late, 1) == []  # the previous utterance's
    p.receive(results("hi", is_final=False), 2)
    assert p.receive(late, 3) == [EndOfTurn(3)]


def test_error_frame_and_noise() -> None:
    p = DeepgramSTTProtocol(URL)
    error = {"type": "Error", "variant": "ServerError", "description": "NET-0000 timeout"}
    assert p.receive(json.dumps(error), 9) == [
        Failed(9, f"error from {URL}: NET-0000 timeout (ServerError)")
    ]
    assert p.receive(b"\x00\x01", 1) == []
    assert p.receive("not json", 1) == []
    assert p.receive(json.dumps({"type": "SpeechStarted", "timestamp": 0.52}), 1) == []
    assert "no final transcript from" in p.stalled(10) and "10 s" in p.stalled(10)


def test_audio_frames_go_out_as_they_are() -> None:
    (frame,) = list(DeepgramSTTProtocol(URL).send_input(b"\x01\x02"))
    assert frame.data == b"\x01\x02" and frame.event is None
    assert json.loads(KEEPALIVE) == {"type": "KeepAlive"}


def test_tts_speak_and_flush_per_piece_then_flushed_ends() -> None:
    p = DeepgramTTSProtocol("wss://api.deepgram.com/v1/speak", rate=24000)
    assert list(p.send_input("  ")) == []
    speak, flush = p.send_input("Hello there. ")
    assert json.loads(str(speak.data)) == {"type": "Speak", "text": "Hello there. "}
    assert speak.event == TextSent(0, "Hello there. ")
    assert json.loads(str(flush.data)) == {"type": "Flush"}
    # Raw linear16; an odd byte waits for the next frame.
    assert p.receive(b"\x01\x02\x03", 10) == [Audio(10, b"\x01\x02", 24000)]
    assert p.receive(b"\x04", 11) == [Audio(11, b"\x03\x04", 24000)]
    metadata = {"type": "Metadata", "request_id": "r", "model_name": "aura-2-thalia-en"}
    assert p.receive(json.dumps(metadata), 12) == []
    assert p.receive(json.dumps({"type": "Flushed", "sequence_id": 0}), 20) == []  # text goes on
    assert p.input_ended(25) == [Done(25)] and p.finished


def test_tts_ends_at_the_last_flushed_after_the_text_ended() -> None:
    p = DeepgramTTSProtocol("wss://x/v1/speak", rate=24000)
    list(p.send_input("One. "))
    list(p.send_input("Two. "))
    assert list(p.send_end()) == []
    assert p.input_ended(5) == []
    assert p.receive(json.dumps({"type": "Flushed", "sequence_id": 0}), 6) == []
    assert p.receive(json.dumps({"type": "Flushed", "sequence_id": 1}), 7) == [Done(7)]
    warning = {"type": "Warning", "description": "flush rate", "code": "W1"}
    assert p.receive(json.dumps(warning), 8) == []


# -- a provider cut-off's leftover: flushed, not waited for, never this turn's or the next's --
FRAME = bytes(640)  # 20 ms at 16 kHz


def timed(text: str, start: float, end: float, **flags: bool) -> str:
    """A ``Results`` frame with word times (stream seconds), as Deepgram sends them."""
    words = text.split()
    step = (end - start) / max(len(words), 1)
    items = [
        {"word": w, "start": start + i * step, "end": start + (i + 1) * step, "confidence": 0.9}
        for i, w in enumerate(words)
    ]
    body = json.loads(results(text, is_final=flags.get("is_final", True), **{
        k: v for k, v in flags.items() if k != "is_final"
    }))  # fmt: skip
    body.update(start=start, duration=end - start)
    body["channel"]["alternatives"][0]["words"] = items
    return json.dumps(body)


def test_audio_after_a_speech_final_is_flushed_but_not_waited_for() -> None:
    p = DeepgramSTTProtocol(URL)
    assert p.receive(results("Book me a flight", is_final=True, speech_final=True), 10) == [
        Final(10, "Book me a flight"),
        EndOfTurn(10),
    ]
    list(p.send_input(FRAME))  # the frame the caller had in hand when the end-of-turn came
    (end,) = list(p.send_end())
    assert json.loads(str(end.data)) == {"type": "Finalize"} and p.flushed_leftover
    assert p.input_ended(30) == [Done(30)] and p.finished  # the turn ended at its cut-off
    assert p.sent_bytes == len(FRAME)


def test_no_audio_after_the_speech_final_sends_nothing() -> None:
    p = DeepgramSTTProtocol(URL)
    p.receive(results("hi", is_final=True, speech_final=True), 10)
    (end,) = list(p.send_end())
    assert end.data is None and not p.flushed_leftover


def test_a_leftover_interim_does_not_reopen_a_turn_the_audio_ended_on() -> None:
    # The user spoke on before the speech_final arrived: an interim of the new utterance
    # comes after it, then the audio ends (provider endpointing stopped on the EndOfTurn).
    p = DeepgramSTTProtocol(URL)
    p.receive(results("Book me a flight", is_final=True, speech_final=True), 10)
    list(p.send_input(FRAME))
    assert p.receive(results("to", is_final=False), 15) == [Partial(15, "Book me a flight to")]
    list(p.send_input(FRAME))
    (end,) = list(p.send_end())
    assert json.loads(str(end.data)) == {"type": "Finalize"} and p.flushed_leftover
    assert p.input_ended(40) == [Done(40)]
    # Its answer (and anything else of the leftover) before the request's end is not this
    # turn's: the transcript stays what was final at the cut-off.
    assert p.receive(results("to Denver", is_final=True, fin=True), 45) == []


def test_a_caller_that_listened_on_after_the_speech_final_waits_for_the_flush() -> None:
    # Its own VAD ended the turn 200 ms after the speech_final (more than a caller stopping
    # on it sends): the words after it are the turn's, as before.
    p = DeepgramSTTProtocol(URL)
    p.receive(results("Book me a flight", is_final=True, speech_final=True), 10)
    for _ in range(10):
        list(p.send_input(FRAME))
    p.receive(results("to Denver", is_final=False), 20)
    (end,) = list(p.send_end())
    assert json.loads(str(end.data)) == {"type": "Finalize"} and not p.flushed_leftover
    assert p.input_ended(30) == []
    assert p.receive(results("to Denver", is_final=True, fin=True), 50) == [
        Final(50, "to Denver"),
        Done(50),
    ]


def test_results_whose_words_ended_before_the_request_are_ignored() -> None:
    # The socket carried 3.0 s of audio before this request: a result whose words end by
    # then is an earlier request's leftover (its speech_final must not end this turn).
    p = DeepgramSTTProtocol(URL, stream_start_s=3.0)
    assert p.receive(timed("Denver on", 2.6, 2.995, speech_final=True), 10) == []
    assert p.receive(timed("Denver", 2.7, 2.9, is_final=False), 11) == []
    assert p.text_final == "" and not p.nothing_pending
    # This request's own words end after its first audio.
    assert p.receive(timed("Will it be sunny", 3.4, 4.9, speech_final=True), 20) == [
        Final(20, "Will it be sunny"),
        EndOfTurn(20),
    ]
    # An empty from_finalize carries no words: never taken for an earlier one's.
    q = DeepgramSTTProtocol(URL, stream_start_s=3.0)
    list(q.send_end())
    q.input_ended(5)
    assert q.receive(timed("", 3.0, 3.0, fin=True), 30) == [Done(30)]


def test_result_times_and_the_finalize_answer_on_literal_frames() -> None:
    assert audio_end_s(json.loads(timed("hello there", 1.0, 1.5))) == 1.5
    assert audio_end_s(json.loads(results("hi", is_final=True))) == 1.02  # start + duration
    assert audio_end_s({"type": "Results"}) is None
    assert flush_answered(results("", is_final=True, fin=True))
    assert not flush_answered(results("hi", is_final=True, speech_final=True))
    assert not flush_answered(json.dumps({"type": "UtteranceEnd", "last_word_end": 2.4}))
    assert not flush_answered(b"\x00\x01") and not flush_answered("not json")
