"""Deepgram: live STT (``/v1/listen``) and Aura TTS (``/v1/speak``) websockets, plus the REST
speak endpoint (PROTOCOLS.md §3, §10).

**Listen.** Binary frames are linear16 audio at the query's ``sample_rate``. A 20 ms energy
VAD (:class:`~voicelat.emulate.providers._wsutil.Listener`) stands in for the recognizer:

- once speech is heard, an interim ``Results`` (``is_final:false``) goes out every
  ``interim_ms`` of audio, ``stt_partial`` ms after the frame that completed the interval,
  revealing one word per ``ms_per_word`` of speech heard (the first interim has one word);
- ``endpointing`` ms of silence after speech (query ``endpointing``; ``false`` turns it off)
  finalizes every remaining word: ``is_final:true, speech_final:true`` after ``stt_final``;
- with ``interim_results`` and ``utterance_end_ms``, that much silence after the last word
  sends ``UtteranceEnd`` (after ``stt_final``);
- ``Finalize`` flushes: ``is_final:true, from_finalize:true`` with the words not finalized
  yet (an empty transcript when there are none), ``stt_final`` after the message arrived,
  and the next audio starts a new turn (fresh transcript match, fresh fault draw);
- ``CloseStream`` flushes the same way, then sends ``Metadata`` and closes 1000;
- ``KeepAlive`` answers nothing; no message for ``idle_timeout_s`` closes 1011 with the
  NET-0001 reason, as Deepgram does after 10 s.

The transcript comes from :class:`~voicelat.emulate.content.Transcriber` on the audio heard
so far (``auto``: a recognised fixture's manifest text), so emulated pipelines get exact text.

**Speak.** ``Speak`` text is buffered; each ``Flush`` generates it: the first binary frame
``tts_first_audio`` after the ``Flush`` arrived (never before the previous generation's last
frame), then one frame of ``chunk_ms`` audio every ``tts_chunk``, then ``Flushed`` with the
flush's ``sequence_id`` (0, 1, ...). ``Clear`` drops what is scheduled and answers
``Cleared``; ``Close`` finishes and closes 1000. ``Metadata`` goes out when the socket opens.

Truth marks beyond the standard ones: ``finalize_received`` (the ``Finalize``/``CloseStream``
message arrived: the t0 of finalization), ``end_of_turn_written`` (``speech_final`` or
``UtteranceEnd``), ``flush_received``, ``flushed_written``.

[U] choices (PROTOCOLS.md §9), configurable: the ``endpointing`` default when the query has
none (docs prose says 10 ms: ``content.default_endpointing_ms``); a ``Finalize`` with nothing
to flush answers an empty final; invalid query parameters are refused at the handshake with
HTTP 400 and Deepgram's REST error body; ``close_1008``'s reason is ``DATA-0000``.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar

from voicelat.core.measure.clock import now_ns
from voicelat.emulate.base import Emulator, Route
from voicelat.emulate.content import (
    SPEAKER_CONTENT,
    TRANSCRIBER_CONTENT,
    Speaker,
    Transcriber,
    pcm_chunks,
    words,
)
from voicelat.emulate.dist import Dist, Fixed
from voicelat.emulate.exchange import BadRequest, HttpExchange, HttpRequest, WsExchange
from voicelat.emulate.profile import WS_FAULTS, EmulatorConfig
from voicelat.emulate.providers._wsutil import (
    Listener,
    Outbox,
    fixture_speech_ms,
    flag,
    match_speech,
    number,
    record_stop,
)

__all__ = ["DeepgramEmulator"]

NET0001 = (
    "Deepgram did not receive audio data or a text message within the timeout window. "
    "See https://dpgr.am/net0001"
)
NET0000 = (
    "Deepgram did not provide a response message within the timeout window. "
    "See https://dpgr.am/net0000"
)
_INVALID_AUTH = "Invalid credentials."
_RATES = (8000, 16000, 24000, 32000, 44100, 48000)


def _key(request: HttpRequest) -> str | None:
    """``Authorization: Token <key>`` (API key) or ``Bearer <token>``, scheme in any case."""
    value = request.headers.get("authorization") or ""
    scheme, _, key = value.strip().partition(" ")
    if scheme.lower() not in ("token", "bearer"):
        return None
    return key.strip() or None


class DeepgramEmulator(Emulator):
    """Deepgram live transcription and Aura speech over websockets."""

    name: ClassVar[str] = "deepgram"
    title: ClassVar[str] = "Deepgram: live STT (/v1/listen) and Aura TTS (/v1/speak) websockets"
    default_port: ClassVar[int] = 8403
    ENDPOINTS: ClassVar[tuple[str, ...]] = ("listen", "speak", "speak_rest")
    FAULTS: ClassVar[frozenset[str]] = WS_FAULTS
    LATENCY: ClassVar[Mapping[str, Dist]] = {
        "handshake": Fixed(ms=0.0),
        "headers": Fixed(ms=20.0),
        "stt_partial": Fixed(ms=150.0),
        "stt_final": Fixed(ms=120.0),
        "tts_first_audio": Fixed(ms=150.0),
        "tts_chunk": Fixed(ms=10.0),
    }
    CONTENT: ClassVar[Mapping[str, Any]] = {
        **TRANSCRIBER_CONTENT,
        "interim_ms": 500.0,
        "ms_per_word": 250.0,
        "default_endpointing_ms": 10.0,
        "idle_timeout_s": 10.0,
        "speak_idle_timeout_s": 0.0,
        "vad_threshold_dbfs": -40.0,
        "stt_models": ["nova-3*", "nova-2*", "nova*", "enhanced*", "base*", "whisper*"],
        "tts_models": ["aura-*"],
        **SPEAKER_CONTENT,
    }
    CLOSE_REASONS: ClassVar[Mapping[int, str]] = {1011: NET0001, 1008: "DATA-0000"}

    def __init__(self, config: EmulatorConfig) -> None:
        super().__init__(config)
        self.transcriber = Transcriber.from_content(self.content)
        self.speaker = Speaker.from_content(self.content)

    async def startup(self) -> None:
        await self.transcriber.startup()
        await self.speaker.startup()

    def routes(self) -> Sequence[Route]:
        return [
            Route("WS", "/v1/listen", self.listen, "listen"),
            Route("WS", "/v1/speak", self.speak, "speak"),
            Route("POST", "/v1/speak", self.speak_rest, "speak_rest"),
        ]

    # -- auth, validation, errors ---------------------------------------------------------
    def authenticate(self, request: HttpRequest) -> str | None:
        return None if self.check_key(_key(request)) is None else _INVALID_AUTH

    def ws_reject(self, request: HttpRequest, endpoint: str) -> tuple[int, str] | None:
        q = request.query
        if endpoint == "listen":
            model = q.get("model", "nova-3")
            if not any(fnmatch.fnmatch(model, g) for g in self.content["stt_models"]):
                return 400, f"No such model/language/tier combination found: model={model}"
            if q.get("encoding", "linear16") != "linear16":
                return 400, (
                    f"The voicelat emulator decodes encoding=linear16 only, not {q['encoding']}"
                )
            if "encoding" in q and "sample_rate" not in q:
                return 400, "sample_rate is required when encoding is set"
            if q.get("channels", "1") != "1":
                return 400, "The voicelat emulator transcribes mono audio only (channels=1)"
        elif endpoint == "speak":
            return self._speak_params(q)[0]
        return None

    def _speak_params(self, q: Mapping[str, str]) -> tuple[tuple[int, str] | None, str, int]:
        model = q.get("model", "aura-2-thalia-en")
        if not any(fnmatch.fnmatch(model, g) for g in self.content["tts_models"]):
            return (400, f"No such model: {model}"), model, 0
        if q.get("encoding", "linear16") != "linear16":
            return (
                (400, f"The voicelat emulator streams encoding=linear16 only, not {q['encoding']}"),
                model,
                0,
            )
        try:
            rate = int(q.get("sample_rate", "24000"))
        except ValueError:
            rate = 0
        if rate not in _RATES:
            return (400, f"Unsupported sample_rate {q.get('sample_rate')}"), model, 0
        return None, model, rate

    def error_response(
        self, status: int, message: str | None, endpoint: str
    ) -> tuple[list[tuple[str, str]], bytes]:
        codes = {400: "Bad Request", 401: "INVALID_AUTH", 429: "TOO_MANY_REQUESTS"}
        body = {
            "err_code": codes.get(status, "INTERNAL_SERVER_ERROR"),
            "err_msg": message
            or {429: "Too many requests. Please try again later."}.get(
                status, "Internal server error."
            ),
            "request_id": str(uuid.uuid4()),
        }
        headers = [("content-type", "application/json")]
        if message and status == 400:
            headers.append(("dg-error", message))
        return headers, json.dumps(body).encode()

    def ws_error(self, x: WsExchange, message: str | None) -> tuple[str | None, int, str]:
        if x.endpoint == "speak":
            # [U] Aura's websocket error frame: the listen shape (the SDK skips unknown types).
            error = {
                "type": "Error",
                "err_code": "INTERNAL_SERVER_ERROR",
                "description": message or "Internal server error.",
            }
            return json.dumps(error), 1011, "INTERNAL_SERVER_ERROR"
        error = {
            "type": "Error",
            "variant": "ServerError",
            "description": message or NET0000,
        }
        return json.dumps(error), 1011, NET0000

    def response_headers(self) -> list[tuple[str, str]]:
        return [("server", "voicelat-emulator/deepgram"), ("dg-request-id", str(uuid.uuid4()))]

    # -- listen ---------------------------------------------------------------------------
    async def listen(self, x: WsExchange) -> None:
        await _Listen(self, x).run()

    # -- speak ----------------------------------------------------------------------------
    async def speak(self, x: WsExchange) -> None:
        _, model, rate = self._speak_params(x.request.query)
        x.truth.model = model
        out = Outbox(x)
        await x.send_json(_speak_metadata(model))
        buffer = ""
        flushes = 0
        generations = 0
        idle_s = self.content["speak_idle_timeout_s"]
        closing = False
        while True:
            idle_at = now_ns() + round(idle_s * 1e9) if idle_s > 0 else None
            try:
                msg, t = await x.recv_stamped(out.wait_s(idle_at if out.empty() else None))
            except TimeoutError:
                if out.empty() and idle_at is not None and now_ns() >= idle_at:
                    await x.close(1011, NET0001)
                    return
                await out.send_due()
                continue
            if msg is None:
                return
            if isinstance(msg, bytes):
                continue
            kind, data = _parse(msg)
            if kind == "Speak":
                text = data.get("text")
                if isinstance(text, str):
                    if out.empty() and not buffer and generations:
                        x.redraw_fault()  # a new utterance on a long-lived socket
                    buffer += text
            elif kind == "Flush":
                x.truth.mark("flush_received", t)
                if buffer.strip():
                    await self._generate(x, out, buffer, rate, t)
                    generations += 1
                out.at(
                    max(t, out.last),
                    {"type": "Flushed", "sequence_id": flushes},
                    ["flushed_written", "end_written"],
                    tag="gen",
                )
                flushes += 1
                buffer = ""
            elif kind == "Clear":
                out.drop("gen")
                record_stop(x, t)
                buffer = ""
                out.at(t, {"type": "Cleared", "sequence_id": flushes}, tag="ctl")
            elif kind == "Close":
                closing = True
            if closing:
                await out.drain()
                return
            await out.send_due()

    async def _generate(
        self, x: WsExchange, out: Outbox, text: str, rate: int, t_flush: int
    ) -> None:
        """Schedule the audio of one flush: its first frame ``tts_first_audio`` after the
        flush arrived, never before the previous generation's last frame."""
        pcm = await self.speaker.speak(text, rate)
        t = max(t_flush + round(x.sample("tts_first_audio") * 1e6), out.last)
        for i, piece in enumerate(pcm_chunks(pcm, rate, self.content["chunk_ms"])):
            if i:
                t += round(x.sample("tts_chunk") * 1e6)
            marks = ["audio_written", *(["first_audio_written"] if i == 0 else [])]
            out.at(t, piece, marks, content=True, tag="gen")

    # -- REST speak (streamed body) -----------------------------------------------------------
    async def speak_rest(self, x: HttpExchange) -> None:
        error, model, rate = self._speak_params(x.request.query)
        if error is not None:
            raise BadRequest(error[1], error[0])
        container = x.request.query.get("container", "none")
        if container not in ("none", "wav"):
            raise BadRequest(
                f"The voicelat emulator streams container=none or wav, not {container}"
            )
        body = x.request.json()
        text = body.get("text")
        if not isinstance(text, str) or not text.strip():
            raise BadRequest("text is required")
        x.truth.model = model
        pcm = await self.speaker.speak(text, rate)
        chunks = pcm_chunks(pcm, rate, self.content["chunk_ms"])
        if container == "wav":
            from voicelat.emulate.content import wav_header

            chunks[0] = wav_header(0xFFFFFFFF, rate) + chunks[0]
        t_headers = x.at(x.sample("headers"))
        t = max(t_headers, x.at(x.sample("tts_first_audio")))
        await x.sleep_until(t_headers, "headers_written")
        await x.start(
            200,
            [
                ("content-type", "audio/wav" if container == "wav" else "audio/l16"),
                ("dg-model-name", model),
                ("dg-char-count", str(len(text))),
            ],
        )
        for i, piece in enumerate(chunks):
            if i:
                t += round(x.sample("tts_chunk") * 1e6)
            await x.sleep_until(t, "first_audio_written" if i == 0 else None)
            marks = ["audio_written", *(["first_audio_written"] if i == 0 else [])]
            await x.send(piece, marks, content=True)
        await x.end()


