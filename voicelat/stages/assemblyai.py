"""AssemblyAI Universal-Streaming v3 over its websocket: ``assemblyai-stt`` (PROTOCOLS.md §7).
The messages are parsed by :mod:`voicelat.stages.protocols.assemblyai`.

One session serves every turn: opened in ``__aenter__`` (its ``Begin`` read before the first
turn), re-opened by ``prepare()`` if the server ended it. AssemblyAI wants 50-1000 ms of
audio per binary message (it closes the socket with 3007 otherwise), so the runner's 20 ms
frames are grouped into ``chunk_ms`` messages (default 60 ms) and the last, shorter group is
padded with silence to that length.

``Turn`` messages with a non-empty ``transcript`` (AssemblyAI puts only finalized words
there) are :class:`~voicelat.core.measure.events.Partial`; ``end_of_turn: true`` is both
:class:`~voicelat.core.measure.events.EndOfTurn` and :class:`~voicelat.core.measure.events.Final` (AssemblyAI advises
voice agents not to wait for the formatted copy; ``wait_formatted = true`` takes the
``turn_is_formatted`` one as the Final instead, with ``format_turns``). Every event,
Finals included, is reported as its message arrives, with that message's stamp (a Final
does not stop the runner's audio); a request with several Finals has their text in order as
its transcript and the last one as ``stt_final``. At the end of the audio an open turn is
closed with ``ForceEndpoint``; after a turn the server already ended the request ends with
the audio, and audio sent after that end of turn (until it arrived: the user may have spoken
on) is closed with a ``ForceEndpoint`` whose answer is read and dropped between turns
(:mod:`voicelat.stages._leftover`), so the next turn on the session does not end on it.
Turns of earlier requests (a late formatted copy, a leftover's turn) are told apart by
``turn_order`` and by stream time (``words[].end``) and ignored.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar
from urllib.parse import urlencode

from voicelat.core.measure.events import StageEvent, StageName
from voicelat.stages._leftover import LeftoverDrain
from voicelat.stages._ws import WsConn, WsOptions, WsStage, plain_url
from voicelat.stages.options import OptionProblem, parse_options, query_strings
from voicelat.stages.protocols.assemblyai import TERMINATE, AssemblyAIProtocol, LeftoverTurn

__all__ = ["AssemblyAIOptions", "AssemblyAISTT"]


@dataclass(frozen=True, kw_only=True)
class AssemblyAIOptions(WsOptions):
    """``[stt]`` of ``assemblyai-stt``: the ``/v3/ws`` query and how audio is grouped."""

    base_url: str = "wss://streaming.assemblyai.com"
    speech_model: str = "universal-streaming-english"
    rate: int = 16000
    chunk_ms: int = 60
    format_turns: bool = False
    wait_formatted: bool = False
    min_turn_silence: int | None = None
    max_turn_silence: int | None = None
    end_of_turn_confidence_threshold: float | None = None
    keyterms: tuple[str, ...] | None = None
    query: Mapping[str, Any] = field(
        default_factory=dict, metadata={"expect": "a table of extra query parameters"}
    )

    def check(self) -> None:
        if not 50 <= self.chunk_ms <= 1000:
            raise OptionProblem("chunk_ms", "chunk_ms must be 50..1000 (AssemblyAI's limits)")
        if self.wait_formatted and not self.format_turns:
            raise OptionProblem("wait_formatted", "wait_formatted needs format_turns = true")

    def params(self) -> dict[str, str]:
        """The optional query parameters the table sets."""
        out: dict[str, str] = {}
        for key in ("min_turn_silence", "max_turn_silence", "end_of_turn_confidence_threshold"):
            value = getattr(self, key)
            if value is not None:
                out[key] = str(value)
        if self.keyterms is not None:
            out["keyterms_prompt"] = json.dumps(list(self.keyterms))
        return {**out, **query_strings(self.query)}


class AssemblyAISTT(WsStage):
    """AssemblyAI streaming speech-to-text (v3) over one long-lived session."""

    kind: ClassVar[StageName] = "stt"
    stage_name: ClassVar[str] = "assemblyai-stt"

    def __init__(self, options: Mapping[str, Any], *, table: str = "stt") -> None:
        o = self.options = parse_options(AssemblyAIOptions, table, options)
        super().__init__(table, o)
        self.input_rate = o.rate
        self.params = o.params()
        self._leftover = LeftoverDrain()

    def _url(self) -> str:
        o = self.options
        params = {
            "sample_rate": str(o.rate),
            "encoding": "pcm_s16le",
            "speech_model": o.speech_model,
            "format_turns": "true" if o.format_turns else "false",
            **self.params,
        }
        return f"{self.base_url}/v3/ws?{urlencode(params)}"

    def _headers(self) -> dict[str, str]:
        # AssemblyAI takes the key as it is, with no scheme.
        return {"Authorization": self._key, "AssemblyAI-Version": "2025-05-12"}

    def describe(self) -> dict[str, Any]:
        o = self.options
        return {
            "stage": self.stage_name,
            "url": plain_url(self._url()),
            "speech_model": o.speech_model,
            "rate": o.rate,
            "chunk_ms": o.chunk_ms,
            "format_turns": o.format_turns,
            "server": self._server,
            "streaming": True,
        }

    async def __aexit__(self, *exc: object) -> None:
        await self._leftover.cancel()
        await self._send_final(TERMINATE)
        await super().__aexit__(*exc)

    async def prepare(self) -> None:
        # Before the turn's first sample: the previous turn's leftover is off the session.
        await self._leftover.settle()
        await super().prepare()

    async def transcribe(self, audio: AsyncIterable[bytes]) -> AsyncIterator[StageEvent]:
        await self._leftover.settle()  # a no-op after prepare()
        conn, events = await self._acquire()
        for event in events:
            yield event
        if conn is None:
            return
        o = self.options
        proto = AssemblyAIProtocol(
            conn.url,
            chunk_bytes=o.rate * o.chunk_ms // 1000 * 2,
            wait_formatted=o.wait_formatted,
            # turn_order counts per session: the connection carries it from turn to turn,
            # and so the stream time that words[].end counts in.
            next_order=conn.extra.get("next_order", 0),
            stream_start_ms=conn.extra.get("stream_bytes", 0) / (2 * o.rate) * 1000,
            rate=o.rate,
        )
        try:
            async for event in self._exchange(conn, proto, audio):
                yield event
        finally:
            self._after(conn, proto)

    def _after(self, conn: WsConn, proto: AssemblyAIProtocol) -> None:
        """Carry the session's order and stream time on; drop the answer to a leftover's
        ForceEndpoint off the turn: a task, so that nothing is awaited between this turn's
        end and its reply."""
        conn.extra["next_order"] = proto.next_order
        conn.extra["stream_bytes"] = conn.extra.get("stream_bytes", 0) + proto.sent_bytes
        if proto.finished and proto.flushed_leftover and conn is self._conn and conn.open:
            reader = LeftoverTurn(proto.next_order)

            def answered(message: str | bytes) -> bool:
                done = reader.answered(message)
                conn.extra["next_order"] = reader.next_order
                return done

            self._leftover.start(conn, answered)
