"""``voicelat import``: a test exporter's spans (the real OpenTelemetry SDK and OTLP encoder,
tests/trace_exporter.py) with defects planted, found by ``--check``; the results directory read
by ``view``, ``ci`` (budget, baseline) and ``compare``; bad input as one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.trace_exporter import E2E_NS, SEGMENTS_NS, Defects, conversation, request_bytes
from voicelat.cli.main import main
from voicelat.core.base.errors import EXIT_GATE_FAILED, EXIT_OK, EXIT_USAGE
from voicelat.files.results import load_run

MS = 1_000_000

#: Each check and a defect that trips it, planted in turn 1 of a two-turn call.
PLANTED = {
    "ttfb_zero": Defects(turn=1, zero_tts_ttfb=True),
    "ttfb_exceeds_span": Defects(turn=1, llm_ttfb_over_span=True),
    "overlapping_turns": Defects(turn=0, overlap_next_turn=True),
    "playback_before_audio": Defects(turn=1, playback_early=True),
    "clock_jump": Defects(turn=1, stt_clock_off_ns=-500 * MS),
}


def _export(path: Path, *calls: tuple[str, Defects | None]) -> Path:
    spans = [s for conv, d in calls for s in conversation(conv, 2, d)]
    path.write_bytes(request_bytes(spans))
    return path


def test_a_clean_export_checks_clean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _export(tmp_path / "clean.pb", ("a", None), ("b", None))
    assert main(["import", str(path), "--check"]) == EXIT_OK
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("check", PLANTED)
def test_check_finds_the_defect_planted_in_the_exporter(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], check: str
) -> None:
    path = _export(tmp_path / "bad.pb", ("clean", None), ("bad", PLANTED[check]))
    assert main(["import", str(path), "--check"]) == EXIT_GATE_FAILED
    lines = capsys.readouterr().out.splitlines()
    assert lines, "no finding printed"
    assert any(line.startswith(f"{check}: conversation bad ") for line in lines), lines
    assert not any("conversation clean" in line for line in lines), lines  # only the bad call


def test_import_writes_traced_turns_each_carrying_its_findings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _export(tmp_path / "calls.pb", ("a", None), ("b", PLANTED["ttfb_zero"]))
    out = tmp_path / "run"
    assert main(["import", str(path), "--out", str(out)]) == EXIT_OK
    assert "imported 4 turn(s)" in capsys.readouterr().out
    run = load_run(out)
    assert len(run.turns) == 4
    for turn in run.turns:
        assert turn.extra["kind"] == "traced" and turn.extra["not_the_ear"] is True
        assert turn.e2e_ns == E2E_NS and sum(turn.segments.values()) == turn.e2e_ns
        if not turn.extra["findings"]:
            assert turn.segments == SEGMENTS_NS
    flagged = [t for t in run.turns if t.extra["findings"]]
    assert [(t.fixture, t.extra["turn_number"]) for t in flagged] == [("b", 2)]
    # A TTFB of 0 puts the first TTS byte at the TTS request: tts_ttfb 0, the rest transport.
    assert flagged[0].segments["tts_ttfb"] == 0 and "finding:ttfb_zero" in flagged[0].flags
    traced = run.summary["traced"]  # type: ignore[index]
    assert traced["findings"]["ttfb_zero"] == 1 and traced["conversations"] == 2
    assert traced["t0"]["end_of_speech"]["turns"] == 4
    assert "not the ear" in traced["end"]["bot_started_speaking"]["means"]
    assert traced["sources"][0]["format"] == "otlp-protobuf"
    assert run.run_summary is not None and run.run_summary.e2e.p50 == E2E_NS


def test_view_ci_and_compare_accept_an_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    week1 = _export(tmp_path / "w1.pb", ("a", None), ("b", None), ("c", None))
    week2 = _export(tmp_path / "w2.pb", ("d", None), ("e", None), ("f", None))
    r1, r2 = tmp_path / "r1", tmp_path / "r2"
    assert main(["import", str(week1), "--out", str(r1)]) == EXIT_OK
    assert main(["import", str(week2), "--out", str(r2)]) == EXIT_OK
    capsys.readouterr()
    assert main(["view", str(r1)]) == EXIT_OK
    shown = capsys.readouterr().out
    assert "tts_ttfb" in shown and "1661" in shown
    budget = tmp_path / "budget.toml"
    budget.write_text("[budget]\nmin_turns = 3\n[budget.e2e]\np90_ms = 1700\n")
    assert main(["ci", "--results", str(r2), "--budget", str(budget), "--baseline", str(r1)]) == 0
    assert "GATE PASSED" in capsys.readouterr().out
    tight = tmp_path / "tight.toml"
    tight.write_text("[budget]\nmin_turns = 3\n[budget.tts_ttfb]\np50_ms = 100\n")
    assert main(["ci", "--results", str(r2), "--budget", str(tight)]) == EXIT_GATE_FAILED
    capsys.readouterr()
    cmp_dir = tmp_path / "cmp"
    assert main(["compare", str(r1), str(r2), "--out", str(cmp_dir)]) == EXIT_OK
    doc = json.loads((cmp_dir / "comparison.json").read_text())
    assert {c["name"] for c in doc["combinations"]} == {"r1", "r2"}


def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken.pb"
    broken.write_bytes(b"\x0a\xff\xff\xff\x0f not a trace")
    assert main(["import", str(broken), "--out", str(tmp_path / "o")]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "broken.pb" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()  # nothing written for bad input
    path = _export(tmp_path / "ok.pb", ("a", None))
    assert main(["import", str(path)]) == EXIT_USAGE
    assert "--out DIR is required" in capsys.readouterr().err
    # Pipecat spans read as GenAI: no turn of that mapping; the line says which names it saw.
    assert main(["import", str(path), "--mapping", "genai", "--out", str(tmp_path / "g")]) == 2
    err = capsys.readouterr().err
    assert "no genai turn" in err and "--mapping pipecat" in err


def test_without_opentelemetry_proto_import_says_which_extra(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.helpers import ROOT

    path = _export(tmp_path / "a.pb", ("a", None))
    code = (
        "import sys; sys.modules['google.protobuf'] = None\n"  # as if not installed
        "from voicelat.cli.main import main\n"
        f"sys.exit(main(['import', {str(path)!r}, '--check']))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert run.returncode == 3, run.stderr
    assert run.stderr.strip().count("\n") == 0 and "voicelat[traces]" in run.stderr


def test_production_md_documents_every_check() -> None:
    from tests.helpers import ROOT
    from voicelat.core.traces.trace_checks import CHECKS

    text = (ROOT / "docs" / "PRODUCTION.md").read_text()
    missing = [c for c in CHECKS if f"| `{c}` |" not in text]
    assert missing == [], f"docs/PRODUCTION.md's check table lacks {missing}"
