"""``voicelat ci --budget FILE`` records and shows the gate's budget, and report.html opens with
the gate's verdict (issue #29: summary.json, report.html and `view` showed the pipeline's
budget, and the page never said the gate failed).

A real gate: the ``voicelat ci`` command (in this process, through its real argparse wiring)
against ``voicelat serve openai`` on loopback, one real-time turn.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.emulated_run import KEY_ENV, pipeline, serving
from voicelat.cli.main import main
from voicelat.cli.view import run_page
from voicelat.files.results import load_run

IMPOSSIBLE = "[budget]\nmin_turns = 1\n[budget.e2e]\np50_ms = 1\n"


@pytest.mark.e2e
def test_ci_budget_file_is_the_budget_recorded_and_the_page_says_the_gate_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(KEY_ENV, "emulator-key")
    budget = tmp_path / "strict.toml"
    budget.write_text(IMPOSSIBLE)
    out = tmp_path / "gate"
    with serving() as (base_url, _):
        # The emulated pipeline has no [budget]: on main summary.json recorded {} here.
        pipe = pipeline(tmp_path, base_url)
        args = ["ci", "-p", str(pipe), "--budget", str(budget), "--turns", "1", "--warmup", "0"]
        code = main([*args, "-o", str(out)])
    assert code == 1, capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["budget"] == {"min_turns": 1, "e2e": {"p50_ms": 1}}
    page = (out / "report.html").read_text()
    verdict = page.index("latency gate FAILED")
    assert verdict < page.index("<h2>"), "the verdict is not at the top of report.html"
    assert str(budget) in page[verdict : page.index("<h2>")]
    # `view --html` redraws the same verdict from gate.json, and the budget from summary.json.
    again = run_page(load_run(out))
    assert "latency gate FAILED" in again and again.index("latency gate FAILED") < again.index("<h2>")
