"""The ``twilio`` stage over a real websocket: a scripted Media Streams server on loopback
sees what Twilio would send (auth header, connected, start, 20 ms media, mark echoes, stop),
and the stage's options fail with the file and line."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.server import ServerConnection, serve

from tests.stages.ws_helpers import collect, fixture_pcm
from voicelat.audio import frames
from voicelat.core.base.errors import ConfigError, StageError
from voicelat.core.measure.events import Audio, Connected, Done, Failed
from voicelat.files.pipeline import load_pipeline
from voicelat.stages.twilio import Twilio

PORT = 9140
ROOT = Path(__file__).resolve().parents[2]


class Agent:
    """Answers after 10 media frames: 100 ms of mu-law tone, a mark, then quiet."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.headers: dict[str, str] = {}

    async def handle(self, ws: ServerConnection) -> None:
        assert ws.request is not None
        self.headers = dict(ws.request.headers)
        media = 0
        async for raw in ws:
            msg = json.loads(raw)
            self.seen.append(msg)
            if msg["event"] == "media":
                media += 1
                if media == 10:
                    sid = msg["streamSid"]
                    tone = base64.b64encode(b"\x80" * 800).decode()
                    await ws.send(
                        json.dumps({"event": "media", "streamSid": sid, "media": {"payload": tone}})
                    )
                    await ws.send(
                        json.dumps({"event": "mark", "streamSid": sid, "mark": {"name": "r1"}})
                    )


async def _call(agent: Agent, monkeypatch: pytest.MonkeyPatch, **options: Any) -> list[Any]:
    monkeypatch.setenv("VOICELAT_TEST_AGENT_TOKEN", "agent-token-123456")
    table = {
        "stage": "twilio",
        "url": f"ws://127.0.0.1:{PORT}/media",
        "reply_idle_ms": 700,
        "start_settle_ms": 0,
        "api_key_env": "VOICELAT_TEST_AGENT_TOKEN",
        "custom_parameters": {"caller": "voicelat"},
        **options,
    }
    async with serve(agent.handle, "127.0.0.1", PORT):
        stage = Twilio(table)
        async with stage:
            await stage.prepare()

            async def audio() -> Any:
                for frame in frames(fixture_pcm(8000), 20)[:25]:
                    yield frame
                    await asyncio.sleep(0.02)

            events = await collect(stage.converse(audio()), 10)
        await asyncio.sleep(0.1)  # the stop message reaches the server
    return events


async def test_a_call_is_what_twilio_sends(monkeypatch: pytest.MonkeyPatch) -> None:
    agent = Agent()
    events = await _call(agent, monkeypatch)
    assert agent.headers["authorization"] == "Bearer agent-token-123456"
    kinds = [m["event"] for m in agent.seen]
    assert kinds[:2] == ["connected", "start"] and kinds[-1] == "stop"
    assert agent.seen[1]["start"]["customParameters"] == {"caller": "voicelat"}
    media = [m for m in agent.seen if m["event"] == "media"]
    assert len(media) > 25  # the fixture's 25 frames, then the line's silence
    assert all(len(base64.b64decode(m["media"]["payload"])) == 160 for m in media)
    # The mark came back after the 100 ms of reply audio played, with the same name.
    echoes = [m for m in agent.seen if m["event"] == "mark"]
    assert [e["mark"]["name"] for e in echoes] == ["r1"]
    assert isinstance(events[0], Connected)
    audio = [e for e in events if isinstance(e, Audio)]
    assert len(audio) == 1 and audio[0].rate == 8000 and len(audio[0].pcm) == 1600
    assert isinstance(events[-1], Done) and events[-1].t_ns == audio[0].t_ns


async def test_an_agent_not_listening_fails_the_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    stage = Twilio({"stage": "twilio", "url": f"ws://127.0.0.1:{PORT + 1}/media"})
    async with stage:
        await stage.prepare()

        async def audio() -> Any:
            yield bytes(320)

        events = await collect(stage.converse(audio()), 10)
    assert isinstance(events[-1], Failed)
    assert (
        events[-1].reason
        == f"twilio: cannot connect to ws://127.0.0.1:{PORT + 1}/media: connection refused"
    )


def test_options_fail_with_file_line_and_key(tmp_path: Path) -> None:
    path = tmp_path / "a.toml"
    path.write_text('[agent]\nstage = "twilio"\nurl = "ws://127.0.0.1:1/x"\nreply_idle_ms = 5\n')
    with pytest.raises(
        StageError, match=r"a\.toml:4: \[agent\] reply_idle_ms must be at least 100"
    ):
        Twilio(load_pipeline(path).agent or {})
    path.write_text('[agent]\nstage = "twilio"\nurl = "ws://127.0.0.1:1/x"\nvoice = "x"\n')
    with pytest.raises(ConfigError, match=r"a\.toml:4: \[agent\] has unknown key\(s\) voice"):
        Twilio(load_pipeline(path).agent or {})
    path.write_text('[agent]\nstage = "twilio"\n')
    with pytest.raises(ConfigError, match=r"\[agent\] needs 'url'"):
        Twilio(load_pipeline(path).agent or {})


def test_the_shipped_pipeline_is_valid() -> None:
    pipeline = load_pipeline(ROOT / "pipelines" / "agent-twilio.toml")
    stage = Twilio(pipeline.agent or {})
    assert stage.describe()["url"] == "ws://127.0.0.1:7860/ws"
    assert pipeline.agent_traces.mapping == "pipecat"
