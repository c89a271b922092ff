"""``run --tui`` ends on SIGTERM, promptly, whenever it lands: the races between the TUI, its
measuring child and the signal (each hung the command for good, or exited 130 for a SIGTERM).

* a background job (SIGINT ignored, as a script's ``voicelat run --tui &``): the child
  inherited the ignored SIGINT across ``exec`` and ignored the TUI's stop, so the TUI waited
  for ever (a real pseudo-terminal, a real run against ``voicelat serve openai``);
* a stop before the measuring child started (the app still starting up, slow on a loaded
  machine): the TUI waited for a child that never ran;
* a child that does not stop (stuck, or ignoring SIGINT): the wait is bounded, it is killed;
* a stop signal while the command's modules load: exit 143, not a bare KeyboardInterrupt.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.emulated_run import run_args, serving
from tests.cli.test_signals_tui import PtyCommand, _turn_written, alive_mentioning
from voicelat.cli import main as main_module
from voicelat.cli import signals
from voicelat.tui.live import ChildRun


@pytest.fixture(scope="module")
def emulator() -> Iterator[str]:
    with serving() as (url, _):
        yield url


@pytest.mark.e2e
def test_run_tui_as_a_background_job_ends_on_sigterm_with_143(
    tmp_path: Path, emulator: str
) -> None:
    out = tmp_path / "out"
    args = [a for a in run_args(tmp_path, emulator, out) if a != "--no-tui"]
    cmd = PtyCommand("run", "--tui", *args, sigint_ignored=True)
    try:
        cmd.wait_until(lambda: _turn_written(out), "a finished turn")
        time.sleep(0.3)
        t0 = time.monotonic()
        cmd.proc.send_signal(signal.SIGTERM)
        rc = cmd.finish(limit_s=30)  # it never ended: the child ignored the TUI's SIGINT
        took = time.monotonic() - t0
    finally:
        cmd.kill()
    assert rc == 143, cmd.screen[-3000:]
    assert took < 30 and "Traceback" not in cmd.screen
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["status"] == "interrupted"
    assert summary["counts"]["turns"] == len((out / "turns.jsonl").read_text().splitlines())
    assert alive_mentioning(str(out)) == []  # the measuring child is gone too


def _within(seconds: float, action: object) -> bool:
    """Run ``action`` on a thread; True if it returned within ``seconds``."""
    assert callable(action)
    worker = threading.Thread(target=action, daemon=True)
    worker.start()
    worker.join(seconds)
    return not worker.is_alive()


def test_a_stop_before_the_child_started_ends_at_once_and_starts_nothing() -> None:
    child = ChildRun([sys.executable, "-c", "import time; time.sleep(60)"])
    child.request_stop()  # the app's q / a signal, before on_mount started the child
    assert _within(5, child.stop_and_wait)  # it waited for ever for a child never started
    child.start()  # on_mount, after the stop: the run must not start any more
    assert child.proc is None and child.done and child.status == "interrupted"
    assert child.exit_code == 3 and child.message == "stopped before the run started"


def test_a_child_that_ignores_the_stop_is_killed_after_the_grace() -> None:
    ignores = "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
    child = ChildRun([sys.executable, "-c", ignores + "print('up', flush=True); time.sleep(60)"])
    child.stop_grace_s = 1.0
    child.start()
    assert child.proc is not None and child.proc.stdout is not None
    deadline = time.monotonic() + 30
    while child.bad_lines == 0 and time.monotonic() < deadline:  # "up": its handler is set
        time.sleep(0.05)
    t0 = time.monotonic()
    assert _within(20, child.stop_and_wait)
    assert time.monotonic() - t0 < 15 and child.done
    assert child.proc.returncode == -signal.SIGKILL
    assert child.message == "the measuring process was killed by SIGKILL"


def test_a_sigterm_while_the_parser_loads_exits_143(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = {sig: signal.getsignal(sig) for sig in signals.STOP_SIGNALS}
    signals.reset()

    def slow_parser() -> object:
        signal.raise_signal(signal.SIGTERM)  # lands while the subcommands' modules import
        raise AssertionError("the SIGTERM did not interrupt")

    monkeypatch.setattr(main_module, "build_parser", slow_parser)
    try:
        code = main_module.main(["run"])
    finally:
        for sig, old in saved.items():
            signal.signal(sig, old)
        signals.reset()
    assert code == 143
    assert capsys.readouterr().err.strip() == "voicelat: error: interrupted by SIGTERM"


def test_a_tui_with_sigint_ignored_starts_a_child_that_obeys_sigint() -> None:
    """From its first instruction: a stop sent while the child still imports is not lost."""
    from voicelat.tui.model import SetupLine

    show = "import signal, sys; print(signal.getsignal(signal.SIGINT), file=sys.stderr)"
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a background job starts
    try:
        child = ChildRun([sys.executable, "-c", show])
        child.start()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # this process still ignores
    finally:
        signal.signal(signal.SIGINT, previous)
    assert child.wait(30)
    lines = []
    while not child.events.empty():
        event = child.events.get()
        if isinstance(event, SetupLine):
            lines.append(event.text)
    assert lines == ["<built-in function default_int_handler>"], lines
