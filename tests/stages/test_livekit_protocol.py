"""The ``livekit`` agent stage: its bridge protocol on literal messages, and the stage against a
real websocket server speaking the bridge on loopback (the host's side as
examples/livekit-agent/agent.py has it). The real AgentSession behind it: tests/e2e/test_agent_livekit.py."""

from __future__ import annotations

import asyncio
import json
import struct
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from websockets.asyncio.server import ServerConnection, serve

from voicelat.core.base.errors import ConfigError, StageError
from voicelat.core.measure.events import Audio, Done, Failed, Interrupted, ServerSpeech
from voicelat.stages.livekit import LiveKit
from voicelat.stages.protocols.livekit import LiveKitBridgeProtocol, ready_rates
from voicelat.stages.protocols.pipecat_ws import ReplyWatch

MS = 1_000_000
URL = "ws://127.0.0.1:1/ws"
LOUD = struct.pack("<4h", 0, 900, -900, 5)
QUIET = bytes(8)


def _proto() -> LiveKitBridgeProtocol:
    # As the stage builds it: the bridge sends only the session's audio, so its digital
    # silence (the TTS's lead) is reply audio, not the line's.
    watch = ReplyWatch(idle_ns=500 * MS, timeout_ns=2000 * MS, silence_peak=-1)
    return LiveKitBridgeProtocol(URL, input_rate=16000, output_rate=24000, watch=watch)


def test_ready_names_both_rates_or_is_not_ready() -> None:
    assert ready_rates('{"type":"ready","input_rate":16000,"output_rate":24000}') == (16000, 24000)
    assert ready_rates('{"type":"ready","input_rate":16000}') is None
    assert ready_rates('{"type":"ready","input_rate":true,"output_rate":24000}') is None
    assert ready_rates(b'{"type":"ready","input_rate":16000,"output_rate":24000}') is None
    assert ready_rates("not json") is None


def test_the_reply_is_the_audio_after_sound_and_ends_at_playback_finished() -> None:
    p = _proto()
    p.turn_start_ns = 100
    assert [s.data for s in p.send_input(LOUD)] == [LOUD]  # raw PCM out, no framing
    assert p.receive(LOUD, 50) == []  # before the turn: a greeting, not this reply
    assert p.receive('{"type":"user_state","state":"speaking"}', 200) == [ServerSpeech(200, True)]
    assert p.receive('{"type":"user_state","state":"listening"}', 300) == [ServerSpeech(300, False)]
    assert p.receive('{"type":"playback_finished"}', 350) == []  # no reply audio yet
    assert p.receive(QUIET, 400) == [Audio(400, QUIET, 24000)]  # the reply's leading silence
    assert p.receive(LOUD, 410) == [Audio(410, LOUD, 24000)]
    assert p.receive('{"type":"clear"}', 420) == [Interrupted(420)]
    (done,) = p.receive('{"type":"playback_finished","interrupted":false}', 500)
    assert isinstance(done, Done) and done.t_ns == 500 and p.finished


def test_unknown_types_are_ignored_and_garbage_fails_the_turn_with_the_reason() -> None:
    p = _proto()
    assert p.receive('{"type":"agent_state","state":"thinking"}', 1) == []
    (failed,) = p.receive("[1, 2]", 2)
    assert isinstance(failed, Failed) and "not a JSON object with a type" in failed.reason
    (error,) = p.receive('{"type":"error","message":"APIConnectionError()"}', 3)
    assert isinstance(error, Failed) and error.reason.endswith("APIConnectionError()")


def test_options_the_bridge_cannot_honour_are_refused() -> None:
    with pytest.raises(StageError, match="rtvi"):
        LiveKit({"url": URL, "rtvi": True})
    with pytest.raises(StageError, match="streams_silence"):
        LiveKit({"url": URL, "streams_silence": True})
    with pytest.raises(ConfigError, match="ready_timeout"):
        LiveKit({"url": URL, "ready_timeout": 3})
    with pytest.raises(StageError, match="ws://"):
        LiveKit({"url": "http://127.0.0.1:1/ws"})


