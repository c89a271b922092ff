"""``--otlp-endpoint`` URLs that can never work: one warning line saying what is wrong with the
URL, before the first export, and nothing more for the rest of the run (no HTTP client parse
error per batch); a good URL still exports (to a real loopback OTLP receiver)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from otlp_sink import otlp_receiver

from tests.cli.emulated_run import run_args, serving
from tests.helpers import voicelat
from voicelat.export import ExportFanout
from voicelat.export.otel import OtelExporter, endpoint_problem
from voicelat.files.results import load_run

RUN = Path(__file__).resolve().parents[1] / "tui" / "data" / "run"

BAD = [
    ("not a url", "no scheme"),
    ("ftp://127.0.0.1:4318", "not ftp://"),
    ("http://127.0.0.1:99999", "port out of range"),
    ("http://[::1:4318", "invalid ipv6 url"),
    ("http://" + "a" * 64 + ".example:4318", "not a valid host name"),
    ("http://a..b:4318", "not a valid host name"),
    ("http://:4318", "no host"),
]


@pytest.mark.parametrize(("url", "says"), BAD, ids=[b[1] for b in BAD])
def test_a_url_that_cannot_work_is_one_warning_and_no_export(url: str, says: str) -> None:
    assert says in (endpoint_problem(url) or "")
    warnings: list[str] = []
    exporter = OtelExporter(url, pipeline={"name": "p"}, warn=warnings.append)
    with ExportFanout([exporter], warn=warnings.append) as fan:
        for turn in load_run(RUN).turns:
            fan.submit(turn)
    assert len(warnings) == 1, warnings
    assert says in warnings[0] and "OTel export is off" in warnings[0]


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:4318",
        "https://collector.example",
        "http://[::1]:4318/v1/traces",
        "http://otel-collector:4318",
    ],
)
def test_urls_that_can_work_have_no_problem(url: str) -> None:
    assert endpoint_problem(url) is None


def test_a_good_url_still_exports() -> None:
    warnings: list[str] = []
    with otlp_receiver() as sink:
        exporter = OtelExporter(sink.url, pipeline={"name": "p"}, warn=warnings.append)
        with ExportFanout([exporter], warn=warnings.append) as fan:
            for turn in load_run(RUN).turns:
                fan.submit(turn)
    assert warnings == [] and len(sink.spans()) > 0


@pytest.mark.e2e
def test_run_with_an_ftp_endpoint_prints_one_warning_line(tmp_path: Path) -> None:
    with serving() as (url, _):
        out = tmp_path / "out"
        proc = voicelat(
            "run", *run_args(tmp_path, url, out, turns=2), "--otlp-endpoint", "ftp://127.0.0.1:4318",
            env={"VOICELAT_EMULATOR_KEY": "k"}, timeout=120,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "OTLP" in line or "otlp" in line]
    assert len(lines) == 1 and lines[0].startswith("warning: OTLP endpoint ftp://"), proc.stderr
    assert "Traceback" not in proc.stderr
    assert json.loads((out / "summary.json").read_text())["counts"]["turns"] == 2
