"""Soak ``voicelat watch`` with a real Pipecat bot's spans: ``voicelat run`` plays calls to the
bot at ``--concurrency 5`` for ``--seconds``, the bot exports its OpenTelemetry spans to watch;
watch's RSS is sampled every 10 s, its Prometheus histograms are compared with ``voicelat
import`` of the same spans (docs/PRODUCTION.md, "A real bot, 10 minutes").

    PYTHONPATH=$PWD python bench/watch_bot_soak.py --seconds 600 --concurrency 5

What runs, each in its own process, on loopback: ``voicelat serve openai --profile realistic``
(the providers), bench/emulated_pipecat_bot.py (the example Pipecat bot, its pipecat-ws route,
tracing on, its STT/LLM/TTS Pipecat's OpenAI services on the emulator), ``voicelat watch
--metrics-port`` and ``voicelat run -p agent-pipecat-ws --concurrency N --turns BIG`` (stopped
with SIGTERM at ``--seconds``: run has no duration option). The bot's OTLP exporter points at a
tee in this process: each POST body goes on to watch unchanged (watch's status and body come
back to the bot) and is appended to ``OUT/spans.pb`` as the collector's file exporter writes
with ``format: proto`` (length-prefixed ExportTraceServiceRequest bodies), which
``voicelat import`` then reads: the same spans, byte for byte what watch was sent.

Prints the RSS samples, watch's counters and a Markdown table: each histogram's
``histogram_quantile`` (Prometheus' interpolation, computed here from the scraped buckets) beside
the import summary's P50/P90, and whether they agree within the bucket the import's value falls
in. Exit 1 if any does not, or if watch dropped anything.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from voicelat.export.measures import bucket_width_s  # noqa: E402

PY = sys.executable


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    return 0.0


class Tee:
    """OTLP/HTTP in, forwarded to watch unchanged, each request body kept as the collector's
    file exporter keeps it with ``format: proto`` (its length, 4 bytes big-endian, then it)."""

    def __init__(self, upstream: str, dump: Path) -> None:
        self.upstream, self.posts, self.lock = upstream, 0, threading.Lock()
        self.file = dump.open("wb")
        tee = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                ctype = self.headers.get("Content-Type", "application/x-protobuf")
                with tee.lock:  # the collector's file exporter, format: proto
                    tee.file.write(len(body).to_bytes(4, "big") + body)
                    tee.file.flush()
                    tee.posts += 1
                req = urllib.request.Request(
                    tee.upstream, data=body, headers={"Content-Type": ctype}
                )
                try:
                    with urllib.request.urlopen(req, timeout=10) as resp:
                        status, answer = resp.status, resp.read()
                except urllib.error.HTTPError as exc:
                    status, answer = exc.code, exc.read()
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.file.close()


def _start(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=log.open("w"),
        text=True,
        cwd=ROOT,
        env=env,
    )


def _first_line(proc: subprocess.Popen[str], prefix: str, what: str) -> str:
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(prefix):
            return line.strip()
    raise SystemExit(f"{what} did not start (exit {proc.poll()}): see its log")


def _pipeline(tmp: Path, bot_port: int) -> Path:
    """The agent-pipecat-ws pipeline on the bot's port, without voicelat's own trace receiver
    (the bot exports to watch here, not to the run)."""
    text = (ROOT / "pipelines" / "agent-pipecat-ws.toml").read_text()
    text = text.replace("127.0.0.1:7860", f"127.0.0.1:{bot_port}")
    text = re.sub(r'^(traces = "pipecat"|trace_wait_ms = \d+)$', "", text, flags=re.M)
    path = tmp / "agent-pipecat-ws.toml"
    path.write_text(text)
    return path


def _histograms(text: str) -> dict[str, list[tuple[float, float]]]:
    """Each latency histogram series (``e2e`` or the segment's name) -> its (le, cumulative)."""
    out: dict[str, list[tuple[float, float]]] = {}
    for family in text_string_to_metric_families(text):
        if family.name not in ("voicelat_turn_e2e_seconds", "voicelat_turn_segment_seconds"):
            continue
        for s in family.samples:
            if s.name.endswith("_bucket"):
                key = s.labels.get("segment", "e2e")
                out.setdefault(key, []).append((float(s.labels["le"]), s.value))
    return {k: sorted(v) for k, v in out.items()}


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """Prometheus' ``histogram_quantile``: linear within the bucket the rank falls in."""
    total = buckets[-1][1] if buckets else 0.0
    if total == 0:
        return None
    rank, lower, below = q * total, 0.0, 0.0
    for upper, count in buckets:
        if count >= rank:
            if math.isinf(upper):
                return lower  # the highest finite bound, as Prometheus answers
            if count == below:
                return upper
            return lower + (upper - lower) * (rank - below) / (count - below)
        lower, below = upper, count
    return lower


def _scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as resp:
        text: str = resp.read().decode()
        return text


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--seconds", type=float, default=600.0)
    p.add_argument("--concurrency", type=int, default=5)
    p.add_argument(
        "--window", type=float, default=300.0, help="watch's rolling window (its default 300)"
    )
    p.add_argument("--out", type=Path, default=None, help="keep everything here (default: tmp)")
    args = p.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="watch-bot-soak-"))
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    procs: list[subprocess.Popen[str]] = []
    try:
        emu = _start(
            [PY, "-m", "voicelat", "serve", "openai", "--profile", "realistic", "--port", "0"],
            out / "emulator.log",
            env,
        )
        procs.append(emu)
        emu_url = _first_line(emu, "openai ", "the emulator").split()[1].removesuffix("/v1")
        metrics_port = _free_port()
        watch_cmd = [PY, "-m", "voicelat", "watch", "--port", "0", "--out", str(out / "watch")]
        watch_cmd += [
            "--metrics-port",
            str(metrics_port),
            "--every",
            "60",
            "--window",
            str(args.window),
        ]
        watch = _start(watch_cmd, out / "watch.log", env)
        procs.append(watch)
        watch_url = _first_line(watch, "watching ", "voicelat watch").split()[1]
        metrics_url = _first_line(watch, "metrics ", "watch's /metrics").split()[1]
        tee = Tee(watch_url, out / "spans.pb")
        bot_port = _free_port()
        bot_cmd = [PY, str(ROOT / "bench" / "emulated_pipecat_bot.py"), "--port", str(bot_port)]
        bot_cmd += ["--transport", "pipecat-ws", "--llm-url", emu_url]
        bot_cmd += ["--otlp-endpoint", tee.url]
        bot = _start(bot_cmd, out / "bot.log", env)
        procs.append(bot)
        _first_line(bot, "pipecat-bot ready", "the bot")
        run_cmd = [PY, "-m", "voicelat", "run", "-p", str(_pipeline(out, bot_port)), "--no-tui"]
        run_cmd += ["-q", "--concurrency", str(args.concurrency), "--turns", "1000000"]
        run_cmd += ["--warmup", "0", "--out", str(out / "run")]
        samples: list[tuple[int, float]] = [(0, _rss_mb(watch.pid))]
        t0 = time.monotonic()
        run = _start(run_cmd, out / "run.log", env)
        procs.append(run)
        while time.monotonic() - t0 < args.seconds and run.poll() is None:
            time.sleep(max(0.0, t0 + 10 * len(samples) - time.monotonic()))
            samples.append((round(time.monotonic() - t0), _rss_mb(watch.pid)))
            (out / "rss.json").write_text(json.dumps(samples))  # kept if the bench dies
        # SIGTERM, not SIGINT: a job started in the background (nohup, `&` in a script) has
        # SIGINT ignored, and voicelat stops on SIGTERM the same way (cli/signals.py).
        run.send_signal(signal.SIGTERM)
        try:
            run.wait(timeout=60)
        except subprocess.TimeoutExpired:
            print("voicelat run did not stop in 60 s after SIGTERM: killed")
            run.kill()
        # The last calls' turns: the bot's exporter (50 ms batches), then watch's settle (5 s).
        time.sleep(10)
        scraped = _scrape(metrics_url)
        (out / "metrics.txt").write_text(scraped)
        watch.send_signal(signal.SIGTERM)
        rest, _ = watch.communicate(timeout=60)
        tee.close()
        imp = subprocess.run(
            [PY, "-m", "voicelat", "import", str(out / "spans.pb"), "--out", str(out / "imp")],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        print(imp.stdout.strip(), imp.stderr.strip(), sep="\n")
        _report(args, out, samples, rest, scraped, tee.posts)
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()


def _report(
    args: argparse.Namespace,
    out: Path,
    samples: list[tuple[int, float]],
    watch_out: str,
    scraped: str,
    posts: int,
) -> None:
    summary = json.loads((out / "imp" / "summary.json").read_text())
    run_file = out / "run" / "turns.jsonl"
    run_turns = sum(1 for _ in run_file.open()) if run_file.exists() else 0
    status = [ln for ln in watch_out.splitlines() if ln.startswith("window")]
    rss = [mb for _, mb in samples]
    print(f"load {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    print(f"watch RSS (s, MB): {[(s, round(mb, 1)) for s, mb in samples]}")
    print(
        f"watch RSS MB: start {rss[0]:.1f} (before any span), at 10 s {rss[1]:.1f}, "
        f"end {rss[-1]:.1f}, max {max(rss):.1f}; last half {min(rss[len(rss) // 2 :]):.1f}"
        f"..{max(rss[len(rss) // 2 :]):.1f}"
    )
    print(f"watch's last status: {status[-1] if status else watch_out.strip()}")
    counts = summary.get("counts", {})
    print(
        f"import: {counts.get('turns')} turn(s), {counts.get('headline')} with an e2e; "
        f"run turns written {run_turns}; OTLP posts teed {posts}"
    )
    hist = _histograms(scraped)
    ok = True
    dists = {"e2e": summary.get("e2e", {}), **summary.get("segments", {})}
    print("| series | n (hist / import) | hist P50 | import P50 | hist P90 | import P90 | ok |")
    print("|---|---|---|---|---|---|---|")
    for key, buckets in hist.items():
        d = dists.get(key) or {}
        n_hist = int(buckets[-1][1]) if buckets else 0
        if n_hist == 0 and not d.get("n"):
            continue
        cells, row_ok = [], True
        for q, name in ((0.5, "p50"), (0.9, "p90")):
            got = histogram_quantile(q, buckets)
            want = d.get(name)
            want_s = want / 1e9 if isinstance(want, int | float) else None
            good = (
                got is not None
                and want_s is not None
                and abs(got - want_s) <= bucket_width_s(want_s)
            )
            row_ok &= good
            cells += [
                "-" if got is None else f"{got * 1000:.0f}",
                "-" if want_s is None else f"{want_s * 1000:.0f}",
            ]
        ok &= row_ok
        n_imp = d.get("n", 0)
        print(
            f"| {key} | {n_hist} / {n_imp} | {cells[0]} | {cells[1]} | {cells[2]} | {cells[3]} "
            f"| {'yes' if row_ok else 'NO'} |"
        )
    (out / "soak.json").write_text(json.dumps({"rss": samples, "status": status}, indent=1))
    print(f"files kept in {out}")
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
