"""Issue #27: the example LiveKit agent profiled through the ``livekit`` kind, and compared.

examples/livekit-agent/agent.py (a real livekit-agents 1.8.9 ``AgentSession`` with no LiveKit
server: Silero VAD, LiveKit's OpenAI STT, LLM and TTS plugins, its audio bridged to a
websocket), started by the manager behind `voicelat agent up --bot livekit`, runs against ``voicelat serve openai`` with the ``exact`` latencies
(STT final 150 ms, TTFT 120 ms, TTS first audio 100 ms, after 10 ms headers), its OTLP exporter
pointed at the trace receiver ``voicelat run`` opens. Two turns of the shipped pipeline
(pipelines/agent-livekit.toml, only the ports changed):

* every turn has e2e at voicelat's sink (``output_first_audible``) and is split by LiveKit's own
  spans through the ``livekit`` mapping: the traced segments, summing exactly to e2e, none
  negative, nothing clamped or partial;
* the split is where the injected delays are: ``tts_ttfb`` holds the emulator's 100 ms TTS
  first audio and agrees with LiveKit's own TTS TTFB; ``llm_ttft`` holds its 120 ms TTFT;
  ``endpointing`` holds LiveKit's stated endpointing delay (0.5 s) and LiveKit's end of speech
  (its VAD's, back-dated by LiveKit) lands within 250 ms of the fixture's ground truth (the
  spans' clock placement is right: a wrong one is seconds off);
* ``transport`` (LiveKit's first TTS byte -> the first reply byte at voicelat) is the bridge's
  few milliseconds on loopback.

Then ``voicelat compare`` ranks it beside the Pipecat transport test bot over ``pipecat-ws``
(tests/agents/pipecat_transport_agent.py: Pipecat's own transport, VAD and serializer, a canned
reply) and voicelat's own cascade on the same emulator (pipelines/emulated-openai.toml).
"""

from __future__ import annotations

