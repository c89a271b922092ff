"""Every text a server sends passes the secret scrubber before any output: its ``Server``
header (the summary's ``stages.*.server``), its error events, its close reasons, its error
bodies. Each networked stage kind runs one request against a real loopback server that sends
the key back everywhere (:mod:`tests.stages.leaky_ws_server`, :mod:`tests.stages.echo_server`);
what the summary would record of the stage and every failure reason must hold no key."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterable, AsyncIterator, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ROOT, voicelat
from tests.stages.echo_server import echo_server
from tests.stages.leaky_ws_server import leaky_ws_server
from tests.stages.test_secrets_robust import _one_fixture as one_fixture
from voicelat.core.measure.events import Failed, StageEvent
from voicelat.engine.servers import with_stack_servers
from voicelat.stages.base import load_stage_class

KEY_ENV = "VOICELAT_TEST_LEAKED_KEY"
KEY = "sk-leak-7f3a9c2e41b8d6f0KEYKEY99"

#: stage name -> (kind, the option naming the server, path after the server's root)
WS_STAGES: dict[str, tuple[str, str, str]] = {
    "deepgram-stt": ("stt", "base_url", ""),
    "deepgram-tts": ("tts", "base_url", ""),
    "elevenlabs-tts": ("tts", "base_url", ""),
    "cartesia-tts": ("tts", "base_url", ""),
    "assemblyai-stt": ("stt", "base_url", ""),
    "openai-realtime": ("s2s", "base_url", "/v1"),
    "gemini-live": ("s2s", "base_url", ""),
    "twilio": ("agent", "url", "/ws"),
    "pipecat-ws": ("agent", "url", "/ws-client"),
}
HTTP_STAGES: dict[str, tuple[str, str, str]] = {
    "openai": ("llm", "base_url", "/v1"),
    "openai-stt": ("stt", "base_url", "/v1"),
    "openai-tts": ("tts", "base_url", "/v1"),
    "inworld-tts": ("tts", "base_url", ""),
}


async def _audio() -> AsyncIterable[bytes]:
    for _ in range(25):
        yield b"\x00\x00" * 320
        await asyncio.sleep(0.005)


async def _texts() -> AsyncIterator[str]:
    yield "Hello there."


async def _request(stage: Any, kind: str) -> list[StageEvent]:
    if kind == "llm":
        return [e async for e in stage.complete("hi")]
    if kind == "stt":
        return [e async for e in stage.transcribe(_audio())]
    if kind == "tts":
        return [e async for e in stage.synthesize(_texts())]
    return [e async for e in stage.converse(_audio())]


async def _run(
    name: str, kind: str, options: dict[str, Any], *, key: bool = True
) -> tuple[dict[str, Any], list[str]]:
    """The stage's description as the summary records it, and every failure reason."""
    if key:
        options = {**options, "api_key_env": KEY_ENV}
    stage = load_stage_class(name, kind)(options)  # type: ignore[arg-type]
    reasons: list[str] = []

    async def go() -> None:
        async with stage:
            events = await _request(stage, kind)
            reasons.extend(e.reason for e in events if isinstance(e, Failed))

    try:
        await asyncio.wait_for(go(), 15)
    except Exception as exc:  # a startup refusal is a one-line error: it must be clean too
        reasons.append(str(exc))
    return with_stack_servers({kind: stage.describe()}, {})[kind], reasons


def _assert_clean(description: dict[str, Any], reasons: list[str]) -> None:
    text = json.dumps(description) + "\n".join(reasons)
    assert KEY not in text and KEY[:12] not in text, text


