"""No API key in any output: a real loopback server that echoes ``Authorization`` in its error
bodies, against every HTTP stage and through a whole ``voicelat run`` (turns.jsonl,
summary.json, stdout, stderr); a key with a stray newline or a non-ASCII character is one clear
configuration error (exit 2), never "server not reachable" or a traceback."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterable, AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ROOT, voicelat
from tests.stages.echo_server import echo_server
from voicelat.core.base.errors import StageError
from voicelat.core.measure.events import Failed, StageEvent
from voicelat.stages.inworld import InworldTTS
from voicelat.stages.openai import OpenAILLM
from voicelat.stages.openai_audio import OpenAISTT, OpenAITTS

KEY_ENV = "VOICELAT_TEST_ECHOED_KEY"
KEY = "sk-live-SECRET0123456789abcdefSECRET"


async def _texts() -> AsyncIterator[str]:
    yield "Hello there."


async def _audio() -> AsyncIterable[bytes]:
    for _ in range(10):
        yield b"\x00\x00" * 320


async def _events(stage: Any, kind: str) -> list[StageEvent]:
    async def run() -> list[StageEvent]:
        async with stage:
            if kind == "llm":
                return [e async for e in stage.complete("hi")]
            if kind == "stt":
                return [e async for e in stage.transcribe(_audio())]
            return [e async for e in stage.synthesize(_texts())]

    return await asyncio.wait_for(run(), 10)


def _stage(name: str, base: str) -> tuple[Any, str]:
    opts: dict[str, Any] = {"api_key_env": KEY_ENV}
    if name == "openai":
        return OpenAILLM({**opts, "base_url": f"{base}/v1", "model": "m"}), "llm"
    if name == "openai-stt":
        return OpenAISTT({**opts, "base_url": f"{base}/v1"}), "stt"
    if name == "openai-tts":
        return OpenAITTS({**opts, "base_url": f"{base}/v1"}), "tts"
    return InworldTTS({**opts, "base_url": base}), "tts"


@pytest.mark.parametrize("name", ["openai", "openai-stt", "openai-tts", "inworld-tts"])
async def test_an_echoed_key_never_reaches_a_failure_reason(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    with echo_server() as base:
        stage, kind = _stage(name, base)
        events = await _events(stage, kind)
    failed = [e for e in events if isinstance(e, Failed)]
    assert failed, events
    reason = failed[0].reason
    # The server really echoed the header: the scrubbed form is there, the key is not.
    assert "***" in reason and "invalid credentials" in reason, reason
    assert KEY not in reason and KEY[:12] not in reason, reason


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (KEY + "\n", "stray newline"),
        ("sk-\u00e9t\u00e9-0123456789", "non-ASCII"),
        ("sk-01234\r\n56789", "control character"),
    ],
)
def test_a_malformed_key_is_a_config_error_naming_the_variable(
    value: str, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, value)
    with pytest.raises(StageError) as info:
        OpenAILLM({"base_url": "http://127.0.0.1:9/v1", "api_key_env": KEY_ENV, "model": "m"})
    message = str(info.value)
    assert info.value.exit_code == 2
    assert KEY_ENV in message and expected in message, message
    assert value.strip() not in message


def _echo_pipeline(tmp_path: Path, base: str) -> Path:
    text = f"""
[pipeline]
name = "echo"

[endpointing]
mode = "vad"
hangover_ms = 300

[stt]
stage = "openai-stt"
base_url = "{base}/v1"
api_key_env = "{KEY_ENV}"

[llm]
stage = "openai"
base_url = "{base}/v1"
model = "m"
api_key_env = "{KEY_ENV}"

[tts]
stage = "openai-tts"
base_url = "{base}/v1"
api_key_env = "{KEY_ENV}"

[turn]
timeout_s = 10
"""
    p = tmp_path / "echo.toml"
    p.write_text(text)
    return p


def _one_fixture(tmp_path: Path) -> Path:
    import json

    d = tmp_path / "fx"
    d.mkdir()
    manifest = json.loads((ROOT / "fixtures" / "manifest.json").read_text())
    entry = next(f for f in manifest["fixtures"] if f["id"] == "weather_paris")
    shutil.copy(ROOT / "fixtures" / entry["file"], d / entry["file"])
    (d / "manifest.json").write_text(json.dumps({**manifest, "fixtures": [entry]}))
    return d


def test_a_whole_run_against_an_echoing_server_leaks_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with echo_server() as base:
        proc = voicelat(
            "run",
            "--pipeline",
            str(_echo_pipeline(tmp_path, base)),
            "--fixtures",
            str(_one_fixture(tmp_path)),
            "--turns",
            "2",
            "--warmup",
            "0",
            "--out",
            str(out),
            "--no-tui",
            env={KEY_ENV: KEY},
            timeout=120,
        )
    assert "Traceback" not in proc.stderr, proc.stderr
    turns = (out / "turns.jsonl").read_text()
    summary = (out / "summary.json").read_text()
    # The echo did happen (the turns failed with the server's message) ...
    assert "invalid credentials" in turns, turns
    # ... and the key is nowhere.
    for where, text in (
        ("turns.jsonl", turns),
        ("summary.json", summary),
        ("stdout", proc.stdout),
        ("stderr", proc.stderr),
    ):
        assert KEY not in text, f"the key leaked into {where}"
        assert KEY[:12] not in text, f"part of the key leaked into {where}"


def test_a_run_with_a_newline_in_the_key_is_exit_2_not_unreachable(tmp_path: Path) -> None:
    with echo_server() as base:
        proc = voicelat(
            "run",
            "--pipeline",
            str(_echo_pipeline(tmp_path, base)),
            "--fixtures",
            str(_one_fixture(tmp_path)),
            "--out",
            str(tmp_path / "out"),
            "--no-tui",
            env={KEY_ENV: KEY + "\n"},
            timeout=120,
        )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("voicelat: error:")]
    assert len(errors) == 1 and "stray newline" in errors[0], proc.stderr
    assert "not reachable" not in proc.stderr
    assert KEY not in proc.stderr + proc.stdout