import json
import shutil
import socket
from collections.abc import Iterator
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from tests.cli.emulated_run import KEY_ENV, pipeline, serving
from tests.stages.agent_helpers import pipecat_agent
from voicelat.cli.main import main
from voicelat.core.base.contract import AGENT_TRACED_SEGMENTS
from voicelat.core.base.errors import EXIT_OK
from voicelat.core.base.turn import Turn
from voicelat.files.results import load_run
from voicelat.stack.agent import AgentConfig, PipecatBot
from voicelat.stack.config import StackConfig
from voicelat.stages import base as stage_base

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
#: The two shortest bundled fixtures (3.2 and 3.3 s of audio, speech ending at 1.7-1.8 s).
FIXTURES = ("kitchen_lights", "rain_tomorrow")
MS = 1_000_000
#: The exact profile with a short reply (its tone plays in real time: the turn's length).
PROFILE = (ROOT / "voicelat" / "emulate" / "profiles" / "exact.toml").read_text() + (
    '\n[openai.content]\nreply = "Sure, done."\nleading_silence_ms = 40.0\n'
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module", autouse=True)
def livekit_entry_point() -> Iterator[None]:
    """The ``livekit`` stage as pyproject.toml registers it, also in an environment installed
    before the entry point existed (as tests/cli/test_agent_cli.py does for twilio)."""
    found = stage_base.available_stages()
    with pytest.MonkeyPatch.context() as mp:
        if "livekit" not in found:
            ep = EntryPoint(
                "livekit", "voicelat.stages.livekit:LiveKit", stage_base.ENTRY_POINT_GROUP
            )
            mp.setattr(stage_base, "available_stages", lambda: {**found, "livekit": ep})
        yield


@pytest.fixture(scope="module")
def fixtures_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = ROOT / "fixtures"
    out = tmp_path_factory.mktemp("fixtures")
    manifest = json.loads((src / "manifest.json").read_text())
    manifest["fixtures"] = [f for f in manifest["fixtures"] if f["id"] in FIXTURES]
    for entry in manifest["fixtures"]:
        shutil.copy(src / entry["file"], out / entry["file"])
    (out / "manifest.json").write_text(json.dumps(manifest))
    return out


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    profile = tmp_path_factory.mktemp("profile") / "short.toml"
    profile.write_text(PROFILE)
    with serving(str(profile)) as (base_url, _):
        yield base_url


@pytest.fixture(scope="module")
def livekit_agent(
    emulator: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[int, int]]:
    """The example agent started as `voicelat agent up --bot livekit` starts it, on a free port,
    exporting to a free trace port: (port, trace port)."""
    port, traces = _free_port(), _free_port()
    config = AgentConfig(
        bot="livekit",
        port=port,
        openai_url=emulator,
        otlp_endpoint=f"http://127.0.0.1:{traces}/v1/traces",
        stack=StackConfig(state_dir=tmp_path_factory.mktemp("agent-state")),
        startup_timeout_s=60.0,
    )
    with PipecatBot(config) as manager:
        status = manager.up()
        assert status.healthy and status.urls == {"livekit": f"ws://127.0.0.1:{port}/ws"}
        yield port, traces


def _run(pipeline_file: Path, fixtures: Path, out: Path) -> Path:
    argv = ["run", "-p", str(pipeline_file), "-f", str(fixtures), "-w", "0", "-o", str(out), "-q"]
    assert main(argv) == EXIT_OK, pipeline_file
    return out


@pytest.fixture(scope="module")
def livekit_run(
    livekit_agent: tuple[int, int], fixtures_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    port, trace_port = livekit_agent
    text = (ROOT / "pipelines" / "agent-livekit.toml").read_text()
    assert "127.0.0.1:7880" in text and '\ntraces = "livekit"\n' in text
    text = text.replace("127.0.0.1:7880", f"127.0.0.1:{port}").replace(
        '\ntraces = "livekit"\n', f'\ntraces = "livekit"\ntrace_port = {trace_port}\n'
    )
    base = tmp_path_factory.mktemp("lk")
    (base / "agent-livekit.toml").write_text(text)
    return _run(base / "agent-livekit.toml", fixtures_dir, base / "livekit")


def _turns(run_dir: Path) -> list[Turn]:
    turns = list(load_run(run_dir).turns)
    assert sorted(t.fixture for t in turns) == sorted(FIXTURES), [t.fixture for t in turns]
    return turns


def test_every_turn_ends_at_the_sink_and_is_split_by_livekits_own_spans(
    livekit_run: Path,
) -> None:
    for turn in _turns(livekit_run):
        where = f"{turn.fixture}: {turn.flags} {turn.failure_reason} {turn.segments} {turn.figures}"
        assert turn.ok, where
        m, seg, fig = turn.milestones, turn.segments, turn.figures
        assert turn.e2e_ns == m["output_first_audible"] - m["speech_end"], where
        assert tuple(seg) == AGENT_TRACED_SEGMENTS, where
        assert sum(seg.values()) == turn.e2e_ns, where
        assert min(seg.values()) >= 0, where
        assert not [f for f in turn.flags if f.startswith(("untraced", "trace_"))], where
        # The black-box total is kept beside the split and agrees with it.
        assert fig["agent_response_ns"] == m["first_audio"] - m["speech_end"], where
        # The emulator's injected delays sit in the segments that hold them.
        assert 100 * MS <= seg["tts_ttfb"] < 250 * MS, where
        # LiveKit's own TTS TTFB (the tts_node's lk.response.ttfb, from the text sent to the
        # provider) and the split's (the tts_request's TTSMetrics, from the text pushed): two
        # stamps of one moment, measured 0-4 ms apart on 8 realistic turns.
        assert abs(seg["tts_ttfb"] - fig["agent_reported_tts_ttfb_ms"] * MS) < 10 * MS, where
        assert seg["llm_ttft"] >= 120 * MS, where
        # LiveKit's end of speech (its endpoint minus its stated delay) near the ground truth.
        delay = fig["agent_reported_endpointing_delay_ms"] * MS
        assert delay == 500 * MS, where
        livekit_eos = m["agent_endpoint"] - delay
        assert abs(livekit_eos - m["speech_end"]) < 250 * MS, where
        assert seg["endpointing"] >= delay - 250 * MS, where
        # The reply ended at the host's playback_finished, once it had played in real time
        # (an idle end before it would hang up on LiveKit mid-reply: lk.interrupted).
        assert m["response_done"] - m["first_audio"] >= fig["agent_audio_ns"] - 50 * MS, where
        # LiveKit's playback start and voicelat's first reply byte: the bridge on loopback.
        assert seg["transport"] < 50 * MS, where
        assert fig["agent_reported_e2e_latency_ms"] > 0, where


def test_compare_ranks_it_beside_the_pipecat_bot_and_the_cascade(
    livekit_run: Path,
    emulator: str,
    fixtures_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    port = _free_port()
    bot = tmp_path / "pipecat-bot.toml"
    bot.write_text(
        '[pipeline]\nname = "pipecat-bot"\n\n[agent]\nstage = "pipecat-ws"\n'
        f'url = "ws://127.0.0.1:{port}"\nreply_idle_ms = 600\n'
    )
    with pipecat_agent("ws", port):
        pipecat_run = _run(bot, fixtures_dir, tmp_path / "pipecat")
    monkeypatch.setenv(KEY_ENV, "emulator-key")
    cascade = _run(pipeline(tmp_path, emulator, "cascade"), fixtures_dir, tmp_path / "cascade")
    out = tmp_path / "cmp"
    argv = ["compare", str(livekit_run), str(pipecat_run), str(cascade), "-o", str(out)]
    assert main(argv) == EXIT_OK
    doc = json.loads((out / "comparison.json").read_text())
    combos = {c["name"]: c for c in doc["combinations"]}
    assert set(combos) == {"livekit", "pipecat", "cascade"}, list(combos)
    assert sorted(c["rank"] for c in combos.values()) == [1, 2, 3]
    for name, c in combos.items():
        assert c["status"] == "ok" and c["n"] == 2 and c["failure_rate"] == 0.0, (name, c)
    md = (out / "comparison.md").read_text()
    assert all(name in md for name in combos)
