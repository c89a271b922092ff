"""``voicelat serve --tls``: an official TLS-only SDK (google-genai's live client) connects
to an emulator in another process with the certificate serve printed; a plain-http request at
the TLS port gets a clear 400, and a TLS client at a plain port a TLS alert at once, each
logged in one line (before: a 10 s hang with nothing logged)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import ROOT
from voicelat.emulate import Emulators

genai = pytest.importorskip("google.genai")


def _serve(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "voicelat", "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


async def _text_turn(root: str, cert: Path) -> str:
    from google.genai import types

    options = types.HttpOptions(
        base_url=root, async_client_args={"ssl": ssl.create_default_context(cafile=str(cert))}
    )
    client = genai.Client(api_key="gm-key", http_options=options)
    config = types.LiveConnectConfig(
        response_modalities=[types.Modality.AUDIO],
        output_audio_transcription=types.AudioTranscriptionConfig(),
    )
    said = ""
    async with asyncio.timeout(20):
        async with client.aio.live.connect(
            model="gemini-live-2.5-flash-preview", config=config
        ) as session:
            await session.send_client_content(
                turns=types.Content(role="user", parts=[types.Part(text="hi")])
            )
            async for message in session.receive():
                sc = message.server_content
                if sc and sc.output_transcription:
                    said += sc.output_transcription.text or ""
                if sc and sc.turn_complete:
                    break
    return said


def test_serve_tls_lets_an_outside_sdk_connect_and_answers_plain_http_clearly() -> None:
    proc = _serve("gemini-live", "--tls", "--port", "0")
    try:
        assert proc.stdout is not None and proc.stderr is not None
        name, url = proc.stdout.readline().split()
        assert name == "gemini-live" and url.startswith("https://127.0.0.1:")
        line = proc.stderr.readline()
        found = re.search(r"tls certificate (\S+)", line)
        assert found, line
        cert = Path(found.group(1))
        assert cert.is_file() and "BEGIN CERTIFICATE" in cert.read_text()
        said = asyncio.run(_text_turn(url, cert))
        assert said == "Sure. It is sunny and mild today."
        t0 = time.monotonic()
        r = httpx.get(url.replace("https://", "http://") + "/", timeout=5)
        assert time.monotonic() - t0 < 3
        assert r.status_code == 400 and "serves TLS only" in r.text and "https://" in r.text
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert "a plain-http client connected to this TLS-only emulator" in err
    assert "Traceback" not in err
    assert not cert.exists()  # throwaway: removed when serve stopped


async def test_a_tls_client_at_a_plain_port_fails_fast_with_a_logged_line() -> None:
    logged: list[str] = []
    async with Emulators(["gemini-live"], log=logged.append) as em:
        host, port = em.root("gemini-live").removeprefix("http://").split(":")
        loop = asyncio.get_running_loop()

        def handshake() -> Any:
            ctx = ssl.create_default_context()
            with (
                socket.create_connection((host, int(port)), timeout=5) as raw,
                ctx.wrap_socket(raw, server_hostname=host),
            ):
                pass

        t0 = time.monotonic()
        with pytest.raises(ssl.SSLError, match=r"HANDSHAKE_FAILURE|handshake failure"):
            await loop.run_in_executor(None, handshake)
        assert time.monotonic() - t0 < 3
        assert em.errors == []
    assert len(logged) == 1 and "TLS client (https/wss) connected" in logged[0]
    assert "voicelat serve --tls" in logged[0]
