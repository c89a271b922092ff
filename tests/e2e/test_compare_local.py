"""A real comparison on the embedded stack: 2 STT x 2 TTS, interleaved, ranked, reported."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ROOT, read_turns, voicelat

pytestmark = pytest.mark.stack

MATRIX = (ROOT / "pipelines" / "matrix-local.toml").read_text()


@pytest.mark.e2e
def test_local_matrix_ranks_four_real_combinations(
    local_stack: dict[str, Any], tmp_path: Path
) -> None:
    # The shipped 2x2 matrix plus a TTS alternative whose server does not exist (kept for one
    # STT only): it must stay in the ranking as failed, with its reason, while the rest compare.
    matrix = tmp_path / "matrix.toml"
    matrix.write_text(
        MATRIX.replace(
            '# exclude = [{ stt = "pocketsphinx", tts = "piper" }]',
            'exclude = [{ stt = "whisper", tts = "nowhere" }]',
        )
        + '\n[[tts]]\nlabel = "nowhere"\nstage = "wyoming-tts"\nurl = "tcp://127.0.0.1:9"\n'
    )
    out = tmp_path / "cmp"
    r = voicelat(
        "compare", "--matrix", str(matrix), "--turns", "2", "--warmup", "1",
        "--out", str(out), "--no-tui", "--resamples", "300",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout

    doc = json.loads((out / "comparison.json").read_text())
    combos = {c["name"]: c for c in doc["combinations"]}
    real = ["whisper+piper", "whisper+espeak", "pocketsphinx+piper", "pocketsphinx+espeak"]
    assert set(combos) == {*real, "pocketsphinx+nowhere"}
    assert sorted(combos[n]["rank"] for n in real) == [1, 2, 3, 4]
    for n in real:
        assert combos[n]["status"] == "ok" and combos[n]["n"] == 2, combos[n]
        assert combos[n]["failure_rate"] == 0.0
        assert combos[n]["waterfall"]["p50"]["mean_e2e_ns"] > 0
    dead = combos["pocketsphinx+nowhere"]
    assert dead["status"] == "failed" and dead["rank"] is None
    assert "127.0.0.1:9" in dead["failure"]
    assert doc["excluded"] == ["whisper+nowhere"]

    # Same schema as `voicelat run`, one run directory per combination.
    order = doc["schedule"]["combination_order"]
    slots: list[tuple[int, str, str, bool]] = []
    for n in real:
        turns = read_turns(out / combos[n]["run_dir"])
        assert [t["warmup"] for t in turns] == [True, False, False]
        summary = json.loads((out / combos[n]["run_dir"] / "summary.json").read_text())
        assert summary["counts"]["headline"] == 2
        slots += [(t["extra"]["compare_slot"], n, t["fixture"], t["warmup"]) for t in turns]
        if n.startswith("pocketsphinx"):
            # The streaming STT makes the first partial measurable.
            assert all("stt_first_partial" in t["milestones_ns"] for t in turns)
            assert summary["stages"]["stt"]["worker_pid"] != summary["stages"]["stt"]["loop_pid"]
    # Interleaved: each planned turn on every live combination before the next one.
    slots.sort()
    fixtures = [f for _, _, f, _ in slots]
    assert fixtures == [fixtures[0]] * 8 + [fixtures[8]] * 4
    assert [w for *_, w in slots] == [True] * 4 + [False] * 8
    live_order = [n for n in order if n in real]
    assert [n for _, n, _, _ in slots] == live_order * 3

    md = (out / "comparison.md").read_text()
    assert "| 1 |" in md and "FAILED" in md
    html = (out / "report.html").read_text()
    waterfalls = re.findall(r'<svg [^>]*class="waterfall"', html)
    assert len(waterfalls) == 8  # P50 and P90 for each ranked combination
    assert 'class="combos"' in html  # and every combination side by side
    assert "whisper+piper" in r.stdout and "too few turns" in r.stdout
