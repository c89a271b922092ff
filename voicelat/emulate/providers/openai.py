"""The OpenAI-compatible API, as PROTOCOLS.md §0-§2 describe it and the official SDK reads it.

Endpoints: ``GET /v1/models``; ``POST /v1/chat/completions`` and ``POST /v1/completions``
(SSE: role chunk, content deltas, optional reasoning deltas, finish chunk, usage chunk when
``stream_options.include_usage``, ``[DONE]``; or one JSON body without ``stream``);
``POST /v1/audio/speech`` (raw PCM/WAV chunked stream, or SSE with ``stream_format: "sse"``);
``POST /v1/audio/transcriptions`` (multipart upload; SSE ``transcript.text.delta``/``done``
with ``stream=true``, JSON otherwise). Auth: ``Authorization: Bearer <key>``.

The provider's own clock: every response carries ``openai-processing-ms`` (whole ms, as the
OpenAI API sends it; content ``processing_ms_header``): the time from the request's end to
the response head as written (the truth's ``request_received`` -> ``headers_written``: the
injected ``headers`` delay for a stream, unless the emulator's own work overran it). With
content ``llama_timings`` the finish chunk carries llama.cpp's ``timings`` block,
``prompt_ms`` (request end -> first token) + ``predicted_ms`` (first -> last token), as
scheduled.

Timeline of a streamed chat request (t0 = the request's last byte read)::

    t0 + headers            status line + headers (+ the role-only chunk)
    t0 + max(ttft, headers) first delta (reasoning first for reasoning models)
    ... + token             each further delta
    right after the last    finish chunk, usage chunk, [DONE], end of body
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from voicelat.core.base.errors import ConfigError
from voicelat.core.measure.clock import now_ns
from voicelat.emulate.base import Emulator, Route, b64, bearer_key
from voicelat.emulate.content import (
    SPEAKER_CONTENT,
    TRANSCRIBER_CONTENT,
    Speaker,
    Transcriber,
    decode_upload,
    pcm_chunks,
    wav_header,
    words,
)
from voicelat.emulate.dist import Dist, Fixed
from voicelat.emulate.exchange import BadRequest, HttpExchange, Upload
from voicelat.emulate.profile import HTTP_FAULTS, EmulatorConfig

__all__ = ["OpenAIEmulator"]

_MISSING_KEY = (
    "You didn't provide an API key. You need to provide your API key in an Authorization "
    "header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field "
    "(with blank username) if you're accessing the API from your browser and are prompted for "
    "a username and password. You can obtain an API key from "
    "https://platform.openai.com/account/api-keys."
)
# The real service echoes a masked key; the emulator never repeats any part of a key.
_WRONG_KEY = (
    "Incorrect API key provided. You can find your API key at "
    "https://platform.openai.com/account/api-keys."
)
_SERVER_ERROR = "The server had an error while processing your request. Sorry about that!"
_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    404: ("invalid_request_error", None),
    405: ("invalid_request_error", None),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
}
_DEFAULT_MESSAGES = {
    429: "Rate limit reached for requests. Please try again in 1s.",
    500: _SERVER_ERROR,
}
SPEECH_RATE = 24000


def sse(data: Any) -> bytes:
    """One SSE event, compact JSON, as the OpenAI API writes them."""
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return f"data: {text}\n\n".encode()


class OpenAIEmulator(Emulator):
    """OpenAI (and any OpenAI-compatible server: vLLM, llama.cpp, OpenRouter...)."""

    name: ClassVar[str] = "openai"
    title: ClassVar[str] = "OpenAI-compatible API: chat, completions, speech, transcriptions"
    base_path: ClassVar[str] = "/v1"
    default_port: ClassVar[int] = 8401
    ENDPOINTS: ClassVar[tuple[str, ...]] = ("chat", "completions", "speech", "transcriptions")
    FAULTS: ClassVar[frozenset[str]] = HTTP_FAULTS
    LATENCY: ClassVar[Mapping[str, Dist]] = {
        "headers": Fixed(ms=20.0),
        "ttft": Fixed(ms=150.0),
        "token": Fixed(ms=15.0),
        "stt_first": Fixed(ms=80.0),
        "stt_final": Fixed(ms=200.0),
        "tts_first_audio": Fixed(ms=150.0),
        "tts_chunk": Fixed(ms=10.0),
    }
    CONTENT: ClassVar[Mapping[str, Any]] = {
        "reply": "Sure. It is sunny and mild today, around twenty degrees. Anything else?",
        # A conversation's replies in turn (a simulated caller's LLM, tests/caller): a chat
        # request carrying N assistant messages gets reply N (the last one repeats); empty:
        # every request gets `reply`.
        "replies": [],
        "reasoning": "The user asks a simple question. I should answer briefly and kindly.",
        "reasoning_field": "reasoning_content",
        "reasoning_models": ["*reason*", "*think*", "*-r1*"],
        "role_chunk": "headers",
        "models": ["gpt-4o-mini", "gpt-4o-mini-tts", "gpt-4o-mini-transcribe", "whisper-1"],
        **TRANSCRIBER_CONTENT,
        **SPEAKER_CONTENT,
        "audio_sse_done": False,
        "processing_ms_header": True,
        "llama_timings": False,
        # Of a prompt's tokens, how many the service reports as served from its prompt cache
        # (usage.prompt_tokens_details.cached_tokens; at most the prompt's).
        "cached_prompt_tokens": 0,
        # A planted defect for reply-quality tests: the speech endpoint leaves out the text's
        # last N words (the truth's detail["spoken"] has what it said).
        "drop_last_words": 0,
    }

    def __init__(self, config: EmulatorConfig) -> None:
        super().__init__(config)
        c = self.content
        if c["reasoning_field"] not in ("reasoning_content", "reasoning", "reasoning_text"):
            raise ConfigError(
                f"[{self.name}.content] reasoning_field must be reasoning_content, reasoning or "
                f"reasoning_text, got {c['reasoning_field']!r}"
            )
        if c["role_chunk"] not in ("headers", "first_token", "none"):
            raise ConfigError(
                f"[{self.name}.content] role_chunk must be headers, first_token or none, "
                f"got {c['role_chunk']!r}"
            )
        self.transcriber = Transcriber.from_content(c)
        self.speaker = Speaker.from_content(c)

    async def startup(self) -> None:
        await self.transcriber.startup()
        await self.speaker.startup()

    def routes(self) -> Sequence[Route]:
        return [
            Route("GET", "/v1/models", self.models, "models", work=False),
            Route("POST", "/v1/chat/completions", self.chat, "chat"),
            Route("POST", "/v1/completions", self.completions, "completions"),
            Route("POST", "/v1/audio/speech", self.speech, "speech"),
            Route("POST", "/v1/audio/transcriptions", self.transcriptions, "transcriptions"),
        ]

    # -- auth and errors --------------------------------------------------------------------
    def authenticate(self, request: Any) -> str | None:
        problem = self.check_key(bearer_key(request))
        if problem == "missing":
            return _MISSING_KEY
        if problem == "wrong":
            return _WRONG_KEY
        return None

    def error_response(
        self, status: int, message: str | None, endpoint: str
    ) -> tuple[list[tuple[str, str]], bytes]:
        kind, code = _ERROR_TYPES.get(status, ("invalid_request_error", None))
        if status == 401 and message == _MISSING_KEY:
            code = None
        body = {
            "error": {
                "message": message or _DEFAULT_MESSAGES.get(status, "Error."),
                "type": kind,
                "param": None,
                "code": code,
            }
        }
        headers = [("content-type", "application/json")]
        if status == 429:
            headers.append(("retry-after", "1"))
        return headers, json.dumps(body).encode()

    def stream_error_event(self, x: HttpExchange, message: str | None) -> bytes:
        # The real mid-stream error (PROTOCOLS.md §1): an error object, then the stream ends
        # without [DONE]. A raw audio stream has no event to carry it: it is cut instead.
        if x.endpoint == "speech" and x.truth.detail.get("stream_format") != "sse":
            return b""
        return sse({"error": {"message": message or _SERVER_ERROR, "type": "server_error"}})

    def response_headers(self) -> list[tuple[str, str]]:
        return [
            ("server", "voicelat-emulator/openai"),
            ("x-request-id", f"req_{secrets.token_hex(12)}"),
            ("openai-version", "2020-10-01"),
        ]

    def processing(self, x: HttpExchange, t_head_ns: int) -> list[tuple[str, str]]:
        """The ``openai-processing-ms`` header of a response whose head was scheduled at
        ``t_head_ns`` and is about to be written: the time since the request's end (the
        schedule, or later when the emulator's own work, e.g. transcribing, overran it), as
        a server's middleware measures it; the truth is ``request_received`` ->
        ``headers_written``."""
        if not self.content["processing_ms_header"]:
            return []
        spent_ns = max(t_head_ns, now_ns()) - x.t0_ns
        return [("openai-processing-ms", str(round(spent_ns / 1e6)))]

    # -- models -----------------------------------------------------------------------------
    async def models(self, x: HttpExchange) -> None:
        created = int(time.time())
        data = [
            {"id": m, "object": "model", "created": created, "owned_by": "voicelat-emulator"}
            for m in self.content["models"]
        ]
        await x.respond_json(200, {"object": "list", "data": data})

    # -- chat and completions ---------------------------------------------------------------
    def reasons(self, model: str) -> bool:
        """Whether ``model`` streams reasoning deltas (profile ``reasoning_models`` globs)."""
        return bool(self.content["reasoning"]) and any(
            fnmatch.fnmatch(model.lower(), p.lower()) for p in self.content["reasoning_models"]
        )

    async def chat(self, x: HttpExchange) -> None:
        body = x.request.json()
        model = _required_str(body, "model")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise BadRequest("Missing required parameter: 'messages'.")
        prompt = " ".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
        # How much conversation the request carried (a call's turns carry the earlier ones).
        x.truth.detail["messages"] = len(messages)
        await self._generate(x, body, model, prompt, chat=True)

    async def completions(self, x: HttpExchange) -> None:
        body = x.request.json()
        model = _required_str(body, "model")
        prompt = body.get("prompt")
        if isinstance(prompt, list):
            prompt = " ".join(str(p) for p in prompt)
        if not isinstance(prompt, str):
            raise BadRequest("Missing required parameter: 'prompt'.")
        await self._generate(x, body, model, prompt, chat=False)

    async def _generate(
        self, x: HttpExchange, body: dict[str, Any], model: str, prompt: str, *, chat: bool
    ) -> None:
        x.truth.model = model
        reply = self._completion(body, model, prompt, chat=chat)
        t_headers = x.at(x.sample("headers"))
        t_first = max(t_headers, x.at(x.sample("ttft")))
        if body.get("stream"):
            await self._stream(x, reply, t_headers, t_first)
            return
        t_end = t_first + sum(round(x.sample("token") * 1e6) for _ in reply.pieces[1:])
        await x.sleep_until(t_end, "end_written")
        await x.respond_json(200, reply.whole(), self.processing(x, t_end))

    def _completion(
        self, body: dict[str, Any], model: str, prompt: str, *, chat: bool
    ) -> _Completion:
        """The reply's tokens within the request's budget, and what every chunk repeats."""
        budget = body.get("max_completion_tokens") or body.get("max_tokens")
        limit = budget if isinstance(budget, int) and budget > 0 else 1 << 30
        reasoning = words(self.content["reasoning"]) if chat and self.reasons(model) else []
        content = words(self._reply_text(body))
        # Reasoning tokens spend the same budget first: a reasoning model given a small
        # max_tokens thinks and then says nothing (finish_reason "length").
        full = len(reasoning) + len(content)
        reasoning = reasoning[:limit]
        content = content[: max(0, limit - len(reasoning))]
        pieces = [("reasoning", t) for t in reasoning] + [("content", t) for t in content]
        options = body.get("stream_options")
        return _Completion(
            chat=chat,
            model=model,
            cid=f"{'chatcmpl' if chat else 'cmpl'}-{secrets.token_hex(12)}",
            created=int(time.time()),
            pieces=pieces,
            finish="length" if len(pieces) < full else "stop",
            usage=self._usage(len(words(prompt)), pieces),
            reasoning_field=self.content["reasoning_field"],
            include_usage=isinstance(options, dict) and bool(options.get("include_usage")),
        )

    def _reply_text(self, body: dict[str, Any]) -> str:
        """``reply``, or with ``replies`` the one for the conversation's point so far."""
        replies = self.content["replies"]
        if not replies:
            return str(self.content["reply"])
        messages = body.get("messages")
        said = sum(
            1
            for m in (messages if isinstance(messages, list) else ())
            if isinstance(m, dict) and m.get("role") == "assistant"
        )
        return str(replies[min(said, len(replies) - 1)])

    def _usage(self, n_prompt: int, pieces: list[tuple[str, str]]) -> dict[str, Any]:
        """``usage`` as the chat API reports it: counts and their details (cached prompt
        tokens, reasoning tokens within the completion's)."""
        n_reasoning = sum(1 for kind, _ in pieces if kind == "reasoning")
        return {
            "prompt_tokens": n_prompt,
            "completion_tokens": len(pieces),
            "total_tokens": n_prompt + len(pieces),
            "prompt_tokens_details": {
                "cached_tokens": min(n_prompt, int(self.content["cached_prompt_tokens"])),
                "audio_tokens": 0,
            },
            "completion_tokens_details": {
                "reasoning_tokens": n_reasoning,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }

    async def _stream(
        self, x: HttpExchange, reply: _Completion, t_headers: int, t_first: int
    ) -> None:
        await x.sleep_until(t_headers, "headers_written")
        await x.start(
            200,
            [
                ("content-type", "text/event-stream; charset=utf-8"),
                ("cache-control", "no-cache"),
                *self.processing(x, t_headers),
            ],
        )
        role_chunk = self.content["role_chunk"] if reply.chat else "none"
        if role_chunk == "headers":
            await x.send(reply.chunk({"role": "assistant", "content": "", "refusal": None}))
        t = t_first
        seen: set[str] = set()
        for i, (kind, text) in enumerate(reply.pieces):
            if i:
                t += round(x.sample("token") * 1e6)
            marks = ["token_written"]
            if i == 0:
                marks.append("first_delta_written")
            if kind not in seen:
                seen.add(kind)
                marks.append(f"first_{kind}_written")
                x.truth.scheduled.setdefault(f"first_{kind}_written", t)
            await x.sleep_until(t, "first_delta_written" if i == 0 else None)
            if reply.chat:
                field = "content" if kind == "content" else reply.reasoning_field
                delta: dict[str, Any] = {field: text}
                if i == 0 and role_chunk == "first_token":
                    delta = {"role": "assistant", **delta}
                data = reply.chunk(delta)
            else:
                data = reply.chunk(None, text=text)
            await x.send(data, marks, content=True)
        timings = self._timings(x, reply, t_first, t) if self.content["llama_timings"] else None
        await x.send(reply.chunk({}, reply.finish, timings=timings))
        if reply.include_usage:
            await x.send(sse(reply.usage_chunk()))
        await x.send(sse("[DONE]"), ["done_written"])
        await x.end()

    @staticmethod
    def _timings(x: HttpExchange, reply: _Completion, t_first: int, t_last: int) -> dict[str, Any]:
        """llama.cpp's ``timings`` block (PROTOCOLS.md §1) from the emulator's schedule."""
        prompt_ms = (t_first - x.t0_ns) / 1e6
        predicted_ms = (t_last - t_first) / 1e6
        n_prompt, n_pred = reply.usage["prompt_tokens"], len(reply.pieces)
        return {
            "prompt_n": n_prompt,
            "prompt_ms": round(prompt_ms, 3),
            "prompt_per_token_ms": round(prompt_ms / max(1, n_prompt), 3),
            "prompt_per_second": round(n_prompt * 1000 / prompt_ms, 3) if prompt_ms else 0.0,
            "predicted_n": n_pred,
            "predicted_ms": round(predicted_ms, 3),
            "predicted_per_token_ms": round(predicted_ms / max(1, n_pred), 3),
            "predicted_per_second": round(n_pred * 1000 / predicted_ms, 3) if predicted_ms else 0.0,
        }

    # -- speech -----------------------------------------------------------------------------
    async def speech(self, x: HttpExchange) -> None:
        body = x.request.json()
        model = _required_str(body, "model")
        text = body.get("input")
        if not isinstance(text, str) or not text:
            raise BadRequest("Missing required parameter: 'input'.")
        if len(text) > 4096:
            raise BadRequest("'input' is too long: at most 4096 characters.")
        if not isinstance(body.get("voice"), str | dict):
            raise BadRequest("Missing required parameter: 'voice'.")
        fmt = body.get("response_format", "mp3")
        if fmt not in ("pcm", "wav"):
            raise BadRequest(
                f"The voicelat emulator streams response_format 'pcm' or 'wav', not {fmt!r}."
            )
        stream_format = body.get("stream_format", "audio")
        if stream_format not in ("audio", "sse"):
            raise BadRequest("'stream_format' must be 'audio' or 'sse'.")
        x.truth.model = model
        sse_mode = stream_format == "sse"
        x.truth.detail["stream_format"] = stream_format
        drop = int(self.content["drop_last_words"])
        spoken = " ".join(text.split()[:-drop]) if drop > 0 else text
        x.truth.detail["spoken"] = spoken
        pcm = await self.speaker.speak(spoken, SPEECH_RATE) if spoken else b""
        chunks = pcm_chunks(pcm, SPEECH_RATE, self.content["chunk_ms"])
        if fmt == "wav" and chunks and not sse_mode:
            chunks[0] = wav_header(0xFFFFFFFF, SPEECH_RATE) + chunks[0]
        t_headers = x.at(x.sample("headers"))
        t = max(t_headers, x.at(x.sample("tts_first_audio")))
        await x.sleep_until(t_headers, "headers_written")
        ctype = "text/event-stream" if sse_mode else ("audio/wav" if fmt == "wav" else "audio/pcm")
        await x.start(200, [("content-type", ctype), *self.processing(x, t_headers)])
        for i, piece in enumerate(chunks):
            if i:
                t += round(x.sample("tts_chunk") * 1e6)
            await x.sleep_until(t, "first_audio_written" if i == 0 else None)
            marks = ["audio_written", *(["first_audio_written"] if i == 0 else [])]
            data = sse({"type": "speech.audio.delta", "audio": b64(piece)}) if sse_mode else piece
            await x.send(data, marks, content=True)
        if sse_mode:
            n_in = len(words(text))
            usage = {
                "input_tokens": n_in,
                "output_tokens": len(chunks),
                "total_tokens": n_in + len(chunks),
            }
            x.truth.detail["usage"] = usage
            await x.send(sse({"type": "speech.audio.done", "usage": usage}), ["done_written"])
            if self.content["audio_sse_done"]:
                await x.send(sse("[DONE]"))
        await x.end()

    # -- transcriptions ---------------------------------------------------------------------
    async def transcriptions(self, x: HttpExchange) -> None:
        form = x.request.form()
        upload = form.get("file")
        if not isinstance(upload, Upload):
            raise BadRequest("Missing required parameter: 'file'.")
        model = form.get("model")
        if not isinstance(model, str) or not model:
            raise BadRequest("Missing required parameter: 'model'.")
        x.truth.model = model
        decoded = decode_upload(upload.data, upload.filename)
        samples, rate = decoded if decoded is not None else (None, 16000)
        x.truth.detail["audio_ms"] = (
            round(len(samples) * 1000 / rate) if samples is not None else None
        )
        if samples is not None:
            # Which audio came (a rerun that must send byte-identical audio is checked on it).
            x.truth.detail["audio_sha256"] = hashlib.sha256(samples.tobytes()).hexdigest()
        text = await self.transcriber.transcribe(samples, rate)
        # whisper-1 ignores stream=true (PROTOCOLS.md §2b) and answers one JSON body.
        stream = str(form.get("stream", "false")).lower() == "true" and model != "whisper-1"
        t_headers = x.at(x.sample("headers"))
        t_first = max(t_headers, x.at(x.sample("stt_first")))
        t_final_min = x.at(x.sample("stt_final"))
        tokens = words(text)
        usage = _transcription_usage(model, x.truth.detail["audio_ms"] or 0, form, len(tokens))
        x.truth.detail["usage"] = usage
        if not stream:
            t_answer = max(t_headers, t_final_min)
            await x.sleep_until(t_answer, "final_written")
            if form.get("response_format") == "text":
                await x.respond(
                    200,
                    (text + "\n").encode(),
                    [("content-type", "text/plain; charset=utf-8"), *self.processing(x, t_answer)],
                    ["headers_written", "final_written", "end_written"],
                )
            else:
                await x.respond(
                    200,
                    json.dumps({"text": text, "usage": usage}).encode(),
                    [("content-type", "application/json"), *self.processing(x, t_answer)],
                    ["headers_written", "final_written", "end_written"],
                )
            return
        await x.sleep_until(t_headers, "headers_written")
        await x.start(
            200,
            [("content-type", "text/event-stream; charset=utf-8"), *self.processing(x, t_headers)],
        )
        t = t_first
        for i, token in enumerate(tokens):
            if i:
                t += round(x.sample("token") * 1e6)
            await x.sleep_until(t, "partial_written" if i == 0 else None)
            await x.send(
                sse({"type": "transcript.text.delta", "delta": token}),
                ["partial_written"],
                content=True,
            )
        await x.sleep_until(max(t, t_final_min), "final_written")
        await x.send(
            sse({"type": "transcript.text.done", "text": text, "usage": usage}),
            ["final_written"],
            content=not tokens,
        )
        if self.content["audio_sse_done"]:
            await x.send(sse("[DONE]"))
        await x.end()


def _transcription_usage(
    model: str, audio_ms: int, form: Mapping[str, Any], n_out: int
) -> dict[str, Any]:
    """``usage`` as the transcription API reports it: the input's duration for whisper-1
    (``{"type": "duration", "seconds"}``), tokens for the gpt-4o models (``{"type":
    "tokens"}`` with the audio and the prompt's text tokens in ``input_token_details``).
    The emulator's own rule: 10 audio tokens a second (at least one), a token a word."""
    if model == "whisper-1":
        return {"type": "duration", "seconds": round(audio_ms / 1000, 3)}
    prompt = form.get("prompt")
    n_audio = max(1, audio_ms // 100)
    n_text = len(words(prompt)) if isinstance(prompt, str) else 0
    return {
        "type": "tokens",
        "input_tokens": n_audio + n_text,
        "input_token_details": {"audio_tokens": n_audio, "text_tokens": n_text},
        "output_tokens": n_out,
        "total_tokens": n_audio + n_text + n_out,
    }


def _required_str(body: Mapping[str, Any], key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value:
        raise BadRequest(f"Missing required parameter: '{key}'.")
    return value


@dataclass(frozen=True)
class _Completion:
    """One generated reply of ``/chat/completions`` or ``/completions``: its tokens (reasoning
    first) and the fields every chunk of it repeats, in the order the service sends them."""

    chat: bool
    model: str
    cid: str
    created: int
    pieces: list[tuple[str, str]]
    """(kind, text) per token; kind is "reasoning" or "content"."""
    finish: str
    usage: dict[str, Any]
    reasoning_field: str
    include_usage: bool

    @property
    def _object(self) -> str:
        return "chat.completion.chunk" if self.chat else "text_completion"

    def chunk(
        self,
        delta: dict[str, Any] | None,
        finish_reason: str | None = None,
        text: str = "",
        *,
        timings: dict[str, Any] | None = None,
    ) -> bytes:
        """One SSE chunk: a chat ``delta``, or a completion's ``text`` (llama.cpp adds its
        ``timings`` to the finish chunk)."""
        # `usage: null` on every chunk but the last when the client asked for usage.
        extra: dict[str, Any] = {"usage": None} if self.include_usage else {}
        if timings is not None:
            extra["timings"] = timings
        if self.chat:
            choice = {
                "index": 0,
                "delta": delta or {},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
            head = {"id": self.cid, "object": self._object, "created": self.created}
            fingerprint = {"model": self.model, "system_fingerprint": "fp_voicelat"}
            return sse({**head, **fingerprint, "choices": [choice], **extra})
        choice = {"text": text, "index": 0, "logprobs": None, "finish_reason": finish_reason}
        obj = {"id": self.cid, "object": self._object, "created": self.created}
        return sse({**obj, "model": self.model, "choices": [choice], **extra})

    def usage_chunk(self) -> dict[str, Any]:
        """The last chunk of a stream that asked for ``stream_options.include_usage``."""
        obj: dict[str, Any] = {
            "id": self.cid,
            "object": self._object,
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": self.usage,
        }
        if self.chat:
            obj["system_fingerprint"] = "fp_voicelat"
        return obj

    def whole(self) -> dict[str, Any]:
        """The body of a request without ``stream``: the whole reply at once."""
        text = "".join(t for k, t in self.pieces if k == "content")
        choice: dict[str, Any]
        if self.chat:
            message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
            reasoning = [t for k, t in self.pieces if k == "reasoning"]
            if reasoning:
                message[self.reasoning_field] = "".join(reasoning)
            choice = {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": self.finish,
            }
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": self.finish}
        return {
            "id": self.cid,
            "object": "chat.completion" if self.chat else "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": [choice],
            "usage": self.usage,
        }
