"""Helpers for tests that run a real ``voicelat`` subprocess against ``voicelat serve openai``
on loopback and act on it mid-run (signals, faults)."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import pytest

from tests.helpers import ROOT

KEY_ENV = "VOICELAT_EMULATOR_KEY"
PIPELINE = (ROOT / "pipelines" / "emulated-openai.toml").read_text()


def popen(*args: str, sigint_ignored: bool = False) -> subprocess.Popen[str]:
    """``python -m voicelat ARGS`` with pipes, the emulator's key set; ``sigint_ignored`` starts
    it the way a shell starts a background job (``voicelat run &`` in a script)."""
    return subprocess.Popen(
        [sys.executable, "-m", "voicelat", *args],
        preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, KEY_ENV: "emulator-key", "PYTHONPATH": str(ROOT)},
    )


@contextmanager
def serving(profile: str = "exact") -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """A running ``voicelat serve openai`` on an ephemeral port: (base URL, process)."""
    proc = popen("serve", "openai", "--port", "0", "--profile", profile)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("openai "), line
    try:
        yield line.split()[1], proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


def pipeline(tmp_path: Path, base_url: str, name: str = "p") -> Path:
    """The emulated-openai pipeline pointed at ``base_url``, named ``name``."""
    p = tmp_path / f"{name}.toml"
    p.write_text(
        PIPELINE.replace("http://127.0.0.1:8401/v1", base_url).replace(
            'name = "emulated-openai"', f'name = "{name}"'
        )
    )
    return p


def run_args(tmp_path: Path, base_url: str, out: Path, turns: int = 30) -> list[str]:
    return [
        "--pipeline",
        str(pipeline(tmp_path, base_url)),
        "--turns",
        str(turns),
        "--warmup",
        "0",
        "--out",
        str(out),
        "--no-tui",
    ]


def _lines(stream: IO[str]) -> queue.Queue[str]:
    q: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in stream:
            q.put(line)

    threading.Thread(target=pump, daemon=True).start()
    return q


def wait_for(proc: subprocess.Popen[str], marker: str, limit_s: float = 60) -> queue.Queue[str]:
    """Wait until ``marker`` shows on ``proc``'s stdout; the queue has the lines after it."""
    assert proc.stdout is not None and proc.stderr is not None
    out = _lines(proc.stdout)
    seen: list[str] = []
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            line = out.get(timeout=0.5)
        except queue.Empty:
            assert proc.poll() is None, "".join(seen) + proc.stderr.read()
            continue
        seen.append(line)
        if marker in line:
            return out
    proc.kill()
    pytest.fail(f"{marker!r} not seen within {limit_s} s:\n" + "".join(seen))


def finish(proc: subprocess.Popen[str], out: queue.Queue[str], limit_s: float = 30) -> str:
    """Wait for ``proc`` to end (killing it past ``limit_s``); its stderr."""
    assert proc.stderr is not None
    try:
        proc.wait(limit_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"still running {limit_s} s later")
    return proc.stderr.read()
