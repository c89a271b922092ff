"""A reader that leaves (``voicelat ... | head -1``) ends the printing, never the command or its
results: real ``voicelat`` processes whose stdout is a real pipe closed by its reader. Each used
to die with a ``BrokenPipeError`` traceback (``run`` losing the turn it was printing)."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.emulated_run import KEY_ENV, run_args, serving
from tests.helpers import ROOT
from voicelat.cli.signals import ReaderSafeStream, output_readers_may_leave


@pytest.fixture(scope="module")
def emulator() -> Iterator[str]:
    with serving() as (url, _):
        yield url


@pytest.fixture(scope="module")
def piped_run(
    emulator: str, tmp_path_factory: pytest.TempPathFactory
) -> tuple[int, list[str], str, Path]:
    """``voicelat run --turns 3 | head -1``: (rc, lines read, stderr, results directory)."""
    tmp = tmp_path_factory.mktemp("piped")
    out = tmp / "out"
    rc, lines, stderr = _voicelat("run", *run_args(tmp, emulator, out, turns=3), read_lines=1)
    return rc, lines, stderr, out


@pytest.fixture(scope="module")
def saved_runs(
    piped_run: tuple[int, list[str], str, Path], tmp_path_factory: pytest.TempPathFactory
) -> list[Path]:
    """Two real run directories: the piped run and a copy of it."""
    run = piped_run[3]
    copy = tmp_path_factory.mktemp("copy") / "b"
    shutil.copytree(run, copy)
    return [run, copy]


@pytest.fixture(scope="module")
def comparison_dir(saved_runs: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A comparison directory (``voicelat compare RUN RUN --out``), as ``view`` opens it."""
    out = tmp_path_factory.mktemp("cmp") / "cmp"
    subprocess.run(
        [sys.executable, "-m", "voicelat", "compare", *map(str, saved_runs), "--out", str(out)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        check=True,
        timeout=120,
    )
    return out


def _voicelat(*args: str, read_lines: int, timeout: float = 120) -> tuple[int, list[str], str]:
    """``python -m voicelat ARGS | head -<read_lines>``: the lines read, then the pipe's read end
    closed (``read_lines=0``: closed before the command writes anything); (rc, lines, stderr)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "voicelat", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, KEY_ENV: "emulator-key", "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None and proc.stderr is not None
    lines = [proc.stdout.readline().decode() for _ in range(read_lines)]
    proc.stdout.close()  # the reader leaves, as `head` does
    try:
        stderr = proc.stderr.read().decode()
        rc = proc.wait(timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    return rc, lines, stderr


@pytest.mark.e2e
def test_run_piped_to_head_keeps_every_planned_turn(
    piped_run: tuple[int, list[str], str, Path],
) -> None:
    rc, lines, stderr, out = piped_run
    assert lines[0].startswith("[1/3]"), lines
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr
    assert rc == 0, stderr
    turns = [json.loads(line) for line in (out / "turns.jsonl").read_text().splitlines()]
    assert sorted(t["index"] for t in turns) == [0, 1, 2]  # every planned turn, none lost
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["status"] == "complete" and summary["counts"]["turns"] == 3


@pytest.mark.e2e
@pytest.mark.parametrize(
    "command",
    [
        ["serve", "--list"],
        ["view", "{a}"],
        ["view", "{cmp}"],
        ["compare", "{a}", "{b}"],
        ["endpointing", "--endpointers", "energy", "--hangovers", "200,400", "--no-tui"],
    ],
    ids=["serve-list", "view", "view-comparison", "compare", "endpointing"],
)
@pytest.mark.parametrize("read_lines", [0, 1], ids=["closed-at-once", "head-1"])
def test_reader_commands_piped_to_head_give_no_traceback(
    command: list[str],
    read_lines: int,
    saved_runs: list[Path],
    comparison_dir: Path,
    tmp_path: Path,
) -> None:
    a, b = saved_runs
    args = [w.format(a=a, b=b, cmp=comparison_dir) for w in command]
    if command[0] == "endpointing":
        args += ["--out", str(tmp_path / "ep")]
    rc, lines, stderr = _voicelat(*args, read_lines=read_lines)
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr
    assert "Exception ignored" not in stderr, stderr
    assert rc == 0, stderr
    if read_lines:
        assert lines[0], "a first line was printed before the reader left"


class _LeavingReader(io.StringIO):
    """A stream whose reader has gone after ``keep`` writes."""

    def __init__(self, keep: int) -> None:
        super().__init__()
        self.keep = keep

    def write(self, s: str) -> int:
        if self.keep <= 0:
            raise BrokenPipeError(32, "Broken pipe")
        self.keep -= 1
        return super().write(s)


def test_reader_safe_stream_drops_writes_once_the_reader_left() -> None:
    inner = _LeavingReader(keep=1)
    stream = ReaderSafeStream(inner)
    stream.write("first\n")
    stream.write("second\n")  # the reader has gone: dropped, no error
    stream.write("third\n")
    stream.flush()
    assert inner.getvalue() == "first\n" and stream.reader_gone
    assert stream.isatty() is False  # everything else is the wrapped stream's


def test_output_guard_is_undone_after_the_command() -> None:
    before = sys.stdout, sys.stderr
    with output_readers_may_leave():
        assert isinstance(sys.stdout, ReaderSafeStream)
        assert isinstance(sys.stderr, ReaderSafeStream)
    assert (sys.stdout, sys.stderr) == before


def test_the_turn_lines_go_to_the_guarded_stdout() -> None:
    """``ci`` makes its ``PrintObserver()`` inside the command: it must print to the guarded
    stdout, not to the one of import time (which a reader that leaves breaks)."""
    from voicelat.cli.run import PrintObserver

    with output_readers_may_leave():
        assert PrintObserver().stream is sys.stdout
        assert isinstance(PrintObserver().stream, ReaderSafeStream)


@pytest.mark.slow  # the same through a real `voicelat ci` (~25 s on a loaded machine)
def test_ci_piped_to_head_keeps_every_planned_turn(tmp_path: Path, emulator: str) -> None:
    """``ci`` prints its turn lines through an observer made before the command ran: it must
    print to the guarded stdout, not the one of import time."""
    out = tmp_path / "out"
    args = [a for a in run_args(tmp_path, emulator, out, turns=3) if a != "--no-tui"]
    rc, _, stderr = _voicelat("ci", *args, read_lines=1)
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr
    assert rc in (0, 1), stderr  # the gate's verdict, whatever it is
    turns = (out / "turns.jsonl").read_text().splitlines()
    assert len(turns) == 3 and (out / "junit.xml").exists()
