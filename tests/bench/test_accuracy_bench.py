"""The accuracy bench, run as users run it, with generous bounds: only what is stable on a shared,
noisy 2-core machine (the figures themselves live in docs/BENCHMARKS.md)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.helpers import ROOT

BENCH = ROOT / "bench" / "accuracy.py"


@pytest.mark.e2e
def test_accuracy_bench_at_1_and_10_sessions_is_within_10_ms_at_p99() -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--sessions", "1,10", "--turns", "2"],
        capture_output=True,
        text=True,
        timeout=540,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    m = re.fullmatch(r"p99_error_ms=(\d+\.\d+)", lines[-1])
    assert m, lines[-1]
    assert float(m.group(1)) < 10.0, proc.stdout
    # every metric was measured at both session counts, and no turn failed
    assert "2 measured turns (0 failed)" in proc.stdout
    assert "20 measured turns (0 failed)" in proc.stdout
    for metric in ("ttft", "ttfa", "stt_final", "e2e"):
        assert len(re.findall(rf"^  {metric} +\d+ ", proc.stdout, re.M)) == 2, metric


def _bench_module() -> ModuleType:
    sys.path.insert(0, str(BENCH.parent))
    spec = importlib.util.spec_from_file_location("voicelat_bench_accuracy", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.e2e
def test_nagle_on_the_server_is_measured_and_flagged(tmp_path: Path) -> None:
    """Headers and the first token as two writes without TCP_NODELAY, requests back to back:
    Linux's delayed ACK holds the token ~40 ms. voicelat sees it (the error vs the write) and
    its 40 ms check flags it; with the headers in the token's segment nothing happens."""
    bench = _bench_module()
    split = bench.wire_case(
        "two segments, no TCP_NODELAY",
        {"coalesce_headers": False, "nodelay": False},
        7,
        0.01,
        tmp_path,
    )
    assert split["n"] == 6
    assert 30 < split["ttft_vs_truth_ms"]["p50"] < 60, split
    assert split["flagged_40ms"], split
    one = bench.wire_case(
        "one segment, no TCP_NODELAY",
        {"coalesce_headers": True, "nodelay": False},
        7,
        0.01,
        tmp_path,
    )
    assert one["ttft_vs_truth_ms"]["p50"] < 10, one
    assert not one["flagged_40ms"], one
    # The emulator is not a server known to set TCP_NODELAY: the trust section keeps the flag.
    assert not split["trusted"] and one["trusted"], (split, one)


def test_compute_after_the_headers_is_measured_and_not_blamed_on_nagle(tmp_path: Path) -> None:
    """The README's first run: headers at 5 ms, the first token at 46 ms (prompt processing),
    TCP_NODELAY on. voicelat measures the 41 ms as it is; described as the embedded stack's
    LLM (a TCP_NODELAY server) the trust section passes, whatever the machine's timing."""
    bench = _bench_module()
    label, wire = bench.COMPUTE_CASE
    w = bench.wire_case(
        label, wire, 7, 0.01, tmp_path,
        headers_ms=bench.COMPUTE_HEADERS_MS, ttft_ms=bench.COMPUTE_TTFT_MS,
    )  # fmt: skip
    assert w["n"] == 6
    assert w["ttft_vs_truth_ms"]["p50"] < 10, w  # no hold: the token is read as it is written
    # the server's 46 ms are all in TTFT (a lower bound: sleeps only wake late)
    assert w["ttft_vs_injected_ms"]["p50"] >= 0, w
    assert w["trusted_as_stack"], w
    # from any other server the same gaps keep the warning exactly when they cluster
    assert w["trusted"] is not w["flagged_40ms"], w
