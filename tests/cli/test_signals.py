"""One signal policy: SIGINT, SIGTERM and SIGHUP sent to a real ``voicelat run`` / ``ci`` /
``compare`` mid-run all end with every finished turn kept, the summary written (and for ``ci``
the JUnit and Markdown reports) and exit 128 + the signal (130, 143, 129); SIGKILL keeps the
finished turns (each line is written whole). The pipeline runs against ``voicelat serve openai``
on loopback; each test stops after the first finished turn."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import ROOT

KEY_ENV = "VOICELAT_EMULATOR_KEY"
PIPELINE = (ROOT / "pipelines" / "emulated-openai.toml").read_text()


def _popen(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "voicelat", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, KEY_ENV: "emulator-key", "PYTHONPATH": str(ROOT)},
    )


def _lines(stream: object) -> queue.Queue[str]:
    q: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in stream:  # type: ignore[attr-defined]
            q.put(line)

    threading.Thread(target=pump, daemon=True).start()
    return q


@pytest.fixture(scope="module")
def emulator() -> Iterator[str]:
    proc = _popen("serve", "openai", "--port", "0", "--profile", "exact")
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("openai "), line
    try:
        yield line.split()[1]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)


def _pipeline(tmp_path: Path, base_url: str, name: str = "p") -> Path:
    p = tmp_path / f"{name}.toml"
    p.write_text(
        PIPELINE.replace("http://127.0.0.1:8401/v1", base_url).replace(
            'name = "emulated-openai"', f'name = "{name}"'
        )
    )
    return p


def _signal_after_first_turn(
    proc: subprocess.Popen[str], sig: int, marker: str, limit_s: float = 60, settle_s: float = 0
) -> tuple[str, str]:
    """Wait until ``marker`` shows on stdout (a turn finished), send ``sig``, collect output."""
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
            break
    else:
        proc.kill()
        pytest.fail("no turn finished within the limit:\n" + "".join(seen))
    time.sleep(settle_s)
    proc.send_signal(sig)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"still running 30 s after {signal.Signals(sig).name}")
    time.sleep(0.2)  # let the pump drain
    while not out.empty():
        seen.append(out.get())
    return "".join(seen), proc.stderr.read()


def _run_args(tmp_path: Path, emulator: str, out: Path) -> list[str]:
    return [
        "--pipeline",
        str(_pipeline(tmp_path, emulator)),
        "--turns",
        "30",
        "--warmup",
        "0",
        "--out",
        str(out),
        "--no-tui",
    ]


def _turn_marker() -> str:
    # PrintObserver prints one line per finished turn: "[  1/30] ...".
    return "1/30"


@pytest.mark.parametrize(
    ("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129)]
)
def test_run_stopped_by_a_signal_keeps_turns_and_summary(
    sig: int, code: int, tmp_path: Path, emulator: str
) -> None:
    out = tmp_path / "out"
    proc = _popen("run", *_run_args(tmp_path, emulator, out))
    _, stderr = _signal_after_first_turn(proc, sig, _turn_marker())
    assert proc.returncode == code, stderr
    assert "Traceback" not in stderr, stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["status"] == "interrupted"
    turns = (out / "turns.jsonl").read_text().splitlines()
    assert len(turns) >= 1 and all(json.loads(t) for t in turns)
    assert summary["counts"]["turns"] == len(turns)
    assert f"interrupted by {signal.Signals(sig).name}" in stderr or sig == signal.SIGINT


def test_sigkill_keeps_every_finished_turn_whole(tmp_path: Path, emulator: str) -> None:
    out = tmp_path / "out"
    proc = _popen("run", *_run_args(tmp_path, emulator, out))
    # The writer thread writes a turn just after it is printed: give it that moment (a turn
    # finished in the instant of the SIGKILL may be lost, but never half-written).
    _signal_after_first_turn(proc, signal.SIGKILL, _turn_marker(), settle_s=1.0)
    assert proc.returncode == -signal.SIGKILL
    lines = (out / "turns.jsonl").read_text().splitlines()
    assert len(lines) >= 1
    for line in lines:
        json.loads(line)  # no torn line


def test_ci_stopped_by_sigterm_writes_summary_and_reports(tmp_path: Path, emulator: str) -> None:
    out = tmp_path / "out"
    junit, md = tmp_path / "junit.xml", tmp_path / "report.md"
    args = _run_args(tmp_path, emulator, out)
    args.remove("--no-tui")
    proc = _popen("ci", *args, "--junit", str(junit), "--markdown", str(md))
    _, stderr = _signal_after_first_turn(proc, signal.SIGTERM, _turn_marker())
    assert proc.returncode == 143, stderr
    assert "Traceback" not in stderr, stderr
    assert json.loads((out / "summary.json").read_text())["run"]["status"] == "interrupted"
    assert "interrupted" in junit.read_text() and "<testsuite" in junit.read_text()
    assert "interrupted" in md.read_text()


def test_compare_stopped_by_sigterm_writes_every_summary(tmp_path: Path, emulator: str) -> None:
    out = tmp_path / "cmp"
    a, b = _pipeline(tmp_path, emulator, "a"), _pipeline(tmp_path, emulator, "b")
    proc = _popen("compare", str(a), str(b), "--repeat", "5", "--out", str(out))
    _, stderr = _signal_after_first_turn(proc, signal.SIGTERM, "1/")
    assert proc.returncode == 143, stderr
    assert "Traceback" not in stderr, stderr
    summaries = list(out.rglob("summary.json"))
    assert summaries, list(out.rglob("*"))
    for s in summaries:
        assert json.loads(s.read_text())["run"]["status"] == "interrupted"
