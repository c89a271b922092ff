"""``voicelat live --tui --ptt`` in a real terminal (tmux, 120x40), on the file-backed sound
card of :mod:`tests.live.rig` and the real embedded stack: the TUI's space key talks, q stops."""

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

from tests.helpers import ROOT, read_turns
from tests.live.rig import AlsaRig
from tests.live.test_live_devices import MIC_RATE, _fixture, _stack_env

pytestmark = [
    pytest.mark.stack,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux"),
]

SOCKET = f"voicelat-live-test-{os.getpid()}"


def tmux(*args: str, check: bool = True) -> str:
    return subprocess.run(
        ["tmux", "-L", SOCKET, *args], capture_output=True, text=True, check=check
    ).stdout


def _screen() -> str:
    return tmux("capture-pane", "-p", "-t", "live", check=False)


def _wait_for(text: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while True:
        screen = _screen()
        if text in screen:
            return screen
        if time.monotonic() > deadline:
            raise AssertionError(f"{text!r} not on screen within {timeout:.0f} s:\n{screen}")
        time.sleep(0.3)


@pytest.fixture
def session() -> Iterator[None]:
    yield
    tmux("kill-server", check=False)


@pytest.mark.e2e
def test_live_tui_push_to_talk_and_q(
    local_stack: dict[str, Any], tmp_path: Path, session: None
) -> None:
    _, samples = _fixture("call_mom")
    out = tmp_path / "out"
    rc = tmp_path / "rc"
    with AlsaRig(tmp_path / "rig", mic_rate=MIC_RATE) as rig:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in _stack_env(local_stack, rig).items())
        cmd = [sys.executable, "-m", "voicelat", "live", "--tui", "--ptt", "--warmup", "0"]
        script = (
            f"cd {shlex.quote(str(ROOT))} && env -u COLUMNS -u LINES {env} "
            f"{shlex.join([*cmd, '--out', str(out)])}; echo $? > {rc}; sleep 600"
        )
        tmux("new-session", "-d", "-s", "live", "-x", "120", "-y", "40", script)
        _wait_for("listening", 120)  # the child's setup lines show in the turn pane
        tmux("send-keys", "-t", "live", "Space")
        truth = rig.say(samples)
        rig.wait_said(truth)
        tmux("send-keys", "-t", "live", "Space")
        deadline = time.monotonic() + 120
        while not (out / "turns.jsonl").exists() or not read_turns(out):
            assert time.monotonic() < deadline, _screen()
            time.sleep(0.2)
        screen = _wait_for("Turns (1)", 10)  # the app drained the finished turn
        assert "Talk" in screen  # the push-to-talk key in the footer
        tmux("send-keys", "-t", "live", "q")
        deadline = time.monotonic() + 60
        while not rc.exists():
            assert time.monotonic() < deadline, _screen()
            time.sleep(0.2)
    assert rc.read_text().strip() == "0", _screen()
    assert "Traceback" not in _screen()
    (turn,) = read_turns(out)
    assert not turn["failed"], turn["failure"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["status"] == "complete" and summary["live"]["ptt"] is True
    assert "--tui" in summary["run"]["argv"] and "--events" not in summary["run"]["argv"]
