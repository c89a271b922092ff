"""ElevenLabs' sans-I/O protocol on literal frames (PROTOCOLS.md §4a): no socket, no clock."""

from __future__ import annotations

import base64
import json

from voicelat.core.measure.events import Audio, Done, Failed, TextSent
from voicelat.stages.protocols.elevenlabs import ElevenLabsProtocol, init_message

URL = "wss://api.elevenlabs.io/v1/text-to-speech/JBFq/stream-input"


def test_init_message_carries_the_settings_allowed_only_there() -> None:
    assert json.loads(init_message()) == {"text": " "}
    init = json.loads(init_message({"stability": 0.5}, (120, 160, 250, 290)))
    assert init == {
        "text": " ",
        "voice_settings": {"stability": 0.5},
        "generation_config": {"chunk_length_schedule": [120, 160, 250, 290]},
    }


def test_each_piece_ends_with_a_space_and_is_flushed() -> None:
    p = ElevenLabsProtocol(URL, rate=24000)
    assert list(p.send_input(" ")) == []
    (piece,) = list(p.send_input("Hello world."))
    assert json.loads(str(piece.data)) == {"text": "Hello world. ", "flush": True}
    assert piece.event == TextSent(0, "Hello world.")
    (end,) = list(p.send_end())
    assert json.loads(str(end.data)) == {"text": ""}
    lazy = ElevenLabsProtocol(URL, rate=24000, flush_each=False)
    (piece,) = list(lazy.send_input("Hi. "))
    assert json.loads(str(piece.data)) == {"text": "Hi. ", "try_trigger_generation": True}


def test_audio_then_is_final() -> None:
    p = ElevenLabsProtocol(URL, rate=16000)
    audio = {
        "audio": base64.b64encode(b"\x01\x02\x03").decode(),
        "normalizedAlignment": {"chars": ["H"], "charStartTimesMs": [0], "charDurationsMs": [3]},
        "alignment": {"chars": ["H"], "charStartTimesMs": [0], "charDurationsMs": [3]},
    }
    assert p.receive(json.dumps(audio), 10) == [Audio(10, b"\x01\x02", 16000)]
    assert p.receive(json.dumps({"isFinal": True, "audio": None}), 20) == [Done(20)]
    assert p.finished


def test_error_payloads_fail_with_the_providers_message() -> None:
    p = ElevenLabsProtocol(URL, rate=24000)
    error = {
        "message": "Have not received a new text input within the timeout of 20.0 seconds.",
        "error": "input_timeout_exceeded",
        "code": 1008,
    }
    (failed,) = p.receive(json.dumps(error), 5)
    assert failed == Failed(
        5,
        f"error from {URL}: Have not received a new text input within the timeout of 20.0 "
        "seconds. (input_timeout_exceeded)",
    )
    assert p.receive(json.dumps({"audio": "%%%"}), 6) == [
        Failed(6, f"{URL}: audio is not valid base64")
    ]
    assert p.receive(b"\x00", 7) == [] and p.receive("[1, 2]", 7) == []
    assert "no audio from" in p.stalled(10)
