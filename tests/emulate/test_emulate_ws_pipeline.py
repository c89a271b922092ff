"""The websocket twins run real fixture turns end to end through the runner.

Like tests/emulate/test_emulate_pipeline.py: the pipeline files as shipped, against in-process
emulators on ephemeral ports (only the ports in the base URLs are swapped). Both twins end
turns on the provider's end of turn (``[endpointing] mode = "provider"``).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ROOT
from voicelat.core.base.plan import plan_turns
from voicelat.emulate import Emulators
from voicelat.engine.runner import Runner
from voicelat.files.fixtures import default_fixtures_dir, load_fixtures
from voicelat.files.pipeline import parse_pipeline

SHORT = {"leading_silence_ms": 40.0, "ms_per_char": 20.0}
PROFILE: dict[str, Any] = {
    "openai": {
        "latency": {"headers": 5, "ttft": 120, "token": 10},
        "content": {"reply": "Sure thing."},
    },
    "deepgram": {"latency": {"stt_partial": 50, "stt_final": 80}},
    "elevenlabs": {"latency": {"tts_first_audio": 90, "tts_chunk": 5}, "content": SHORT},
    "assemblyai": {"latency": {"stt_partial": 50, "stt_final": 80}},
    "cartesia": {"latency": {"tts_first_audio": 70, "tts_chunk": 5}, "content": SHORT},
}


def _pipeline(name: str, em: Emulators) -> Any:
    path = ROOT / "pipelines" / f"{name}.toml"
    data = tomllib.loads(path.read_text())
    for table in ("stt", "llm", "tts"):
        url = data[table]["base_url"]
        for server in em.servers.values():
            url = url.replace(
                f"127.0.0.1:{server.emulator.default_port}", f"127.0.0.1:{server.port}"
            )
        data[table]["base_url"] = url
    return parse_pipeline(data, path=path)


def _plain(text: str | None) -> str:
    return re.sub(r"[^\w\s']", "", text or "").lower()


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("name", "emulators", "tts_truth"),
    [
        (
            "emulated-deepgram-openai-elevenlabs",
            ["deepgram", "openai", "elevenlabs"],
            "stream_input",
        ),
        (
            "emulated-assemblyai-groq-cartesia",
            ["assemblyai", "openai", "cartesia"],
            "tts_websocket",
        ),
    ],
)
async def test_websocket_twin_runs_fixture_turns(
    name: str,
    emulators: list[str],
    tts_truth: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    fixture = next(f for f in load_fixtures(default_fixtures_dir()) if f.id == "book_table")
    async with Emulators(emulators, profile={k: PROFILE[k] for k in emulators}, seed=1) as em:
        runner = Runner(_pipeline(name, em), [fixture], tmp_path)
        outcome = await runner.run(plan_turns([fixture.id, fixture.id], warmup=0))
        tts_ex = em.truth.select(None, tts_truth)
        assert em.errors == []
    assert len(outcome.turns) == 2
    for turn in outcome.turns:
        assert not turn.failed, turn.failure_reason
        assert _plain(turn.transcript) == _plain(fixture.text)
        assert turn.reply == "Sure thing."
        # The provider's end of turn is the endpoint; the emulator's leading silence comes back.
        assert "endpoint" in turn.milestones and turn.e2e_ns is not None
        assert abs(turn.segments["leading_silence"] / 1e6 - 40) <= 10, turn.segments
        assert not turn.cold  # every socket was opened before the turn needed it
    # The STT socket served both turns (AssemblyAI, Deepgram); ElevenLabs opens one per turn.
    assert len(tts_ex) == (2 if tts_truth == "stream_input" else 1)
    spans = {s.name for t in outcome.turns for s in t.spans if s.stage == "stt"}
    assert {"connect", "handshake"} <= spans
