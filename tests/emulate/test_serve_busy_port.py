"""A newcomer's first run: the emulated pipelines name each emulator's default port, and another
process may hold it. ``voicelat serve`` then takes a free port (and says so) instead of exit 2,
and ``voicelat run`` of the unchanged pipeline follows it there while that serve runs."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import ROOT
from voicelat.emulate.served import register_served, served_moves, unregister_served
from voicelat.engine.served import with_served_emulators
from voicelat.files.pipeline import load_pipeline

DEFAULT = "127.0.0.1:8401"  # the OpenAI emulator's, as pipelines/emulated-openai.toml names it


@contextlib.contextmanager
def _port_held(port: int) -> Iterator[None]:
    """Another process's listener on ``port``; when something already holds it, it is busy
    just the same (a shared machine: another suite's serve, say)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        with contextlib.suppress(OSError):
            sock.bind(("127.0.0.1", port))
            sock.listen(1)
        probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        with probe, pytest.raises(OSError):
            probe.bind(("127.0.0.1", port))  # busy, by us or by whoever held it first
        yield
    finally:
        sock.close()


def _env(state: Path) -> dict[str, str]:
    return {
        **os.environ,
        "VOICELAT_STATE_DIR": str(state),  # this test's serve records, no other run's
        "VOICELAT_EMULATOR_KEY": "any-non-empty-key",
        "VOICELAT_CALIBRATE": "off",
        "PYTHONPATH": str(ROOT),
    }


@pytest.mark.e2e
def test_a_busy_default_port_still_serves_and_the_run_follows_it(tmp_path: Path) -> None:
    env = _env(tmp_path / "state")
    with _port_held(8401):
        serve = subprocess.Popen(
            [sys.executable, "-m", "voicelat", "serve", "openai", "--profile", "exact"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
        )  # fmt: skip
        try:
            assert serve.stdout is not None and serve.stderr is not None
            line = serve.stdout.readline()
            assert line.startswith("openai http://127.0.0.1:"), (line, serve.stderr.read())
            served = line.split()[1].removeprefix("http://").split("/")[0]
            assert served != DEFAULT
            assert "port 8401 is in use by another process: serving on" in serve.stderr.readline()
            run = subprocess.run(
                [sys.executable, "-m", "voicelat", "run", "--no-tui",
                 "-p", str(ROOT / "pipelines" / "emulated-openai.toml"),
                 "--turns", "1", "--warmup", "0", "-o", str(tmp_path / "out")],
                capture_output=True, text=True, env=env, cwd=ROOT, timeout=120,
            )  # fmt: skip
            assert run.returncode == 0, run.stderr
            assert f"{DEFAULT} -> {served} (where voicelat serve listens)" in run.stderr
            turns = [json.loads(t) for t in (tmp_path / "out" / "turns.jsonl").open()]
            assert len(turns) == 1 and not turns[0]["failed"], turns
        finally:
            serve.send_signal(signal.SIGINT)
            serve.wait(15)
    assert serve.returncode == 0
    assert not list((tmp_path / "state" / "emulators").glob("*.json"))  # its record is gone


def test_an_asked_for_port_in_use_is_still_one_line_and_exit_2(tmp_path: Path) -> None:
    with _port_held(8401):
        proc = subprocess.run(
            [sys.executable, "-m", "voicelat", "serve", "openai", "--port", "8401"],
            capture_output=True, text=True, env=_env(tmp_path / "state"), cwd=ROOT, timeout=60,
        )  # fmt: skip
    assert proc.returncode == 2
    assert "the port is in use" in proc.stderr and "Traceback" not in proc.stderr


def test_only_a_live_serve_moves_an_address_and_never_one_another_serve_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICELAT_STATE_DIR", str(tmp_path))
    pipeline = load_pipeline(ROOT / "pipelines" / "emulated-openai.toml")
    assert with_served_emulators(pipeline) is pipeline  # nothing served: as named
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    stale = register_served([], {DEFAULT: "127.0.0.1:1"}, pid=int(dead.stdout))
    assert served_moves() == {} and stale is not None and not stale.exists()
    mine = register_served(["127.0.0.1:40001"], {DEFAULT: "127.0.0.1:40001"})
    try:
        moved = with_served_emulators(pipeline)
        assert {moved.stt["base_url"], moved.llm["base_url"], moved.tts["base_url"]} == {
            "http://127.0.0.1:40001/v1"
        }
        # Another serve on the default address itself: that one is an emulator, left alone.
        other = register_served([DEFAULT], {}, pid=os.getppid())
        assert served_moves() == {}
        unregister_served(other)
    finally:
        unregister_served(mine)
    assert served_moves() == {}
