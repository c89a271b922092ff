"""``voicelat whatif`` on a run directory whose endpoints are those of the bundled fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from voicelat.audio.endpointers_replay import first_endpoints_ns
from voicelat.cli.main import main
from voicelat.core.base.turn import Turn
from voicelat.files.fixtures import load_fixtures
from voicelat.files.results import TurnsWriter, write_summary

ROOT = Path(__file__).resolve().parents[2]
MS = 1_000_000
IDS = ("weather_paris", "pharmacy_close", "rain_tomorrow")


def _run(tmp_path: Path, mode: str = "vad") -> Path:
    fixtures = [f for f in load_fixtures(ROOT / "fixtures") if f.id in IDS]
    ends = first_endpoints_ns(fixtures, hangover_ms=500, threshold_dbfs=-40, min_speech_ms=100)
    w = TurnsWriter(tmp_path)
    for i, f in enumerate(fixtures):
        end = (f.speech_end_ms or 0) * MS
        ep = (ends[f.id] or 0) + 300_000  # a little pacer lag
        e2e = (1000 + 10 * i) * MS
        w.write(Turn(i, f.id, 0, {"speech_end": end, "endpoint": ep}, {}, e2e))
    w.close()
    write_summary(
        tmp_path,
        {
            "schema_version": 1,
            "pipeline": {
                "endpointing": {
                    "mode": mode,
                    "hangover_ms": 500,
                    "threshold_dbfs": -40.0,
                    "min_speech_ms": 100,
                },
                "output": {"latency_ms": 0},
            },
            "fixtures": [f.to_json() for f in fixtures],
        },
    )
    return tmp_path


def test_hangover_shift_and_replay_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "p.json"
    args = ["whatif", str(_run(tmp_path)), "--set", "endpointing.hangover_ms=300"]
    assert main([*args, "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "recorded  e2e P50 1010 ms" in text and "predicted e2e P50 810 ms" in text
    assert "within 0.3 ms of every recorded endpoint" in text
    assert "assumptions:" in text
    doc = json.loads(out.read_text())
    assert doc["predicted_p50_ns"] == 810 * MS and doc["n"] == 3


def test_threshold_moves_fixtures_differently(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "p.json"
    args = ["whatif", str(_run(tmp_path)), "--set", "endpointing.threshold_dbfs=-30"]
    assert main([*args, "--set", "output.latency_ms=40", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    # e2e 1000/1010/1020 ms; the offline VAD moves weather_paris -20 ms, pharmacy_close -120,
    # rain_tomorrow 0; the output buffer adds 40: (1020, 930, 1060) ms.
    assert doc["predicted_p50_ns"] == 1020 * MS
    assert doc["predicted_p90_ns"] == 1052 * MS
    capsys.readouterr()


def test_provider_mode_and_unknown_fixture_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run(tmp_path / "a", mode="provider")
    assert main(["whatif", str(run), "--set", "endpointing.hangover_ms=300"]) == 2
    assert "endpointing.mode = provider" in capsys.readouterr().err
    run = _run(tmp_path / "b")
    args = ["whatif", str(run), "--set", "endpointing.hangover_ms=300"]
    assert main([*args, "--fixtures", str(ROOT / "fixtures" / "pauses")]) == 2
    assert "lacks the run's fixture(s)" in capsys.readouterr().err
