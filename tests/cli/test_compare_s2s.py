"""``voicelat compare`` ranks a cascade run and a speech-to-speech run in one report.

Both runs are written as ``voicelat run`` writes them (turns.jsonl + summary.json) from turns
built by the recorders with literal stamps: the S2S run is 200 ms faster at the median, so it
ranks first; the table shows the shared segments for both and ``model`` for the S2S one only;
the HTML report draws each run's waterfall with its own segments.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.core.test_core_recorder import complete_turn
from tests.core.test_core_s2s import server_vad_turn
from voicelat.cli.main import main
from voicelat.core.base.turn import Turn
from voicelat.core.summaries.summary import build_summary
from voicelat.files.results import TurnsWriter, write_summary


def _write_run(d: Path, turns: list[Turn], name: str) -> Path:
    writer = TurnsWriter(d)
    for t in turns:
        writer.write(t)
    writer.close()
    summary = build_summary(
        turns,
        run={"tool": "voicelat", "status": "complete"},
        pipeline={"name": name},
        fixtures=[],
        stages={},
    )
    write_summary(d, summary)
    return d


def _cascade(n: int) -> list[Turn]:
    turns = []
    for i in range(n):
        rec = complete_turn()
        rec.index = i
        turns.append(rec.finish())
    return turns


def test_compare_ranks_cascade_and_s2s_together(tmp_path: Path) -> None:
    cascade = _cascade(6)
    s2s = [server_vad_turn(i, shift_ms=i).finish() for i in range(6)]
    assert all(t.ok for t in cascade + s2s)
    a = _write_run(tmp_path / "cascade", cascade, "cascade")
    b = _write_run(tmp_path / "realtime", s2s, "realtime")
    out = tmp_path / "cmp"
    assert main(["compare", str(a), str(b), "-o", str(out)]) == 0
    doc = json.loads((out / "comparison.json").read_text())
    ranked = {c["name"]: c for c in doc["combinations"]}
    assert ranked["realtime"]["rank"] == 1 and ranked["cascade"]["rank"] == 2
    assert set(ranked["realtime"]["segments"]) == {
        "endpointing",
        "model",
        "leading_silence",
        "playout",
    }
    assert "model" not in ranked["cascade"]["segments"]
    assert "stt" in ranked["cascade"]["segments"]
    md = (out / "comparison.md").read_text()
    assert "model" in md and "stt" in md
    html = (out / "report.html").read_text()
    assert html.count('class="lbl">model<') >= 1 and html.count('class="lbl">stt<') >= 1
