"""ElevenLabs TTS: the stream-input websocket and the HTTP stream (PROTOCOLS.md §4, §10).

**``/v1/text-to-speech/{voice_id}/stream-input``** (one generation per socket):

1. The first message initializes: ``{"text": " ", "voice_settings"?, "generation_config"?:
   {"chunk_length_schedule": [...]}, "xi-api-key"?}``. The key comes in the ``xi-api-key``
   header (checked at the handshake: a wrong one is an HTTP 401) or, without the header, in
   this message (``xi-api-key``, ``xi_api_key`` or ``authorization: Bearer``).
2. Text messages add to a buffer. A generation starts when the buffer reaches the next
   ``chunk_length_schedule`` size (default ``[120, 160, 250, 290]``), on ``flush: true``, or
   at the end of input (``{"text": ""}``); ``{"text": " "}`` only keeps the socket alive.
3. Each generation's first audio message goes out ``tts_first_audio`` after its trigger
   arrived (never before the previous generation's last chunk), then one every
   ``tts_chunk``: ``{"audio": "<base64 PCM>", "normalizedAlignment", "alignment"}``
   (alignment on a generation's first chunk, ``null`` after).
4. After the end of input and the last audio: ``{"isFinal": true}``, then close 1000 (the
   SDK waits for that close; any other code raises).

No text for ``inactivity_timeout`` seconds (query, default 20) sends ElevenLabs'
``input_timeout_exceeded`` message and closes 1008. Only ``pcm_*`` output formats are
generated (the emulator encodes no MP3/μ-law); others, unknown voices and unknown models get
an error message and close 1008.

**``POST /v1/text-to-speech/{voice_id}/stream``**: the same audio as a chunked raw body.

[U] choices, configurable where it matters: ``isFinal`` carries no ``audio`` key
(``content.final_audio_null = true`` sends ``"audio": null``); error frames for an unknown
voice/model/format use the ``{"message", "error", "code": 1008}`` shape of the documented
timeout error; the close reason of ``close_1008`` is the short error name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from voicelat.core.measure.clock import now_ns
from voicelat.emulate.base import Emulator, Route, b64
from voicelat.emulate.content import SPEAKER_CONTENT, Speaker, pcm_chunks
from voicelat.emulate.dist import Dist, Fixed
from voicelat.emulate.exchange import BadRequest, HttpExchange, HttpRequest, WsExchange
from voicelat.emulate.profile import WS_FAULTS, EmulatorConfig
from voicelat.emulate.providers._wsutil import Outbox, number

__all__ = ["ElevenLabsEmulator"]

_RATES = (8000, 16000, 22050, 24000, 32000, 44100, 48000)
_TIMEOUT_MESSAGE = (
    "Have not received a new text input within the timeout of {s:.1f} seconds. Streaming input "
    "terminated. Please make sure to either feed the input in the timely manner, or to send the "
    'end of input text (empty string "") when done.'
)
_INVALID_INPUT = (
    "Could not parse input message, make sure it is a json and follows the schema outlined in "
    "protocol."
)


def _rate(output_format: str) -> int | None:
    """``pcm_24000`` -> 24000; None for formats the emulator does not generate."""
    codec, _, rest = output_format.partition("_")
    if codec != "pcm":
        return None
    try:
        rate = int(rest)
    except ValueError:
        return None
    return rate if rate in _RATES else None


class ElevenLabsEmulator(Emulator):
    """ElevenLabs text-to-speech: stream-input websocket and HTTP stream."""

    name: ClassVar[str] = "elevenlabs"
    title: ClassVar[str] = "ElevenLabs: TTS stream-input websocket and HTTP stream"
    default_port: ClassVar[int] = 8404
    ENDPOINTS: ClassVar[tuple[str, ...]] = ("stream_input", "stream")
    FAULTS: ClassVar[frozenset[str]] = WS_FAULTS
    LATENCY: ClassVar[Mapping[str, Dist]] = {
        "handshake": Fixed(ms=0.0),
        "headers": Fixed(ms=20.0),
        "tts_first_audio": Fixed(ms=150.0),
        "tts_chunk": Fixed(ms=10.0),
    }
    CONTENT: ClassVar[Mapping[str, Any]] = {
        "voices": ["JBFqnCBsd6RMkjVDRZzb", "21m00Tcm4TlvDq8ikWAM", "EXAVITQu4vr4xnFWEtHE"],
        "models": [
            "eleven_flash_v2_5",
            "eleven_turbo_v2_5",
            "eleven_multilingual_v2",
            "eleven_v3",
        ],
        **SPEAKER_CONTENT,
        "final_audio_null": False,
        "reject_at_handshake": True,
    }
    CLOSE_REASONS: ClassVar[Mapping[int, str]] = {
        1011: "internal_server_error",
        1008: "input_timeout_exceeded",
    }

    def __init__(self, config: EmulatorConfig) -> None:
        super().__init__(config)
        self.speaker = Speaker.from_content(self.content)

    async def startup(self) -> None:
        await self.speaker.startup()

    def routes(self) -> Sequence[Route]:
        return [
            Route(
                "WS",
                "/v1/text-to-speech/{voice_id}/stream-input",
                self.stream_input,
                "stream_input",
            ),
            Route("POST", "/v1/text-to-speech/{voice_id}/stream", self.stream, "stream"),
        ]

    # -- auth and errors ------------------------------------------------------------------
    def authenticate(self, request: HttpRequest) -> str | None:
        key = request.headers.get("xi-api-key")
        if key is None and request.headers.get("upgrade", "").lower() == "websocket":
            return None  # the key may come in the first message instead
        problem = self.check_key(key)
        if problem is None:
            return None
        return "Invalid API key" if problem == "wrong" else "Missing API key (xi-api-key)"

    def error_response(
        self, status: int, message: str | None, endpoint: str
    ) -> tuple[list[tuple[str, str]], bytes]:
        statuses = {
            400: "invalid_request",
            401: "invalid_api_key",
            429: "too_many_concurrent_requests",
        }
        defaults = {
            429: "Too many concurrent requests. Please try again later.",
            500: "An internal server error occurred.",
        }
        body = {
            "detail": {
                "status": statuses.get(status, "internal_server_error"),
                "message": message or defaults.get(status, "Error."),
            }
        }
        return [("content-type", "application/json")], json.dumps(body).encode()

    def ws_error(self, x: WsExchange, message: str | None) -> tuple[str | None, int, str]:
        text = message or "An internal server error occurred."
        error = {"message": text, "error": "internal_server_error", "code": 1011}
        return json.dumps(error), 1011, "internal_server_error"

    def response_headers(self) -> list[tuple[str, str]]:
        return [("server", "voicelat-emulator/elevenlabs")]

    def ws_reject(self, request: HttpRequest, endpoint: str) -> tuple[int, str] | None:
        if not self.content["reject_at_handshake"]:
            return None
        voice = request.params.get("voice_id", "")
        problem = self._check(voice, request.query.get("model_id"), _format(request.query))
        if problem is None:
            return None
        return (404 if problem[0].endswith("not_found") else 400), problem[1]

    def _check(self, voice: str, model: str | None, output_format: str) -> tuple[str, str] | None:
        """(error, message) for what the emulator cannot serve, else None."""
        if voice not in self.content["voices"]:
            return "voice_not_found", f"A voice with the voice_id {voice} was not found."
        if model is not None and model not in self.content["models"]:
            return "model_not_found", f"A model with model ID {model} does not exist."
        if _rate(output_format) is None:
            return "invalid_output_format", (
                f"The voicelat emulator generates pcm_* output formats only, not {output_format}"
            )
        return None

    # -- stream-input websocket ---------------------------------------------------------------
    async def stream_input(self, x: WsExchange) -> None:
        q = x.request.query
        voice = x.params["voice_id"]
        model = q.get("model_id")
        output_format = _format(q)
        x.truth.model = model
        x.truth.detail["voice"] = voice
        problem = self._check(voice, model, output_format)
        if problem is not None:
            await self._error(x, problem[0], problem[1])
            return
        rate = _rate(output_format) or 24000
        inactivity = number(q, "inactivity_timeout", 20.0) or 20.0
        out = Outbox(x)
        buffer = ""
        schedule = [120, 160, 250, 290]
        initialized = False
        ended = False
        generations = 0
        last_text = now_ns()
        while not (ended and out.empty()):
            idle_at = None if ended else last_text + round(inactivity * 1e9)
            try:
                msg, t = await x.recv_stamped(out.wait_s(idle_at))
            except TimeoutError:
                await out.send_due()
                if idle_at is not None and now_ns() >= idle_at:
                    await self._error(
                        x, "input_timeout_exceeded", _TIMEOUT_MESSAGE.format(s=inactivity)
                    )
                    return
                continue
            if msg is None:
                return
            data = _parse(msg)
            if data is None or not isinstance(data.get("text"), str):
                await self._error(x, "invalid_input_message", _INVALID_INPUT)
                return
            text: str = data["text"]
            if not initialized:
                if text != " ":
                    await self._error(
                        x,
                        "invalid_input_message",
                        'The first message must initialize the stream: {"text": " ", ...}',
                    )
                    return
                no_header = x.request.headers.get("xi-api-key") is None
                if no_header and self.check_key(_init_key(data)) is not None:
                    await self._error(x, "invalid_api_key", "Invalid API key")
                    return
                config = data.get("generation_config")
                if isinstance(config, dict) and isinstance(
                    config.get("chunk_length_schedule"), list
                ):
                    schedule = [int(v) for v in config["chunk_length_schedule"]] or schedule
                initialized = True
                last_text = t
                continue
            last_text = t
            if text == "":
                ended = True
                x.truth.mark("end_of_input_received", t)
                if buffer.strip():
                    await self._generate(x, out, buffer, rate, t)
                buffer = ""
                final: dict[str, Any] = {"isFinal": True}
                if self.content["final_audio_null"]:
                    final["audio"] = None
                out.at(out.last, final, ["done_written", "end_written"])
            elif text != " " or buffer:
                buffer += text
                threshold = schedule[min(generations, len(schedule) - 1)]
                if data.get("flush") or len(buffer) >= threshold:
                    x.truth.mark("trigger_received", t)
                    await self._generate(x, out, buffer, rate, t)
                    generations += 1
                    buffer = ""
            await out.send_due()
        # Returning closes with 1000, which the SDK waits for after isFinal.

    async def _generate(self, x: WsExchange, out: Outbox, text: str, rate: int, t: int) -> None:
        pcm = await self.speaker.speak(text, rate)
        t_audio = max(t + round(x.sample("tts_first_audio") * 1e6), out.last)
        chunks = pcm_chunks(pcm, rate, self.content["chunk_ms"])
        alignment = _alignment(text, self.content["ms_per_char"])
        for i, piece in enumerate(chunks):
            if i:
                t_audio += round(x.sample("tts_chunk") * 1e6)
            message = {
                "audio": b64(piece),
                "normalizedAlignment": alignment if i == 0 else None,
                "alignment": alignment if i == 0 else None,
            }
            marks = ["audio_written", *(["first_audio_written"] if i == 0 else [])]
            out.at(t_audio, message, marks, content=True)

    async def _error(self, x: WsExchange, error: str, message: str) -> None:
        await x.send_json({"message": message, "error": error, "code": 1008})
        await x.close(1008, error)

    # -- HTTP stream ----------------------------------------------------------------------
    async def stream(self, x: HttpExchange) -> None:
        voice = x.request.params["voice_id"]
        output_format = x.request.query.get("output_format", "mp3_44100_128")
        body = x.request.json()
        text = body.get("text")
        if not isinstance(text, str) or not text.strip():
            raise BadRequest("text is required")
        model = body.get("model_id")
        problem = self._check(voice, model if isinstance(model, str) else None, output_format)
        if problem is not None:
            raise BadRequest(problem[1], 404 if problem[0].endswith("not_found") else 400)
        rate = _rate(output_format) or 24000
        x.truth.model = model if isinstance(model, str) else None
        pcm = await self.speaker.speak(text, rate)
        t_headers = x.at(x.sample("headers"))
        t = max(t_headers, x.at(x.sample("tts_first_audio")))
        await x.sleep_until(t_headers, "headers_written")
        await x.start(200, [("content-type", "audio/pcm")])
        for i, piece in enumerate(pcm_chunks(pcm, rate, self.content["chunk_ms"])):
            if i:
                t += round(x.sample("tts_chunk") * 1e6)
            await x.sleep_until(t, "first_audio_written" if i == 0 else None)
            marks = ["audio_written", *(["first_audio_written"] if i == 0 else [])]
            await x.send(piece, marks, content=True)
        await x.end()


def _format(query: Mapping[str, str]) -> str:
    return query.get("output_format", "mp3_44100_128")


def _parse(msg: str | bytes) -> dict[str, Any] | None:
    if isinstance(msg, bytes):
        return None
    try:
        data = json.loads(msg)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _init_key(data: Mapping[str, Any]) -> str | None:
    for name in ("xi-api-key", "xi_api_key"):
        value = data.get(name)
        if isinstance(value, str) and value:
            return value
    auth = data.get("authorization")
    if isinstance(auth, str) and auth.lower().startswith("bearer "):
        return auth[7:].strip() or None
    return None


def _alignment(text: str, ms_per_char: float) -> dict[str, list[Any]]:
    chars = list(text)
    step = round(ms_per_char)
    return {
        "chars": chars,
        "charStartTimesMs": [i * step for i in range(len(chars))],
        "charDurationsMs": [step] * len(chars),
    }
