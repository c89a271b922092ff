"""The exports wired into the commands: `run --json` / `-q`, turns.csv, `--otlp-endpoint` and
`--metrics-port` during a real run against the OpenAI emulator, a metrics port in use, and
`ci --benchmark-json` — each through `python -m voicelat`, as a user runs it."""

from __future__ import annotations

import contextlib
import csv
import json
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.export.otlp_sink import attributes, otlp_receiver
from tests.helpers import ROOT, read_turns, voicelat
from voicelat.export import SUMMARY_SCHEMA, TURN_SCHEMA, validate
from voicelat.export.measures import bucket_width_s


@pytest.fixture(scope="module")
def emulated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """`voicelat serve openai --profile exact` in its own process; the emulated-openai pipeline
    pointed at it."""
    d = tmp_path_factory.mktemp("emulated")
    proc = subprocess.Popen(
        [sys.executable, "-m", "voicelat", "serve", "openai", "--profile", "exact", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().split()[1]
        text = (ROOT / "pipelines" / "emulated-openai.toml").read_text()
        pipe = d / "p.toml"
        pipe.write_text(text.replace("http://127.0.0.1:8401/v1", url))
        yield {"pipeline": str(pipe), "env": {"VOICELAT_EMULATOR_KEY": "test"}}
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scrape_while_running(port: int, stop: threading.Event, seen: list[str]) -> None:
    while not stop.is_set():
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1) as r:
                seen.append(r.read().decode())
        except OSError:
            pass
        time.sleep(0.2)


@pytest.mark.e2e
def test_run_json_prints_only_the_summary_and_exports_every_turn(
    emulated: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    port = _free_port()
    scraped: list[str] = []
    stop = threading.Event()
    scraper = threading.Thread(target=_scrape_while_running, args=(port, stop, scraped))
    with otlp_receiver() as sink:
        scraper.start()
        try:
            proc = voicelat(
                "run", "-p", emulated["pipeline"], "--turns", "3", "--warmup", "0",
                "--out", str(out), "--json", "--metrics-port", str(port),
                "--otlp-endpoint", sink.url,
                env=emulated["env"], timeout=300,
            )  # fmt: skip
        finally:
            stop.set()
            scraper.join()
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)  # stdout is the summary and nothing else
    assert summary == json.loads((out / "summary.json").read_text())
    validate(summary, SUMMARY_SCHEMA)
    turns = read_turns(out)
    assert len(turns) == 3
    for t in turns:
        validate(t, TURN_SCHEMA)
    # the per-turn lines went to stderr, not into the JSON
    assert sum(" e2e " in line for line in proc.stderr.splitlines()) == 3, proc.stderr
    # turns.csv beside turns.jsonl, one row per turn, in order
    with (out / "turns.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [int(r["index"]) for r in rows] == [t["index"] for t in turns]
    # one invoke_agent span per turn, its e2e and segments equal to the turn's
    spans = [s for s in sink.spans() if s.name.startswith("invoke_agent ")]
    assert len(spans) == 3
    by_index = {attributes(s)["voicelat.turn.index"]: attributes(s) for s in spans}
    for t in turns:
        attrs = by_index[t["index"]]
        assert attrs.get("voicelat.e2e_ns") == t["e2e_ns"]
        for name, ns in t["segments_ns"].items():
            assert attrs[f"voicelat.segment.{name}_ns"] == ns
    # Prometheus served /metrics while the run went
    assert any("voicelat_turns_total" in page for page in scraped), scraped[-1:]


@pytest.mark.e2e
def test_quiet_run_prints_nothing_and_still_writes_results(
    emulated: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    proc = voicelat(
        "run", "-p", emulated["pipeline"], "--turns", "1", "--warmup", "0", "--out", str(out),
        "-q", env=emulated["env"], timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout == "" and proc.stderr == ""
    assert len(read_turns(out)) == 1 and (out / "summary.json").exists()


def test_a_metrics_port_in_use_is_exit_3_naming_it_before_any_turn(
    emulated: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = voicelat(
            "run", "-p", emulated["pipeline"], "--turns", "1", "--out", str(out), "--no-tui",
            "--metrics-port", str(port), env=emulated["env"], timeout=120,
        )  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    errors = [x for x in proc.stderr.splitlines() if x.startswith("voicelat: error:")]
    assert len(errors) == 1 and str(port) in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (out / "turns.jsonl").exists() or read_turns(out) == []


@pytest.mark.parametrize("flags", [["--metrics-port", "0"], ["--metrics-port", "70000"]])
def test_a_bad_metrics_port_is_a_usage_error(flags: list[str], tmp_path: Path) -> None:
    proc = voicelat("run", "--no-tui", "--out", str(tmp_path / "o"), *flags, timeout=60)
    assert proc.returncode == 2 and "is not a port number" in proc.stderr


@pytest.mark.parametrize("fmt", ["github", "bencher"])
def test_ci_benchmark_json_from_a_saved_run(fmt: str, tmp_path: Path) -> None:
    run = tmp_path / "run"  # a copy: `ci --results` writes its reports into the run directory
    shutil.copytree(ROOT / "tests" / "tui" / "data" / "run", run)
    bench = tmp_path / "bench.json"
    proc = voicelat(
        "ci", "--results", str(run), "--benchmark-json", str(bench), "--benchmark-format", fmt,
        "--budget", str(_generous_budget(tmp_path)), timeout=120,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    doc = json.loads(bench.read_text())
    e2e_p50_ns = json.loads((run / "summary.json").read_text())["e2e"]["p50"]
    if fmt == "github":  # customSmallerIsBetter: a list of {name, unit, value}, in ms
        entry = next(e for e in doc if e["name"] == "local: e2e p50")
        assert entry["unit"] == "ms" and entry["value"] == pytest.approx(e2e_p50_ns / 1e6, abs=0.01)
    else:  # Bencher Metric Format: benchmark -> measure -> value (ns)
        assert doc["local: e2e p50"]["latency"]["value"] == pytest.approx(e2e_p50_ns, abs=1)


def _generous_budget(tmp_path: Path) -> Path:
    p = tmp_path / "budget.toml"
    p.write_text("[budget.e2e]\np50_ms = 100000\n")
    return p


PROMETHEUS = shutil.which("prometheus")


@contextlib.contextmanager
def _prometheus_scraping(target_port: int, tmp_path: Path) -> Iterator[str]:
    """A real Prometheus (Debian's package) scraping 127.0.0.1:target_port twice a second."""
    if PROMETHEUS is None:
        pytest.skip("prometheus is not installed (apt-get install prometheus; .ci/run does)")
    port = _free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 500ms\n  scrape_timeout: 400ms\n"
        "scrape_configs:\n  - job_name: voicelat\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n"
    )
    proc = subprocess.Popen(
        [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{base}/-/ready", timeout=1):
                break
            assert time.monotonic() < deadline and proc.poll() is None, "prometheus not ready"
            time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def _instant(base: str, promql: str, at: float) -> float | None:
    query = urllib.parse.urlencode({"query": promql, "time": f"{at:.3f}"})
    with urllib.request.urlopen(f"{base}/api/v1/query?{query}", timeout=5) as r:
        result = json.loads(r.read())["data"]["result"]
    return float(result[0]["value"][1]) if result else None


@pytest.mark.e2e
def test_prometheus_scraping_a_load_run_agrees_with_its_summary(
    emulated: dict[str, Any], tmp_path: Path
) -> None:
    metrics_port = _free_port()
    out = tmp_path / "out"
    with _prometheus_scraping(metrics_port, tmp_path) as base:
        proc = voicelat(
            "run", "-p", emulated["pipeline"], "--turns", "8", "--warmup", "1",
            "--concurrency", "3", "--out", str(out), "--no-tui",
            "--metrics-port", str(metrics_port), "--metrics-linger", "5",
            env=emulated["env"], timeout=300,
        )  # fmt: skip
        # Queried as of the run's end, through last_over_time: once the target is gone, its
        # series are marked stale, which an instant selector would honour.
        ended = time.time()
        assert proc.returncode == 0, proc.stderr[-3000:]
        summary = json.loads((out / "summary.json").read_text())
        # the lingering /metrics was scraped after the last turn: every turn is counted
        assert (
            _instant(base, "sum(last_over_time(voicelat_turns_total[1m]))", ended)
            == summary["counts"]["turns"]
        )
        headline = summary["counts"]["headline"]
        assert headline > 0
        assert (
            _instant(base, "sum(last_over_time(voicelat_turn_e2e_seconds_count[1m]))", ended)
            == headline
        )
        checks = [("voicelat_turn_e2e_seconds_bucket", summary["e2e"])] + [
            (f'voicelat_turn_segment_seconds_bucket{{segment="{name}"}}', summary["segments"][name])
            for name in ("endpointing", "llm_ttft", "tts_ttfb")
        ]
        for series, dist in checks:
            for q, key in ((0.5, "p50"), (0.9, "p90")):
                promql = f"histogram_quantile({q}, sum by (le) (last_over_time({series}[1m])))"
                got = _instant(base, promql, ended)
                want = dist[key] / 1e9
                assert got is not None, promql
                assert abs(got - want) <= bucket_width_s(want), (promql, got, want)
