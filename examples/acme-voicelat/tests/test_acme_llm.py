"""acme-llm in real turns: `voicelat run` against voicelat's OpenAI emulator (`voicelat serve`).

Run from this directory after `pip install -e .`:  python -m pytest tests -q
The emulator serves STT and TTS too, so the whole turn (fixture audio in, reply audio out)
runs on loopback with no key and no network.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

VOICELAT = [sys.executable, "-m", "voicelat"]

PIPELINE = """
[pipeline]
name = "acme-emulated"

[endpointing]
mode = "vad"
hangover_ms = 300

[stt]
stage = "openai-stt"
base_url = "{url}"
api_key_env = "VOICELAT_EMULATOR_KEY"

[llm]
stage = "acme-llm"
base_url = "{llm_url}"
model = "acme-mini"
max_tokens = 60
{extra}

[tts]
stage = "openai-tts"
base_url = "{url}"
api_key_env = "VOICELAT_EMULATOR_KEY"
"""


@pytest.fixture
def emulator(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """`voicelat serve openai` on an ephemeral port; yields its base URL and truth file."""
    truth = tmp_path / "truth.jsonl"
    proc = subprocess.Popen(
        [*VOICELAT, "serve", "openai", "--port", "0", "--seed", "1", "--truth", str(truth)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        name, url = proc.stdout.readline().split()  # "openai http://127.0.0.1:PORT/v1"
        assert name == "openai"
        yield url, truth
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _run(
    tmp_path: Path, url: str, extra: str = "", llm_url: str | None = None
) -> subprocess.CompletedProcess[str]:
    pipeline = tmp_path / "acme.toml"
    pipeline.write_text(PIPELINE.format(url=url, llm_url=llm_url or url, extra=extra))
    env = {**os.environ, "VOICELAT_EMULATOR_KEY": "any-key", "ACME_API_KEY": "any-key"}
    argv = [
        "run",
        "-p",
        str(pipeline),
        "-n",
        "2",
        "-w",
        "0",
        "--no-tui",
        "-o",
        str(tmp_path / "run"),
    ]
    return subprocess.run(
        [*VOICELAT, *argv], env=env, capture_output=True, text=True, timeout=180, check=False
    )


def test_acme_llm_measures_real_turns(tmp_path: Path, emulator: tuple[str, Path]) -> None:
    url, truth = emulator
    result = _run(tmp_path, url, 'system = "Answer in one sentence."')
    assert result.returncode == 0, result.stderr
    lines = (tmp_path / "run" / "turns.jsonl").read_text().splitlines()
    turns = [json.loads(line) for line in lines]
    assert len(turns) == 2
    # What the emulator received is what acme-llm sent (the options reached the request),
    # and its ground truth bounds the measurement: voicelat's first token is stamped after the
    # emulator wrote it (one clock, CLOCK_MONOTONIC, in both processes), and soon after.
    records = [json.loads(line) for line in truth.read_text().splitlines()]
    chats = [r for r in records if r["endpoint"] == "chat"]
    assert [c["model"] for c in chats] == ["acme-mini", "acme-mini"]
    for turn, chat in zip(turns, chats, strict=True):
        assert not turn["failed"], turn["failure"]
        assert turn["reply"]  # the deltas acme-llm yielded, joined by voicelat
        assert turn["segments_ns"]["llm_ttft"] > 0
        measured = turn["t0_ns"] + turn["milestones_ns"]["llm_first_token"]
        written = chat["marks"]["first_content_written"]
        assert 0 <= measured - written < 50_000_000, (measured - written) / 1e6
    summary = (tmp_path / "run" / "summary.json").read_text()
    assert '"acme-llm"' in summary  # describe() is recorded in the run's metadata


def test_a_bad_option_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = _run(tmp_path, "http://127.0.0.1:1/v1", llm_url="ftp://127.0.0.1:1/v1")
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("voicelat: error:")]
    assert len(errors) == 1, result.stderr  # one line, no traceback
    assert "Traceback" not in result.stderr
    assert "[llm] base_url must start with http:// or https://" in errors[0]
    assert "acme.toml:16:" in errors[0]  # the file and line of the bad key
