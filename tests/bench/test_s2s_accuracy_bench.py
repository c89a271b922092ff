"""The S2S accuracy bench, run as users run it, with a generous bound (the figures themselves
live in docs/BENCHMARKS.md): 3 turns against the OpenAI Realtime emulator in its own process."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.helpers import ROOT

BENCH = ROOT / "bench" / "s2s_accuracy.py"


@pytest.mark.e2e
def test_s2s_accuracy_bench_is_within_10_ms_at_p99() -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--turns", "3"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    m = re.fullmatch(r"p99_error_ms=(\d+\.\d+)", lines[-1])
    assert m, lines[-1]
    assert float(m.group(1)) < 10.0, proc.stdout
    assert "3 turns (0 failed)" in proc.stdout
    for metric in ("endpoint", "first_audio", "e2e", "model_vs_injected"):
        assert re.search(rf"^  {metric} +3 ", proc.stdout, re.M), (metric, proc.stdout)
