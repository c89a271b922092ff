"""The signal policy where voicelat starts the real embedded servers: ``voicelat stack up``
stopped by SIGTERM while the servers start, and ``voicelat run`` on a stack it started itself
stopped by SIGTERM mid-run. Each exits 143 without a traceback and leaves no server process
behind (checked in /proc: alive and not a zombie); the run keeps its finished turns and summary.

Each test has a stack of its own (a fresh state directory, ports 9310-9319 of this suite's
range), never the shared one."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.emulated_run import finish, wait_for
from tests.cli.test_signals_tui import alive_mentioning
from tests.helpers import ROOT

pytestmark = pytest.mark.stack


def _free_ports(base: int) -> dict[str, str]:
    import socket

    ports: list[int] = []
    port = base
    while len(ports) < 3:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                ports.append(port)
            except OSError:
                pass
        port += 1
    names = ("VOICELAT_STT_PORT", "VOICELAT_TTS_PORT", "VOICELAT_LLM_PORT")
    return {name: str(port) for name, port in zip(names, ports, strict=True)}


def _stack_env(tmp_path: Path, base: int) -> dict[str, str]:
    state = tmp_path / "stack-state"
    return {
        **os.environ,
        **_free_ports(base),
        "VOICELAT_STATE_DIR": str(state),
        "PYTHONPATH": str(ROOT),
    }


def _popen(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-X", "faulthandler", "-m", "voicelat", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )


def _gone(pids: list[int], limit_s: float = 15) -> list[int]:
    """The pids among ``pids`` still alive (not zombies) after waiting up to ``limit_s``."""
    deadline = time.monotonic() + limit_s
    while True:
        alive = []
        for pid in pids:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state != "Z":
                alive.append(pid)
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


def _started_pids(text: str) -> list[int]:
    return [int(p) for p in re.findall(r"started pid (\d+)", text)]


def test_stack_up_stopped_by_sigterm_while_starting_leaves_no_server(tmp_path: Path) -> None:
    env = _stack_env(tmp_path, 9310)
    proc = _popen(env, "stack", "up")
    assert proc.stderr is not None
    seen = ""
    deadline = time.monotonic() + 60
    # The third "started pid" line: every server spawned, none ready yet (~0.6 s or more).
    while len(_started_pids(seen)) < 3:
        assert time.monotonic() < deadline and proc.poll() is None, seen
        seen += proc.stderr.readline()
    proc.send_signal(signal.SIGTERM)
    try:
        _, rest = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("stack up still running 60 s after SIGTERM")
    stderr = seen + rest
    pids = _started_pids(stderr)
    try:
        assert proc.returncode == 143, stderr
        assert "Traceback" not in stderr, stderr
        assert "no server was left running" in stderr, stderr
        assert _gone(pids) == [], stderr
        assert alive_mentioning(env["VOICELAT_STATE_DIR"]) == []
    finally:
        for pid in _gone(pids, 0):  # never leave a server behind, even when failing
            os.kill(pid, signal.SIGKILL)


@pytest.mark.e2e
def test_run_on_a_stack_it_started_stopped_by_sigterm_stops_the_servers(tmp_path: Path) -> None:
    env = _stack_env(tmp_path, 9315)
    out = tmp_path / "out"
    proc = _popen(env, "run", "--no-tui", "--turns", "20", "--warmup", "0", "--out", str(out))
    lines = wait_for(proc, "1/20", limit_s=180)  # the stack is up and a turn finished
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(40)
    except subprocess.TimeoutExpired:
        # Hung (the loop's shutdown waited on a task left behind): faulthandler prints every
        # thread's stack on SIGABRT, into the failure message.
        proc.send_signal(signal.SIGABRT)
    stderr = finish(proc, lines, limit_s=60)
    pids = _started_pids(stderr)
    try:
        assert proc.returncode == 143, stderr
        assert "Traceback" not in stderr, stderr
        assert len(pids) == 3, stderr  # this run started the three servers ...
        assert _gone(pids) == [], stderr  # ... and stopped them
        summary = json.loads((out / "summary.json").read_text())
        assert summary["run"]["status"] == "interrupted"
        turns = (out / "turns.jsonl").read_text().splitlines()
        assert len(turns) >= 1 and summary["counts"]["turns"] == len(turns)
    finally:
        for pid in _gone(pids, 0):
            os.kill(pid, signal.SIGKILL)
