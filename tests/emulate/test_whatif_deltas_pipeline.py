"""A real turn (emulated OpenAI on loopback, real HTTP streaming) records when each LLM delta
arrived, and `voicelat whatif --set chunker.mode=clause` predicts from what it wrote."""

from __future__ import annotations

import json
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from tests.helpers import ROOT
from voicelat.cli.main import main
from voicelat.core.base.plan import plan_turns
from voicelat.core.judge.whatif_reply import ChunkerSetting, piece_sends
from voicelat.core.measure.arrivals import EXTRA_KEY, fed_text
from voicelat.emulate import Emulators
from voicelat.engine.runner import Runner
from voicelat.files.fixtures import default_fixtures_dir, load_fixtures
from voicelat.files.pipeline import parse_pipeline
from voicelat.files.results import TurnsWriter, load_run, write_summary

MS = 1_000_000
REPLY = "Sure thing, I booked it. See you soon."
PROFILE = {
    "openai": {
        "latency": {
            "headers": 5,
            "ttft": 60,
            "token": 15,
            "stt_first": 40,
            "stt_final": 60,
            "tts_first_audio": 50,
            "tts_chunk": 5,
        },
        "content": {"leading_silence_ms": 30.0, "reply": REPLY, "ms_per_char": 5.0},
    },
}


@pytest.mark.e2e
async def test_a_recorded_turn_carries_its_delta_arrivals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    fixture = next(f for f in load_fixtures(default_fixtures_dir()) if f.id == "book_table")
    data = tomllib.loads((ROOT / "pipelines" / "emulated-openai.toml").read_text())
    async with Emulators(["openai"], profile=PROFILE, seed=1) as em:
        port = em.servers["openai"].port
        default = em.servers["openai"].emulator.default_port
        for table in ("stt", "llm", "tts"):
            url = data[table]["base_url"].replace(f"127.0.0.1:{default}", f"127.0.0.1:{port}")
            data[table]["base_url"] = url
        pipeline = parse_pipeline(data, path=ROOT / "pipelines" / "emulated-openai.toml")
        runner = Runner(pipeline, [fixture], tmp_path)
        outcome = await runner.run(plan_turns([fixture.id], warmup=0))
    (turn,) = outcome.turns
    assert not turn.failed, turn.failure_reason
    assert turn.reply == REPLY
    record = turn.extra[EXTRA_KEY]
    fed = fed_text(record, turn.reply)
    assert fed is not None and fed.complete
    offsets = [t for t, _ in fed.deltas]
    assert offsets[0] == 0 and offsets == sorted(offsets) and len(offsets) >= 5
    assert "".join(text for _, text in fed.deltas).strip() == REPLY
    # The emulator streams a token every 15 ms: the recorded arrivals are spread like that.
    assert offsets[-1] >= (len(offsets) - 1) * 10 * MS
    # The chunker replayed on the record hands its first piece when the turn recorded it.
    m = turn.milestones
    done = m["llm_done"] - m["llm_first_token"]
    first = piece_sends(fed, ChunkerSetting("sentence", 1), done)[0]
    assert first[1].strip() == "Sure thing, I booked it."
    assert abs(m["llm_first_token"] + first[0] - m["llm_first_speakable"]) < 3 * MS
    clause = piece_sends(fed, ChunkerSetting("clause", 1), done)[0]
    assert clause[1].strip() == "Sure thing," and clause[0] < first[0]

    # Written and read back as `voicelat run` writes it, then predicted from.
    run = tmp_path / "run"
    w = TurnsWriter(run)
    # The emulated STT opens a websocket per turn, so every turn is cold and the what-if
    # (warm turns only) would have none: this one counts as warm for the prediction.
    w.write(replace(turn, cold=False, cold_stages=()))
    w.close()
    write_summary(run, {"schema_version": 1, "pipeline": {"chunker": {"mode": "sentence"}}})
    assert load_run(run).turns[0].extra[EXTRA_KEY] == record
    out = tmp_path / "p.json"
    # The record is a few dozen integers: it stays small next to the rest of the turn.
    assert len(json.dumps(record)) < 400
    code = main(["whatif", str(run), "--set", "chunker.mode=clause", "--json", str(out)])
    assert code == 0, capsys.readouterr().err
    doc = json.loads(out.read_text())
    # One turn, too few to fit TTFB against the length: the first byte moves with the clause.
    assert doc["n"] == 1
    assert doc["predicted_p50_ns"] == doc["recorded_p50_ns"] + clause[0] - first[0]
