"""``voicelat view`` on good and bad input, and how ``voicelat run`` picks the TUI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.tui.helpers import SAVED_RUN
from voicelat.cli.main import build_parser, main
from voicelat.core.base.errors import EXIT_OK, EXIT_USAGE
from voicelat.tui.app import VoicelatApp


def _copy_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(SAVED_RUN, run)
    return run


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err  # one clear line, no traceback
    assert lines[0].startswith("voicelat: error: ")
    return lines[0]


def test_view_of_a_missing_directory_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["view", str(tmp_path / "nope")]) == EXIT_USAGE
    assert "no results at" in _one_error_line(capsys.readouterr().err)


def test_view_of_a_newer_schema_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _copy_run(tmp_path)
    summary = json.loads((run / "summary.json").read_text())
    summary["schema_version"] = 99
    (run / "summary.json").write_text(json.dumps(summary))
    assert main(["view", str(run)]) == EXIT_USAGE
    assert "uses results schema 99, newer than this voicelat reads" in _one_error_line(
        capsys.readouterr().err
    )


def test_view_of_a_directory_with_nothing_readable_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "turns.jsonl").write_text('{"schema_version": 1, "index": 0, "fix')
    assert main(["view", str(tmp_path)]) == EXIT_USAGE
    assert "no readable turn and no summary (1 unreadable line" in _one_error_line(
        capsys.readouterr().err
    )


def _truncate(run: Path) -> None:
    """A run killed mid-write: its last line torn, its summary never written."""
    lines = (run / "turns.jsonl").read_text().splitlines(keepends=True)
    (run / "turns.jsonl").write_text("".join(lines[:5]) + lines[5][:100])
    (run / "summary.json").unlink()


def test_view_of_a_truncated_run_opens_what_is_readable_and_counts_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _copy_run(tmp_path)
    _truncate(run)
    shown: list[Any] = []
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    monkeypatch.setattr(VoicelatApp, "run", lambda self: shown.append(self.model))
    assert main(["view", str(run)]) == EXIT_OK
    (model,) = shown
    assert len(model.turns) == 5 and model.skipped_lines == 1
    assert model.status.startswith("no summary")
    assert "1 unreadable line(s)" in capsys.readouterr().err


def test_view_without_a_terminal_prints_the_summary_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _copy_run(tmp_path)
    _truncate(run)
    assert main(["view", str(run)]) == EXIT_OK
    out, err = capsys.readouterr()
    assert "Per-segment percentiles" in out and "turns: 5 run" in out
    assert "1 unreadable line(s) in turns.jsonl were skipped" in err


def test_run_parses_tui_flags() -> None:
    parser = build_parser()
    assert parser.parse_args(["run"]).tui is None
    assert parser.parse_args(["run", "--tui"]).tui is True
    assert parser.parse_args(["run", "--no-tui"]).tui is False
    assert parser.parse_args(["view", "x"]).run_dir == Path("x")


@pytest.mark.parametrize(("flag", "tui"), [("--tui", True), ("--no-tui", False)])
def test_run_takes_the_tui_path_only_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flag: str, tui: bool
) -> None:
    calls: list[str] = []

    def fake_tui(*args: Any, **kw: Any) -> int:
        calls.append("tui")
        return 130

    class Outcome:
        def __init__(self) -> None:
            self.summary: dict[str, Any] = {"counts": {"headline": 1}}
            self.turns: list[Any] = []

    def fake_execute_run(*args: Any, **kw: Any) -> Outcome:
        calls.append("plain")
        return Outcome()

    monkeypatch.setattr("voicelat.tui.live.run_with_tui", fake_tui)
    monkeypatch.setattr("voicelat.cli.run.execute_run", fake_execute_run)
    monkeypatch.setattr("voicelat.cli.run.summary_table", lambda *a: "")
    code = main(["run", flag, "--out", str(tmp_path / "out")])
    assert calls == (["tui"] if tui else ["plain"])
    assert code == (130 if tui else EXIT_OK)
