"""Soak ``voicelat watch``: POST two-turn Pipecat-shaped calls (the test exporter's OTLP
protobuf bodies, real OpenTelemetry SDK spans) at a steady rate; sample the watcher's RSS.

    PYTHONPATH=$PWD python bench/watch_soak.py --seconds 240 --rate 20

Prints the RSS samples (seconds, MB) and the watcher's last status line. Loopback only.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.trace_exporter import BASE_NS, conversation, request_bytes  # noqa: E402


def _rss_mb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) // 1024
    return 0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--seconds", type=float, default=240.0)
    p.add_argument("--rate", type=float, default=20.0, help="calls per second (2 turns each)")
    p.add_argument("--max-spans", default="20000")
    args = p.parse_args()
    out = tempfile.mkdtemp()
    cmd = [sys.executable, "-m", "voicelat", "watch", "--port", "0", "--out", out]
    cmd += ["--every", "10", "--window", "20", "--settle", "0.5", "--max-spans", args.max_spans]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout is not None
    url = proc.stdout.readline().split()[1]
    n_calls = int(args.seconds * args.rate) + 10
    # Unique trace and span ids per call, made before the clock starts.
    bodies = [
        request_bytes(conversation(f"c{i}", 2, base_ns=BASE_NS + i * 30 * 10**9))
        for i in range(n_calls)
    ]
    t0 = time.monotonic()
    sent = 0
    samples: list[tuple[int, int]] = []
    every = max(1, int(args.rate * 5))
    while time.monotonic() - t0 < args.seconds and sent < n_calls:
        req = urllib.request.Request(
            url, data=bodies[sent], headers={"Content-Type": "application/x-protobuf"}
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            resp.read()
        sent += 1
        if sent % every == 0:
            samples.append((round(time.monotonic() - t0), _rss_mb(proc.pid)))
        time.sleep(max(0.0, t0 + sent / args.rate - time.monotonic()))
    proc.send_signal(signal.SIGTERM)
    rest, _ = proc.communicate(timeout=60)
    print(f"calls {sent}; watcher RSS (s, MB): {samples}")
    print(rest.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