@pytest.mark.parametrize("name", sorted(WS_STAGES))
async def test_a_websocket_server_that_sends_the_key_back_leaks_nothing(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    kind, option, path = WS_STAGES[name]
    with leaky_ws_server(KEY) as base:
        description, reasons = await _run(name, kind, {option: base + path})
    # The server's words did arrive: its header is recorded (scrubbed), the turn failed.
    assert description.get("server") == "leaky/1.0 (***)", description
    assert reasons, f"{name}: the request did not fail against a server that closes it"
    _assert_clean(description, reasons)


@pytest.mark.parametrize("name", ["twilio", "pipecat-ws"])
async def test_a_key_the_run_never_sent_is_scrubbed_too(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent table names no key, but the bot's own provider key is in this environment (the
    agent runs on the same machine) and the bot quotes it: every provider's variable is
    registered, not only the ones a table names."""
    monkeypatch.setenv("VOICELAT_TEST_PROVIDER_API_KEY", KEY)
    kind, option, path = WS_STAGES[name]
    with leaky_ws_server(KEY) as base:
        description, reasons = await _run(name, kind, {option: base + path}, key=False)
    assert description.get("server") == "leaky/1.0 (***)", description
    assert reasons, name
    _assert_clean(description, reasons)


@pytest.mark.parametrize("name", sorted(HTTP_STAGES))
async def test_an_http_server_that_sends_the_key_back_leaks_nothing(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    kind, option, path = HTTP_STAGES[name]
    with echo_server() as base:
        description, reasons = await _run(name, kind, {option: base + path})
    assert "echo/1.0" in str(description.get("server")), description
    assert any("invalid credentials" in r for r in reasons), reasons
    _assert_clean(description, reasons)


async def test_a_webrtc_offer_refused_with_the_key_in_its_body_leaks_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("aiortc")
    monkeypatch.setenv(KEY_ENV, KEY)
    with echo_server() as base:
        description, reasons = await _run("webrtc", "agent", {"url": f"{base}/api/offer"})
    # The echo server's 500 body quotes the Authorization header 150 characters in: the old
    # 200-character cut halved the key before the scrubber saw it.
    assert any("HTTP 500" in r and "***" in r for r in reasons), reasons
    _assert_clean(description, reasons)


# -- whole runs: every output of `voicelat run` and `voicelat view --html` --------------------
def _pipelines(ws: str, http: str) -> dict[str, str]:
    """A cascade of websocket stages (and an HTTP LLM), a realtime model and a WebRTC agent,
    each pointed at a server that sends the key back."""
    key = f'api_key_env = "{KEY_ENV}"'
    return {
        "cascade": f"""
[pipeline]
name = "leaky-cascade"
[endpointing]
mode = "vad"
hangover_ms = 300
[stt]
stage = "deepgram-stt"
base_url = "{ws}"
{key}
[llm]
stage = "openai"
base_url = "{http}/v1"
model = "m"
{key}
[tts]
stage = "elevenlabs-tts"
base_url = "{ws}"
{key}
[turn]
timeout_s = 10
""",
        "s2s": f"""
[pipeline]
name = "leaky-s2s"
[s2s]
stage = "openai-realtime"
base_url = "{ws}/v1"
{key}
[turn]
timeout_s = 10
""",
        "agent": f"""
[pipeline]
name = "leaky-agent"
[agent]
stage = "webrtc"
url = "{http}/api/offer"
answer_timeout_s = 5
{key}
[turn]
timeout_s = 10
""",
    }


@contextmanager
def _collector() -> Iterator[tuple[str, list[bytes]]]:
    """A loopback OTLP/HTTP collector that keeps every request body it is sent."""
    bodies: list[bytes] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            return None

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            bodies.append(body)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", bodies
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.e2e
def test_whole_runs_against_servers_that_send_the_key_back_leak_nothing(tmp_path: Path) -> None:
    pytest.importorskip("aiortc")
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    fixtures = one_fixture(tmp_path)
    env = {**os.environ, KEY_ENV: KEY, "PYTHONPATH": str(ROOT)}
    with leaky_ws_server(KEY) as ws, echo_server() as http, _collector() as (otlp, bodies):
        procs: dict[str, subprocess.Popen[str]] = {}
        for name, text in _pipelines(ws, http).items():
            (tmp_path / f"{name}.toml").write_text(text)
            procs[name] = subprocess.Popen(
                [sys.executable, "-m", "voicelat", "run", "-p", str(tmp_path / f"{name}.toml"),
                 "--fixtures", str(fixtures), "--turns", "1", "--warmup", "0",
                 "--out", str(tmp_path / name), "--no-tui", "--otlp-endpoint", otlp],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
            )  # fmt: skip
        outputs = {name: p.communicate(timeout=120) for name, p in procs.items()}
    # Every turn's spans went out over OTLP (a failed turn's span carries its reason) ...
    assert any(b"invoke_agent" in b or b"speech_to_text" in b for b in bodies), len(bodies)
    for body in bodies:
        assert KEY.encode() not in body and KEY[:12].encode() not in body, "the key went to OTLP"
    for name, (stdout, stderr) in outputs.items():
        out = tmp_path / name
        assert "Traceback" not in stderr, stderr
        assert (out / "summary.json").is_file(), (name, stderr)
        html = voicelat("view", "--html", str(out), env={KEY_ENV: KEY})
        assert html.returncode == 0, html.stderr
        texts = {"stdout": stdout, "stderr": stderr, "view": html.stdout + html.stderr}
        texts |= {p.name: p.read_text(errors="replace") for p in out.rglob("*") if p.is_file()}
        assert {"turns.jsonl", "summary.json", "report.html"} <= set(texts), sorted(texts)
        # The servers' words did reach the results (the echo is real) ...
        assert "***" in texts["turns.jsonl"] + texts["summary.json"], (name, texts["turns.jsonl"])
        for where, text in texts.items():
            assert KEY not in text and KEY[:12] not in text, f"{name}: the key leaked into {where}"
