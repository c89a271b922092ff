"""``voicelat view RUN --definitions`` (and ``--json``) on real runs of each kind of turn: a
cascade and a realtime model against their in-process emulators, a black-box agent (the real
Pipecat test agent over Twilio Media Streams). Every definition is printed, with figures where
the run's milestones allow and the missing milestone named where they don't."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_agent_cli import twilio_entry_point
from tests.emulate.test_emulate_pipeline import PROFILE as CASCADE_PROFILE
from tests.emulate.test_emulate_realtime_pipeline import PROFILE as S2S_PROFILE
from tests.emulate.test_emulate_realtime_pipeline import realtime_pipeline
from tests.helpers import emulated_openai_pipeline
from voicelat.cli.main import main
from voicelat.core.base.plan import plan_turns
from voicelat.core.judge.definitions import DEFINITIONS
from voicelat.emulate import Emulators
from voicelat.engine.runner import Runner
from voicelat.export import SUMMARY_SCHEMA, TURN_SCHEMA
from voicelat.export.validate import schema_errors
from voicelat.files.fixtures import default_fixtures_dir, load_fixtures

__all__ = ["twilio_entry_point"]

MS = 1_000_000


def _fixture() -> Any:
    return next(f for f in load_fixtures(default_fixtures_dir()) if f.id == "book_table")


def _view(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, dict[str, Any]]:
    """The ``--definitions`` text and the ``--json`` document of ``run_dir``."""
    assert main(["view", str(run_dir), "--definitions"]) == 0
    text = capsys.readouterr().out
    assert main(["view", str(run_dir), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for d in DEFINITIONS:  # every definition is printed, computed or not
        assert f"[{d.key}]" in text, d.key
    assert [d["key"] for d in doc["definitions"]] == [d.key for d in DEFINITIONS]
    # The document is the summary plus the section: the shipped schema holds it.
    assert schema_errors(doc, SUMMARY_SCHEMA) == []
    for line in (run_dir / "turns.jsonl").read_text().splitlines():
        assert schema_errors(json.loads(line), TURN_SCHEMA) == []
    return text, doc


def _by_key(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {d["key"]: d for d in doc["definitions"]}


def _e2e_agrees(doc: dict[str, Any]) -> None:
    """The definitions that are voicelat's e2e read the summary's own e2e percentiles."""
    defs, e2e = _by_key(doc), doc["e2e"]
    for key in ("voicelat_e2e", "openbenchmarks_ttfab", "pipecat_voice_to_voice"):
        assert (defs[key]["n"], defs[key]["p50_ns"]) == (e2e["n"], e2e["p50"]), key
    assert e2e["n"] >= 1


async def cascade_run(out: Path) -> None:
    """Three turns of the emulated OpenAI cascade into ``out`` (the first one cold)."""
    fx = _fixture()
    async with Emulators(["openai"], profile=CASCADE_PROFILE, seed=1) as em:
        runner = Runner(emulated_openai_pipeline(em), [fx], out)
        await runner.run(plan_turns([fx.id], turns=3, warmup=0))
        assert em.errors == []


async def realtime_run(out: Path) -> None:
    """Two turns of the emulated OpenAI Realtime model (server VAD) into ``out``."""
    fx = _fixture()
    async with Emulators(["openai-realtime"], profile=S2S_PROFILE, seed=1) as em:
        runner = Runner(realtime_pipeline(em), [fx], out)
        await runner.run(plan_turns([fx.id], turns=2, warmup=0))
        assert em.errors == []


def agent_run(tmp: Path, out: Path, port: int = 9131) -> None:
    """Two calls to the real Pipecat test agent over Twilio Media Streams into ``out``."""
    from tests.agents.pipecat_agent import ROOT, running_agent

    with running_agent(port) as url:
        pipeline = tmp / "agent.toml"
        pipeline.write_text(
            f'[pipeline]\nname = "bot"\n\n[agent]\nstage = "twilio"\nurl = "{url}/twilio"\n'
            "reply_idle_ms = 400\n"
        )
        args = ["run", "-p", str(pipeline), "-f", str(ROOT / "fixtures"), "-n", "2", "-w", "0"]
        assert main([*args, "-o", str(out), "--no-tui", "--quiet"]) == 0


@pytest.mark.e2e
async def test_a_cascade_run_in_every_definition(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    await cascade_run(tmp_path / "run")
    text, doc = _view(tmp_path / "run", capsys)
    _e2e_agrees(doc)
    defs = _by_key(doc)
    for d in doc["definitions"]:
        assert d["n"] == doc["e2e"]["n"] and d["reason"] is None, d  # a cascade has them all
    # The emulator's 80 ms to first TTS audio plus its 60 ms of leading silence: Coval's TTFA.
    assert 120 * MS <= defs["coval_tts_ttfa"]["p50_ns"] <= 200 * MS, defs["coval_tts_ttfa"]
    # The LiveKit sum leaves out what e2e has beside its three parts.
    assert defs["livekit_e2e_sum"]["p50_ns"] < defs["voicelat_e2e"]["p50_ns"]
    assert "formula: tts_first_audible − tts_request" in text


@pytest.mark.e2e
async def test_a_realtime_run_in_every_definition(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    await realtime_run(tmp_path / "run")
    text, doc = _view(tmp_path / "run", capsys)
    _e2e_agrees(doc)
    defs = _by_key(doc)
    # The emulator answers 180 ms after its server VAD's end of speech: S2S TTFA above that.
    assert defs["aa_s2s_ttfa"]["p50_ns"] >= 180 * MS
    assert defs["eot_bench_dead_air"]["n"] == doc["e2e"]["n"]
    for key in ("aa_stt_latency", "coval_tts_ttfa", "livekit_e2e_sum", "twilio_llm_ttft"):
        assert defs[key]["n"] == 0 and defs[key]["reason"].startswith("a realtime model"), key
    assert "not computable: a realtime model gives no final transcript" in text
    assert defs["aa_s2s_ttfa"]["formula"] == "first_audio − speech_end"


@pytest.mark.e2e
def test_an_agent_run_in_every_definition(
    tmp_path: Path, twilio_entry_point: None, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    agent_run(tmp_path, out)
    capsys.readouterr()
    text, doc = _view(out, capsys)
    _e2e_agrees(doc)
    defs = _by_key(doc)
    assert defs["aa_s2s_ttfa"]["n"] == doc["e2e"]["n"]  # first reply byte: black-box is enough
    # Without the agent's traces, what needs the agent's own milestones says so.
    for key in ("aa_stt_latency", "twilio_stt", "livekit_e2e_sum", "pipecat_bot_ttfb"):
        assert defs[key]["n"] == 0, key
        assert "agent's traces" in defs[key]["reason"], defs[key]
    assert "needs agent_stt_final" in text


def save_runs(dest: Path) -> None:
    """``python -m tests.cli.test_view_definitions DEST``: a run of each kind, its summary.json
    and turns.jsonl kept in ``DEST/<kind>/`` (the saved runs the schema tests validate)."""
    import asyncio
    import os
    import shutil
    import tempfile

    os.environ.setdefault("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        asyncio.run(cascade_run(base / "cascade"))
        asyncio.run(realtime_run(base / "realtime"))
        agent_run(base, base / "agent")
        for kind in ("cascade", "realtime", "agent"):
            (dest / kind).mkdir(parents=True, exist_ok=True)
            for name in ("summary.json", "turns.jsonl"):
                shutil.copy(base / kind / name, dest / kind / name)


if __name__ == "__main__":
    import sys

    save_runs(Path(sys.argv[1]))


def test_definitions_of_a_comparison_is_one_line_exit_2() -> None:
    from tests.helpers import ROOT, voicelat

    proc = voicelat("view", str(ROOT / "tests" / "tui" / "data" / "compare"), "--definitions")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "is a comparison" in lines[0] and "Traceback" not in proc.stderr
