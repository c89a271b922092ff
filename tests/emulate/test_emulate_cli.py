"""``voicelat serve`` as a user runs it: ready lines, serving, Ctrl-C, one-line errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.helpers import ROOT, voicelat


def _start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "voicelat", "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def test_serve_prints_ready_lines_serves_and_stops_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    truth = tmp_path / "truth.jsonl"
    proc = _start("openai", "inworld", "--port", "0", "--seed", "5", "--truth", str(truth))
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline().split() for _ in range(2)]
        names = [line[0] for line in lines]
        urls = dict((line[0], line[1]) for line in lines)
        assert names == ["openai", "inworld"]
        assert urls["openai"].startswith("http://127.0.0.1:") and urls["openai"].endswith("/v1")
        r = httpx.get(urls["openai"] + "/models", headers={"Authorization": "Bearer k"})
        assert r.status_code == 200 and r.json()["object"] == "list"
        r = httpx.get(urls["inworld"] + "/tts/v1/voices", headers={"Authorization": "Basic k"})
        assert r.status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0
    assert "Traceback" not in err and "stopped" in err
    records = [json.loads(line) for line in truth.read_text().splitlines()]
    assert [(r["emulator"], r["endpoint"]) for r in records] == [
        ("openai", "models"),
        ("inworld", "voices"),
    ]
    assert records[0]["marks"]["request_received"] < records[0]["marks"]["end_written"]


def test_sigterm_also_stops_cleanly() -> None:
    proc = _start("openai", "--port", "0")
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("openai http://127.0.0.1:")
    finally:
        t0 = time.monotonic()
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0 and "Traceback" not in err
    assert time.monotonic() - t0 < 5


def test_unknown_emulator_is_one_line_and_exit_2() -> None:
    r = voicelat("serve", "opneai", timeout=60)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("voicelat: error: unknown emulator 'opneai'; known emulators: ")
    assert "openai" in lines[0] and "inworld" in lines[0]
    assert "Traceback" not in r.stderr


def test_bad_profile_is_one_line(tmp_path: Path) -> None:
    profile = tmp_path / "p.toml"
    profile.write_text("[openai.latency]\nttft = -3\n")
    r = voicelat("serve", "openai", "--profile", str(profile), timeout=60)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1
    assert "[openai.latency] ttft" in r.stderr and "cannot be negative" in r.stderr


def test_list_names_every_emulator_with_its_port() -> None:
    r = voicelat("serve", "--list", timeout=60)
    assert r.returncode == 0
    assert "openai       port 8401" in r.stdout and "inworld      port 8402" in r.stdout
