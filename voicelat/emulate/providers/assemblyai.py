"""AssemblyAI Universal-Streaming v3: the ``/v3/ws`` websocket (PROTOCOLS.md §7, §10).

On open the server sends ``Begin`` (``id``, ``expires_at``). Binary frames are
``pcm_s16le`` audio at ``sample_rate``, each 50-1000 ms long (outside that range the socket
closes with 3007, as AssemblyAI does; ``content.min_chunk_ms``/``max_chunk_ms``, 0 to allow
any). A 20 ms energy VAD stands in for the model:

- while a turn has speech, a ``Turn`` with ``end_of_turn: false`` goes out every
  ``interim_ms`` of audio (``stt_partial`` after the frame that completed it): ``words``
  reveals one word per ``ms_per_word`` of speech, the last one ``word_is_final: false``;
  ``transcript`` holds only the final words (so the first Turn may have an empty one);
- ``min_turn_silence`` ms of silence after speech (query; default 400) ends the turn: a
  ``Turn`` with ``end_of_turn: true``, every word final, ``stt_final`` after the frame, and
  with ``format_turns`` a second, formatted copy (``turn_is_formatted: true``) ``format_ms``
  later; the next speech is the next ``turn_order``;
- ``ForceEndpoint`` ends the current turn the same way, ``stt_final`` after the message
  arrived (with no speech heard in the turn it answers nothing);
- ``Terminate`` ends any open turn, sends ``Termination`` and closes 1000.

Unformatted text is the transcript lower-cased without punctuation (apostrophes kept); the
formatted copy is the transcript as matched (a fixture's manifest text). Every ``Turn`` carries
every field the SDK validates (``turn_order``, ``turn_is_formatted``, ``end_of_turn``,
``transcript``, ``end_of_turn_confidence``, ``words[]`` with ``start``, ``end``,
``confidence``, ``text``, ``word_is_final``): one missing field silently stops its reader.

Truth marks beyond the standard ones: ``force_endpoint_received``, ``end_of_turn_written``,
``formatted_written``.

[U] choices: ``speech_model`` is optional (the latest spec's default); a ``ForceEndpoint`` with
no open turn answers nothing; the 3007 reason text; 1011/1008 reasons.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from voicelat.emulate.base import Emulator, Route
from voicelat.emulate.content import TRANSCRIBER_CONTENT, Transcriber, words
from voicelat.emulate.dist import Dist, Fixed
from voicelat.emulate.exchange import HttpRequest, WsExchange
from voicelat.emulate.profile import WS_FAULTS, EmulatorConfig
from voicelat.emulate.providers._wsutil import Listener, Outbox, flag, match_speech, number

__all__ = ["AssemblyAIEmulator"]

_MODELS = (
    "universal-streaming-english",
    "universal-streaming-multilingual",
    "u3-rt-pro",
    "u3-pro",
    "whisper-rt",
    "universal-3-5-pro",
)
_PUNCT = re.compile(r"[^\w\s']")


def _unformatted(word: str) -> str:
    return _PUNCT.sub("", word).lower()


class AssemblyAIEmulator(Emulator):
    """AssemblyAI streaming speech-to-text, v3."""

    name: ClassVar[str] = "assemblyai"
    title: ClassVar[str] = "AssemblyAI: Universal-Streaming v3 STT websocket (/v3/ws)"
    default_port: ClassVar[int] = 8406
    ENDPOINTS: ClassVar[tuple[str, ...]] = ("v3_ws",)
    FAULTS: ClassVar[frozenset[str]] = WS_FAULTS
    LATENCY: ClassVar[Mapping[str, Dist]] = {
        "handshake": Fixed(ms=0.0),
        "stt_partial": Fixed(ms=150.0),
        "stt_final": Fixed(ms=120.0),
    }
    CONTENT: ClassVar[Mapping[str, Any]] = {
        **TRANSCRIBER_CONTENT,
        "interim_ms": 400.0,
        "ms_per_word": 250.0,
        "format_ms": 60.0,
        "min_turn_silence_ms": 400.0,
        "min_chunk_ms": 50.0,
        "max_chunk_ms": 1000.0,
        "vad_threshold_dbfs": -40.0,
    }
    CLOSE_REASONS: ClassVar[Mapping[int, str]] = {
        1011: "Internal server error",
        1008: "Policy violation",
    }

    def __init__(self, config: EmulatorConfig) -> None:
        super().__init__(config)
        self.transcriber = Transcriber.from_content(self.content)

    async def startup(self) -> None:
        await self.transcriber.startup()

    def routes(self) -> Sequence[Route]:
        return [Route("WS", "/v3/ws", self.websocket, "v3_ws")]

    def authenticate(self, request: HttpRequest) -> str | None:
        key = (request.headers.get("authorization") or "").strip()
        if key.lower().startswith("bearer "):
            key = key[7:].strip()
        key = key or request.query.get("token", "")
        problem = self.check_key(key or None)
        return None if problem is None else "Invalid API key or token"

    def ws_reject(self, request: HttpRequest, endpoint: str) -> tuple[int, str] | None:
        q = request.query
        encoding = q.get("encoding", "pcm_s16le")
        if encoding != "pcm_s16le":
            return 400, f"The voicelat emulator decodes encoding=pcm_s16le only, not {encoding}"
        try:
            rate = int(q.get("sample_rate", ""))
        except ValueError:
            return 400, "sample_rate is required for pcm_s16le audio"
        if not 8000 <= rate <= 48000:
            return 400, f"Invalid sample_rate {rate}"
        model = q.get("speech_model")
        if model is not None and model not in _MODELS:
            return 400, f"Invalid speech_model: {model}"
        return None

    def error_response(
        self, status: int, message: str | None, endpoint: str
    ) -> tuple[list[tuple[str, str]], bytes]:
        defaults = {401: "Invalid API key", 429: "Too many concurrent sessions"}
        body = {"error": message or defaults.get(status, "Internal server error")}
        return [("content-type", "application/json")], json.dumps(body).encode()

    def ws_error(self, x: WsExchange, message: str | None) -> tuple[str | None, int, str]:
        text = message or "Internal server error"
        return json.dumps({"type": "Error", "error_code": 3005, "error": text}), 3005, text

    def response_headers(self) -> list[tuple[str, str]]:
        return [("server", "voicelat-emulator/assemblyai")]

    async def websocket(self, x: WsExchange) -> None:
        await _Session(self, x).run()


class _Session:
    def __init__(self, em: AssemblyAIEmulator, x: WsExchange) -> None:
        self.em, self.x, self.out = em, x, Outbox(x)
        q = x.request.query
        self.rate = int(q["sample_rate"])
        # What the client sent (never a header's value: the truth may go to a file).
        auth = (x.request.headers.get("authorization") or "").strip()
        x.truth.detail["auth"] = (
            "token" if " " not in auth and auth else "scheme" if auth else "query"
        )
        x.truth.detail["query"] = dict(q)
        self.format_turns = flag(q, "format_turns", False)
        silence = number(q, "min_turn_silence", None) or number(
            q, "min_end_of_turn_silence_when_confident", None
        )
        self.min_silence = silence or em.content["min_turn_silence_ms"]
        x.truth.model = q.get("speech_model", "universal-streaming-english")
        self.listener = Listener(self.rate, em.content["vad_threshold_dbfs"])
        self.turn_order = 0
        self.audio_s = 0.0
        self.t_start = time.time()
        self.turns_seen = 0
        self._reset()

    def _reset(self) -> None:
        self.listener.reset()
        self.matched = False
        self.words: list[str] = []
        self.revealed = 0
        self.next_interim_ms = self.em.content["interim_ms"]
        self.open = False
        self.offset_ms = self.audio_s * 1000

    async def run(self) -> None:
        x, out = self.x, self.out
        await x.send_json(
            {"type": "Begin", "id": str(uuid.uuid4()), "expires_at": int(time.time()) + 3600}
        )
        while True:
            try:
                msg, t = await x.recv_stamped(out.wait_s())
            except TimeoutError:
                await out.send_due()
                continue
            if msg is None:
                return
            if isinstance(msg, bytes):
                if not await self._audio(msg, t):
                    return
            else:
                kind = _kind(msg)
                if kind == "ForceEndpoint":
                    x.truth.mark("force_endpoint_received", t)
                    if self.open and self.listener.heard_speech:
                        await self._end_turn(t)
                elif kind == "Terminate":
                    if self.open and self.listener.heard_speech:
                        await self._end_turn(t)
                    await out.drain()
                    await x.send_json(
                        {
                            "type": "Termination",
                            "audio_duration_seconds": round(self.audio_s),
                            "session_duration_seconds": round(time.time() - self.t_start),
                        }
                    )
                    await x.close(1000)
                    return
                # KeepAlive and UpdateConfiguration answer nothing.
            await out.send_due()

    async def _audio(self, data: bytes, t: int) -> bool:
        c = self.em.content
        ms = len(data) / 2 / self.rate * 1000
        lo, hi = c["min_chunk_ms"], c["max_chunk_ms"]
        if (lo and ms < lo - 1e-6) or (hi and ms > hi + 1e-6):
            await self.out.drain()
            await self.x.close(
                3007,
                f"Input duration violation: {ms:.0f} ms. Expected between {lo:.0f} and {hi:.0f} ms",
            )
            return False
        if not self.open:
            if self.turns_seen:
                self.x.redraw_fault()  # each turn on the long-lived session draws its own
            self.turns_seen += 1
            self.open = True
        self.audio_s += ms / 1000
        lis = self.listener
        lis.feed(data)
        if not lis.heard_speech:
            return True
        if lis.heard_ms >= self.next_interim_ms and lis.in_speech:
            self.next_interim_ms = lis.heard_ms + c["interim_ms"]
            await self._match()
            shown = min(len(self.words), 1 + int(lis.speech_ms // c["ms_per_word"]))
            self.revealed = max(self.revealed, shown)
            if self.revealed:
                final_words = self.words[: self.revealed - 1]
                marks = ["partial_written"] if final_words else []
                self.out.at(
                    t + round(self.x.sample("stt_partial") * 1e6),
                    self._turn(self.words[: self.revealed], end=False),
                    marks,
                    content=True,
                )
        if not lis.in_speech and lis.silence_ms >= self.min_silence:
            await self._end_turn(t)
        return True

    async def _end_turn(self, t: int) -> None:
        if self.listener.heard_speech:
            await self._match()
        t_send = t + round(self.x.sample("stt_final") * 1e6)
        self.out.at(
            t_send,
            self._turn(self.words, end=True),
            ["final_written", "end_of_turn_written"],
            content=True,
        )
        if self.format_turns:
            self.out.at(
                t_send + round(self.em.content["format_ms"] * 1e6),
                self._turn(self.words, end=True, formatted=True),
                ["formatted_written"],
            )
        self.turn_order += 1
        self._reset()

    async def _match(self) -> None:
        if self.matched:
            return  # one match per turn: the text of a fixture does not change
        text = await match_speech(
            self.em.transcriber,
            self.listener.samples(),
            self.rate,
            self.em.content["vad_threshold_dbfs"],
        )
        self.words = [w.strip() for w in words(text) if w.strip()]
        self.matched = text != self.em.transcriber.canned

    def _turn(self, ws: list[str], *, end: bool, formatted: bool = False) -> dict[str, Any]:
        ms = self.em.content["ms_per_word"]
        start = self.offset_ms + (self.listener.speech_start_ms or 0)
        items = []
        for i, w in enumerate(ws):
            final = end or i < len(ws) - 1
            items.append(
                {
                    "start": round(start + i * ms),
                    "end": round(start + (i + 1) * ms),
                    "text": w if formatted else _unformatted(w),
                    "confidence": 0.93,
                    "word_is_final": final,
                }
            )
        final_words = ws if end else ws[:-1]
        text = (
            " ".join(final_words) if formatted else " ".join(_unformatted(w) for w in final_words)
        )
        return {
            "type": "Turn",
            "turn_order": self.turn_order,
            "turn_is_formatted": formatted,
            "end_of_turn": end,
            "transcript": text,
            "end_of_turn_confidence": 0.92 if end else 0.01,
            "words": items,
            "utterance": text if end else "",
        }


def _kind(msg: str) -> str:
    try:
        data = json.loads(msg)
    except ValueError:
        return ""
    return str(data.get("type", "")) if isinstance(data, dict) else ""
