"""The websocket provider emulators pass their official Python SDKs' basic streaming calls.

SDK versions are pinned in the ``dev`` extra (pyproject.toml). Base URLs are overridden as
PROTOCOLS.md §10 describes; the one exception is ElevenLabs' ``convert_realtime``, whose
client always builds a ``wss://`` URL from the base URL (``RealtimeTextToSpeechClient``
replaces the scheme in ``__init__``): the test sets its ``_ws_base_url`` to the emulator's
``ws://`` address, so the SDK's own websocket code runs unchanged, and also checks every
message against the SDK's models (docs/EMULATORS.md, "SDK conformance status").
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest
from websockets.asyncio.client import connect

from tests.helpers import ROOT
from voicelat.audio import frames, load_for_stage
from voicelat.emulate import Emulators
from voicelat.emulate.content import tone_speech

FIXTURE = ROOT / "fixtures" / "weather_paris.wav"
FIXTURE_TEXT = "What's the weather like in Paris today?"
FAST = {"latency": {"stt_partial": 20, "stt_final": 30, "tts_first_audio": 20, "tts_chunk": 1}}
FAST_STT = {"latency": {"stt_partial": 20, "stt_final": 30}}
FAST_TTS = {"latency": {"tts_first_audio": 20, "tts_chunk": 1}}


# -- Deepgram (deepgram-sdk, async client) ------------------------------------------------------
def _deepgram(em: Emulators, key: str = "dg-key") -> Any:
    from deepgram import AsyncDeepgramClient
    from deepgram.environment import DeepgramClientEnvironment

    root = em.root("deepgram")
    ws = root.replace("http://", "ws://")
    env = DeepgramClientEnvironment(base=root, production=ws, agent=ws, agent_rest=root)
    return AsyncDeepgramClient(api_key=key, environment=env)


async def test_deepgram_sdk_live_transcription() -> None:
    from deepgram.listen.v1.types import (
        ListenV1Metadata,
        ListenV1Results,
        ListenV1SpeechStarted,
        ListenV1UtteranceEnd,
    )

    pcm = load_for_stage(FIXTURE, 16000)
    async with Emulators(["deepgram"], profile={"deepgram": FAST}, seed=1) as em:
        client = _deepgram(em)
        got: list[Any] = []
        async with client.listen.v1.connect(
            model="nova-3",
            encoding="linear16",
            sample_rate=16000,
            interim_results=True,
            endpointing=300,
            utterance_end_ms=1000,
            vad_events=True,
        ) as conn:

            async def read() -> None:
                async for message in conn:
                    got.append(message)

            reader = asyncio.create_task(read())
            for frame in frames(pcm, 20):
                await conn.send_media(frame)
            await conn.send_finalize()
            await conn.send_close_stream()
            await asyncio.wait_for(reader, 5)  # ends cleanly on the server's close 1000
        ex = em.truth.last("deepgram", "listen")
        assert em.errors == []
    kinds = [type(m) for m in got]
    assert kinds[0] is ListenV1SpeechStarted and kinds[-1] is ListenV1Metadata
    assert ListenV1UtteranceEnd in kinds
    results = [m for m in got if isinstance(m, ListenV1Results)]
    interim = [r for r in results if not r.is_final]
    finals = [r for r in results if r.is_final and r.channel.alternatives[0].transcript]
    assert interim and interim[0].channel.alternatives[0].transcript == "What's"
    assert [r.channel.alternatives[0].transcript for r in finals] == [FIXTURE_TEXT]
    assert finals[0].speech_final is True
    assert any(r.from_finalize for r in results)
    assert ex.detail["query"]["interim_results"] == "true"  # SDK booleans arrive as strings


async def test_deepgram_sdk_aura_websocket_and_rest() -> None:
    from deepgram.speak.v1.types import SpeakV1Flushed, SpeakV1Metadata, SpeakV1Text

    async with Emulators(["deepgram"], profile={"deepgram": FAST}, seed=1) as em:
        client = _deepgram(em)
        audio = b""
        got: list[Any] = []
        async with client.speak.v1.connect(
            model="aura-2-thalia-en", encoding="linear16", sample_rate=24000
        ) as conn:
            await conn.send_text(SpeakV1Text(text="Hello there."))
            await conn.send_flush()
            async for message in conn:
                if isinstance(message, bytes):
                    audio += message
                    continue
                got.append(message)
                if isinstance(message, SpeakV1Flushed):
                    break
            await conn.send_close()
        rest = b"".join(
            [
                chunk
                async for chunk in client.speak.v1.audio.generate(
                    text="Hello there.",
                    model="aura-2-thalia-en",
                    encoding="linear16",
                    sample_rate=24000,
                    container="none",
                )
            ]
        )
        assert em.errors == []
    assert isinstance(got[0], SpeakV1Metadata) and got[-1] == SpeakV1Flushed(
        type="Flushed", sequence_id=0
    )
    assert audio == tone_speech("Hello there.", 24000) == rest


async def test_deepgram_sdk_sees_the_401() -> None:
    from deepgram.core.api_error import ApiError

    profile = {"deepgram": {"api_key_env": "VOICELAT_TEST_DG_PINNED"}}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VOICELAT_TEST_DG_PINNED", "right")
        async with Emulators(["deepgram"], profile=profile, seed=1) as em:
            with pytest.raises(ApiError) as err:
                async with _deepgram(em, "wrong").listen.v1.connect(model="nova-3"):
                    pass
    assert err.value.status_code == 401


# -- ElevenLabs (elevenlabs, sync client on a thread) -------------------------------------------
async def test_elevenlabs_sdk_realtime_and_http_stream() -> None:
    from elevenlabs.client import ElevenLabs

    async with Emulators(
        ["elevenlabs"], profile={"elevenlabs": FAST_TTS}, seed=1, thread=True
    ) as em:
        root = em.root("elevenlabs")

        def run() -> tuple[bytes, bytes]:
            client = ElevenLabs(api_key="el-key", base_url=root)
            tts = client.text_to_speech
            # The public API forces wss:// (see the module docstring): point the SDK's own
            # websocket code at the emulator's ws:// address.
            assert tts._ws_base_url.startswith("wss://")  # type: ignore[attr-defined]
            tts._ws_base_url = root.replace("http://", "ws://")  # type: ignore[attr-defined]
            realtime = b"".join(
                tts.convert_realtime(  # type: ignore[attr-defined]
                    voice_id="JBFqnCBsd6RMkjVDRZzb",
                    text=iter(["Hello there.", " How are you?"]),
                    model_id="eleven_flash_v2_5",
                    output_format="pcm_24000",
                )
            )
            http = b"".join(
                tts.stream(
                    voice_id="JBFqnCBsd6RMkjVDRZzb",
                    text="Hello there.",
                    model_id="eleven_flash_v2_5",
                    output_format="pcm_24000",
                )
            )
            return realtime, http

        realtime, http = await asyncio.to_thread(run)
        ex = em.truth.last("elevenlabs", "stream_input")
        assert em.errors == []
    # The SDK re-chunks at punctuation and adds a trailing space; its chunk schedule is [50],
    # so both pieces are generated at the end of input: one generation.
    assert realtime == tone_speech("Hello there.  How are you? ", 24000)
    assert http == tone_speech("Hello there.", 24000)
    assert ex.detail["close_code"] == 1000


async def test_elevenlabs_messages_match_the_sdk_models() -> None:
    from elevenlabs.types import AudioOutput, FinalOutput

    async with Emulators(["elevenlabs"], profile={"elevenlabs": FAST_TTS}, seed=1) as em:
        url = em.root("elevenlabs").replace("http://", "ws://")
        url += "/v1/text-to-speech/JBFqnCBsd6RMkjVDRZzb/stream-input?output_format=pcm_16000"
        messages: list[dict[str, Any]] = []
        async with connect(url, additional_headers={"xi-api-key": "k"}) as ws:
            await ws.send(json.dumps({"text": " ", "try_trigger_generation": True}))
            await ws.send(json.dumps({"text": "Hi there. ", "flush": True}))
            await ws.send(json.dumps({"text": ""}))
            async for raw in ws:
                messages.append(json.loads(raw))
    audio = [AudioOutput.model_validate(m) for m in messages[:-1]]
    final = FinalOutput.model_validate(messages[-1])
    assert final.is_final is True and all(a.audio for a in audio)
    assert audio[0].alignment is not None and audio[0].alignment.chars is not None
    assert b"".join(base64.b64decode(a.audio) for a in audio) == tone_speech("Hi there. ", 16000)


# -- Cartesia (cartesia[websockets], async client) ------------------------------------------------
async def test_cartesia_sdk_websocket_context() -> None:
    from cartesia import AsyncCartesia

    async with Emulators(["cartesia"], profile={"cartesia": FAST_TTS}, seed=1) as em:
        root = em.root("cartesia")
        client = AsyncCartesia(
            api_key="ca-key", base_url=root, websocket_base_url=root.replace("http://", "ws://")
        )
        events: list[Any] = []
        async with client.tts.websocket_connect() as conn:
            ctx = conn.context(
                model_id="sonic-3",
                voice={"mode": "id", "id": "6ccbfb76-1fc6-48f7-b71d-91ac6298247b"},
                output_format={"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000},
                add_timestamps=True,
            )
            await ctx.push("Hello there. ")
            await ctx.push("How are you?")
            await ctx.no_more_inputs()
            events = [e async for e in ctx.receive()]
            # The SDK's own defaults (pcm_f32le at 44.1 kHz, sonic-latest) are served too.
            ctx2 = conn.context(voice={"mode": "id", "id": "6ccbfb76-1fc6-48f7-b71d-91ac6298247b"})
            await ctx2.push("Hi.", continue_=False)
            f32 = [e async for e in ctx2.receive()]
        ex = em.truth.last("cartesia")
        assert em.errors == []
    chunks = [e for e in events if e.type == "chunk"]
    assert events[-1].type == "done" and any(e.type == "timestamps" for e in events)
    assert b"".join(c.audio for c in chunks) == tone_speech("Hello there. ", 24000) + tone_speech(
        "How are you?", 24000
    )
    f32_audio = b"".join(e.audio for e in f32 if e.type == "chunk")
    assert f32[-1].type == "done" and len(f32_audio) == len(tone_speech("Hi.", 44100)) * 2
    assert ex.detail["cartesia_version"] == "2026-08-14"


# -- AssemblyAI (assemblyai, sync streaming client on a thread) -----------------------------------
async def test_assemblyai_sdk_streaming() -> None:
    from assemblyai.streaming.v3 import (
        StreamingClient,
        StreamingClientOptions,
        StreamingEvents,
        StreamingParameters,
    )

    pcm = load_for_stage(FIXTURE, 16000)
    async with Emulators(
        ["assemblyai"], profile={"assemblyai": FAST_STT}, seed=1, thread=True
    ) as em:
        host = em.root("assemblyai").replace("http://", "ws://")
        got: list[tuple[str, Any]] = []

        def run() -> None:
            client = StreamingClient(StreamingClientOptions(api_key="aai-key", api_host=host))
            for event in (
                StreamingEvents.Begin,
                StreamingEvents.Turn,
                StreamingEvents.Termination,
                StreamingEvents.Error,
            ):
                client.on(event, lambda _c, e, name=event.name: got.append((name, e)))
            client.connect(StreamingParameters(sample_rate=16000, format_turns=True))
            client.stream(iter(frames(pcm, 100)))
            client.disconnect(terminate=True)

        await asyncio.to_thread(run)
        ex = em.truth.last("assemblyai")
        assert em.errors == []
    names = [n for n, _ in got]
    assert names[0] == "Begin" and names[-1] == "Termination" and "Error" not in names
    turns = [e for n, e in got if n == "Turn"]
    assert any(t.transcript == "what's" for t in turns)
    ended = [t for t in turns if t.end_of_turn]
    assert [(t.turn_is_formatted, t.transcript) for t in ended] == [
        (False, "what's the weather like in paris today"),
        (True, FIXTURE_TEXT),
    ]
    # The SDK's wire: the key without a scheme, Python booleans in the query.
    assert ex.detail["auth"] == "token"
    assert ex.detail["query"]["format_turns"] == "True"
