"""``voicelat view COMPARE_DIR`` (a saved comparison) and ``view DIR --html``, on the comparison
a real ``voicelat compare`` of two pipelines against ``voicelat serve openai`` wrote."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.tui.helpers import SAVED_RUN
from voicelat.cli.main import main
from voicelat.core.base.errors import EXIT_OK, EXIT_USAGE
from voicelat.tui.compare import CompareApp

COMPARE_DIR = Path(__file__).resolve().parents[1] / "tui" / "data" / "compare"


def _copy(tmp_path: Path) -> Path:
    out = tmp_path / "cmp"
    shutil.copytree(COMPARE_DIR, out)
    return out


def test_view_of_a_comparison_piped_prints_the_ranking_and_accuracy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["view", str(_copy(tmp_path))]) == EXIT_OK
    out = capsys.readouterr().out
    assert out.startswith("Comparison emu-a+emu-b: 2 combinations x 14 fixtures")
    assert "1  emu-b" in out and "2  emu-a" in out
    assert "emu-b: WER 0.0% (0 error(s) in 98 reference words; 14 of 14 turn(s) exact)" in out


def test_view_of_a_comparison_in_a_terminal_opens_the_compare_screen_with_its_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shown: list[CompareApp] = []
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    monkeypatch.setattr(CompareApp, "run", lambda self: shown.append(self))
    # Its comparison.json works as the argument too.
    assert main(["view", str(_copy(tmp_path) / "comparison.json")]) == EXIT_OK
    (app,) = shown
    assert [c["name"] for c in app.doc["combinations"]] == ["emu-b", "emu-a"]
    assert {n: len(t) for n, t in app.runs.items()} == {"emu-b": 15, "emu-a": 15}


def test_html_rewrites_the_comparison_page_with_every_picture(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cmp = _copy(tmp_path)
    assert main(["view", str(cmp), "--html"]) == EXIT_OK
    assert capsys.readouterr().out.strip() == str(cmp / "report.html")
    page = (cmp / "report.html").read_text()
    assert page.count('class="combos"') == 1 and page.count('class="waterfall"') == 4
    assert page.count('class="histogram"') == 2 and page.count('class="timeline"') == 2
    assert "Accuracy beside latency" in page


def test_html_of_a_run_writes_its_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    shutil.copytree(SAVED_RUN, run)
    assert main(["view", str(run), "--html"]) == EXIT_OK
    page = (run / "report.html").read_text()
    assert capsys.readouterr().out.strip() == str(run / "report.html")
    assert page.count('class="waterfall"') == 2
    assert 'class="histogram"' in page and 'class="timeline"' in page
    assert "<script" not in page


def test_a_missing_run_directory_is_said_and_the_rest_still_shows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cmp = _copy(tmp_path)
    shutil.rmtree(cmp / "emu-a")
    assert main(["view", str(cmp), "--html"]) == EXIT_OK
    err = capsys.readouterr().err
    assert "emu-a: no turns.jsonl at emu-a (its pictures are left out)" in err
    assert (cmp / "report.html").read_text().count('class="histogram"') == 1


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("{not json", "is not readable JSON"),
        (json.dumps({"kind": "something-else"}), "is not a voicelat comparison"),
        (json.dumps({"kind": "voicelat-comparison", "combinations": 3}), "is damaged"),
    ],
)
def test_a_bad_comparison_json_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, words: str
) -> None:
    (tmp_path / "comparison.json").write_text(content)
    assert main(["view", str(tmp_path)]) == EXIT_USAGE
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("voicelat: error: ") and words in lines[0]


def test_view_help_names_both_kinds_of_directory(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["view", "--help"])
    text: Any = capsys.readouterr().out
    assert "comparison directory" in text and "--html" in text


def test_an_unfinished_comparison_says_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cmp = _copy(tmp_path)
    (cmp / "comparison.json").unlink()  # interrupted before the ranking was written
    assert main(["view", str(cmp)]) == EXIT_USAGE
    (line,) = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert "has run directories (emu-a, emu-b) but no comparison.json" in line
    assert f"voicelat compare {cmp / 'emu-a'} {cmp / 'emu-b'}" in line
