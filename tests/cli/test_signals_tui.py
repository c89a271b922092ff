"""The signal policy for the terminal UIs, in a real pseudo-terminal: ``voicelat run --tui``
(the TUI here, the measuring child behind it) and ``voicelat view``. A SIGTERM, SIGINT or SIGHUP
sent to the command gives the terminal back, exits 128 + the signal, keeps every finished turn
and the summary (run) and leaves no measuring child behind. The run goes against
``voicelat serve openai`` on loopback."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.emulated_run import KEY_ENV, run_args, serving
from tests.helpers import ROOT


@pytest.fixture(scope="module")
def emulator() -> Iterator[str]:
    with serving() as (url, _):
        yield url


class PtyCommand:
    """``python -m voicelat ARGS`` on a 120x40 pseudo-terminal of its own (its own session,
    as a terminal emulator starts a shell); what it wrote is kept in :attr:`screen`."""

    def __init__(self, *args: str, sigint_ignored: bool = False) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        env.update({KEY_ENV: "emulator-key", "PYTHONPATH": str(ROOT), "TERM": "xterm-256color"})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "voicelat", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
            cwd=ROOT,
            env=env,
            # As a shell starts a background job (`voicelat run --tui &` in a script).
            preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
            if sigint_ignored
            else None,
        )
        os.close(slave)
        self._master = master
        self._buf = bytearray()
        self._pump = threading.Thread(target=self._read, daemon=True)
        self._pump.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self._master, 65536)
            except OSError:  # EIO: the last process holding the terminal has ended
                return
            if not data:
                return
            self._buf.extend(data)

    @property
    def screen(self) -> str:
        return self._buf.decode(errors="replace")

    def wait_until(self, done: object, what: str, limit_s: float = 90) -> None:
        deadline = time.monotonic() + limit_s
        while not (done() if callable(done) else done):
            assert self.proc.poll() is None, f"ended ({self.proc.returncode}):\n{self.screen}"
            if time.monotonic() > deadline:
                self.kill()
                pytest.fail(f"{what} not within {limit_s:.0f} s:\n{self.screen[-3000:]}")
            time.sleep(0.1)

    def finish(self, limit_s: float = 30) -> int:
        try:
            code = self.proc.wait(limit_s)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"still running {limit_s:.0f} s after the signal:\n{self.screen[-3000:]}")
        self._pump.join(5)
        os.close(self._master)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def alive_mentioning(marker: str) -> list[str]:
    """Command lines of live (non-zombie) processes that mention ``marker``."""
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z":
            alive.append(f"{entry.name}: {cmdline}")
    return alive


def _turn_written(out: Path) -> bool:
    path = out / "turns.jsonl"
    return path.exists() and path.read_text().strip() != ""


def _run_tui_stopped_by(sig: int, code: int, tmp_path: Path, emulator: str) -> None:
    out = tmp_path / "out"
    args = [a for a in run_args(tmp_path, emulator, out) if a != "--no-tui"]
    cmd = PtyCommand("run", "--tui", *args)
    try:
        cmd.wait_until(lambda: _turn_written(out), "a finished turn")
        time.sleep(0.3)
        cmd.proc.send_signal(sig)
        rc = cmd.finish()
    finally:
        cmd.kill()
    screen = cmd.screen
    assert rc == code, screen[-3000:]
    assert "Traceback" not in screen, screen
    # the terminal given back (alternate screen left), then the summary table printed
    assert "\x1b[?1049l" in screen and "Per-segment percentiles" in screen, screen[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["status"] == "interrupted"
    turns = (out / "turns.jsonl").read_text().splitlines()
    assert len(turns) >= 1 and summary["counts"]["turns"] == len(turns)
    assert all(json.loads(t)["schema_version"] for t in turns)
    # the measuring child (`run ... --events jsonl --out OUT`) is gone with its parent
    assert alive_mentioning(str(out)) == []


@pytest.mark.e2e
def test_run_tui_stopped_by_sigterm_keeps_turns_summary_and_no_child(
    tmp_path: Path, emulator: str
) -> None:
    _run_tui_stopped_by(signal.SIGTERM, 143, tmp_path, emulator)


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGHUP, 129)])
def test_run_tui_stopped_by_sigint_or_sighup(
    sig: int, code: int, tmp_path: Path, emulator: str
) -> None:
    _run_tui_stopped_by(sig, code, tmp_path, emulator)


@pytest.fixture(scope="module")
def saved_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small run directory of synthetic turns (what `voicelat run` writes)."""
    from tests.export.synthetic_turns import synthetic_turns
    from voicelat.files.results import turn_to_json

    run = tmp_path_factory.mktemp("saved") / "run"
    run.mkdir()
    lines = [json.dumps(turn_to_json(t)) for t in synthetic_turns(5)]
    (run / "turns.jsonl").write_text("\n".join(lines) + "\n")
    return run


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129)]
)
def test_view_stopped_by_a_signal_gives_the_terminal_back_and_exits_128_plus_n(
    sig: int, code: int, saved_run: Path
) -> None:
    cmd = PtyCommand("view", str(saved_run))
    try:
        cmd.wait_until(lambda: "e2e" in cmd.screen, "the viewer on screen", limit_s=60)
        time.sleep(0.3)
        cmd.proc.send_signal(sig)
        rc = cmd.finish()
    finally:
        cmd.kill()
    # It used to exit 0: textual swallowed the cancellation asyncio's SIGINT handling relies on.
    assert rc == code, cmd.screen[-3000:]
    assert "Traceback" not in cmd.screen
    assert "\x1b[?1049l" in cmd.screen  # the alternate screen was left: the terminal is usable


def test_view_ctrl_c_typed_is_the_quit_key_exit_0(saved_run: Path) -> None:
    cmd = PtyCommand("view", str(saved_run))
    try:
        cmd.wait_until(lambda: "e2e" in cmd.screen, "the viewer on screen", limit_s=60)
        time.sleep(0.3)
        os.write(cmd._master, b"\x03")  # Ctrl-C in a raw terminal is a key, not a signal
        rc = cmd.finish()
    finally:
        cmd.kill()
    assert rc == 0, cmd.screen[-3000:]
    assert "Traceback" not in cmd.screen
