"""AssemblyAI Universal-Streaming v3 over its websocket: ``assemblyai-stt`` (PROTOCOLS.md §7).

One session serves every turn: opened in ``__aenter__`` (its ``Begin`` read before the first
turn), re-opened by ``prepare()`` if the server ended it. AssemblyAI wants 50-1000 ms of
audio per binary message (it closes the socket with 3007 otherwise), so the runner's 20 ms
frames are grouped into ``chunk_ms`` messages (default 60 ms) and the last, shorter group is
padded with silence to that length.

``Turn`` messages with a non-empty ``transcript`` (AssemblyAI puts only finalized words
there) are :class:`~voicelat.core.events.Partial`; ``end_of_turn: true`` is both
:class:`~voicelat.core.events.EndOfTurn` and :class:`~voicelat.core.events.Final` (AssemblyAI advises
voice agents not to wait for the formatted copy; ``wait_formatted = true`` takes the
``turn_is_formatted`` one as the Final instead, with ``format_turns``). Every event,
Finals included, is reported as its message arrives, with that message's stamp (a Final
does not stop the runner's audio); a request with several Finals has their text in order as
its transcript and the last one as ``stt_final``. At the end of the audio an open turn is
closed with ``ForceEndpoint``; a turn the server already ended needs nothing. Turns of
earlier requests (a late formatted copy) are told apart by ``turn_order`` and ignored.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any, ClassVar
from urllib.parse import urlencode

from voicelat.core.errors import StageError
from voicelat.core.events import (
    Done,
    EndOfTurn,
    Final,
    Partial,
    RequestSent,
    StageEvent,
    StageName,
)
from voicelat.stages._ws import (
    Closed,
    Message,
    Pump,
    SenderDone,
    SenderFailed,
    WsConn,
    WsStage,
    close_reason,
    plain_url,
    require_key,
)
from voicelat.stages.base import Options

__all__ = ["AssemblyAISTT"]


class AssemblyAISTT(WsStage):
    """AssemblyAI streaming speech-to-text (v3) over one long-lived session."""

    kind: ClassVar[StageName] = "stt"
    stage_name: ClassVar[str] = "assemblyai-stt"

    def __init__(self, options: Mapping[str, Any], *, table: str = "stt") -> None:
        super().__init__()
        o = Options(
            table,
            options,
            {
                "base_url",
                "speech_model",
                "rate",
                "chunk_ms",
                "format_turns",
                "wait_formatted",
                "min_turn_silence",
                "max_turn_silence",
                "end_of_turn_confidence_threshold",
                "keyterms",
                "query",
                "api_key_env",
                "timeout_s",
            },
        )
        self.table = table
        self.base_url = o.text("base_url", "wss://streaming.assemblyai.com").rstrip("/")
        self.speech_model = o.text("speech_model", "universal-streaming-english")
        self.input_rate = o.integer("rate", 16000)
        self.chunk_ms = o.integer("chunk_ms", 60)
        if not 50 <= self.chunk_ms <= 1000:
            raise StageError(f"[{table}] chunk_ms must be 50..1000 (AssemblyAI's limits)")
        self.format_turns = o.flag("format_turns", False)
        self.wait_formatted = o.flag("wait_formatted", False)
        if self.wait_formatted and not self.format_turns:
            raise StageError(f"[{table}] wait_formatted needs format_turns = true")
        self.params: dict[str, str] = {}
        for key in ("min_turn_silence", "max_turn_silence"):
            if key in o.values:
                self.params[key] = str(o.integer(key, 0))
        if "end_of_turn_confidence_threshold" in o.values:
            self.params["end_of_turn_confidence_threshold"] = str(
                o.number("end_of_turn_confidence_threshold", 0.4)
            )
        if "keyterms" in o.values:
            self.params["keyterms_prompt"] = json.dumps(o.text_list("keyterms", []))
        extra = o.values.get("query", {})
        if not isinstance(extra, Mapping):
            raise StageError(f"[{table}] query must be a table of extra query parameters")
        for k, v in extra.items():
            self.params[str(k)] = str(v).lower() if isinstance(v, bool) else str(v)
        self.timeout_s = o.number("timeout_s", 10.0)
        self.key_env = o.opt_text("api_key_env")
        self._key = require_key(o.secret("api_key_env"), table)
        self._next_order = 0

    def _url(self) -> str:
        params = {
            "sample_rate": str(self.input_rate),
            "encoding": "pcm_s16le",
            "speech_model": self.speech_model,
            "format_turns": "true" if self.format_turns else "false",
            **self.params,
        }
        return f"{self.base_url}/v3/ws?{urlencode(params)}"

    def _headers(self) -> dict[str, str]:
        # AssemblyAI takes the key as it is, with no scheme.
        return {"Authorization": self._key, "AssemblyAI-Version": "2025-05-12"}

    async def _on_open(self, conn: WsConn) -> None:
        self._next_order = 0  # turn_order counts per session

    def describe(self) -> dict[str, Any]:
        return {
            "stage": self.stage_name,
            "url": plain_url(self._url()),
            "speech_model": self.speech_model,
            "rate": self.input_rate,
            "chunk_ms": self.chunk_ms,
            "format_turns": self.format_turns,
            "server": self._server,
            "streaming": True,
        }

    async def __aexit__(self, *exc: object) -> None:
        if self._conn is not None and self._conn.open:
            with contextlib.suppress(Exception):  # closing anyway
                await self._conn.send_json({"type": "Terminate"})
        await super().__aexit__(*exc)

    async def transcribe(self, audio: AsyncIterable[bytes]) -> AsyncIterator[StageEvent]:
        conn, events = await self._acquire()
        for event in events:
            yield event
        if conn is None:
            return
        url = conn.url
        pump = Pump(conn)
        chunk_bytes = self.input_rate * self.chunk_ms // 1000 * 2
        state = {"open_turn": False, "ended": 0}

        async def send() -> int:
            buf = b""
            async for frame in audio:
                buf += frame
                if len(buf) >= chunk_bytes:
                    await conn.send(buf)
                    buf = b""
            if buf:
                await conn.send(buf + bytes(chunk_bytes - len(buf)))
            if state["ended"] and not state["open_turn"]:
                t = time.perf_counter_ns()  # the server already ended the turn
            else:
                t = await conn.send_json({"type": "ForceEndpoint"})
            pump.emit(RequestSent(t, "audio_end"))
            return t

        pump.start_sender(send)
        audio_ended = False
        finished = False
        try:
            while True:
                item = await pump.next(self.timeout_s if audio_ended else None)
                if item is None:
                    yield self.failed(
                        f"no end of turn from {url} within {self.timeout_s:g} s after the end "
                        "of audio (read timeout): the server stalled"
                    )
                    return
                if isinstance(item, SenderDone):
                    audio_ended = True
                    if state["ended"] and not state["open_turn"]:
                        finished = True
                        yield Done(item.t_ns)
                        return
                    continue
                if isinstance(item, SenderFailed):
                    yield self.failed(f"sending audio to {url} failed: {item.exc}")
                    return
                if isinstance(item, Closed):
                    yield self.failed(close_reason(item.exc, url, self._key, "the end of turn"))
                    return
                if not isinstance(item, Message):
                    yield item  # RequestSent
                    continue
                data = _json(item.data)
                if data is None:
                    continue
                kind = data.get("type")
                if kind == "Error" or ("error" in data and kind is None):
                    code = data.get("error_code")
                    suffix = f" ({code})" if code else ""
                    yield self.failed(f"error from {url}: {data.get('error')}{suffix}")
                    return
                if kind != "Turn":
                    continue  # Begin, SpeechStarted, Warning, Heartbeat, Termination
                order = data.get("turn_order")
                if not isinstance(order, int) or order < self._next_order:
                    continue  # a turn an earlier request already ended (its formatted copy)
                transcript = str(data.get("transcript") or "").strip()
                formatted = bool(data.get("turn_is_formatted"))
                if not data.get("end_of_turn"):
                    state["open_turn"] = True
                    if transcript:
                        yield Partial(item.t_ns, transcript)
                    continue
                if self.wait_formatted and not formatted:
                    yield EndOfTurn(item.t_ns)
                    continue
                self._next_order = order + 1
                state["ended"] += 1
                state["open_turn"] = False
                if not self.wait_formatted:
                    yield EndOfTurn(item.t_ns)
                if transcript:
                    yield Final(item.t_ns, transcript)
                if audio_ended:
                    finished = True
                    yield Done(item.t_ns)
                    return
        finally:
            await pump.stop()
            if not finished:
                await self._drop()


def _json(message: str | bytes) -> dict[str, Any] | None:
    if isinstance(message, bytes):
        return None
    try:
        data = json.loads(message)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None
