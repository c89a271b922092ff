"""bench/soak.py: its slopes (pure), and a real soak of a few seconds (slow)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT

sys.path.insert(0, str(ROOT / "bench"))

from soak import report, slope_per_hour


def test_the_slope_is_per_hour_and_least_squares() -> None:
    assert slope_per_hour([(0.0, 100.0), (1800.0, 150.0), (3600.0, 200.0)]) == pytest.approx(100.0)
    assert slope_per_hour([(0.0, 5.0), (10.0, 5.0)]) == 0.0
    assert slope_per_hour([(0.0, 5.0)]) is None


def test_the_report_judges_only_the_steady_part() -> None:
    # RSS climbs while the run warms up (the first 120 s), then is flat.
    samples = [
        {"t_s": t, "turns": 20 * t, "rss_mb": min(t, 120) + 300.0, "fds": 260, "threads": 5,
         "cpu_s": t / 3, "load1": 4.0}
        for t in range(10, 310, 10)
    ]  # fmt: skip
    summary = {"run": {"status": "interrupted"}, "counts": {"turns": 6000}, "e2e": {},
               "loop_lag": {}, "trust": {"reasons": []}}  # fmt: skip
    rep = report({"samples": samples, "summary": summary}, 120.0)
    assert rep["slopes"] == {"rss_mb_per_hour": 0.0, "fds_per_hour": 0.0, "threads_per_hour": 0.0}
    assert rep["steady_samples"] == 19 and rep["rss_mb_per_1000_turns"] == 0.0
    assert rep["run"]["quantiles"].startswith("(not stated")


@pytest.mark.slow
def test_a_short_real_soak_samples_the_child_and_writes_its_json(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    cmd = [sys.executable, str(ROOT / "bench" / "soak.py"), "--sessions", "2", "--minutes",
           "0.4", "--interval", "4", "--settle", "0.1", "--synthetic", "--out", str(out)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert len(doc["samples"]) >= 4 and doc["samples"][-1]["turns"] > 0
    assert all(s["rss_mb"] > 0 and s["fds"] > 0 and s["threads"] >= 1 for s in doc["samples"])
    assert doc["run"]["status"] == "interrupted" and doc["run"]["counts"]["turns"] > 0
    assert doc["run"]["quantiles"] == {"mode": "exact"}
    assert "steady part" in proc.stdout and "MB/h" in proc.stdout
