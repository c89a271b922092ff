"""Inworld: the TTS HTTP stream (PROTOCOLS.md §6a) and the LLM Router (§6d), Basic auth.

``POST /tts/v1/voice:stream`` answers ``application/json`` with one JSON object per line,
``{"result":{"audioContent":"<base64>"}}``, where every chunk of LINEAR16/PCM audio carries
its own complete 44-byte WAV header (the documented quirk clients must strip). Camel- and
snake-case request fields are both accepted, as the official examples send both.
``POST /tts/v1/voice`` is the non-streamed form. The Router is the OpenAI chat format under
``/v1`` (the OpenAI emulator's code), with ``Authorization: Basic <key>``.

Unverified [U] details are configurable or tolerant: the pre-stream error body uses the
grpc-gateway shape ``{"code","message","details"}``; ``GET /tts/v1/voices`` and
``GET /v1/models`` answer so clients can warm a connection.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from voicelat.emulate.base import Route, b64, basic_key
from voicelat.emulate.content import pcm_chunks, wav_header
from voicelat.emulate.dist import Dist
from voicelat.emulate.exchange import BadRequest, HttpExchange, HttpRequest
from voicelat.emulate.profile import HTTP_FAULTS
from voicelat.emulate.providers.openai import OpenAIEmulator

__all__ = ["InworldEmulator"]

# grpc status codes by HTTP status, as grpc-gateway maps them.
_GRPC = {400: 3, 401: 16, 403: 7, 404: 5, 405: 12, 429: 8, 500: 13, 503: 14}
_MESSAGES = {
    401: "Unauthorized: the Authorization header must be 'Basic <your Inworld API key>'.",
    429: "Resource exhausted: too many requests.",
    500: "Internal error.",
}


def _pick(body: Mapping[str, Any], camel: str, snake: str) -> Any:
    return body.get(camel, body.get(snake))


class InworldEmulator(OpenAIEmulator):
    """Inworld TTS over HTTP plus the OpenAI-compatible LLM Router."""

    name: ClassVar[str] = "inworld"
    title: ClassVar[str] = (
        "Inworld: TTS HTTP stream (WAV header per chunk) + LLM Router (Basic auth)"
    )
    base_path: ClassVar[str] = ""
    default_port: ClassVar[int] = 8402
    ENDPOINTS: ClassVar[tuple[str, ...]] = ("tts_stream", "tts", "chat")
    FAULTS: ClassVar[frozenset[str]] = HTTP_FAULTS
    LATENCY: ClassVar[Mapping[str, Dist]] = OpenAIEmulator.LATENCY
    CONTENT: ClassVar[Mapping[str, Any]] = {
        **OpenAIEmulator.CONTENT,
        "models": ["openai/gpt-4o-mini", "openai/gpt-5", "inworld-tts-1.5-max"],
        "voices": ["Ashley", "Dennis", "Alex"],
        "chunk_ms": 100.0,
        # Inworld documents no timing header (PROTOCOLS.md §6): its Router answers without one.
        "processing_ms_header": False,
    }

    def routes(self) -> Sequence[Route]:
        return [
            Route("GET", "/tts/v1/voices", self.voices, "voices", work=False),
            Route("POST", "/tts/v1/voice:stream", self.tts_stream, "tts_stream"),
            Route("POST", "/tts/v1/voice", self.tts, "tts"),
            Route("GET", "/v1/models", self.models, "models", work=False),
            Route("POST", "/v1/chat/completions", self.chat, "chat"),
        ]

    def authenticate(self, request: HttpRequest) -> str | None:
        problem = self.check_key(basic_key(request))
        if problem is None:
            return None
        return _MESSAGES[401] if problem == "missing" else "Unauthorized: invalid API key."

    def error_response(
        self, status: int, message: str | None, endpoint: str
    ) -> tuple[list[tuple[str, str]], bytes]:
        if endpoint in ("chat", "models"):
            return super().error_response(status, message, endpoint)
        body = {
            "code": _GRPC.get(status, 2),
            "message": message or _MESSAGES.get(status, "Error."),
            "details": [],
        }
        return [("content-type", "application/json")], json.dumps(body).encode()

    def stream_error_event(self, x: HttpExchange, message: str | None) -> bytes:
        if x.endpoint == "chat":
            return super().stream_error_event(x, message)
        error = {"error": {"code": 13, "message": message or "Internal error.", "details": []}}
        return (json.dumps(error, separators=(",", ":")) + "\n").encode()

    def response_headers(self) -> list[tuple[str, str]]:
        return [("server", "voicelat-emulator/inworld")]

    # -- TTS --------------------------------------------------------------------------------
    async def voices(self, x: HttpExchange) -> None:
        voices = [{"voiceId": v, "languages": ["en"]} for v in self.content["voices"]]
        await x.respond_json(200, {"voices": voices})

    def _tts_request(self, x: HttpExchange) -> tuple[str, str, int, str]:
        body = x.request.json()
        text = body.get("text")
        if not isinstance(text, str) or not text.strip():
            raise BadRequest("text is required")
        if len(text) > 2000:
            raise BadRequest("text is too long: at most 2000 characters")
        voice = _pick(body, "voiceId", "voice_id")
        if not isinstance(voice, str) or not voice:
            raise BadRequest("voiceId is required")
        if voice not in self.content["voices"]:
            raise BadRequest(f"Unknown voice: {voice} not found")
        model = _pick(body, "modelId", "model_id")
        config = _pick(body, "audioConfig", "audio_config") or {}
        if not isinstance(config, dict):
            raise BadRequest("audioConfig must be an object")
        encoding = str(_pick(config, "audioEncoding", "audio_encoding") or "LINEAR16").upper()
        if encoding not in ("LINEAR16", "PCM"):
            raise BadRequest(
                f"the voicelat emulator streams audioEncoding LINEAR16 or PCM, not {encoding}"
            )
        rate = _pick(config, "sampleRateHertz", "sample_rate_hertz") or 24000
        if not isinstance(rate, int) or not 8000 <= rate <= 48000:
            raise BadRequest(f"sampleRateHertz must be 8000..48000, got {rate!r}")
        x.truth.model = model if isinstance(model, str) else None
        x.truth.detail["voice"] = voice
        return text, voice, rate, encoding

    async def tts_stream(self, x: HttpExchange) -> None:
        text, _, rate, _ = self._tts_request(x)
        pcm = await self.speaker.speak(text, rate)
        chunks = pcm_chunks(pcm, rate, self.content["chunk_ms"])
        t_headers = x.at(x.sample("headers"))
        t = max(t_headers, x.at(x.sample("tts_first_audio")))
        await x.sleep_until(t_headers, "headers_written")
        await x.start(200, [("content-type", "application/json")])
        for i, piece in enumerate(chunks):
            if i:
                t += round(x.sample("tts_chunk") * 1e6)
            await x.sleep_until(t, "first_audio_written" if i == 0 else None)
            result: dict[str, Any] = {"audioContent": b64(wav_header(len(piece), rate) + piece)}
            if i == len(chunks) - 1:
                x.truth.detail["characters"] = len(text)
                result["usage"] = {
                    "processedCharactersCount": len(text),
                    "modelId": x.truth.model or "inworld-tts-1.5-max",
                }
            line = json.dumps({"result": result}, separators=(",", ":")) + "\n"
            marks = ["audio_written", *(["first_audio_written"] if i == 0 else [])]
            await x.send(line.encode(), marks, content=True)
        await x.end()

    async def tts(self, x: HttpExchange) -> None:
        text, _, rate, _ = self._tts_request(x)
        pcm = await self.speaker.speak(text, rate)
        t_first = max(x.at(x.sample("headers")), x.at(x.sample("tts_first_audio")))
        n = len(pcm_chunks(pcm, rate, self.content["chunk_ms"]))
        t_end = t_first + sum(round(x.sample("tts_chunk") * 1e6) for _ in range(max(0, n - 1)))
        await x.sleep_until(t_end, "first_audio_written")
        body = {
            "audioContent": b64(wav_header(len(pcm), rate) + pcm),
            "usage": {
                "processedCharactersCount": len(text),
                "modelId": x.truth.model or "inworld-tts-1.5-max",
            },
        }
        await x.respond(
            200,
            json.dumps(body).encode(),
            [("content-type", "application/json")],
            ["headers_written", "first_audio_written", "end_written"],
        )
