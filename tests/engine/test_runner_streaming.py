"""A real run keeps a bounded window of turns and streams its summary: summary.json and
turns.jsonl are what they were (against the emulated OpenAI twin on loopback)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import emulated_openai_pipeline
from voicelat.core.base.plan import plan_turns
from voicelat.core.measure.schedule import Load
from voicelat.core.summaries.streaming_summary import RecentTurns
from voicelat.core.summaries.summary import build_summary
from voicelat.emulate import Emulators
from voicelat.engine.runner import Runner
from voicelat.files.fixtures import default_fixtures_dir, load_fixtures
from voicelat.files.pipeline import Pipeline
from voicelat.files.results import turn_from_json

PROFILE = {
    "openai": {
        "latency": {"headers": 5, "ttft": 30, "token": 5, "stt_first": 20, "stt_final": 30,
                    "tts_first_audio": 20, "tts_chunk": 5},
        "content": {"leading_silence_ms": 20.0, "reply": "Sure.", "ms_per_char": 10.0},
    }
}  # fmt: skip


def _pipeline(em: Emulators) -> Pipeline:
    pipeline: Pipeline = emulated_openai_pipeline(em)
    return pipeline


@pytest.mark.e2e
async def test_a_run_keeps_a_window_of_turns_and_its_summary_is_the_turns_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    fixtures = [f for f in load_fixtures(default_fixtures_dir()) if f.id in ("kitchen_lights",)]
    async with Emulators(["openai"], profile=PROFILE, seed=2) as em:
        runner = Runner(_pipeline(em), fixtures, tmp_path / "run")
        runner.turns = RecentTurns(maxlen=2)  # a long run's window, in miniature
        plan = plan_turns([f.id for f in fixtures], turns=4, warmup=2)
        outcome = await runner.run(plan, load=Load(concurrency=2))
    lines = (tmp_path / "run" / "turns.jsonl").read_text().splitlines()
    turns = [turn_from_json(json.loads(line)) for line in lines]
    assert sorted(t.index for t in turns) == list(range(6))  # every turn written, once
    assert all(t.ok for t in turns), [t.failure_reason for t in turns]
    # Memory: the runner kept the two most recent turns; the summary counts all six.
    assert [t.index for t in runner.turns] == [t.index for t in turns[-2:]]
    assert len(outcome.turns) == 2 and runner.turns.appended == 6
    # A gate must judge every turn: the outcome reads the rest back from turns.jsonl.
    assert not outcome.kept_all
    assert sorted(t.index for t in outcome.every_turn()) == list(range(6))
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["counts"]["turns"] == 6 and summary["counts"]["headline"] >= 1
    expected = build_summary(
        turns,
        run=summary["run"],
        pipeline=summary["pipeline"],
        fixtures=summary["fixtures"],
        stages=summary["stages"],
        loop_lag_ns=runner.loop_lag.lags,
        budget=summary["budget"],
        machine=runner.machine_samples,
    ) | {"fixture_set_sha256": summary["fixture_set_sha256"]}
    assert summary == expected
    assert summary["quantiles"] == {"mode": "exact"}
