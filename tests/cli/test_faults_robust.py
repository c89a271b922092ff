"""Faults mid-run, each against a real ``voicelat run`` subprocess and ``voicelat serve openai``:
a full disk (a small tmpfs) and a read-only results directory are one line and exit 3 with no
torn line; a server killed mid-run fails the remaining turns with their reason, the run goes on
and writes its summary; a slow disk never blocks the measuring loop (the writer thread)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.emulated_run import finish, popen, run_args, serving, wait_for
from tests.export.synthetic_turns import synthetic_turns
from voicelat.core.base.errors import InfraError
from voicelat.core.base.turn import Turn
from voicelat.engine.writer import TurnsWriterThread
from voicelat.files.results import TurnsWriter


def _one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("voicelat: error:")]
    assert len(errors) == 1, stderr
    return errors[0]


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs (root only: skipped where mounting is not allowed)."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.fixture(scope="module")
def emulator() -> Iterator[str]:
    with serving() as (url, _):
        yield url


@pytest.mark.e2e
def test_a_full_disk_stops_the_run_with_one_line_and_no_torn_line(
    tmp_path: Path, tmpfs: Path, emulator: str
) -> None:
    # Leave room for about two turns (a turn line is ~3 KB).
    (tmpfs / "filler").write_bytes(b"\0" * (56 * 1024))
    out = tmpfs / "run"
    proc = popen("run", *run_args(tmp_path, emulator, out, turns=8))
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 3, stderr
    line = _one_error_line(stderr)
    assert "No space left on device" in line and str(out) in line, line
    lines = (out / "turns.jsonl").read_text().splitlines()
    assert len(lines) < 8  # stopped early, not after measuring turns it could not keep
    for text in lines:
        json.loads(text)  # every kept line whole


def test_a_read_only_results_directory_is_exit_3_before_any_turn(
    tmp_path: Path, tmpfs: Path, emulator: str
) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)
    proc = popen("run", *run_args(tmp_path, emulator, tmpfs / "run", turns=2))
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 3, stderr
    assert "Read-only file system" in _one_error_line(stderr)
    assert "[1/2]" not in stdout  # refused before measuring anything


@pytest.mark.e2e
def test_a_server_killed_mid_run_fails_the_rest_and_the_run_goes_on(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with serving() as (url, server):
        proc = popen("run", *run_args(tmp_path, url, out, turns=4))
        lines = wait_for(proc, "[1/4]")
        server.send_signal(signal.SIGKILL)
        server.wait(5)
        stderr = finish(proc, lines, limit_s=90)
    assert "Traceback" not in stderr, stderr
    assert proc.returncode == 0, stderr  # the first turn was fine: not every turn failed
    turns = [json.loads(t) for t in (out / "turns.jsonl").read_text().splitlines()]
    assert len(turns) == 4
    assert not turns[0]["failed"]
    failed = [t for t in turns if t["failed"]]
    assert failed, turns
    for t in failed:
        reason = t["failure"]["reason"]
        assert "\n" not in reason and ("connect" in reason or "refused" in reason), reason
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["status"] == "complete" and summary["counts"]["failed"] == len(failed)


class _SlowWriter(TurnsWriter):
    """A disk whose every write takes 200 ms (an fsync stuck behind a busy device)."""

    def write(self, turn: Turn) -> None:
        time.sleep(0.2)
        super().write(turn)


async def test_a_slow_disk_never_blocks_the_measuring_loop(tmp_path: Path) -> None:
    writer = TurnsWriterThread(_SlowWriter(tmp_path))
    turns = synthetic_turns(5)
    worst = 0.0
    for turn in turns:
        t = time.perf_counter()
        writer.write(turn)  # what the loop does when a turn finishes
        worst = max(worst, time.perf_counter() - t)
        await asyncio.sleep(0)
    assert worst < 0.02, f"writing a turn held the loop {worst * 1e3:.1f} ms"
    writer.close()  # waits for the thread: every turn is on disk
    assert len((tmp_path / "turns.jsonl").read_text().splitlines()) == len(turns)


def test_a_failed_write_cuts_the_file_back_to_whole_lines(tmp_path: Path, tmpfs: Path) -> None:
    (tmpfs / "filler").write_bytes(b"\0" * (56 * 1024))
    writer = TurnsWriter(tmpfs)
    turns = synthetic_turns(400)

    with pytest.raises(InfraError, match="No space left on device"):
        for turn in turns:
            writer.write(turn)
    writer.close()
    text = (tmpfs / "turns.jsonl").read_text()
    assert text.endswith("\n")
    assert all(json.loads(line) for line in text.splitlines())
    assert os.path.getsize(tmpfs / "turns.jsonl") == len(text.encode())
