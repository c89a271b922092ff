"""`voicelat run --concurrency / --rate` bad input: one clear line, exit 2, nothing started."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ROOT, voicelat


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--concurrency", "0"], "argument --concurrency/-c: 0 must be at least 1"),
        (["--concurrency", "-3"], "argument --concurrency/-c: -3 must be at least 1"),
        (["-c", "2.5"], "argument --concurrency/-c: '2.5' is not an integer"),
        (["--rate", "0"], "argument --rate: 0 must be a positive number of turns per second"),
        (["--rate", "-1.5"], "argument --rate: -1.5 must be a positive number"),
        (["--rate", "nan"], "argument --rate: nan must be a positive number"),
        (["--rate", "fast"], "argument --rate: 'fast' is not a number"),
        (["--rate", "2", "--concurrency", "4"], "not allowed with argument --rate"),
        (["--concurrency", "4", "--rate", "2"], "not allowed with argument --concurrency"),
        (["--arrival", "bursty", "--rate", "1"], "argument --arrival: invalid choice: 'bursty'"),
        (["--arrival", "constant"], "--arrival and --arrival-seed shape an open-loop schedule"),
        (["--arrival-seed", "3"], "add --rate R"),
    ],
)
def test_bad_load_options_are_one_line_and_exit_2(
    args: list[str], says: str, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    proc = voicelat("run", "--no-tui", "--out", str(out), *args, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("voicelat: error:")]
    assert len(errors) == 1 and says in errors[0], proc.stderr
    assert not out.exists()  # refused before any run (or server) started


def test_run_help_documents_both_loops() -> None:
    proc = voicelat("run", "--help", timeout=60)
    assert proc.returncode == 0
    for word in ("--concurrency", "closed loop", "--rate", "open loop", "--arrival"):
        assert word in proc.stdout


@pytest.fixture(scope="module")
def emulated_pipeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """`voicelat serve openai --profile exact` in its own process, and the emulated-openai
    pipeline pointed at its port."""
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
        yield {"pipeline": pipe, "env": {"VOICELAT_EMULATOR_KEY": "test"}}
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("args", "load"),
    [
        (["--concurrency", "2"], {"mode": "closed", "concurrency": 2, "sessions_opened": 2}),
        pytest.param(  # the open loop's own tests are in tests/engine (workers, schedules)
            ["--rate", "3", "--arrival", "constant"],
            {"mode": "open", "arrival": "constant"},
            marks=pytest.mark.slow,
        ),
    ],
)
def test_a_loaded_run_reports_both_latencies_and_its_trust(
    emulated_pipeline: dict[str, Any], tmp_path: Path, args: list[str], load: dict[str, Any]
) -> None:
    out = tmp_path / "out"
    proc = voicelat(
        "run",
        "--no-tui",
        "-p",
        str(emulated_pipeline["pipeline"]),
        "--turns",
        "4",
        "--out",
        str(out),
        *args,
        env=emulated_pipeline["env"],
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert load.items() <= summary["run"]["load"].items()
    assert summary["counts"]["headline"] == 4
    assert summary["e2e_from_intended"]["n"] == 4 and summary["schedule_lag"]["n"] == 4
    # e2e from the intended start is never shorter than from the actual start
    assert summary["e2e_from_intended"]["p50"] >= summary["e2e"]["p50"]
    assert "trust" in summary and "trustworthy" in summary["trust"]
    turns = [json.loads(x) for x in (out / "turns.jsonl").read_text().splitlines()]
    assert all("schedule_lag_ns" in t["figures"] and "session" in t["extra"] for t in turns)
    assert "trust: ok" in proc.stdout or "TRUST:" in proc.stdout
    if load["mode"] == "open":
        assert "open loop, constant arrivals at 3 turns/s" in proc.stdout
        assert "e2e from the intended start" in proc.stdout
    else:
        assert "closed loop, 2 sessions" in proc.stdout
