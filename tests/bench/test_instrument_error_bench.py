"""The instrument-error bench, run as users run it: a stamp delayed by a known 10 ms widens the
error bar by it (the figures themselves live in docs/BENCHMARKS.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT

BENCH = ROOT / "bench" / "instrument_error.py"


@pytest.mark.e2e
def test_a_delayed_stamp_moves_the_bar_by_the_delay(tmp_path: Path) -> None:
    out = tmp_path / "bar.json"
    args = ["--delays", "0,10", "--turns", "2", "--passes", "1", "--json", str(out)]
    proc = subprocess.run(
        [sys.executable, str(BENCH), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "covered=all"
    zero, ten = (r["passes"][0] for r in json.loads(out.read_text())["rows"])
    assert zero["status"] == ten["status"] == "calibrated"
    # In ms. The bar moves by the injected 10 ms: its P50 by 10 ms (give or take the loopback's
    # own spread), in every kind, so a bar that ignored the delay (or doubled it) fails.
    assert 9.0 <= ten["p50_ms"] - zero["p50_ms"] <= 11.0, (zero, ten)
    for kind, (p50, _p99) in ten["by_kind_ms"].items():
        assert 10.0 <= p50 < 15.0, kind
