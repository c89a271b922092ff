"""``voicelat whatif`` with chunker.mode and tts=LABEL --compare DIR, on literal run directories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from voicelat.cli.main import main
from voicelat.core.base.turn import Turn
from voicelat.core.measure.arrivals import delta_record
from voicelat.core.measure.events import Delta
from voicelat.files.results import TurnsWriter, write_summary

MS = 1_000_000
WORDS = [" Yes", ",", " I", " can", " do", " that", "."]


def _turn(i: int, fixture: str, tts_ms: int, *, deltas: bool = True, reply: str = "") -> Turn:
    first = 3000 * MS
    ds = [Delta(first + k * 20 * MS, w) for k, w in enumerate(WORDS)]
    cut = ds[-1].t_ns  # sentence mode cuts at the "."
    ms = {
        "speech_end": 2000 * MS,
        "llm_first_token": first,
        "llm_first_speakable": cut,
        "llm_done": cut + 2 * MS,
        "tts_request": cut,
        "tts_first_byte": cut + (tts_ms - 20) * MS,
        "output_first_audible": cut + tts_ms * MS,
    }
    extra = {"llm_deltas": delta_record(ds)} if deltas else {}
    text = reply or "".join(WORDS).strip()
    return Turn(i, fixture, 0, ms, {}, cut + tts_ms * MS - 2000 * MS, reply=text, extra=extra)


def _run(directory: Path, turns: list[Turn], tts: dict[str, object]) -> Path:
    w = TurnsWriter(directory)
    for t in turns:
        w.write(t)
    w.close()
    pipeline = {"chunker": {"mode": "sentence", "min_chars": 1}, "output": {"latency_ms": 0}}
    write_summary(
        directory,
        {"schema_version": 1, "pipeline": {**pipeline, "tts": tts}, "stages": {"tts": tts}},
    )
    return directory


def _compare(directory: Path, cells: dict[str, list[Turn]]) -> Path:
    combos = []
    for label, turns in cells.items():
        _run(directory / label, turns, {"stage": f"{label}-tts"})
        combos.append(
            {"name": label, "run_dir": label, "labels": {"stt": "s", "llm": "l", "tts": label}}
        )
    doc = {"kind": "voicelat-comparison", "combinations": combos}
    (directory / "comparison.json").write_text(json.dumps(doc))
    return directory


def test_chunker_mode_on_a_piece_tts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(tmp_path / "run", [_turn(1, "a", 100), _turn(2, "b", 120)], {"stage": "espeak-tts"})
    out = tmp_path / "p.json"
    assert main(["whatif", str(run), "--set", "chunker.mode=clause", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    # Clause mode cuts at "," (20 ms after the first token) instead of "." (120 ms).
    assert "predicted tts_request move (the first piece leaves): P50 -100 ms" in text
    assert "within 0.0 ms of every recorded llm_first_speakable" in text
    assert "starts synthesizing on the first piece" in text
    doc = json.loads(out.read_text())
    assert doc["recorded_p50_ns"] == 1230 * MS and doc["predicted_p50_ns"] == 1130 * MS
    assert doc["part"] == "llm_first_token -> tts_first_byte"


def test_chunker_mode_on_wyoming_piper_moves_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tts = {"stage": "wyoming-tts", "streaming": True}
    run = _run(tmp_path / "run", [_turn(1, "a", 100)], tts)
    out = tmp_path / "p.json"
    assert main(["whatif", str(run), "--set", "chunker.mode=token", "--json", str(out)]) == 0
    assert "splits the text stream into sentences itself" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert doc["predicted_p50_ns"] == doc["recorded_p50_ns"]


def test_tts_swap_from_a_compare_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(tmp_path / "run", [_turn(1, "a", 100), _turn(2, "b", 300)], {"stage": "piper"})
    cmp = _compare(
        tmp_path / "cmp",
        {
            "piper": [_turn(1, "a", 100), _turn(2, "b", 300)],
            "espeak": [_turn(1, "a", 30), _turn(2, "a", 50), _turn(3, "b", 60, reply="Other.")],
        },
    )
    out = tmp_path / "p.json"
    args = ["whatif", str(run), "--set", "tts=espeak", "--compare", str(cmp), "--json", str(out)]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "matched 2 fixture(s)" in text and "differs from the compare cell's on 1" in text
    doc = json.loads(out.read_text())
    # e2e = 1120 ms + the TTS part: a 100 -> 40 (median of 30, 50), b 300 -> 60.
    assert doc["predicted_p50_ns"] == 1170 * MS
    assert doc["predicted_p90_ns"] == round(1160 * MS + 0.9 * 20 * MS)
    assert doc["part"] == "llm_first_speakable -> output_first_audible"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--set", "tts=espeak"], "needs --compare DIR"),
        (["--set", "tts=cartesia", "--compare", "CMP"], "measured no TTS 'cartesia'; it has: "),
        (["--set", "tts=far", "--compare", "CMP"], "share no fixture with the run"),
        (["--set", "tts=espeak", "--compare", "NOPE"], "no readable comparison.json"),
        (["--set", "chunker.mode=clause", "--set", "tts=espeak", "--compare", "CMP"], "one of"),
        (["--set", "chunker.mode=clause", "--compare", "CMP"], "--compare DIR is for"),
        (["--set", "chunker.mode=lines"], "choose from sentence, clause, token"),
    ],
)
def test_bad_reply_what_ifs_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    run = _run(tmp_path / "run", [_turn(1, "a", 100)], {"stage": "piper"})
    cmp = _compare(tmp_path / "cmp", {"espeak": [_turn(1, "a", 30)], "far": [_turn(1, "z", 30)]})
    args = [str(cmp) if a == "CMP" else str(tmp_path / "nope") if a == "NOPE" else a for a in extra]
    assert main(["whatif", str(run), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_run_without_delta_arrivals_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run(tmp_path / "run", [_turn(1, "a", 100, deltas=False)], {"stage": "espeak-tts"})
    assert main(["whatif", str(run), "--set", "chunker.min_chars=20"]) == 2
    err = capsys.readouterr().err
    assert "keeps no per-delta arrival times" in err and err.count("\n") == 1


def test_a_compare_of_pipeline_files_is_matched_by_the_cells_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run(tmp_path / "run", [_turn(1, "a", 100)], {"stage": "piper"})
    cmp = _compare(tmp_path / "cmp", {"rerun": [_turn(1, "a", 90)], "src": [_turn(1, "a", 30)]})
    doc = json.loads((cmp / "comparison.json").read_text())
    for c in doc["combinations"]:  # a compare of pipeline files labels a TTS by its stage
        c["labels"]["tts"] = "espeak-tts"
    (cmp / "comparison.json").write_text(json.dumps(doc))
    out = tmp_path / "p.json"
    args = ["whatif", str(run), "--set", "tts=src", "--compare", str(cmp), "--json", str(out)]
    assert main(args) == 0
    assert json.loads(out.read_text())["predicted_p50_ns"] == 1150 * MS
    capsys.readouterr()
    args = [
        "whatif",
        str(run),
        "--set",
        "tts=espeak-tts",
        "--compare",
        str(cmp),
        "--json",
        str(out),
    ]
    assert main(args) == 0  # both cells: the median of 90 and 30 ms
    assert json.loads(out.read_text())["predicted_p50_ns"] == 1180 * MS
    capsys.readouterr()
