"""``voicelat ci --budget FILE`` records and shows the gate's budget, and report.html opens with
the gate's verdict (issue #29: summary.json, report.html and `view` showed the pipeline's
budget, and the page never said the gate failed).

A real gate: ``voicelat ci`` as a subprocess against ``voicelat serve openai`` on loopback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.cli.emulated_run import KEY_ENV, pipeline, serving
from tests.helpers import ROOT

IMPOSSIBLE = "[budget]\nmin_turns = 1\n[budget.e2e]\np50_ms = 1\n"


def _ci(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "voicelat", "ci", *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
        env={**os.environ, KEY_ENV: "emulator-key", "PYTHONPATH": str(ROOT), "NO_COLOR": "1"},
    )


def test_ci_budget_file_is_the_budget_recorded_and_the_page_says_the_gate_failed(
    tmp_path: Path,
) -> None:
    budget = tmp_path / "strict.toml"
    budget.write_text(IMPOSSIBLE)
    out = tmp_path / "gate"
    with serving() as (base_url, _):
        # The emulated pipeline has no [budget]: on main summary.json recorded {} here.
        pipe = pipeline(tmp_path, base_url)
        result = _ci(
            "-p",
            str(pipe),
            "--budget",
            str(budget),
            "--turns",
            "1",
            "--warmup",
            "0",
            "-o",
            str(out),
        )
    assert result.returncode == 1, result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["budget"] == {"min_turns": 1, "e2e": {"p50_ms": 1}}
    page = (out / "report.html").read_text()
    verdict = page.index("latency gate FAILED")
    assert verdict < page.index("<h2>"), "the verdict is not at the top of report.html"
    assert str(budget) in page[verdict : page.index("<h2>")]
    # `view --html` redraws the same verdict from gate.json.
    again = subprocess.run(
        [sys.executable, "-m", "voicelat", "view", str(out), "--html"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert again.returncode == 0, again.stderr
    assert "latency gate FAILED" in (out / "report.html").read_text()
