"""`run --scenario --workers N`: whole calls dealt to worker processes (a call never spans
workers), every turn back in one turns.jsonl, every call in one calls.jsonl and the summary."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.calls.calls_helpers import CALLS, openai_profile
from tests.helpers import emulated_openai_pipeline
from voicelat.core.base.plan import PlannedTurn
from voicelat.core.calls.call import CALL_ID
from voicelat.core.measure.schedule import Load
from voicelat.emulate import Emulators
from voicelat.engine.call import plan_calls
from voicelat.engine.workers import WorkerPool
from voicelat.files.results import read_calls
from voicelat.files.scenario import load_scenario

PROFILE = openai_profile()


@pytest.mark.e2e
async def test_calls_are_dealt_whole_to_the_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    path = tmp_path / "two.toml"
    path.write_text(
        f'name = "two"\nfixtures = "{CALLS}"\n'
        '[[step]]\nsay = "short_01_weather"\ngap_ms = 100\n'
        '[[step]]\nsay = "short_02_tomorrow"\ngap_ms = 100\n'
    )
    loaded = load_scenario(path)
    calls = plan_calls([loaded.scenario], repeat=3)
    plan = [
        PlannedTurn(c.first_index + i, f, 0, False)
        for c in calls
        for i, f in enumerate(c.scenario.fixture_ids())
    ]
    async with Emulators(["openai"], profile=PROFILE, seed=1, thread=True) as em:
        pool = WorkerPool(
            emulated_openai_pipeline(em),
            list(loaded.fixtures.values()),
            tmp_path / "run",
            2,
            calls=calls,
        )
        outcome = await asyncio.to_thread(pool.run, plan, Load(concurrency=2))
    turns = sorted(outcome.every_turn(), key=lambda t: t.index)
    assert [t.index for t in turns] == list(range(6)) and all(t.ok for t in turns)
    # A call never spans workers: both turns of each call ran on one worker.
    by_call: dict[str, set[int]] = {}
    for t in turns:
        by_call.setdefault(str(t.extra[CALL_ID]), set()).add(int(t.extra["worker"]))
    assert len(by_call) == 3 and all(len(w) == 1 for w in by_call.values())
    assert {w for ws in by_call.values() for w in ws} == {0, 1}
    records = read_calls(tmp_path / "run")
    assert sorted(r.call_id for r in records) == sorted(by_call)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["calls"]["n"] == 3 and summary["calls"]["e2e_by_index"]["2"]["n"] == 3
