"""Prometheus export, checked by a REAL Prometheus server scraping it (Debian's package)."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from synthetic_turns import synthetic_turns

from voicelat.core.base.errors import EXIT_INFRA
from voicelat.core.summaries.summary import build_summary
from voicelat.export import ExportOptions, MetricsPortInUse, build_exporters
from voicelat.export.measures import bucket_width_s
from voicelat.export.prometheus import PrometheusExporter

PROMETHEUS = shutil.which("prometheus")
DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "voicelat.json"
N_TURNS = 300


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())


def _dashboard_queries() -> list[str]:
    doc = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in doc["panels"] for t in p["targets"]]
    exprs.append(doc["templating"]["list"][0]["query"]["query"])
    return exprs


def _concrete(expr: str) -> str:
    """A dashboard expression with Grafana's variables filled in, as Grafana would send it."""
    return (
        expr.replace("$pipeline", ".*").replace("$__rate_interval", "1m").replace("$__range", "5m")
    )


def _query(base: str, promql: str) -> float | None:
    doc = _get(f"{base}/api/v1/query?{urllib.parse.urlencode({'query': promql})}")
    result = doc["data"]["result"]
    return float(result[0]["value"][1]) if result else None


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[tuple[PrometheusExporter, str]]:
    """The exporter on a free port, and a Prometheus scraping it every second."""
    if PROMETHEUS is None:
        pytest.skip("prometheus is not installed (apt-get install prometheus; .ci/run does)")
    exporter = PrometheusExporter(0, pipeline="synthetic")
    port = _free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: voicelat\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{exporter.port}']\n"
    )
    proc = subprocess.Popen(
        [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                with urllib.request.urlopen(f"{base}/-/ready", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                pytest.fail("prometheus did not become ready")
            time.sleep(0.2)
        yield exporter, base
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        exporter.close(None)


@pytest.mark.e2e
def test_prometheus_quantiles_agree_with_the_summary(
    prometheus: tuple[PrometheusExporter, str],
) -> None:
    exporter, base = prometheus
    turns = synthetic_turns(N_TURNS, failed_every=50)
    for t in turns:
        exporter.on_turn(t)
    summary = build_summary(turns, run={}, pipeline={"name": "synthetic"}, fixtures=[], stages={})
    # Wait for a scrape that saw every turn.
    deadline = time.monotonic() + 20
    while _query(base, 'voicelat_turns_total{pipeline="synthetic"}') != N_TURNS:
        assert time.monotonic() < deadline, "prometheus never scraped the exporter"
        time.sleep(0.3)
    failed = _query(base, 'voicelat_turn_failures_total{stage="llm"}')
    assert failed == summary["counts"]["failed"] == 5
    assert _query(base, "count(voicelat_turn_e2e_seconds_count)") == 1
    head = summary["counts"]["headline"]
    assert _query(base, "sum(voicelat_turn_e2e_seconds_count)") == head == N_TURNS - 6
    checks = [
        ("voicelat_turn_e2e_seconds_bucket", summary["e2e"]),
        ('voicelat_turn_segment_seconds_bucket{segment="stt"}', summary["segments"]["stt"]),
        ('voicelat_turn_segment_seconds_bucket{segment="llm_ttft"}', summary["segments"]["llm_ttft"]),
    ]  # fmt: skip
    for series, dist in checks:
        for q, key in ((0.5, "p50"), (0.9, "p90")):
            got = _query(base, f"histogram_quantile({q}, sum by (le) ({series}))")
            want = dist[key] / 1e9
            assert got is not None, series
            assert abs(got - want) <= bucket_width_s(want), (series, key, got, want)
    # Every query of the Grafana dashboard is PromQL this Prometheus accepts.
    for expr in _dashboard_queries():
        if expr.startswith("label_values"):
            continue
        url = f"{base}/api/v1/query?{urllib.parse.urlencode({'query': _concrete(expr)})}"
        assert _get(url)["status"] == "success", expr


def test_a_port_in_use_fails_before_the_run_naming_the_port(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(MetricsPortInUse) as info:
            PrometheusExporter(port, pipeline="p")
        assert info.value.exit_code == EXIT_INFRA == 3
        assert str(port) in str(info.value) and "in use" in str(info.value)
        # Through the registry: Prometheus is built first, so turns.csv was never opened.
        opts = ExportOptions(metrics_port=port, csv=True, run_dir=tmp_path, env={})
        with pytest.raises(MetricsPortInUse):
            build_exporters(opts)
        assert not (tmp_path / "turns.csv").exists()


def test_metrics_page_names_and_bounded_labels() -> None:
    exporter = PrometheusExporter(0, pipeline="p")
    try:
        for t in synthetic_turns(20, failed_every=7):
            exporter.on_turn(t)
        exporter.on_loop_lag(1_500_000)
        exporter.on_turn(synthetic_turns(1)[0])
        url = f"http://127.0.0.1:{exporter.port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as resp:
            page = resp.read().decode()
    finally:
        exporter.close(None)
    for name in ("voicelat_turn_e2e_seconds_bucket", "voicelat_turn_segment_seconds_bucket",
                 "voicelat_llm_ttft_seconds_count", "voicelat_tts_ttfa_seconds_count",
                 "voicelat_turns_total", "voicelat_turn_failures_total",
                 "voicelat_loop_lag_seconds_count"):  # fmt: skip
        assert f"\n{name}{{" in page, name
    labels = {
        pair.split("=")[0]
        for line in page.splitlines()
        if line.startswith("voicelat_") and "{" in line
        for pair in line[line.index("{") + 1 : line.index("}")].split(",")
    }
    assert labels == {"pipeline", "segment", "stage", "le"}
    # The dashboard names only metrics the exporter serves.
    used = {m for e in _dashboard_queries() for m in re.findall(r"voicelat_[a-z0-9_]+", e)}
    assert len(used) >= 7
    for name in used:
        assert f"\n{name}{{" in page, name
    assert 'voicelat_turns_total{pipeline="p"} 21.0' in page
    assert 'voicelat_turn_failures_total{pipeline="p",stage="llm"} 2.0' in page
    # 20 per-turn maxima, then the probe's sample; once samples arrive, turns add none.
    assert 'voicelat_loop_lag_seconds_count{pipeline="p"} 21.0' in page
