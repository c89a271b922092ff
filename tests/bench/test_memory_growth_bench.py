"""bench/memory_growth.py run as users run it, small (slow: a real run of 60 turns)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.helpers import ROOT

pytestmark = pytest.mark.slow


def test_memory_growth_bench_names_the_sites_and_a_bounded_growth() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "memory_growth.py"), "--turns", "60", "--at", "20",
         "--sessions", "10", "--top", "5"],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = re.search(r"-> (-?[\d.]+) KB per turn \(the RSS", proc.stdout)
    assert m, proc.stdout
    # a finished turn is kept for the summary (a few KB); anything near 50 KB is a leak
    assert float(m.group(1)) < 50, proc.stdout
    sites = re.findall(r"^ +-?\d+ B +-?[\d.]+  (\S+):\d+", proc.stdout, re.M)
    assert sites and any(s.startswith("voicelat/") for s in sites), proc.stdout
