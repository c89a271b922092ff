"""The Gemini Live emulator passes the official ``google-genai`` SDK's live client.

The SDK always speaks TLS (``wss``, PROTOCOLS-AGENTS.md §2.1): the emulator is served with a
throwaway self-signed certificate for 127.0.0.1 (made by ``openssl``) that the client trusts
through ``HttpOptions(async_client_args={"ssl": ...})``. The SDK's own senders drive the
session (snake_case ``realtime_input``, its mixed-case ``setup``); every server message comes
back through the SDK's parser as a ``LiveServerMessage`` (a message it cannot map raises).
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ROOT
from voicelat.audio import frames, load_for_stage
from voicelat.emulate import Emulators

genai = pytest.importorskip("google.genai")

FIXTURE = ROOT / "fixtures" / "weather_paris.wav"
#: Replies at once; turnComplete not held for a playback nobody does here.
FAST = {"latency": {"first_audio": 20, "audio_chunk": 1}, "content": {"assume_playback": False}}
REPLY = "Sure. It is sunny and mild today."


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(server, client) TLS contexts for a self-signed 127.0.0.1 certificate."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert, key)
    client = ssl.create_default_context(cafile=str(cert))
    return server, client


def _client(em: Emulators, client_ctx: ssl.SSLContext, key: str = "gm-key") -> Any:
    from google.genai import types

    options = types.HttpOptions(
        base_url=em.root("gemini-live"), async_client_args={"ssl": client_ctx}
    )
    return genai.Client(api_key=key, http_options=options)


def _pcm_chunks(path: Path = FIXTURE, silence_ms: int = 1000) -> list[bytes]:
    pcm = load_for_stage(path, 16000)
    return [*frames(pcm, 20), *([bytes(640)] * (silence_ms // 20))]


async def _turn(session: Any) -> list[Any]:
    seen: list[Any] = []
    async for message in session.receive():
        seen.append(message)
        if message.server_content and message.server_content.turn_complete:
            break
    return seen


@pytest.mark.parametrize("manual", [False, True])
async def test_google_genai_live_session_turn(
    manual: bool, tls: tuple[ssl.SSLContext, ssl.SSLContext]
) -> None:
    from google.genai import types

    server_ctx, client_ctx = tls
    async with Emulators(["gemini-live"], profile={"gemini-live": FAST}, ssl=server_ctx) as em:
        client = _client(em, client_ctx)
        config = types.LiveConnectConfig(
            response_modalities=[types.Modality.AUDIO],
            output_audio_transcription=types.AudioTranscriptionConfig(),
            realtime_input_config=types.RealtimeInputConfig(
                automatic_activity_detection=types.AutomaticActivityDetection(disabled=manual)
            ),
        )
        async with client.aio.live.connect(
            model="gemini-live-2.5-flash-preview", config=config
        ) as session:
            if manual:
                await session.send_realtime_input(activity_start=types.ActivityStart())
            for chunk in _pcm_chunks():
                blob = types.Blob(data=chunk, mime_type="audio/pcm;rate=16000")
                await session.send_realtime_input(audio=blob)
            if manual:
                await session.send_realtime_input(activity_end=types.ActivityEnd())
            messages = await _turn(session)
        truth = em.truth.last("gemini-live", "live")
        assert em.errors == []
    audio = b"".join(
        p.inline_data.data
        for m in messages
        if m.server_content and m.server_content.model_turn
        for p in m.server_content.model_turn.parts or []
        if p.inline_data and p.inline_data.data
    )
    said = "".join(
        m.server_content.output_transcription.text or ""
        for m in messages
        if m.server_content and m.server_content.output_transcription
    )
    assert len(audio) > 24000  # over half a second of 24 kHz pcm16
    assert said == REPLY
    last = messages[-1]
    assert last.server_content.turn_complete
    assert last.usage_metadata is not None and last.usage_metadata.total_token_count > 0
    assert truth.detail["automatic_activity_detection"] is (not manual)
    assert ("activity_end_received" if manual else "endpoint_decided") in truth.marks


async def test_google_genai_sees_the_close_reason_of_an_unknown_model(
    tls: tuple[ssl.SSLContext, ssl.SSLContext],
) -> None:
    from google.genai import errors

    server_ctx, client_ctx = tls
    async with Emulators(["gemini-live"], profile={"gemini-live": FAST}, ssl=server_ctx) as em:
        client = _client(em, client_ctx)
        with pytest.raises(errors.APIError, match="models/no-such-model is not found") as info:
            async with client.aio.live.connect(model="no-such-model", config={}) as session:
                await _turn(session)
    assert info.value.code == 1008


async def test_google_genai_sees_interrupted_when_the_user_talks_over_the_reply(
    tls: tuple[ssl.SSLContext, ssl.SSLContext],
) -> None:
    from google.genai import types

    server_ctx, client_ctx = tls
    slow = {"latency": {"first_audio": 20, "audio_chunk": 40}}
    async with Emulators(["gemini-live"], profile={"gemini-live": slow}, ssl=server_ctx) as em:
        client = _client(em, client_ctx)
        config = types.LiveConnectConfig(response_modalities=[types.Modality.AUDIO])
        async with client.aio.live.connect(
            model="gemini-live-2.5-flash-preview", config=config
        ) as session:
            for chunk in _pcm_chunks(silence_ms=700):
                await session.send_realtime_input(
                    audio=types.Blob(data=chunk, mime_type="audio/pcm;rate=16000")
                )
            stream = session.receive()
            async for message in stream:
                if message.server_content and message.server_content.model_turn:
                    break  # the reply started
            for chunk in _pcm_chunks(silence_ms=0)[:60]:  # talk over it
                await session.send_realtime_input(
                    audio=types.Blob(data=chunk, mime_type="audio/pcm;rate=16000")
                )
            messages = await _turn(session)
        truth = em.truth.last("gemini-live", "live")
    flags = [m.server_content.interrupted for m in messages if m.server_content]
    assert True in flags
    assert messages[-1].server_content.turn_complete
    assert "interrupted_written" in truth.marks
