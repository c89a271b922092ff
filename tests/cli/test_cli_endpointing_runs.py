"""``voicelat endpointing --runs``: recorded runs on the table, and the runs it refuses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from voicelat.cli.main import main
from voicelat.core.base.turn import Turn
from voicelat.files.results import turn_to_json

MS = 1_000_000
PAUSE = {"start_ms": 1829, "end_ms": 2528}


def _write_run(
    path: Path, *, mode: str = "provider", pauses: list[dict[str, int]] | None = None
) -> Path:
    """A run directory as `voicelat run` writes it: two turns of hesitate_flight, one cut."""
    path.mkdir(parents=True)
    fixture: dict[str, Any] = {
        "id": "hesitate_flight",
        "speech_start_ms": 400,
        "speech_end_ms": 3439,
        "sha256": "486167295b27ad05a501407869a260603720404f9a4c5b3d3cd1d952bd4a9b89",
        "annotated": True,
    }
    if pauses is not None:
        fixture["pauses"] = pauses
    summary = {
        "schema_version": 1,
        "pipeline": {
            "name": "dg",
            "endpointing": {"mode": mode, "hangover_ms": 600},
            "stt": {"stage": "deepgram-stt", "endpointing": 500},
        },
        "stages": {"stt": {"stage": "deepgram-stt", "endpointing": 500, "utterance_end_ms": 1000}},
        "fixtures": [fixture],
        "counts": {"turns": 2},
    }
    (path / "summary.json").write_text(json.dumps(summary))
    lines = []
    for index, endpoint_ms in ((0, 2450), (1, 4060)):
        turn = Turn(index, "hesitate_flight", 10**12, {"endpoint": endpoint_ms * MS}, {}, None)
        lines.append(json.dumps(turn_to_json(turn)))
    (path / "turns.jsonl").write_text("\n".join(lines) + "\n")
    return path


def _last_line(capsys: pytest.CaptureFixture[str]) -> str:
    return capsys.readouterr().err.strip().splitlines()[-1]


def test_run_point_in_table_json_and_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _write_run(tmp_path / "dg-500", pauses=[PAUSE])
    args = ["endpointing", "--runs", str(run), "--endpointers", "energy", "--hangovers", "500"]
    assert main([*args, "--out", str(tmp_path / "out"), "--no-tui"]) == 0
    out = capsys.readouterr()
    row = "| deepgram (wire) | — | endpointing=500 utterance_end_ms=1000 | 621 | 621 | 50% (1/2)"
    assert row in out.out
    assert (
        "turn 0 hesitate_flight: end-of-turn at 2.450 s, inside the pause 1.829-2.528 s" in out.out
    )
    assert "scored on 1 fixture(s), the offline grid on 12" in out.err
    doc = json.loads((tmp_path / "out" / "endpointing.json").read_text())
    (point,) = [c for c in doc["configs"] if c["source"] == "wire"]
    assert point["options"] == {"endpointing": "500", "utterance_end_ms": "1000"}
    assert doc["runs"][0]["turns"][0]["cut_in_pause"] is True
    assert doc["runs"][0]["turns"][1]["latency_ns"] == 621 * MS
    page = (tmp_path / "out" / "endpointing.html").read_text()
    assert page.count('<rect x="') >= 2 and "measured on the wire" in page  # square + legend


def test_runs_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _write_run(tmp_path / "dg", pauses=[PAUSE])
    args = [
        "endpointing",
        "--runs",
        str(run),
        "--endpointers",
        "none",
        "--out",
        str(tmp_path / "o"),
    ]
    assert main([*args, "--no-tui"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Endpointing from 1 recorded run(s), no offline replay.")
    assert "Provider setting (measured on the wire) within 10%" not in out  # 50% cut
    assert "No recorded provider setting keeps cut-offs within 10%." in out


def test_controls_only_run_is_said_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _write_run(tmp_path / "dg")
    args = [
        "endpointing",
        "--runs",
        str(run),
        "--endpointers",
        "none",
        "--out",
        str(tmp_path / "o"),
    ]
    assert main([*args, "--no-tui"]) == 0
    err = capsys.readouterr().err
    assert f"note: {run}: its fixtures have no annotated pauses (controls only)" in err


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p, "no results at "),
        (lambda p: (p.mkdir(), p)[1], "holds no turns.jsonl or summary.json: is it a voicelat run"),
        (
            lambda p: _write_run(p, mode="vad", pauses=[PAUSE]),
            "ended its turns on the client VAD ([endpointing] mode = 'vad', hangover_ms = 600)",
        ),
        (
            lambda p: (_write_run(p), (p / "summary.json").unlink(), p)[2],
            "has no summary.json (stopped before its end?)",
        ),
    ],
)
def test_bad_runs_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: Any, message: str
) -> None:
    run = make(tmp_path / "r")
    args = ["endpointing", "--runs", str(run), "--out", str(tmp_path / "o"), "--no-tui"]
    assert main(args) == 2
    line = _last_line(capsys)
    assert line.startswith("voicelat: error: ") and message in line
    assert not (tmp_path / "o").exists()  # refused before any work


def test_none_without_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["endpointing", "--endpointers", "none", "--out", str(tmp_path)]) == 2
    assert "leaves nothing to score: give --runs RUN_DIR" in _last_line(capsys)
