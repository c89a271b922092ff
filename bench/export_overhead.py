"""A/B: what exporting costs the measuring loop (issue #14: "export on vs off within noise").

An asyncio loop runs voicelat's kind of wake-up probe (sleep 1 ms, record how late it woke) while
turns are handed to the export fan-out at a load run's rate. "on" exports every turn to OTel
(OTLP/HTTP to a receiver in another process), Prometheus (serving /metrics, scraped from another
process every second) and turns.csv; "off" builds no exporter. Rounds alternate off/on so drift
(other processes, CPU frequency) hits both alike. Reported: the probe's lag P50/P99/max per mode,
and what one ``submit`` costs the loop.

    PYTHONPATH=. .venv/bin/python bench/export_overhead.py [--seconds 5] [--rounds 3] [--rate 20]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "export"))

from synthetic_turns import synthetic_turns  # noqa: E402

from voicelat.core.base.stats import percentile  # noqa: E402
from voicelat.export import ExportFanout, ExportOptions, build_exporters  # noqa: E402

RECEIVER = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
s = ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_port, flush=True)
s.serve_forever()
"""

SCRAPER = """
import sys, time, urllib.request
while True:
    try:
        urllib.request.urlopen(sys.argv[1], timeout=2).read()
    except OSError:
        pass
    time.sleep(1)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _probe_and_feed(
    fan: ExportFanout, seconds: float, rate: float
) -> tuple[list[int], list[int]]:
    lags: list[int] = []
    submit_ns: list[int] = []
    turns = synthetic_turns(int(seconds * rate) + 1)
    period = 0.001

    async def feed() -> None:
        for t in turns:
            await asyncio.sleep(1 / rate)
            a = time.perf_counter_ns()
            fan.submit(t)
            submit_ns.append(time.perf_counter_ns() - a)

    task = asyncio.create_task(feed())
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t = time.perf_counter_ns()
        await asyncio.sleep(period)
        lags.append(max(0, time.perf_counter_ns() - t - int(period * 1e9)))
    task.cancel()
    return lags, submit_ns


def _round(
    on: bool, seconds: float, rate: float, otlp: str, out: Path
) -> tuple[list[int], list[int]]:
    port = _free_port()
    exporters = (
        build_exporters(
            ExportOptions(
                pipeline={"name": "bench"}, run_dir=out, otlp_endpoint=otlp,
                metrics_port=port, csv=True, env={},
            )
        )
        if on
        else []
    )  # fmt: skip
    scraper = (
        subprocess.Popen([sys.executable, "-c", SCRAPER, f"http://127.0.0.1:{port}/metrics"])
        if on
        else None
    )
    time.sleep(0.5)  # let the scraper's interpreter start before the probe measures
    fan = ExportFanout(exporters)
    fan.start()
    try:
        return asyncio.run(_probe_and_feed(fan, seconds, rate))
    finally:
        fan.close({})
        if scraper is not None:
            scraper.terminate()
            scraper.wait(5)


def _line(name: str, values: list[int]) -> str:
    v = [float(x) for x in values]
    return (
        f"{name:<4} n={len(v):>6}  P50 {percentile(v, 50) / 1e3:8.1f} us  "
        f"P99 {percentile(v, 99) / 1e3:8.1f} us  max {max(v) / 1e3:8.1f} us"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rate", type=float, default=20.0, help="turns per second handed over")
    args = ap.parse_args()
    receiver = subprocess.Popen([sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True)
    assert receiver.stdout is not None
    otlp = f"http://127.0.0.1:{receiver.stdout.readline().strip()}"
    lags: dict[str, list[int]] = {"off": [], "on": []}
    submits: list[int] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for _ in range(args.rounds):
                for mode in ("off", "on"):
                    lag, sub = _round(mode == "on", args.seconds, args.rate, otlp, Path(tmp))
                    lags[mode] += lag
                    if mode == "on":
                        submits += sub
    finally:
        receiver.terminate()
        receiver.wait(5)
    print(f"loop-lag probe (1 ms sleeps), {args.rounds} x {args.seconds:g} s per mode, "
          f"{args.rate:g} turns/s exported to OTel + Prometheus + CSV when on")  # fmt: skip
    print(_line("off", lags["off"]))
    print(_line("on", lags["on"]))
    print(_line("submit", submits).replace("submit n", "submit() n"))


if __name__ == "__main__":
    main()
