"""A simulated caller on a REAL Pipecat bot (tests/agents/pipecat_transport_agent.py: Pipecat's
own pipecat-ws transport and its bundled Silero VAD, a canned tone for every reply): one
connection for the whole call, the caller hearing each reply by transcribing the reply audio
the run saved (the bot's turns carry no text), four turns, each with ground-truth bounds.

Silero hears speech, not a tone: the caller's clips are speech (the bundled call fixtures'
espeak-ng audio), put in the caller's cache under its voice's keys, as a cache filled by an
earlier run holds them. The caller's TTS is then never asked (a cache hit is a cache hit)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.calls.calls_helpers import CALLS, MS
from tests.stages.agent_helpers import pipecat_agent
from voicelat.audio import read_wav
from voicelat.audio.clip import shape_clip
from voicelat.core.calls.call import CALL_TURN
from voicelat.core.calls.caller import cache_key
from voicelat.emulate import Emulators
from voicelat.engine.call import plan_calls
from voicelat.engine.caller import CallerOptions, SimulatedCallers, caller_tables
from voicelat.engine.caller_cache import ClipCache
from voicelat.engine.runner import Runner
from voicelat.engine.stageset import AgentStageSet
from voicelat.files.fixtures import load_fixtures
from voicelat.files.pipeline import parse_pipeline
from voicelat.files.results import read_calls
from voicelat.files.scenario import load_scenario
from voicelat.stages.pipecat_ws import PipecatWs

# Real-time end to end (seconds each): the e2e set .ci/run runs (pyproject's markers).
pytestmark = pytest.mark.e2e

SAID = ["book_01_dinner", "book_02_party", "book_03_time", "book_05_repeat"]
HEARD = "Your table for four is booked."


def _scenario(tmp_path: Path, port: int) -> Path:
    url = f"http://127.0.0.1:{port}/v1"
    key = 'api_key_env = "VOICELAT_EMULATOR_KEY"\n'
    path = tmp_path / "agent-caller.toml"
    path.write_text(
        'name = "agent-caller"\n[caller]\npersona = "You are Sam, booking a table."\n'
        "max_turns = 6\ngap_ms = 400\n"
        f'[caller.llm]\nbase_url = "{url}"\nmodel = "gpt-4o-mini"\n{key}'
        f'[caller.voice]\nstage = "openai-tts"\nbase_url = "{url}"\nvoice = "echo"\n{key}'
        f'[caller.stt]\nstage = "openai-stt"\nbase_url = "{url}"\n'
        f'model = "gpt-4o-mini-transcribe"\n{key}',
        encoding="utf-8",
    )
    return path


# The caller with the example bot and its models runs in CI (tests/stack/test_agent_bot_profiled.py).
@pytest.mark.slow
def test_a_simulated_caller_talks_to_a_pipecat_bot_and_hears_it_by_stt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    fixtures = {f.id: f for f in load_fixtures(CALLS)}
    texts = [str(fixtures[i].text) for i in SAID]
    profile: dict[str, Any] = {
        "openai": {
            "latency": {"headers": 5, "ttft": 20, "token": 2, "stt_first": 10, "stt_final": 20},
            "content": {"replies": [*texts[:-1], texts[-1] + " [DONE]"], "transcript": HEARD},
        }
    }
    cache = ClipCache(tmp_path / "cache")

    async def run() -> Runner:
        async with Emulators(["openai"], profile=profile, seed=1, thread=True) as em:
            loaded = load_scenario(_scenario(tmp_path, em.servers["openai"].port))
            spec = loaded.scenario.caller
            assert spec is not None
            voice = caller_tables(spec)["voice"]
            for fid, text in zip(SAID, texts, strict=True):
                clip = shape_clip(read_wav(fixtures[fid].path))
                assert clip is not None
                cache.store(cache_key(voice, text), clip, text, voice)
            calls = plan_calls([loaded.scenario])
            table = {"stage": "pipecat-ws", "url": "ws://127.0.0.1:9291", "reply_idle_ms": 400}
            pipeline = parse_pipeline(
                {"agent": table, "turn": {"timeout_s": 20}, "output": {"save_audio": True}}
            )
            out = tmp_path / "out"
            options = CallerOptions(out, cache_dir=cache.root, auto_hears_audio=True)
            callers = SimulatedCallers(options, calls)
            runner = Runner(pipeline, [], out, calls=calls, callers=callers)
            made = PipecatWs(pipeline.agent or {})
            runner.build_stages = lambda: AgentStageSet.agent_of(made)  # type: ignore[method-assign]
            await runner.run([])
            assert em.truth.select("openai", "speech") == []  # every line from the cache
            return runner

    with pipecat_agent("ws", 9291) as agent:
        runner = asyncio.run(run())
    turns = sorted(runner.turns, key=lambda t: t.index)
    assert [t.extra[CALL_TURN] for t in turns] == [1, 2, 3, 4]
    assert all(t.ok and t.e2e_ns is not None for t in turns), [t.failure_reason for t in turns]
    assert len(agent.named("vad_stop")) == 4 and len(agent.named("reply")) == 4
    (record,) = read_calls(tmp_path / "out")
    part = record.extra["caller"]
    assert part["end_reason"] == "goal"
    for turn, line in zip(turns, part["lines"], strict=True):
        # One connection; the line's clip behind the human gap's silence on it.
        # (the silence is whole 20 ms frames; lead_silence_ms is the gap asked for.)
        lead = turn.extra["lead_silence_ms"] // 20 * 20
        assert turn.milestones["speech_start"] == (line["speech_start_ms"] + lead) * MS
        assert turn.milestones["speech_end"] == (line["speech_end_ms"] + lead) * MS
        assert sum(turn.segments.values()) == turn.e2e_ns
        # The bot's turns carry no text: the caller heard the saved reply audio by its STT.
        assert line["heard_by"] == "stt" and line["agent_text"] == HEARD
        assert line["cached"] and line["tts_ns"] is None
    assert ["connect" in {s.name for s in t.spans} for t in turns] == [True, False, False, False]
