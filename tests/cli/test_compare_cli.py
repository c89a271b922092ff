"""``voicelat compare`` without servers: bad input (one line, exit 2) and ranking saved runs."""

from __future__ import annotations

import json
import shutil
from html import escape
from pathlib import Path

import pytest

from tests.helpers import ROOT, voicelat
from voicelat.cli.main import main

SAVED_RUN = ROOT / "tests" / "tui" / "data" / "run"
MATRIX = (ROOT / "pipelines" / "matrix-local.toml").read_text()


def _one_clear_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("voicelat: error:")]
    assert len(errors) == 1, stderr
    return errors[0]


def test_unknown_stage_in_a_matrix_lists_the_known_ones(tmp_path: Path) -> None:
    bad = tmp_path / "m.toml"
    bad.write_text(MATRIX.replace('stage = "espeak-tts"', 'stage = "kokoro-tts"'))
    r = voicelat("compare", "--matrix", str(bad), "--out", str(tmp_path / "out"))
    assert r.returncode == 2
    line = _one_clear_line(r.stderr)
    assert "tts alternative 'espeak'" in line and "unknown tts stage 'kokoro-tts'" in line
    assert "espeak-tts" in line and "wyoming-tts" in line  # the known ones
    assert not (tmp_path / "out").exists()  # refused before anything started


def test_missing_pipeline_file(tmp_path: Path) -> None:
    r = voicelat("compare", "pipelines/local.toml", str(tmp_path / "nope.toml"))
    assert r.returncode == 2
    assert "nope.toml does not exist" in _one_clear_line(r.stderr)


def test_missing_matrix_file(tmp_path: Path) -> None:
    r = voicelat("compare", "--matrix", str(tmp_path / "nope.toml"))
    assert r.returncode == 2
    assert "matrix file" in _one_clear_line(r.stderr)


def test_nothing_or_both_to_compare() -> None:
    r = voicelat("compare")
    assert r.returncode == 2 and "nothing to compare" in _one_clear_line(r.stderr)
    r = voicelat("compare", "pipelines/local.toml", "--matrix", "pipelines/matrix-local.toml")
    assert r.returncode == 2 and "not both" in _one_clear_line(r.stderr)


def _copy_run(tmp_path: Path, name: str, fixture_set: str | None = None) -> Path:
    d = tmp_path / name
    shutil.copytree(SAVED_RUN, d)
    if fixture_set is not None:
        s = json.loads((d / "summary.json").read_text())
        s["fixture_set_sha256"] = fixture_set
        (d / "summary.json").write_text(json.dumps(s))
    return d


def test_runs_on_different_fixtures_are_refused(tmp_path: Path) -> None:
    a = _copy_run(tmp_path, "a")
    b = _copy_run(tmp_path, "b", fixture_set="0" * 64)
    r = voicelat("compare", str(a), str(b), "--out", str(tmp_path / "out"), "--no-tui")
    assert r.returncode == 2
    line = _one_clear_line(r.stderr)
    assert "different fixtures" in line and "'a'" in line and "'b'" in line
    assert not (tmp_path / "out").exists()


def test_saved_runs_are_ranked_with_reports(tmp_path: Path) -> None:
    a = _copy_run(tmp_path, "a")
    b = _copy_run(tmp_path, "b")
    out = tmp_path / "out"
    r = voicelat("compare", str(a), str(b), "--out", str(out), "--no-tui", "--resamples", "200")
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    doc = json.loads((out / "comparison.json").read_text())
    assert doc["interleaved"] is False  # said plainly: separate runs, drift not controlled
    assert [c["rank"] for c in doc["combinations"]] == [1, 2]
    assert {c["n"] for c in doc["combinations"]} == {14}
    # The same turns twice: identical numbers, so no difference can be significant.
    second = doc["combinations"][1]
    assert second["vs_best"]["p50"]["diff_ns"] == 0
    assert second["vs_best"]["p50"]["verdict"] == "not significant"
    assert "not significant" in r.stdout
    md = (out / "comparison.md").read_text()
    assert "| 1 | a | 14 | 0% |" in md and "| 2 | b | 14 | 0% |" in md
    page = (out / "report.html").read_text()
    assert page.count('class="waterfall"') == 4
    # The runs' turns were found where the comparison recorded them: each one's pictures.
    assert page.count('class="histogram"') == 2 and page.count('class="timeline"') == 2
    assert page.count('class="combos"') == 1


LOAD = "load average 3.1 per core > 1.5: other work competed with the run for the CPU"


def _distrust(run_dir: Path) -> None:
    s = json.loads((run_dir / "summary.json").read_text())
    s["trust"] = {
        "trustworthy": False,
        "reasons": [{"code": "load_average", "message": LOAD}],
        "checks": {},
        "thresholds": {},
    }
    (run_dir / "summary.json").write_text(json.dumps(s))


def test_a_run_on_a_distrusted_machine_keeps_its_distrust_in_every_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue #29: `compare` dropped each run's trust: a ranking of figures from an overloaded
    # machine read as clean as any other.
    a, b = _copy_run(tmp_path, "a"), _copy_run(tmp_path, "b")
    _distrust(b)
    out = tmp_path / "out"
    args = ["compare", str(a), str(b), "--out", str(out), "--no-tui", "--resamples", "200"]
    assert main(args) == 0
    stdout = capsys.readouterr().out
    doc = json.loads((out / "comparison.json").read_text())
    trust = {c["name"]: c.get("trust") for c in doc["combinations"]}
    assert trust["b"] == {"trustworthy": False, "reasons": [LOAD], "codes": ["load_average"]}
    assert trust["a"] is None  # the saved run has no trust section: nothing is claimed
    assert doc["untrusted"] == ["b"]
    line = f"(!) b: NOT trustworthy, ran on a distrusted machine: {LOAD}"
    assert line in stdout
    assert "b (!)" in stdout and "a (!)" not in stdout  # the ranking row says it too
    md = (out / "comparison.md").read_text()
    assert "## Trust" in md and f"- {line}" in md and "| b (!) |" in md
    page = (out / "report.html").read_text()
    assert f'<p class="warn">{escape(line)}</p>' in page


async def test_the_compare_screen_names_the_distrusted_run(tmp_path: Path) -> None:
    from textual.widgets import DataTable, Static

    from voicelat.cli.view import load_comparison
    from voicelat.tui.compare import CompareApp

    a, b = _copy_run(tmp_path, "a"), _copy_run(tmp_path, "b")
    _distrust(a)
    out = tmp_path / "out"
    assert main(["compare", str(a), str(b), "--out", str(out), "--no-tui", "--resamples", "200"]) == 0
    loaded = load_comparison(out)
    app = CompareApp(loaded.doc, loaded.runs)
    async with app.run_test(size=(80, 24)):
        ranking = app.query_one("#ranking", DataTable)
        names = [ranking.get_row_at(i)[1] for i in range(ranking.row_count)]
        assert sorted(names) == ["a (!)", "b"]
        warns = [str(w.render()) for w in app.query(".warn").results(Static)]
        assert any("a: NOT trustworthy" in w and "load average" in w for w in warns), warns
