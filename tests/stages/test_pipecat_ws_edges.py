"""pipecat-ws's call loop on a real socket, against a scripted websocket peer speaking Pipecat's
protobuf frames (the edges a healthy Pipecat bot never shows on purpose): a bot that hangs up
before its reply, one that hangs up right after it, one that greets on connect, one that talks
JSON. Each call is a real websocket on loopback; the stage runs as the engine runs it."""

from __future__ import annotations

import asyncio
import contextlib
import struct
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from websockets.asyncio.server import ServerConnection, serve

from voicelat.core.measure.events import Audio, Done, Failed, StageEvent
from voicelat.stages.pipecat_ws import PipecatWs
from voicelat.stages.protocols.pipecat_ws import decode_frame, encode_audio

PORT = 9258
LOUD = struct.pack("<480h", *([3000, -3000] * 240))  # 20 ms at 24 kHz


async def _frames(n: int) -> AsyncIterator[bytes]:
    """``n`` 20 ms frames of 16 kHz silence, paced in real time (the pacer's part)."""
    t0 = time.monotonic()
    for k in range(n):
        yield bytes(640)
        await asyncio.sleep(max(0.0, t0 + (k + 1) * 0.02 - time.monotonic()))


async def _turn(bot: Callable[[ServerConnection], Awaitable[None]], **options: Any) -> list[Any]:
    async def handler(ws: ServerConnection) -> None:
        with contextlib.suppress(Exception):
            await bot(ws)

    async with serve(handler, "127.0.0.1", PORT):
        table = {"url": f"ws://127.0.0.1:{PORT}", "reply_idle_ms": 200, "ready_timeout_s": 0.2}
        async with PipecatWs({**table, **options}) as stage:
            await stage.prepare()
            events: list[StageEvent] = []
            async for event in stage.converse(_frames(15)):
                events.append(event)
            return events


async def _audio_frames_in(ws: ServerConnection, n: int) -> None:
    """Wait for ``n`` user audio frames (client-ready and other messages skipped)."""
    seen = 0
    while seen < n:
        if decode_frame(await ws.recv()).kind == "audio":
            seen += 1


async def test_a_bot_that_hangs_up_before_replying_fails_the_turn_with_its_close() -> None:
    async def bot(ws: ServerConnection) -> None:
        await _audio_frames_in(ws, 5)
        await ws.close(1011, "pipeline error")

    events = await _turn(bot)
    failed = events[-1]
    assert isinstance(failed, Failed), events
    assert failed.reason.startswith("pipecat-ws: ws://127.0.0.1:9258 closed the websocket")
    assert "1011 pipeline error" in failed.reason


async def test_a_hang_up_right_after_the_reply_ends_it() -> None:
    async def bot(ws: ServerConnection) -> None:
        await _audio_frames_in(ws, 5)
        for _ in range(3):
            await ws.send(encode_audio(LOUD, 24000))
        await ws.close()

    events = await _turn(bot, reply_idle_ms=5000)
    audio = [e for e in events if isinstance(e, Audio)]
    assert len(audio) == 3 and all(a.rate == 24000 for a in audio)
    assert isinstance(events[-1], Done) and events[-1].finish_reason == "agent hung up"


async def test_a_greeting_before_the_turn_is_not_the_reply() -> None:
    async def bot(ws: ServerConnection) -> None:
        await ws.send(encode_audio(LOUD, 24000))  # on connect: before the turn
        await _audio_frames_in(ws, 10)
        await ws.send(encode_audio(LOUD, 24000))  # the reply
        await asyncio.sleep(1)  # and the line stays open

    t0 = time.monotonic_ns()
    events = await _turn(bot)
    audio = [e for e in events if isinstance(e, Audio)]
    assert len(audio) == 1 and audio[0].t_ns - t0 >= 150_000_000  # after 10 frames
    assert isinstance(events[-1], Done) and events[-1].finish_reason == "idle"


async def test_a_json_bot_fails_the_turn_naming_the_serializer() -> None:
    async def bot(ws: ServerConnection) -> None:
        await _audio_frames_in(ws, 2)
        await ws.send('{"event": "media"}')
        await asyncio.sleep(1)

    events = await _turn(bot)
    assert isinstance(events[-1], Failed)
    assert "is the bot's serializer ProtobufFrameSerializer?" in events[-1].reason


async def test_leading_digital_silence_is_reply_audio_unless_the_bot_streams_silence() -> None:
    async def bot(ws: ServerConnection) -> None:
        await _audio_frames_in(ws, 5)
        await ws.send(encode_audio(bytes(960), 24000))  # the reply's 20 ms of exact zeros
        await ws.send(encode_audio(LOUD, 24000))
        await asyncio.sleep(1)

    plain = [e for e in await _turn(bot) if isinstance(e, Audio)]
    assert [a.pcm for a in plain] == [bytes(960), LOUD]  # its first byte is the first audio
    mixer = [e for e in await _turn(bot, streams_silence=True) if isinstance(e, Audio)]
    assert [a.pcm for a in mixer] == [LOUD]  # zeros are the line for a bot that streams them


async def test_each_call_carries_a_fresh_id_when_asked() -> None:
    paths: list[str] = []

    async def bot(ws: ServerConnection) -> None:
        paths.append(ws.request.path if ws.request else "")
        await _audio_frames_in(ws, 2)
        await ws.send(encode_audio(LOUD, 24000))
        await ws.close()

    async with serve(bot, "127.0.0.1", PORT + 10):
        url = f"ws://127.0.0.1:{PORT + 10}/ws-client"
        async with PipecatWs({"url": url, "call_id_param": "conversation_id", "rtvi": False}) as st:
            ids = []
            for _ in range(2):
                await st.prepare()
                async for _event in st.converse(_frames(5)):
                    pass
                ids.append(st.call_id)
    assert len(set(ids)) == 2 and all(ids)
    assert paths == [f"/ws-client?conversation_id={i}" for i in ids]
