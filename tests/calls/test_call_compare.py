"""`voicelat compare --scenario`: whole calls on every combination, interleaved call by call, on
the emulated cascade (real servers on loopback); each combination's call figures side by side."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.calls.calls_helpers import CALLS, ROOT, openai_profile
from voicelat.emulate import Emulators

PROFILE = openai_profile()


def _pipeline(tmp_path: Path, name: str, port: int) -> Path:
    text = (ROOT / "pipelines" / "emulated-openai.toml").read_text()
    text = text.replace("8401", str(port)).replace('name = "emulated-openai"', f'name = "{name}"')
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


# compare --scenario runs in CI through the caller's and the barge-in compares.
@pytest.mark.e2e
@pytest.mark.slow
async def test_compare_runs_each_call_on_every_combination_in_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    scenario = tmp_path / "two.toml"
    scenario.write_text(
        f'name = "two"\nfixtures = "{CALLS}"\n[[step]]\nexpect_greeting = true\n'
        '[[step]]\nsay = "short_01_weather"\ngap_ms = 200\n'
        '[[step]]\nsay = "short_02_tomorrow"\ngap_ms = 200\n'
    )
    async with Emulators(["openai"], profile=PROFILE, seed=1, thread=True) as em:
        port = em.servers["openai"].port
        a, b = _pipeline(tmp_path, "emu-a", port), _pipeline(tmp_path, "emu-b", port)
        out = tmp_path / "cmp"
        cmd = [sys.executable, "-m", "voicelat", "compare", str(a), str(b), "--scenario",
               str(scenario), "--repeat", "2", "--out", str(out)]  # fmt: skip
        done = await asyncio.to_thread(
            subprocess.run, cmd, capture_output=True, text=True, timeout=300, cwd=ROOT
        )
    assert done.returncode == 0, done.stderr
    doc = json.loads((out / "comparison.json").read_text())
    assert set(doc["calls"]) == {"emu-a", "emu-b"}
    for name in ("emu-a", "emu-b"):
        calls = doc["calls"][name]
        assert calls["n"] == 2 and calls["greeting"]["n"] == 2
        assert calls["e2e_first_turn"]["n"] == 2 and calls["e2e_later_turns"]["n"] == 2
    assert doc["schedule"]["order"].startswith("interleaved per call")
    # Call by call: a's call 1, b's call 1, a's call 2, b's call 2 (the stdout lines' order).
    combos = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("[")]
    assert combos == ["emu-a"] * 2 + ["emu-b"] * 2 + ["emu-a"] * 2 + ["emu-b"] * 2
    assert "Calls: the greeting, turn 1 and the later turns" in done.stdout
    run_dirs = [p for p in out.iterdir() if (p / "calls.jsonl").is_file()]
    assert len(run_dirs) == 2
