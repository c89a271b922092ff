"""``voicelat run --tui`` in a real terminal (tmux, 120x40) on the real embedded stack."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.stack,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux"),
]


#: A tmux server of our own: another session's server, options or clients cannot resize ours.
SOCKET = f"voicelat-test-{os.getpid()}"


def tmux(*args: str, check: bool = True) -> str:
    """Run a tmux command on our own server; its stdout."""
    return subprocess.run(
        ["tmux", "-L", SOCKET, *args], capture_output=True, text=True, check=check
    ).stdout


def _screen(session: str) -> str:
    return tmux("capture-pane", "-p", "-t", session, check=False)


def _wait_for(session: str, text: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while True:
        screen = _screen(session)
        if text in screen:
            return screen
        assert "Terminal too small" not in screen, screen
        if time.monotonic() > deadline:
            raise AssertionError(f"{text!r} not on screen within {timeout:.0f} s:\n{screen}")
        time.sleep(0.5)


@pytest.fixture
def tmux_session() -> Iterator[str]:
    name = "voicelat"
    yield name
    socket = tmux("display-message", "-p", "#{socket_path}", check=False).strip()
    tmux("kill-server", check=False)
    if socket:  # tmux leaves the socket file behind
        Path(socket).unlink(missing_ok=True)


@pytest.mark.e2e
def test_run_tui_two_turns_in_a_terminal(
    local_stack: dict[str, Any], tmp_path: Path, tmux_session: str
) -> None:
    out = tmp_path / "out"
    rc = tmp_path / "rc"
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in local_stack["env"].items())
    cmd = [sys.executable, "-m", "voicelat", "run", "--tui", "--turns", "2", "--out", str(out)]
    # The shell stays after voicelat exits, so what it printed can still be read off the pane.
    # COLUMNS/LINES are dropped: set under pytest's capture, they would override the pane size.
    script = (
        f"cd {shlex.quote(str(ROOT))} && env -u COLUMNS -u LINES {env} {shlex.join(cmd)}; "
        f"echo $? > {rc}; sleep 600"
    )
    tmux("new-session", "-d", "-s", tmux_session, "-x", "120", "-y", "40", script)
    # The child's milestones reach the screen as they happen, then the run completes.
    _wait_for(tmux_session, "Live turn", 120)  # a milestone of the first turn is on screen
    screen = _wait_for(tmux_session, "· complete", 180)
    assert "turns 3/3" in screen and "loop lag max" in screen
    assert "Traceback" not in screen
    tmux("send-keys", "-t", tmux_session, "q")
    deadline = time.monotonic() + 30
    while not rc.exists():
        assert time.monotonic() < deadline, _screen(tmux_session)
        time.sleep(0.2)
    assert rc.read_text().strip() == "0"
    after = _screen(tmux_session)
    assert "Per-segment percentiles" in after and f"results: {out}" in after
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["status"] == "complete" and summary["counts"]["turns"] == 3
    # the user's command is on record, not the child's `--events jsonl`
    assert "--events" not in summary["run"]["argv"] and "--tui" in summary["run"]["argv"]
