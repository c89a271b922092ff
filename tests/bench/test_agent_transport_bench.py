"""The agent-transport bench, run as users run it (2 turns per transport, real Pipecat bots):
it splits every turn, and the remainders are where docs/AGENTS.md says (generous
bounds; the figures themselves live there)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.helpers import ROOT

BENCH = ROOT / "bench" / "agent_transport.py"


@pytest.mark.slow
def test_the_bench_splits_the_transport_remainder() -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--turns", "2", "--only", "ws 24k,webrtc jb4"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("2/2 turns split") == 2, proc.stdout
    m = re.search(r"^transport_p50_ms=ws 24k:([\d.]+),webrtc jb4:([\d.]+)$", proc.stdout, re.M)
    assert m, proc.stdout
    ws, webrtc = float(m.group(1)), float(m.group(2))
    assert 0 < ws < 60, proc.stdout  # protobuf over a loopback socket
    assert 40 < webrtc < 300 and webrtc > ws, proc.stdout  # Opus + aiortc's jitter buffer
