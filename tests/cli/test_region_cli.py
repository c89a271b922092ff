"""``--region LABEL`` end to end (docs/NETWORK.md, "Regions"): two real runs against ``voicelat
serve openai`` on loopback, one labelled ``eu-west`` by the flag (over two worker processes,
which inherit it), one ``us-east`` by ``VOICELAT_REGION``; every turn and each summary carry
their label; their turns read together give one per-region table (``voicelat view``), and
``voicelat compare`` of the two saved runs shows a region column."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.emulated_run import KEY_ENV, pipeline, serving
from tests.helpers import ROOT, read_turns
from voicelat.cli.main import main
from voicelat.export.validate import schema_errors


def _voicelat(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "VOICELAT_REGION"}
    return subprocess.run(
        [sys.executable, "-m", "voicelat", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=base | {KEY_ENV: "emulator-key", "PYTHONPATH": str(ROOT)} | (env or {}),
        timeout=300,
    )


@pytest.mark.e2e
def test_two_regions_read_as_one_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    eu, us, both = tmp_path / "eu-west", tmp_path / "us-east", tmp_path / "both"
    with serving() as (url, _):
        p = str(pipeline(tmp_path, url))
        common = ["run", "--pipeline", p, "--no-tui", "--calibrate", "off"]
        # Two workers (a session each): a warm-up and a measured turn each.
        a = _voicelat(*common, "--turns", "2", "--warmup", "2", "--workers", "2",
                      "--concurrency", "2", "--region", "eu-west", "--out", str(eu))  # fmt: skip
        assert a.returncode == 0, a.stderr
        b = _voicelat(*common, "--turns", "1", "--warmup", "1", "--out", str(us),
                      env={"VOICELAT_REGION": "us-east"})  # fmt: skip
        assert b.returncode == 0, b.stderr
    for run, label, workers in ((eu, "eu-west", 2), (us, "us-east", 1)):
        turns = read_turns(run)
        assert turns and {t["extra"].get("region") for t in turns} == {label}
        assert len({t["extra"].get("worker", 0) for t in turns}) == workers
        summary = json.loads((run / "summary.json").read_text())
        assert summary["run"]["region"] == label and "regions" not in summary
        assert schema_errors(summary, "summary.schema.json") == []
    # Both runs' turns in one results directory (no summary: view summarizes the turns), the
    # second run's indexes moved past the first's (a turns file holds each index once).
    both.mkdir()
    moved = [t | {"index": t["index"] + 1000} for t in read_turns(us)]
    lines = [json.dumps(t) + "\n" for t in [*read_turns(eu), *moved]]
    (both / "turns.jsonl").write_text("".join(lines))
    # Read here (as `voicelat view` and `compare` read them: no measuring, no process needed).
    monkeypatch.delenv("VOICELAT_REGION", raising=False)
    capsys.readouterr()
    assert main(["view", str(both)]) == 0
    shown = capsys.readouterr().out
    assert "unreadable" not in shown, shown
    table = shown[shown.index("By region") :].splitlines()
    rows = {line.split()[0]: line.split() for line in table[2:4]}
    assert set(rows) == {"eu-west", "us-east"}, table
    assert rows["eu-west"][1] == "2" and rows["us-east"][1] == "1"  # n: the headline turns
    # The two saved runs compared: one table, a region column.
    assert main(["compare", str(eu), str(us), "--out", str(tmp_path / "cmp"), "--no-tui"]) == 0
    ranked = capsys.readouterr().out
    doc = json.loads((tmp_path / "cmp" / "comparison.json").read_text())
    assert {c["name"]: c.get("region") for c in doc["combinations"]} == {
        "eu-west": "eu-west",
        "us-east": "us-east",
    }
    header = next(line for line in ranked.splitlines() if line.lstrip().startswith("#"))
    assert header.split()[:4] == ["#", "combination", "region", "n"], ranked


def test_the_ranking_table_gets_a_region_column_only_when_a_run_has_one() -> None:
    from voicelat.report.comparison import ranking_rows

    ok = {"status": "ok", "n": 3, "failed": 0}
    doc = {"combinations": [ok | {"name": "a", "region": "eu-west"}, ok | {"name": "b"}]}
    rows = ranking_rows(doc)
    assert [r[2] for r in rows] == ["region", "eu-west", "-"]
    assert all(len(r) == len(rows[0]) for r in rows)
    plain = ranking_rows({"combinations": [ok | {"name": "a"}]})
    assert "region" not in plain[0] and len(plain[0]) == len(rows[0]) - 1
