"""``voicelat run -p PIPELINE`` with an ``[agent]`` table runs agent turns end to end, through
the CLI, against the real Pipecat test agent (tests/agents), two calls at once
(``--concurrency 2``); ``voicelat compare`` ranks an
agent run against a cascade run with the shared segments and ``agent_response``.

The ``twilio`` entry point is registered by the integrator (pyproject); until then the test
hands ``load_stage_class`` the entry point pyproject will declare.
"""

from __future__ import annotations

import json
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

import voicelat.stages.base as stage_base
from tests.agents.pipecat_agent import ROOT, running_agent
from tests.cli.test_compare_s2s import _cascade, _write_run
from tests.core.test_core_agent import agent_turn
from voicelat.cli.main import main

PORT = 9130


@pytest.fixture
def twilio_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    found = stage_base.available_stages()
    if "twilio" not in found:
        ep = EntryPoint("twilio", "voicelat.stages.twilio:Twilio", stage_base.ENTRY_POINT_GROUP)
        monkeypatch.setattr(stage_base, "available_stages", lambda: {**found, "twilio": ep})


@pytest.mark.e2e
def test_voicelat_run_profiles_an_agent_pipeline(
    tmp_path: Path, twilio_entry_point: None, capsys: pytest.CaptureFixture[str]
) -> None:
    with running_agent(PORT) as url:
        pipeline = tmp_path / "agent.toml"
        pipeline.write_text(
            f'[pipeline]\nname = "bot"\n\n[agent]\nstage = "twilio"\nurl = "{url}/twilio"\n'
            "reply_idle_ms = 400\n"
        )
        out = tmp_path / "out"
        code = main(
            ["run", "-p", str(pipeline), "-f", str(ROOT / "fixtures"), "-n", "2", "-w", "0",
             "-c", "2", "-o", str(out), "--no-tui", "--json"]
        )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["turns"] == 2 and summary["counts"]["failed"] == 0
    assert summary["stages"]["agent"]["stage"] == "twilio"
    assert summary["segments"]["agent_response"]["n"] == 2
    assert summary["figures"]["agent_response_ns"]["n"] == 2
    turns = [json.loads(line) for line in (out / "turns.jsonl").read_text().splitlines()]
    # --concurrency 2: two calls at once, one per session.
    assert sorted(t["extra"]["session"] for t in turns) == [0, 1]
    for t in turns:
        assert t["extra"]["kind"] == "agent"
        assert sum(t["segments_ns"].values()) == t["e2e_ns"]


def test_compare_ranks_an_agent_against_the_cascade(tmp_path: Path) -> None:
    agent = _write_run(tmp_path / "bot", [agent_turn(shift_ms=i).finish() for i in range(6)], "bot")
    cascade = _write_run(tmp_path / "cascade", _cascade(6), "cascade")
    out = tmp_path / "cmp"
    assert main(["compare", str(agent), str(cascade), "-o", str(out)]) == 0
    doc = json.loads((out / "comparison.json").read_text())
    ranked = {c["name"]: c for c in doc["combinations"]}
    assert {ranked["bot"]["rank"], ranked["cascade"]["rank"]} == {1, 2}
    assert {"agent_response", "leading_silence", "playout"} <= set(ranked["bot"]["segments"])
    assert "agent_response" not in ranked["cascade"]["segments"]
