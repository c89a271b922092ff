"""Damaged results read by ``view``, ``view --html``, ``ci --results`` and ``compare``: never a
traceback, never silent. A damaged turns.jsonl line is skipped with one warning naming its line
and what is wrong with it, and counted; a missing or mismatched summary is rebuilt from the
turns; a directory where a file belongs, a nested JSON document, one run given to compare are
each one error line with exit 2. Real run directories (written by the real writers), the real
argparse wiring (``voicelat.cli.main.main``)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_ci_offline import GENEROUS, budget_file, ci, make_turns, write_run
from voicelat.cli.main import main

#: Deeper than any JSON parser's recursion limit (it raised RecursionError, not ValueError).
NESTED = "[" * 100_000


def _records(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "turns.jsonl").read_text().splitlines()]


def _rewrite_line(run: Path, number: int, line: str) -> None:
    lines = (run / "turns.jsonl").read_text().splitlines()
    lines[number - 1] = line
    (run / "turns.jsonl").write_text("\n".join(lines) + "\n")


def _damaged(change: Callable[[dict[str, Any]], None]) -> Callable[[str], str]:
    def damage(line: str) -> str:
        record = json.loads(line)
        change(record)
        return json.dumps(record)

    return damage


#: name -> (how line 4 is damaged, what the warning must say). Line 4 is a measured turn.
DAMAGE: dict[str, tuple[Callable[[str], str], str]] = {
    "truncated mid-line": (lambda line: line[: len(line) // 2], "not JSON"),
    "nested too deeply": (lambda line: NESTED, "nested too deeply"),
    "milestones as strings": (
        _damaged(lambda r: r.update(milestones_ns={"speech_end": "12"})),
        "milestone speech_end",
    ),
    "duplicate index": (_damaged(lambda r: r.update(index=2)), "index 2 again (first on line 3)"),
    "negative e2e": (_damaged(lambda r: r.update(e2e_ns=-5)), "e2e_ns is negative"),
    "flags as a dict": (_damaged(lambda r: r.update(flags={"a": 1})), "flags is not a list"),
    "e2e as a string": (
        _damaged(lambda r: r.update(e2e_ns="100")),
        "e2e_ns is not an integer ns value",
    ),
    "negative segment": (
        _damaged(lambda r: r["segments_ns"].update(stt=-1)),
        "segment stt is negative",
    ),
}


@pytest.mark.parametrize("name", sorted(DAMAGE))
def test_ci_results_skips_a_damaged_line_with_one_warning_naming_it(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path / "r", make_turns())
    damage, expected = DAMAGE[name]
    _rewrite_line(run, 4, damage((run / "turns.jsonl").read_text().splitlines()[3]))
    rc, out, err = ci(capsys, "--results", run, "--budget", budget_file(tmp_path, GENEROUS))
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    line_warnings = [w for w in warnings if "line 4:" in w]
    assert len(line_warnings) == 1 and expected in line_warnings[0], err
    assert any("1 damaged line(s) skipped" in w for w in warnings), err
    # The gate judged the 9 readable measured turns, from a summary rebuilt to match them.
    assert rc == 0 and "n=9 warm turns" in (run / "junit.xml").read_text(), out + err
    assert "rebuilt from the 10 turn(s) read" in err, err
    # ... and the gate's own reports count what was skipped.
    assert "1 damaged line(s) of turns.jsonl skipped" in out, out


def test_ci_results_of_a_run_killed_before_its_summary_gates_its_turns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path / "r", make_turns())
    (run / "summary.json").unlink()  # SIGKILL: turns.jsonl is written turn by turn, no summary
    rc, out, err = ci(capsys, "--results", run, "--budget", budget_file(tmp_path, GENEROUS))
    assert rc == 0, err
    assert "no summary.json" in err and "rebuilt from the 11 turn(s) read" in err, err
    assert out.splitlines()[-1].startswith("GATE PASSED"), out
    assert "run status: interrupted" in out, out


def test_ci_results_rebuilds_a_summary_whose_counts_are_damaged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path / "r", make_turns())
    doc = json.loads((run / "summary.json").read_text())
    doc["counts"]["turns"] = -3
    (run / "summary.json").write_text(json.dumps(doc))
    rc, _, err = ci(capsys, "--results", run, "--budget", budget_file(tmp_path, GENEROUS))
    assert rc == 0, err
    assert "counts.turns is -3 but turns.jsonl holds 11" in err, err


def test_view_reports_each_damaged_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_run(tmp_path / "r", make_turns())
    _rewrite_line(run, 2, NESTED)
    assert main(["view", str(run)]) == 0
    err = capsys.readouterr().err
    assert "1 unreadable line(s)" in err, err
    assert main(["view", "--html", str(run)]) == 0
    assert (run / "report.html").is_file()


def _one_error(capsys: pytest.CaptureFixture[str], argv: list[str], *expected: str) -> str:
    rc = main(argv)
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("voicelat: error:")]
    assert rc == 2 and len(errors) == 1, (rc, err)
    assert all(e in errors[0] for e in expected), errors[0]
    return errors[0]


@pytest.mark.parametrize("html", [False, True])
def test_a_nested_summary_is_one_error_line(
    html: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path / "r", make_turns())
    (run / "summary.json").write_text(NESTED)
    argv = ["view", *(["--html"] if html else []), str(run)]
    _one_error(capsys, argv, "summary.json", "nested too deeply")
    _one_error(capsys, ["ci", "--results", str(run)], "summary.json", "nested too deeply")


def test_turns_jsonl_being_a_directory_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path / "r", make_turns())
    (run / "turns.jsonl").unlink()
    (run / "turns.jsonl").mkdir()
    _one_error(capsys, ["view", str(run)], "turns.jsonl is a directory")
    _one_error(capsys, ["ci", "--results", str(run)], "turns.jsonl is a directory")


def test_report_html_being_a_directory_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path / "r", make_turns())
    (run / "report.html").mkdir()
    _one_error(capsys, ["view", "--html", str(run)], "report.html is a directory")


def test_compare_of_one_run_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path / "r", make_turns())
    line = _one_error(capsys, ["compare", str(run), "--no-tui"], "two or more runs")
    assert str(run) in line
    _one_error(capsys, ["compare", str(run), str(run), "--no-tui"], "given twice")


def test_fixtures_check_of_a_nested_manifest_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "manifest.json").write_text(NESTED)
    rc = main(["fixtures", "check", str(tmp_path)])
    out = capsys.readouterr().out
    errors = [line for line in out.splitlines() if re.match(r"\s*error\b", line)]
    assert rc == 1 and len(errors) == 1 and "nested too deeply" in errors[0], out
