"""A real `voicelat compare --scenario` of two turn-taking policies of voicelat's own cascade
(the OpenAI emulator on loopback, the call fixtures' real "mm-hmm"): the eager policy stops on
the backchannel, the patient one talks on; compare shows both rates and ranks by them."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bargein.bargein_helpers import BACKCHANNEL_STEPS, LONG_REPLY, scenario
from tests.calls.calls_helpers import ROOT, openai_profile
from voicelat.emulate import Emulators
from voicelat.report.comparison import BARGE_IN_TITLE


def _pipeline(tmp_path: Path, name: str, port: int, min_speech_ms: int) -> Path:
    text = (ROOT / "pipelines" / "emulated-openai.toml").read_text()
    text = text.replace("8401", str(port)).replace('name = "emulated-openai"', f'name = "{name}"')
    path = tmp_path / f"{name}.toml"
    path.write_text(f"{text}\n[turn_taking]\nmin_speech_ms = {min_speech_ms}\n")
    return path


@pytest.mark.e2e
async def test_compare_ranks_two_turn_taking_policies_by_false_barge_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    calls = scenario(tmp_path, "bc", BACKCHANNEL_STEPS)
    profile = openai_profile(LONG_REPLY, 30.0)
    async with Emulators(["openai"], profile=profile, seed=1, thread=True) as em:
        port = em.servers["openai"].port
        eager = _pipeline(tmp_path, "eager", port, 200)
        patient = _pipeline(tmp_path, "patient", port, 900)
        out = tmp_path / "cmp"
        cmd = [sys.executable, "-m", "voicelat", "compare", str(eager), str(patient),
               "--scenario", str(calls), "--rank-by", "false_barge_in", "--out", str(out),
               "--no-tui"]  # fmt: skip
        done = await asyncio.to_thread(
            subprocess.run, cmd, capture_output=True, text=True, timeout=300, cwd=ROOT
        )
    assert done.returncode == 0, done.stderr
    doc = json.loads((out / "comparison.json").read_text())
    by_name = {c["name"]: c for c in doc["combinations"]}
    assert by_name["eager"]["barge_in"]["false_barge_ins"] == 1
    assert by_name["eager"]["barge_in"]["false_barge_in_rate"] == 1.0
    assert by_name["patient"]["barge_in"]["false_barge_ins"] == 0
    assert by_name["patient"]["barge_in"]["false_barge_in_rate"] == 0.0
    assert by_name["patient"]["rank"] == 1 and by_name["eager"]["rank"] == 2
    assert doc["statistics"]["rank_by"] == "false_barge_in"
    assert "ranked by false barge-in rate" in done.stdout
    table = done.stdout.split(BARGE_IN_TITLE)[1].splitlines()
    row = next(x for x in table if x.startswith("eager "))
    assert row.split()[-2:] == ["1/1", "100%"]  # false barge-ins / backchannels, rate
    assert "## Barge-in" in (out / "comparison.md").read_text()
    assert "<h2>Barge-in</h2>" in (out / "report.html").read_text()
