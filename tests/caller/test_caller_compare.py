"""`voicelat compare --scenario` with a simulated caller, on two emulated cascades (real HTTP
servers on loopback, each agent answering differently): the caller speaks live on the first
combination and the same lines, the same bytes, on the second, whatever it answers; the
caller's LLM is asked once per line, on the first only."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.caller.test_caller_call import CALLER_PROFILE, LINES, _pipeline, _uploads
from tests.calls.calls_helpers import openai_profile
from voicelat.cli.main import main
from voicelat.emulate import Emulators

# Two combinations' calls in real time (seconds): the e2e set.
pytestmark = pytest.mark.e2e


def _scenario(tmp_path: Path, caller_port: int) -> Path:
    url = f"http://127.0.0.1:{caller_port}/v1"
    key = 'api_key_env = "VOICELAT_EMULATOR_KEY"\n'
    path = tmp_path / "booker.toml"
    path.write_text(
        '[caller]\npersona = "You are Sam, calling a restaurant."\nmax_turns = 6\ngap_ms = 200\n'
        f'[caller.llm]\nbase_url = "{url}"\nmodel = "gpt-4o-mini"\n{key}'
        f'[caller.voice]\nstage = "openai-tts"\nbase_url = "{url}"\nvoice = "echo"\n{key}',
        encoding="utf-8",
    )
    return path


def _lines(run_dir: Path) -> list[dict[str, Any]]:
    text = (run_dir / "conversation.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


async def test_compare_runs_the_caller_live_once_and_replays_its_lines_on_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    out = tmp_path / "cmp"
    async with (
        Emulators(["openai"], profile=openai_profile("Sure thing."), seed=1, thread=True) as a,
        Emulators(["openai"], profile=openai_profile("We are full."), seed=2, thread=True) as b,
        Emulators(["openai"], profile=CALLER_PROFILE, seed=1, thread=True) as caller,
    ):
        pa = _pipeline(tmp_path, a.servers["openai"].port, "emu-a.toml")
        pb = _pipeline(tmp_path, b.servers["openai"].port, "emu-b.toml")
        for path, name in ((pa, "emu-a"), (pb, "emu-b")):
            text = path.read_text().replace('name = "emulated-openai"', f'name = "{name}"')
            path.write_text(text)
        scenario = _scenario(tmp_path, caller.servers["openai"].port)
        argv = ["compare", str(pa), str(pb), "--scenario", str(scenario), "-o"]
        code = await asyncio.to_thread(
            main, [*argv, str(out), "--caller-cache", str(tmp_path / "cache"), "--no-tui"]
        )
        err = capsys.readouterr().err
        assert code == 0, err
        # Each agent heard the same caller audio, byte for byte, in the same order.
        assert _uploads(a) == _uploads(b) and len(_uploads(a)) == 4
        # The caller's LLM wrote each line once: on the first combination only.
        assert len(caller.truth.select("openai", "chat")) == 4
    doc = json.loads((out / "comparison.json").read_text())
    dirs = {c["name"]: out / c["name"] for c in doc["combinations"]}
    assert set(dirs) == {"emu-a", "emu-b"} and all(d.is_dir() for d in dirs.values()), dirs
    live, replayed = _lines(dirs["emu-a"]), _lines(dirs["emu-b"])
    said = [*LINES[:3], "Great, thank you. Goodbye."]
    assert [ln["caller_text"] for ln in live] == [ln["caller_text"] for ln in replayed] == said
    assert [ln["sha256"] for ln in live] == [ln["sha256"] for ln in replayed]
    assert {ln["agent_text"] for ln in live} == {"Sure thing."}
    assert {ln["agent_text"] for ln in replayed} == {"We are full."}  # whatever it answered
    assert all(ln["cached"] for ln in replayed) and all(ln["llm_ns"] is None for ln in replayed)
    ends = {}
    for name, d in dirs.items():
        (record,) = [json.loads(x) for x in (d / "calls.jsonl").read_text().splitlines()]
        ends[name] = (record["extra"]["caller"]["end_reason"], record["extra"]["caller"]["frozen"])
        assert record["turns_completed"] == 4
    assert ends == {"emu-a": ("goal", False), "emu-b": ("frozen_end", True)}
    assert doc["calls"]["emu-a"]["turns_completed"] == doc["calls"]["emu-b"]["turns_completed"]
