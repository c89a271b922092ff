"""One signal policy: SIGINT, SIGTERM and SIGHUP sent to a real ``voicelat run`` / ``ci`` /
``compare`` mid-run all end with every finished turn kept, the summary written (and for ``ci``
the JUnit and Markdown reports) and exit 128 + the signal (130, 143, 129); SIGKILL keeps the
finished turns (each line is written whole). The pipeline runs against ``voicelat serve openai``
on loopback; each test stops after the first finished turn."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.emulated_run import finish, pipeline, popen, run_args, serving, wait_for


@pytest.fixture(scope="module")
def emulator() -> Iterator[str]:
    with serving() as (url, _):
        yield url


def _signal_after_first_turn(
    proc: subprocess.Popen[str], sig: int, marker: str, settle_s: float = 0
) -> tuple[str, str]:
    """Wait until ``marker`` shows on stdout (a turn finished), send ``sig``, collect stderr."""
    out = wait_for(proc, marker)
    time.sleep(settle_s)
    proc.send_signal(sig)
    return "", finish(proc, out)


def _run_args(tmp_path: Path, emulator: str, out: Path) -> list[str]:
    return run_args(tmp_path, emulator, out)


def _turn_marker() -> str:
    # PrintObserver prints one line per finished turn: "[1/30] ...".
    return "1/30"


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129)]
)
def test_run_stopped_by_a_signal_keeps_turns_and_summary(
    sig: int, code: int, tmp_path: Path, emulator: str
) -> None:
    out = tmp_path / "out"
    proc = popen("run", *_run_args(tmp_path, emulator, out))
    _, stderr = _signal_after_first_turn(proc, sig, _turn_marker())
    assert proc.returncode == code, stderr
    assert "Traceback" not in stderr, stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["status"] == "interrupted"
    turns = (out / "turns.jsonl").read_text().splitlines()
    assert len(turns) >= 1 and all(json.loads(t) for t in turns)
    assert summary["counts"]["turns"] == len(turns)
    assert f"interrupted by {signal.Signals(sig).name}" in stderr or sig == signal.SIGINT


@pytest.mark.e2e
def test_sigkill_keeps_every_finished_turn_whole(tmp_path: Path, emulator: str) -> None:
    out = tmp_path / "out"
    proc = popen("run", *_run_args(tmp_path, emulator, out))
    # The writer thread writes a turn just after it is printed: give it that moment (a turn
    # finished in the instant of the SIGKILL may be lost, but never half-written).
    _signal_after_first_turn(proc, signal.SIGKILL, _turn_marker(), settle_s=1.0)
    assert proc.returncode == -signal.SIGKILL
    lines = (out / "turns.jsonl").read_text().splitlines()
    assert len(lines) >= 1
    for line in lines:
        json.loads(line)  # no torn line


@pytest.mark.e2e
def test_ci_stopped_by_sigterm_writes_summary_and_reports(tmp_path: Path, emulator: str) -> None:
    out = tmp_path / "out"
    junit, md = tmp_path / "junit.xml", tmp_path / "report.md"
    args = _run_args(tmp_path, emulator, out)
    args.remove("--no-tui")
    proc = popen("ci", *args, "--junit", str(junit), "--markdown", str(md))
    _, stderr = _signal_after_first_turn(proc, signal.SIGTERM, _turn_marker())
    assert proc.returncode == 143, stderr
    assert "Traceback" not in stderr, stderr
    assert json.loads((out / "summary.json").read_text())["run"]["status"] == "interrupted"
    assert "interrupted" in junit.read_text() and "<testsuite" in junit.read_text()
    assert "interrupted" in md.read_text()


@pytest.mark.e2e
def test_compare_stopped_by_sigterm_writes_every_summary(tmp_path: Path, emulator: str) -> None:
    out = tmp_path / "cmp"
    a, b = pipeline(tmp_path, emulator, "a"), pipeline(tmp_path, emulator, "b")
    proc = popen("compare", str(a), str(b), "--repeat", "5", "--out", str(out))
    _, stderr = _signal_after_first_turn(proc, signal.SIGTERM, "1/")
    assert proc.returncode == 143, stderr
    assert "Traceback" not in stderr, stderr
    summaries = list(out.rglob("summary.json"))
    assert summaries, list(out.rglob("*"))
    for s in summaries:
        assert json.loads(s.read_text())["run"]["status"] == "interrupted"


@pytest.mark.e2e
def test_a_background_job_with_sigint_ignored_still_stops_cleanly_on_sigterm(
    tmp_path: Path, emulator: str
) -> None:
    out = tmp_path / "out"
    proc = popen("run", *_run_args(tmp_path, emulator, out), sigint_ignored=True)
    _, stderr = _signal_after_first_turn(proc, signal.SIGTERM, _turn_marker())
    assert proc.returncode == 143, stderr
    assert json.loads((out / "summary.json").read_text())["run"]["status"] == "interrupted"