async def _frames(n: int) -> AsyncIterator[bytes]:
    for _ in range(n):
        yield bytes(640)
        await asyncio.sleep(0.002)


async def _bridge(rates: tuple[int, int], seen: dict[str, Any], ws: ServerConnection) -> None:
    """The host's side: ready, then after 5 frames of the caller a short reply and its end."""
    assert ws.request is not None
    seen["query"] = parse_qs(urlparse(ws.request.path).query)
    await ws.send(json.dumps({"type": "ready", "input_rate": rates[0], "output_rate": rates[1]}))
    got = 0
    async for message in ws:
        assert isinstance(message, bytes) and len(message) == 640
        got += 1
        if got == 5:
            await ws.send(json.dumps({"type": "user_state", "state": "listening"}))
            for _ in range(3):
                await ws.send(LOUD * 120)
            await ws.send(json.dumps({"type": "playback_finished", "interrupted": False}))
    seen["frames"] = got


async def _converse(rates: tuple[int, int]) -> tuple[list[Any], dict[str, Any]]:
    seen: dict[str, Any] = {}
    async with serve(lambda ws: _bridge(rates, seen, ws), "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        table = {"url": f"ws://127.0.0.1:{port}/ws", "call_id_param": "conversation_id"}
        async with LiveKit(table) as stage:
            events = [e async for e in stage.converse(_frames(8))]
            call_id = stage.call_id
        await asyncio.sleep(0.05)
    return events, {**seen, "call_id": call_id}


def test_one_call_over_a_real_bridge_server() -> None:
    events, seen = asyncio.run(_converse((16000, 24000)))
    assert seen["query"]["conversation_id"] == [seen["call_id"]] and len(seen["call_id"]) == 32
    audio = [e for e in events if isinstance(e, Audio)]
    assert len(audio) == 3 and all(e.rate == 24000 for e in audio)
    assert any(isinstance(e, ServerSpeech) and not e.started for e in events)
    done = events[-1]
    assert isinstance(done, Done) and done.finish_reason == "playback-finished", events


def test_a_host_at_other_rates_fails_the_call_naming_both() -> None:
    events, _ = asyncio.run(_converse((16000, 48000)))
    (failed,) = [e for e in events if isinstance(e, Failed)]
    assert "sends 48000 Hz" in failed.reason and "output_rate = 24000" in failed.reason


def test_a_host_that_never_says_ready_fails_the_call_with_one_line() -> None:
    async def mute(ws: ServerConnection) -> None:
        async for _ in ws:
            pass

    async def call() -> list[Any]:
        async with serve(mute, "127.0.0.1", 0) as server:
            port = server.sockets[0].getsockname()[1]
            table = {"url": f"ws://127.0.0.1:{port}/ws", "ready_timeout_s": 0.2}
            async with LiveKit(table) as stage:
                return [e async for e in stage.converse(_frames(2))]

    (failed,) = asyncio.run(call())
    assert isinstance(failed, Failed), failed
    assert "no ready message from the LiveKit host" in failed.reason, failed.reason
    assert "\n" not in failed.reason and "Traceback" not in failed.reason


def test_the_shipped_pipeline_reads_traces_with_the_livekit_mapping() -> None:
    from pathlib import Path

    from voicelat.files.pipeline import load_pipeline

    root = Path(__file__).resolve().parents[2]
    p = load_pipeline(root / "pipelines" / "agent-livekit.toml")
    stage = LiveKit(p.agent or {})
    assert stage.kind == "agent" and stage.endpoint_by_server and stage.stage_name == "livekit"
    assert (stage.input_rate, stage.output_rate) == (16000, 24000)
    assert (p.agent_traces.mapping, p.agent_traces.wait_ms) == ("livekit", 3000)
    assert stage.options.call_id_param == "conversation_id"
