"""``voicelat view`` on results a person edited or a damaged copy left: a summary with only a
schema_version no longer hides valid turns; lines with Infinity, a 2^63 ns segment or wrong
types are skipped and counted, never a traceback or a hang."""

from __future__ import annotations

import json
from pathlib import Path

from tests.export.synthetic_turns import synthetic_turns
from tests.helpers import voicelat
from voicelat.files.results import TurnsWriter, load_run


def _run_dir(tmp_path: Path, n: int = 4) -> Path:
    run = tmp_path / "run"
    writer = TurnsWriter(run)
    for turn in synthetic_turns(n):
        writer.write(turn)
    writer.close()
    return run


def test_a_schema_only_summary_does_not_hide_the_turns(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    (run / "summary.json").write_text('{"schema_version": 1}')
    assert load_run(run).run_summary is None  # rebuilt from the turns by the readers
    proc = voicelat("view", str(run), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "turns: 4 run" in proc.stdout, proc.stdout


def test_infinity_huge_ints_and_wrong_types_are_skipped_and_counted(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    lines = (run / "turns.jsonl").read_text().splitlines()
    bad = []
    for change in ({"e2e_ns": float("inf")}, {"segments_ns": {"stt": 2**63}}, {"t0_ns": "soon"}):
        line = json.loads(lines[0])
        line.update(change)
        bad.append(json.dumps(line))
    (run / "turns.jsonl").write_text("\n".join([*lines, *bad]) + "\n")
    loaded = load_run(run)
    assert len(loaded.turns) == 4 and loaded.skipped_lines == 3
    proc = voicelat("view", str(run), timeout=60)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "3 unreadable line(s)" in proc.stderr
