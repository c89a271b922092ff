"""The one websocket request loop (``WsStage._exchange``) over a scripted connection: no
socket, a fake clock. Each end of a request (finished, provider error, stall, close, a
failed send) is handled once, for every provider protocol."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.frames import Close

from tests.stages.ws_helpers import KEY, KEY_ENV, collect
from voicelat.core.measure.clock import FakeClock
from voicelat.core.measure.events import Done, Failed, Final, RequestSent, StageEvent, TextSent
from voicelat.stages.cartesia import CartesiaTTS
from voicelat.stages.deepgram import DeepgramSTT
from voicelat.stages.protocols.cartesia import CartesiaProtocol

URL = "ws://127.0.0.1:9/v1/listen"


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


class ScriptedConn:
    """What the driver needs of a connection: ``recv`` plays ``script`` (a message with its
    arrival stamp, or an exception to raise), then waits forever; ``send`` records."""

    def __init__(self, script: list[tuple[str | bytes, int] | BaseException], clock: Any) -> None:
        self.url = URL
        self.clock = clock
        self.used = True
        self.sent: list[str | bytes] = []
        self._script = list(script)
        self._gate = asyncio.Event()

    def release(self) -> None:
        """Let the scripted messages come (once the input has gone out)."""
        self._gate.set()

    async def recv(self) -> tuple[str | bytes, int]:
        await self._gate.wait()
        if not self._script:
            await asyncio.Event().wait()
        item = self._script.pop(0)
        if isinstance(item, BaseException):
            raise item
        return item

    async def send(self, data: str | bytes) -> int:
        self.sent.append(data)
        return int(self.clock.now_ns())

    async def close(self, timeout: float = 1.0) -> None:
        return None


def _stt(**extra: Any) -> DeepgramSTT:
    stt = DeepgramSTT({"base_url": "ws://127.0.0.1:9", "api_key_env": KEY_ENV, **extra})
    stt.clock = FakeClock(t_ns=1_000)
    return stt


async def _frames(conn: ScriptedConn, *frames: bytes) -> AsyncIterator[bytes]:
    for frame in frames:
        yield frame
    conn.release()


def _results(text: str, **flags: bool) -> str:
    return json.dumps(
        {"type": "Results", "channel": {"alternatives": [{"transcript": text}]}, **flags}
    )


async def _run(stt: DeepgramSTT, script: list[Any], *frames: bytes) -> tuple[list[Any], Any]:
    conn = ScriptedConn(script, stt.clock)
    proto = stt._protocol(conn)
    events = await collect(stt._exchange(conn, proto, _frames(conn, *frames)))
    return events, conn


async def test_a_request_that_finishes() -> None:
    stt = _stt()
    final = _results("hello", is_final=True, from_finalize=True)
    events, conn = await _run(stt, [(final, 5_000)], b"\x00\x00", b"\x01\x00")
    assert conn.sent == [
        b"\x00\x00",
        b"\x01\x00",
        json.dumps({"type": "Finalize"}, separators=(",", ":")),
    ]
    assert events == [RequestSent(1_000, "audio_end"), Final(5_000, "hello"), Done(5_000)]


async def test_a_provider_error_is_one_failed_line_stamped_on_arrival() -> None:
    stt = _stt()
    error = json.dumps({"type": "Error", "description": f"bad key {KEY}", "variant": "Auth"})
    events, _ = await _run(stt, [(error, 7_000)], b"\x00\x00")
    failed = events[-1]
    assert isinstance(failed, Failed) and failed.t_ns == 7_000
    assert failed.reason == f"deepgram-stt: error from {URL}: bad key *** (Auth)"


async def test_a_close_under_the_request() -> None:
    stt = _stt()
    closed = ConnectionClosed(Close(1011, "NET-0001"), None)
    events, _ = await _run(stt, [closed], b"\x00\x00")
    assert events[-1] == Failed(
        1_000, f"deepgram-stt: {URL} closed the websocket before the final result: 1011 NET-0001"
    )


async def test_a_stall_after_the_end_of_audio() -> None:
    stt = _stt(timeout_s=0.05)
    events, _ = await _run(stt, [], b"\x00\x00")
    assert isinstance(events[-1], Failed)
    assert "no final transcript from" in events[-1].reason and "0.05 s" in events[-1].reason


async def test_a_failed_send() -> None:
    stt = _stt()

    async def broken() -> AsyncIterator[bytes]:
        yield b"\x00\x00"
        raise RuntimeError("the pacer broke")

    conn = ScriptedConn([], stt.clock)
    events: list[StageEvent] = await collect(stt._exchange(conn, stt._protocol(conn), broken()))
    assert events == [
        Failed(1_000, f"deepgram-stt: sending audio to {URL} failed: the pacer broke")
    ]


async def test_text_sent_is_stamped_at_hand_over() -> None:
    tts = CartesiaTTS({"api_key_env": KEY_ENV})
    clock = tts.clock = FakeClock(t_ns=2_000)
    done = json.dumps({"type": "done", "done": True, "context_id": "c"})
    conn = ScriptedConn([(done, 9_000)], clock)

    async def pieces() -> AsyncIterator[str]:
        yield "Hello, "
        clock.advance(500)
        yield "world."
        conn.release()

    proto = CartesiaProtocol(URL, context="c", voice=tts.voice)
    events = await collect(tts._exchange(conn, proto, pieces()))
    assert events == [TextSent(2_000, "Hello, "), TextSent(2_500, "world."), Done(9_000)]
    assert [json.loads(m)["transcript"] for m in conn.sent] == ["Hello, ", "world.", ""]
