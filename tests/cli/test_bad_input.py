"""Bad input: one clear line on stderr, a documented exit code, no traceback, no server started."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.helpers import ROOT, voicelat

LOCAL = (ROOT / "pipelines" / "local.toml").read_text()


def _one_clear_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("voicelat: error:")]
    assert len(errors) == 1, stderr
    return errors[0]


def _fixture_dir(tmp_path: Path, wav_bytes: bytes | None = None, name: str = "a.wav") -> Path:
    d = tmp_path / "fx"
    d.mkdir()
    if wav_bytes is not None:
        (d / name).write_bytes(wav_bytes)
    return d


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _no_stack_pipeline(tmp_path: Path, **replace: str) -> Path:
    """The local pipeline without the embedded stack, its servers on ports nobody listens on."""
    text = LOCAL.replace('stack = "local"\n', "")
    text = text.replace(
        'stage = "wyoming-stt"\n',
        f'stage = "wyoming-stt"\nurl = "tcp://127.0.0.1:{_closed_port()}"\n',
    )
    text = text.replace(
        'stage = "wyoming-tts"\n',
        f'stage = "wyoming-tts"\nurl = "tcp://127.0.0.1:{_closed_port()}"\n',
    )
    text = text.replace(
        'stage = "openai"\n',
        f'stage = "openai"\nbase_url = "http://127.0.0.1:{_closed_port()}/v1"\n',
    )
    for old, new in replace.items():
        text = text.replace(old, new)
    p = tmp_path / "p.toml"
    p.write_text(text)
    return p


def test_missing_wav_named_in_manifest(tmp_path: Path) -> None:
    d = _fixture_dir(tmp_path)
    (d / "manifest.json").write_text(json.dumps({"fixtures": [{"file": "gone.wav", "text": "hi"}]}))
    proc = voicelat("run", "--fixtures", str(d), "--out", str(tmp_path / "o"))
    assert proc.returncode == 2
    line = _one_clear_line(proc.stderr)
    assert "gone.wav" in line and "does not exist" in line
    assert "embedded stack" not in proc.stderr  # failed before starting any server


def test_not_a_wav(tmp_path: Path) -> None:
    d = _fixture_dir(tmp_path, b"ID3\x03\x00\x00\x00 this is an mp3, honest", "song.wav")
    proc = voicelat("run", "--fixtures", str(d), "--out", str(tmp_path / "o"))
    assert proc.returncode == 2
    line = _one_clear_line(proc.stderr)
    assert "song.wav" in line
    assert "embedded stack" not in proc.stderr


def test_empty_audio(tmp_path: Path) -> None:
    import wave

    d = _fixture_dir(tmp_path)
    with wave.open(str(d / "empty.wav"), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
    proc = voicelat("run", "--fixtures", str(d), "--out", str(tmp_path / "o"))
    assert proc.returncode == 2
    assert "empty.wav" in _one_clear_line(proc.stderr)


def test_missing_fixtures_dir(tmp_path: Path) -> None:
    proc = voicelat("run", "--fixtures", str(tmp_path / "nope"))
    assert proc.returncode == 2
    assert "does not exist" in _one_clear_line(proc.stderr)


def test_malformed_pipeline_names_the_line(tmp_path: Path) -> None:
    p = tmp_path / "bad.toml"
    p.write_text(LOCAL.replace("max_tokens = 40", "max_tokens = = 40"))
    proc = voicelat("run", "--pipeline", str(p))
    assert proc.returncode == 2
    line = _one_clear_line(proc.stderr)
    expected_line = LOCAL.splitlines().index("max_tokens = 40") + 1
    assert str(p) in line and str(expected_line) in line


def test_incomplete_pipeline_names_the_table(tmp_path: Path) -> None:
    p = tmp_path / "p.toml"
    start = LOCAL.index("[llm]")
    end = LOCAL.index("[tts]")
    p.write_text(LOCAL[:start] + LOCAL[end:])
    proc = voicelat("run", "--pipeline", str(p))
    assert proc.returncode == 2
    assert "[llm]" in _one_clear_line(proc.stderr)


def test_wrong_type_names_key_and_line(tmp_path: Path) -> None:
    p = tmp_path / "p.toml"
    text = LOCAL.replace("hangover_ms = 500", 'hangover_ms = "long"')
    p.write_text(text)
    proc = voicelat("run", "--pipeline", str(p))
    assert proc.returncode == 2
    line = _one_clear_line(proc.stderr)
    lineno = next(n for n, ln in enumerate(text.splitlines(), 1) if ln.startswith("hangover_ms"))
    assert "[endpointing] hangover_ms" in line and f"{p}:{lineno}:" in line


def test_unknown_stage_lists_known_ones(tmp_path: Path) -> None:
    p = tmp_path / "p.toml"
    p.write_text(LOCAL.replace('stage = "wyoming-tts"', 'stage = "wyoming-ttz"'))
    proc = voicelat("run", "--pipeline", str(p))
    assert proc.returncode == 2
    line = _one_clear_line(proc.stderr)
    assert "wyoming-ttz" in line and "wyoming-tts" in line


def test_unknown_stage_option(tmp_path: Path) -> None:
    p = tmp_path / "p.toml"
    p.write_text(LOCAL.replace("max_tokens = 40", "max_tokens = 40\nmax_tokenz = 3"))
    proc = voicelat("run", "--pipeline", str(p))
    assert proc.returncode == 2
    line = _one_clear_line(proc.stderr)
    assert "max_tokenz" in line and "valid keys" in line


def test_missing_api_key_variable_is_named_never_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = tmp_path / "p.toml"
    p.write_text(
        LOCAL.replace("max_tokens = 40", 'max_tokens = 40\napi_key_env = "VOICELAT_TEST_KEY"')
    )
    monkeypatch.delenv("VOICELAT_TEST_KEY", raising=False)
    proc = voicelat("run", "--pipeline", str(p))
    assert proc.returncode == 2
    line = _one_clear_line(proc.stderr)
    assert "VOICELAT_TEST_KEY" in line and "not set" in line


def test_secret_in_pipeline_file_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "p.toml"
    p.write_text(LOCAL.replace("max_tokens = 40", 'max_tokens = 40\napi_key = "sk-live-123456"'))
    proc = voicelat("run", "--pipeline", str(p))
    assert proc.returncode == 2
    line = _one_clear_line(proc.stderr)
    assert "api_key" in line and "sk-live-123456" not in proc.stderr + proc.stdout


def test_unreachable_server_names_the_url_and_the_fix(tmp_path: Path) -> None:
    p = _no_stack_pipeline(tmp_path)
    proc = voicelat("run", "--pipeline", str(p), "--out", str(tmp_path / "o"), timeout=120)
    assert proc.returncode == 3
    line = _one_clear_line(proc.stderr)
    assert "not reachable at tcp://127.0.0.1:" in line and "voicelat stack up" in line


def test_results_dir_not_empty(tmp_path: Path) -> None:
    out = tmp_path / "o"
    out.mkdir()
    (out / "x").write_text("keep me")
    proc = voicelat("run", "--out", str(out))
    assert proc.returncode == 2
    assert "not empty" in _one_clear_line(proc.stderr)
    assert (out / "x").read_text() == "keep me"


def test_unknown_flag_is_a_usage_error() -> None:
    proc = voicelat("run", "--turns", "zero")
    assert proc.returncode == 2
    assert "--turns" in _one_clear_line(proc.stderr)


def test_port_in_use_names_the_port_and_the_fix(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        env = {
            "VOICELAT_STATE_DIR": str(tmp_path / "state"),
            "VOICELAT_STT_PORT": str(port),
            "VOICELAT_TTS_PORT": str(_closed_port()),
            "VOICELAT_LLM_PORT": str(_closed_port()),
        }
        proc = voicelat("stack", "up", env=env, timeout=120)
    if "not installed" in proc.stderr:
        pytest.skip("the local extra is not installed")
    assert proc.returncode == 3
    line = _one_clear_line(proc.stderr)
    assert str(port) in line and ("--stt-port" in line or "VOICELAT_STT_PORT" in line)
