"""Damaged input that reaches the stages: a websocket message nested too deeply for any JSON
parser fails the turn with a reason naming the stage (it escaped as a bare RecursionError);
and option values a run cannot use are refused when the pipeline is loaded, exit 2 with one
line (a huge integer, a URL of a scheme the stage cannot speak, unknown or negative ``vad``
settings, a file that is not UTF-8), not on every turn as an unreachable server (exit 3)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.server import ServerConnection, serve

from voicelat.core.base.errors import ConfigError, VoicelatError
from voicelat.core.measure.events import Failed
from voicelat.files.pipeline import load_pipeline
from voicelat.stages.deepgram import DeepgramSTT
from voicelat.stages.gemini_live import GeminiLive
from voicelat.stages.openai import OpenAILLM
from voicelat.stages.openai_realtime import OpenAIRealtime
from voicelat.stages.twilio import Twilio

NESTED = "[" * 100_000


async def _audio() -> AsyncIterable[bytes]:
    for _ in range(10):
        yield b"\x00\x00" * 320
        await asyncio.sleep(0.005)


async def test_a_nested_websocket_message_fails_the_turn_naming_the_stage(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VOICELAT_TEST_DG_KEY", "dg-key-0123456789")

    async def handler(ws: ServerConnection) -> None:
        await ws.recv()
        await ws.send(NESTED)
        await ws.wait_closed()

    async with serve(handler, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        stage = DeepgramSTT(
            {"base_url": f"ws://127.0.0.1:{port}", "api_key_env": "VOICELAT_TEST_DG_KEY"}
        )
        async with stage:
            events = await asyncio.wait_for(
                _collect(stage.transcribe(_audio())), 10
            )  # fmt: skip
    failed = [e for e in events if isinstance(e, Failed)]
    assert len(failed) == 1, events
    reason = failed[0].reason
    assert reason.startswith("deepgram-stt: a message from ws://127.0.0.1:"), reason
    assert "nested too deeply" in reason and "RecursionError" not in reason, reason


async def _collect(stream: Any) -> list[Any]:
    return [e async for e in stream]


def _refused(build: Any, *expected: str) -> str:
    with pytest.raises(VoicelatError) as info:
        build()
    message = str(info.value)
    assert info.value.exit_code == 2, message
    assert all(e in message for e in expected), message
    assert "\n" not in message
    return message


def test_a_huge_integer_option_is_a_range_error_not_an_overflow() -> None:
    huge = 10**400  # TOML integers have no size limit in tomllib; float() of this overflows
    message = _refused(
        lambda: OpenAILLM({"base_url": "http://127.0.0.1:9/v1", "model": "m", "temperature": huge}),
        "temperature must be a finite number",
        "401-digit integer",
    )
    assert len(message) < 200


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (lambda: Twilio({"url": "http://127.0.0.1:9/ws"}), "url must start with ws:// or wss://"),
        (
            lambda: OpenAIRealtime({"base_url": "ftp://127.0.0.1:9/v1"}),
            "base_url must start with ws:// or wss://, not 'ftp://",
        ),
        (
            lambda: OpenAIRealtime(
                {"base_url": "ws://127.0.0.1:9/v1", "vad": {"silence_duration_ms": -200}}
            ),
            "vad.silence_duration_ms must be an integer 0..60000 ms, not -200",
        ),
        (
            lambda: OpenAIRealtime(
                {"base_url": "ws://127.0.0.1:9/v1", "vad": {"silence_duration": 200}}
            ),
            "vad has unknown key(s) silence_duration",
        ),
        (
            lambda: OpenAIRealtime({"base_url": "ws://127.0.0.1:9/v1", "vad": {"threshold": 3}}),
            "vad.threshold must be a number 0..1",
        ),
        (
            lambda: GeminiLive({"base_url": "ws://127.0.0.1:9", "vad": {"silenceDurationMs": -1}}),
            "vad.silenceDurationMs must be an integer 0..60000 ms",
        ),
    ],
)
def test_a_table_the_stage_cannot_use_is_refused_at_load(build: Any, expected: str) -> None:
    _refused(build, expected)


def test_the_settings_real_pipelines_use_still_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOICELAT_TEST_S2S_KEY", "s2s-key-0123456789")
    key = {"api_key_env": "VOICELAT_TEST_S2S_KEY"}
    OpenAIRealtime(
        {
            "base_url": "wss://api.openai.com/v1",
            "vad": {"silence_duration_ms": 500, "prefix_padding_ms": 300, "threshold": 0.5},
        }
        | key
    )
    OpenAIRealtime({"turn_detection": "semantic_vad", "vad": {"eagerness": "low"}} | key)
    GeminiLive({"vad": {"silenceDurationMs": 300, "prefixPaddingMs": 20}} | key)
    Twilio({"url": "wss://agent.example/ws"})


def test_a_pipeline_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_bytes(b'[pipeline]\nname = "caf\xe9"\n')
    with pytest.raises(ConfigError) as info:
        load_pipeline(path)
    assert info.value.exit_code == 2
    assert str(info.value) == (
        f"{path}:2: not UTF-8 (byte 0xe9): TOML files are UTF-8; save it as UTF-8"
    )
