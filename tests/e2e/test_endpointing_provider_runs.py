"""A real `voicelat run` against the Deepgram emulator, then `voicelat endpointing --runs` on it.

Two pause fixtures, a pipeline that ends turns on Deepgram's ``speech_final``
(``[endpointing] mode = "provider"``, ``endpointing = 400``): ``hesitate_flight`` has a
699 ms pause, longer than 400 ms, so the provider ends its turn inside it (a cut-off: the
pipeline answers mid-sentence); ``clause_meeting``'s 299 ms pause is bridged and its turn ends
after the speech. The point's figures are checked against the emulator's ground truth: the
``end_of_turn_written`` mark of each turn, on the same clock as the run's stamps.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT
from voicelat.cli.main import main
from voicelat.core.base.errors import ConfigError
from voicelat.emulate import Emulators
from voicelat.files.results import load_run

MS = 1_000_000
FIXTURES = ("hesitate_flight", "clause_meeting")
PROFILE = {
    "openai": {"latency": {"headers": 5, "ttft": 30, "token": 5}, "content": {"reply": "Okay."}},
    "deepgram": {
        "latency": {"stt_partial": 50, "stt_final": 80, "tts_first_audio": 30, "tts_chunk": 5},
        "content": {"ms_per_char": 20.0},
    },
}


def _fixtures(d: Path) -> Path:
    src = ROOT / "fixtures" / "pauses"
    manifest = json.loads((src / "manifest.json").read_text())
    manifest["fixtures"] = [f for f in manifest["fixtures"] if f["id"] in FIXTURES]
    d.mkdir()
    for f in manifest["fixtures"]:
        shutil.copy(src / f["file"], d / f["file"])
    (d / "manifest.json").write_text(json.dumps(manifest))
    return d


def _pipeline(path: Path, dg: str, openai: str) -> Path:
    ws = dg.replace("http://", "ws://")
    key = 'api_key_env = "VOICELAT_EMULATOR_KEY"'
    path.write_text(
        '[pipeline]\nname = "eot-e2e"\n[endpointing]\nmode = "provider"\n'
        f'[stt]\nstage = "deepgram-stt"\nbase_url = "{ws}"\nendpointing = 400\n{key}\n'
        f'[llm]\nstage = "openai"\nbase_url = "{openai}"\nendpoint = "chat"\n'
        f'model = "gpt-4o-mini"\nmax_tokens = 10\n{key}\n'
        f'[tts]\nstage = "deepgram-tts"\nbase_url = "{ws}"\nrate = 24000\n{key}\n'
        "[turn]\ntimeout_s = 20\n"
    )
    return path


async def _emulators() -> Emulators:
    """The emulators on two free ports of 19340-19399 (this project's test range)."""
    for port in range(19340, 19399, 2):
        em = Emulators(["deepgram", "openai"], profile=PROFILE, seed=1, port=port)
        try:
            await em.__aenter__()
        except ConfigError:
            continue
        return em
    raise RuntimeError("no free port pair in 19340-19399")


@pytest.mark.e2e
async def test_deepgram_run_scored_against_emulator_truth(tmp_path: Path) -> None:
    fixtures = _fixtures(tmp_path / "fx")
    em = await _emulators()
    try:
        pipe = _pipeline(tmp_path / "dg.toml", em.root("deepgram"), em.url("openai"))
        run_dir = tmp_path / "run"
        env = {**os.environ, "VOICELAT_EMULATOR_KEY": "k", "PYTHONPATH": str(ROOT)}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "voicelat", "run", "-p", str(pipe), "-f", str(fixtures),
            "--warmup", "0", "--out", str(run_dir), "--quiet",
            env=env, cwd=ROOT, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        _, err = await asyncio.wait_for(proc.communicate(), timeout=60)
        assert proc.returncode == 0, err.decode()[-2000:]
        listen = [e for ex in em.truth.select("deepgram", "listen") for e in ex.events]
        assert em.errors == []
    finally:
        await em.__aexit__(None, None, None)
    # speech_final is the Results message marked both final_written and end_of_turn_written
    # (an UtteranceEnd has only the latter: after the cut, the silence runs on into the next
    # turn's leading silence and a late one comes, which the client rightly ignores, as it
    # comes before any word of that turn).
    finals = {t for name, t in listen if name == "final_written"}
    eot_marks = sorted(t for name, t in listen if name == "end_of_turn_written" and t in finals)
    out = tmp_path / "out"
    assert (
        main(
            [
                "endpointing",
                "--runs",
                str(run_dir),
                "--endpointers",
                "none",
                "--out",
                str(out),
                "--no-tui",
            ]
        )
        == 0
    )
    doc = json.loads((out / "endpointing.json").read_text())
    (run,) = doc["runs"]
    point = run["point"]
    assert point["source"] == "wire" and point["options"]["endpointing"] == "400"
    turns = {t.index: t for t in load_run(run_dir).turns}
    by_fixture = {}
    for judged in run["turns"]:
        turn = turns[judged["index"]]
        # The emulator's first speech_final after the turn's first sample: what the provider
        # decided, stamped as it handed the message to the socket.
        truth = next(t for t in eot_marks if t > turn.t0_ns) - turn.t0_ns
        # The run received it a little later (loopback), never earlier.
        assert 0 <= judged["endpoint_ns"] - truth < 25 * MS, (judged, truth)
        by_fixture[judged["fixture"]] = (judged, truth)
    cut, truth_cut = by_fixture["hesitate_flight"]
    assert 1829 * MS <= truth_cut < 2528 * MS  # the emulator ended the turn inside the pause
    assert cut["cut"] and cut["cut_in_pause"] and cut["pause_ns"] == [1829 * MS, 2528 * MS]
    assert cut["latency_ns"] is None and not cut["missed"]
    ok, truth_ok = by_fixture["clause_meeting"]
    truth_latency = truth_ok - 3069 * MS  # after the annotated speech end
    assert truth_latency >= 400 * MS  # the query's endpointing silence was honoured
    assert not ok["cut"] and abs(ok["latency_ns"] - truth_latency) < 25 * MS
    # The point: 2 turns, 1 cut in a pause, none missed; its P50 is the uncut turn's latency.
    assert (point["n"], point["cut_fixtures"], point["cutoffs_in_pause"], point["missed"]) == (
        2,
        1,
        1,
        0,
    )
    assert point["p50_ns"] == ok["latency_ns"]
    md = (out / "endpointing.md").read_text()
    assert "deepgram endpointing=400 utterance_end_ms=1000 (wire)" in md
    assert "the pipeline answered mid-sentence in 1 of 2 turns" in md