def _parse(msg: str) -> tuple[str, dict[str, Any]]:
    try:
        data = json.loads(msg)
    except ValueError:
        return "", {}
    if not isinstance(data, dict):
        return "", {}
    return str(data.get("type", "")), data


def _speak_metadata(model: str) -> dict[str, Any]:
    return {
        "type": "Metadata",
        "request_id": str(uuid.uuid4()),
        "model_name": model,
        "model_version": "2025-04-07.0",
        "model_uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, model)),
    }


class _Listen:
    """One ``/v1/listen`` session: audio in, results out on their schedule."""

    def __init__(self, emulator: DeepgramEmulator, x: WsExchange) -> None:
        self.em = emulator
        self.x = x
        self.out = Outbox(x)
        q = x.request.query
        self.model = q.get("model", "nova-3")
        x.truth.model = self.model
        self.rate = int(q.get("sample_rate", "16000") or 16000)
        self.interim = flag(q, "interim_results", False)
        self.endpointing = number(q, "endpointing", emulator.content["default_endpointing_ms"])
        self.utterance_end = number(q, "utterance_end_ms", None) if self.interim else None
        self.vad_events = flag(q, "vad_events", False)
        # What the client asked for (no header values: the truth may be written to a file).
        x.truth.detail["query"] = dict(q)
        self.request_id = str(uuid.uuid4())
        self.listener = Listener(self.rate, emulator.content["vad_threshold_dbfs"])
        self.turns = 0
        self.total_s = 0.0
        #: Where the next result's window starts (the end of the last final's window): finals
        #: tile the stream, never overlapping, never past the audio received.
        self.window_s = 0.0
        #: The end of the last finalized word: later words never start before it.
        self.final_end_s = 0.0
        self.sha = hashlib.sha256()
        self._new_utterance()
        self._new_turn()

    def _new_utterance(self) -> None:
        """A fresh transcript: the words of what is said next (one fixture, matched once)."""
        self.words: list[str] = []
        self.finalized = self.revealed = 0
        self.matched = False
        self.speech_total_ms: float | None = None
        self.speech_before_ms = 0.0  # speech heard in earlier segments of this utterance

    def _new_segment(self) -> None:
        """After a speech_final: a new segment. An utterance whose words are not all final yet
        (a fixture with a pause) goes on with its remaining words; otherwise the next speech
        is a new utterance (a fresh match). The socket's turn (fault draw, Finalize) goes on."""
        silence = self.listener.silence_ms  # UtteranceEnd counts silence across segments
        if self.finalized >= len(self.words):
            self._new_utterance()
        else:
            self.speech_before_ms += self.listener.speech_ms
        self.listener.reset()
        self.listener.silence_ms = silence
        self.next_interim_ms = self.em.content["interim_ms"]
        self.turn_offset_s = self.total_s
        self.speech_started_sent = False

    def _new_turn(self) -> None:
        self.turn_open = False
        self.last_word_end_s = self.total_s
        self.listener.reset()
        self._new_utterance()
        self.next_interim_ms = self.em.content["interim_ms"]
        self.endpointed = False
        self.utterance_ended = True
        self.speech_started_sent = False
        self.turn_offset_s = self.total_s

    def _due(self, *, final: bool) -> int:
        """How many of the utterance's words the speech heard so far accounts for: in
        proportion to the fixture's own speech (or ``ms_per_word`` a word), at least one."""
        n = len(self.words)
        total = self.speech_total_ms or n * float(self.em.content["ms_per_word"])
        heard = self.speech_before_ms + self.listener.speech_ms
        if not n or heard >= 0.9 * total:
            return n
        share = n * heard / total
        if final:
            return min(n, max(self.finalized + 1, round(share)))
        return min(n, max(1, int(share)))

    async def run(self) -> None:
        x, out = self.x, self.out
        idle_s = self.em.content["idle_timeout_s"]
        last_msg = now_ns()
        while True:
            idle_at = last_msg + round(idle_s * 1e9) if idle_s > 0 else None
            try:
                msg, t = await x.recv_stamped(out.wait_s(idle_at))
            except TimeoutError:
                await out.send_due()
                if idle_at is not None and now_ns() >= idle_at:
                    await out.drain()
                    await x.close(1011, NET0001)
                    return
                continue
            if msg is None:
                return
            last_msg = t
            if isinstance(msg, bytes):
                await self._audio(msg, t)
            else:
                kind, _ = _parse(msg)
                if kind == "Finalize":
                    x.truth.mark("finalize_received", t)
                    await self._flush(t, from_finalize=True)
                elif kind == "CloseStream":
                    x.truth.mark("finalize_received", t)
                    await self._flush(t, from_finalize=False)
                    await out.drain()
                    await x.send_json(self._metadata())
                    await x.close(1000)
                    return
                # KeepAlive (and Configure, which the emulator ignores) answer nothing.
            await out.send_due()

    async def _audio(self, data: bytes, t: int) -> None:
        lis, c = self.listener, self.em.content
        if not self.turn_open:
            if self.turns:
                self.x.redraw_fault()  # a new turn on a long-lived socket draws its own fault
            self.turns += 1
            self.turn_open = True
        self.sha.update(data)
        self.total_s += len(data) / 2 / self.rate
        lis.feed(data)
        if lis.in_speech:
            self.utterance_ended = False
            self.last_word_end_s = self.turn_offset_s + lis.last_speech_end_ms / 1000
        if (
            self.utterance_end is not None
            and not self.utterance_ended
            and lis.silence_ms >= self.utterance_end
        ):
            self.utterance_ended = True
            t_send = t + round(self.x.sample("stt_final") * 1e6)
            last = self.last_word_end_s
            self.out.at(
                t_send,
                {"type": "UtteranceEnd", "channel": [0, 1], "last_word_end": round(last, 3)},
                ["end_of_turn_written"],
            )
        if not lis.heard_speech:
            return
        if self.vad_events and not self.speech_started_sent:
            self.speech_started_sent = True
            start = self.turn_offset_s + (lis.speech_start_ms or 0) / 1000
            self.out.at(t, {"type": "SpeechStarted", "channel": [0, 1], "timestamp": start})
        if lis.in_speech:
            self.endpointed = False
            self.utterance_ended = False
            self.last_word_end_s = self.turn_offset_s + lis.last_speech_end_ms / 1000
        if self.interim and lis.heard_ms >= self.next_interim_ms and not self.endpointed:
            self.next_interim_ms = lis.heard_ms + c["interim_ms"]
            await self._match()
            self.revealed = max(self.revealed, self._due(final=False))
            if self.revealed > self.finalized:
                t_send = t + round(self.x.sample("stt_partial") * 1e6)
                self.out.at(
                    t_send,
                    self._results(self.words[self.finalized : self.revealed], False, False),
                    ["partial_written"],
                    content=True,
                )
        if (
            self.endpointing is not None
            and not self.endpointed
            and not lis.in_speech
            and lis.silence_ms >= max(self.endpointing, Listener.FRAME_MS)
        ):
            self.endpointed = True
            await self._match()
            due = self._due(final=True)
            if due > self.finalized:
                t_send = t + round(self.x.sample("stt_final") * 1e6)
                self.out.at(
                    t_send,
                    self._results(self.words[self.finalized : due], True, True),
                    ["final_written", "end_of_turn_written"],
                    content=True,
                )
                self.finalized = self.revealed = due
            # A streaming recognizer goes on listening: what follows is a new segment.
            self._new_segment()

    async def _flush(self, t: int, *, from_finalize: bool) -> None:
        """Finalize / CloseStream: every word not finalized yet, then a new turn."""
        if self.listener.heard_speech:
            await self._match()
        remaining = self.words[self.finalized :]
        t_send = t + round(self.x.sample("stt_final") * 1e6)
        self.out.at(
            t_send,
            self._results(remaining, True, False, from_finalize=from_finalize),
            ["final_written"] if remaining else ["finalize_answered"],
            content=bool(remaining),
        )
        self._new_turn()

    async def _match(self) -> None:
        if self.matched:
            return  # one match per utterance: the text of a fixture does not change
        lis, threshold = self.listener, self.em.content["vad_threshold_dbfs"]
        text = await match_speech(self.em.transcriber, lis.samples(), self.rate, threshold)
        found = [w.strip() for w in words(text) if w.strip()]
        # Words already sent as final stay; the rest follow the latest match.
        self.words = self.words[: self.finalized] + found[self.finalized :]
        self.matched = text != self.em.transcriber.canned
        if self.matched:
            self.speech_total_ms = fixture_speech_ms(self.em.transcriber, text, threshold)

    def _results(
        self, ws: list[str], is_final: bool, speech_final: bool, *, from_finalize: bool = False
    ) -> dict[str, Any]:
        # The words share the speech heard in this segment (its onset to the last loud frame
        # received), after the last final word: timings from the audio, not a constant.
        lis = self.listener
        lo = max(self.final_end_s, self.turn_offset_s + (lis.speech_start_ms or 0) / 1000)
        hi = max(lo, self.turn_offset_s + lis.last_speech_end_ms / 1000)
        step = (hi - lo) / len(ws) if ws else 0.0
        word_items = [
            {
                "word": w.lower().strip(".,?!"),
                "start": round(lo + i * step, 3),
                "end": round(lo + (i + 1) * step, 3),
                "confidence": 0.98,
                "punctuated_word": w,
            }
            for i, w in enumerate(ws)
        ]
        # The window: from the end of the last final's window to the audio received now.
        start, duration = self.window_s, max(0.0, self.total_s - self.window_s)
        if is_final:
            self.window_s = self.total_s
            if ws:
                self.final_end_s = hi
        return {
            "type": "Results",
            "channel_index": [0, 1],
            "duration": round(duration, 3),
            "start": round(start, 3),
            "is_final": is_final,
            "speech_final": speech_final,
            "channel": {
                "alternatives": [
                    {
                        "transcript": " ".join(ws),
                        "confidence": 0.98 if ws else 0.0,
                        "words": word_items,
                    }
                ]
            },
            "metadata": {
                "request_id": self.request_id,
                "model_info": {
                    "name": f"general-{self.model}",
                    "version": "2024-11-18",
                    "arch": self.model,
                },
                "model_uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, self.model)),
            },
            "from_finalize": from_finalize,
        }

    def _metadata(self) -> dict[str, Any]:
        return {
            "type": "Metadata",
            "transaction_key": "deprecated",
            "request_id": self.request_id,
            "sha256": self.sha.hexdigest(),
            "created": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "duration": round(self.total_s, 3),
            "channels": 1,
        }
