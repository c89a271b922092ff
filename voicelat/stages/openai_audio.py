"""OpenAI audio stages over HTTP: ``openai-tts`` (``/v1/audio/speech``) and ``openai-stt``
(``/v1/audio/transcriptions`` with ``stream=true``).

Both stamp every raw read of the response body on arrival, before decoding, and report
httpcore trace sub-spans (connect, TLS, request sent, response headers) like the ``openai``
LLM stage. Every failure (refused connection, HTTP error, mid-stream error event, stall,
truncated stream) ends the request with one :class:`~voicelat.core.measure.events.Failed` line; read
timeouts bound every wait, so nothing hangs.

The TTS base class :class:`HttpTTS` (one HTTP request per text piece the chunker hands over,
audio decoded as it streams) is shared with the Inworld stage.
"""

from __future__ import annotations

import base64
import io
import json
import wave
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import httpx

from voicelat.core.base import jsontext
from voicelat.core.base.secrets import excerpt
from voicelat.core.measure.events import (
    Audio,
    Done,
    Failed,
    Final,
    Partial,
    RequestSent,
    StageEvent,
    StageName,
    TextSent,
)
from voicelat.core.measure.sse import SSEDecoder
from voicelat.stages.http import (
    HttpOptions,
    HttpStage,
    drain_body,
    network_reason,
    stream_error,
)
from voicelat.stages.options import parse_options

__all__ = [
    "AudioDecoder",
    "HttpTTS",
    "HttpTTSOptions",
    "OpenAISTT",
    "OpenAISTTOptions",
    "OpenAITTS",
    "OpenAITTSOptions",
    "network_reason",
]


# -- decoders --------------------------------------------------------------------------------
class AudioDecoder:
    """Sans-I/O: raw response bytes in, 16-bit PCM pieces out; keeps odd bytes for the next
    read. Subclasses handle containers and framings (WAV, SSE, NDJSON)."""

    def __init__(self, rate: int) -> None:
        self.rate = rate
        self.done = False
        self.error: str | None = None
        #: What the provider reported this request used (None: it reported nothing), in the
        #: keys core/judge/cost.py prices: ``characters``, ``audio_ms``, ``input_tokens``...
        self.usage: dict[str, int] | None = None
        self._carry = b""

    def _pcm(self, data: bytes) -> bytes:
        data = self._carry + data
        cut = len(data) - len(data) % 2
        self._carry = data[cut:]
        return data[:cut]

    def feed(self, data: bytes) -> list[bytes]:
        """PCM pieces completed by ``data`` (possibly empty); sets ``done``/``error``."""
        return [p for p in (self._pcm(data),) if p]

    def flush(self) -> list[bytes]:
        """PCM still held at the end of the body (e.g. a last line without its newline)."""
        return []

    def eof(self) -> str | None:
        """At the end of the body: None if the stream ended as the protocol says, else why not."""
        return None


class _RawDecoder(AudioDecoder):
    """Raw PCM (``response_format: pcm``), or a WAV stream whose header is skipped."""

    def __init__(self, rate: int, wav: bool) -> None:
        super().__init__(rate)
        self._head: bytearray | None = bytearray() if wav else None

    def feed(self, data: bytes) -> list[bytes]:
        if self._head is not None:
            self._head += data
            parsed = _wav_data_offset(bytes(self._head))
            if parsed is None:
                return []
            offset, rate = parsed
            self.rate = rate or self.rate
            data = bytes(self._head[offset:])
            self._head = None
        return super().feed(data)


def _speech_usage(usage: object) -> dict[str, int] | None:
    """``speech.audio.done``'s ``usage`` (text tokens in, audio tokens out: how
    gpt-4o-mini-tts is billed); None when it carries no counts."""
    if not isinstance(usage, dict):
        return None
    out = {
        k: n for k in ("input_tokens", "output_tokens") if (n := _count(usage.get(k))) is not None
    }
    return out or None


def _wav_data_offset(head: bytes) -> tuple[int, int] | None:
    """Where the samples of a RIFF/WAVE stream start, and its rate; None until enough bytes."""
    if len(head) < 12:
        return None
    if head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return 0, 0
    pos, rate = 12, 0
    while len(head) >= pos + 8:
        cid = head[pos : pos + 4]
        size = int.from_bytes(head[pos + 4 : pos + 8], "little")
        if cid == b"data":
            return pos + 8, rate
        if cid == b"fmt " and len(head) >= pos + 16:
            rate = int.from_bytes(head[pos + 12 : pos + 16], "little")
        if len(head) < pos + 8 + size:
            return None
        pos += 8 + size + (size & 1)
    return None


def strip_wav(data: bytes) -> tuple[bytes, int]:
    """The samples of one complete WAV blob (Inworld sends one per chunk), and its rate (0 if
    the blob is not WAV and passes through)."""
    parsed = _wav_data_offset(data)
    if parsed is None:
        return (data[44:], 0) if data[:4] == b"RIFF" else (data, 0)
    return data[parsed[0] :], parsed[1]


class _SpeechSSEDecoder(AudioDecoder):
    """``stream_format: sse``: ``speech.audio.delta`` (base64) until ``speech.audio.done``."""

    def __init__(self, rate: int) -> None:
        super().__init__(rate)
        self._sse = SSEDecoder()

    def feed(self, data: bytes) -> list[bytes]:
        out: list[bytes] = []
        for ev in self._sse.feed(data, 0):
            if self.done or self.error:
                break
            if ev.data.startswith("[DONE]"):
                self.done = True
                break
            try:
                obj = jsontext.loads(ev.data)
            except ValueError:
                self.error = f"malformed SSE data: {excerpt(ev.data, 80, quoted=True)}"
                break
            if not isinstance(obj, dict):
                continue
            err = stream_error(obj)
            if err is not None:
                self.error = f"error event mid-stream: {err}"
                break
            kind = obj.get("type")
            if kind == "speech.audio.delta" and isinstance(obj.get("audio"), str):
                try:
                    raw = base64.b64decode(obj["audio"])
                except ValueError:
                    self.error = "speech.audio.delta carries invalid base64"
                    break
                pcm = self._pcm(raw)
                if pcm:
                    out.append(pcm)
            elif kind == "speech.audio.done":
                self.done = True
                self.usage = _speech_usage(obj.get("usage"))
        return out

    def eof(self) -> str | None:
        return None if self.done else "stream ended before speech.audio.done"


# -- TTS ---------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class HttpTTSOptions(HttpOptions):
    """What every HTTP TTS stage's table may hold (each stage's options extend it)."""

    model: str
    voice: str
    mode: Literal["sentence", "full"] = field(
        default="sentence", metadata={"expect": "'sentence' or 'full'"}
    )
    rate: int = 24000


class HttpTTS(HttpStage):
    """TTS over a streamed HTTP response: one request per text piece (``mode = "sentence"``,
    the chunker's pieces) or one for the whole reply (``mode = "full"``), in order.

    Subclasses name their options class (``options_class``, an :class:`HttpTTSOptions`)."""

    kind: ClassVar[StageName] = "tts"
    options_class: ClassVar[type[HttpTTSOptions]] = HttpTTSOptions

    def __init__(self, options: Mapping[str, Any], *, table: str = "tts") -> None:
        o = self.tts_options = parse_options(self.options_class, table, options)
        super().__init__(table, o)
        self.mode = o.mode
        self.rate = o.rate
        self.model = o.model
        self.voice = o.voice

    def _build(self, text: str) -> tuple[str, dict[str, Any]]:
        """URL and JSON body of one synthesis request."""
        raise NotImplementedError

    def _decoder(self) -> AudioDecoder:
        raise NotImplementedError

    def _headers(self) -> dict[str, str]:
        return {**self._auth, "Accept-Encoding": "identity", "Content-Type": "application/json"}

    async def synthesize(self, text: AsyncIterable[str]) -> AsyncIterator[StageEvent]:
        assert self._client is not None, "use the stage as an async context manager"
        if self.mode == "full":
            whole = "".join([piece async for piece in text]).strip()
            pieces: AsyncIterable[str] = _once(whole)
        else:
            pieces = text
        reported: list[dict[str, int] | None] = []
        async for piece in pieces:
            if not piece.strip():
                continue
            failed = False
            async for event in self._one(piece, reported):
                yield event
                failed = failed or isinstance(event, Failed)
            if failed:
                return
        yield Done(self.clock.now_ns(), usage=_total_usage(reported))

    async def _one(
        self, text: str, reported: list[dict[str, int] | None]
    ) -> AsyncIterator[StageEvent]:
        assert self._client is not None
        url, body = self._build(text)
        trace = self._trace()
        request = self._client.build_request(
            "POST",
            url,
            content=json.dumps(body).encode(),
            headers=self._headers(),
            extensions={"trace": trace},
        )
        t_request = self.clock.now_ns()
        yield TextSent(t_request, text)
        events, response = await self._send_traced(request, url, trace, t_request)
        for event in events:
            yield event
        if response is None:
            return
        try:
            async for event in self._audio(response, url, reported):
                yield event
        finally:
            await response.aclose()
            self._last_use_ns = self.clock.now_ns()

    async def _audio(
        self, response: httpx.Response, url: str, reported: list[dict[str, int] | None]
    ) -> AsyncIterator[StageEvent]:
        decoder = self._decoder()
        reported.append(None)
        raw = response.aiter_raw()
        t = self.clock.now_ns()
        while True:
            try:
                chunk, t_read = await self._read_raw(raw)  # stamped on arrival
            except httpx.HTTPError as exc:
                yield self._failed(network_reason(exc, url, self.timeout_s))
                return
            if chunk is None:
                break
            t = t_read
            for pcm in decoder.feed(chunk):
                yield Audio(t, pcm, decoder.rate)
            if decoder.error is not None:
                yield Failed(t, f"{url}: {decoder.error}")
                return
            if decoder.done:
                break
        for pcm in decoder.flush():
            yield Audio(t, pcm, decoder.rate)
        reported[-1] = decoder.usage
        problem = decoder.eof()
        if problem is not None:
            yield self._failed(f"{url}: {problem}")


def _total_usage(reported: list[dict[str, int] | None]) -> dict[str, int]:
    """The reply's usage: the sum over its requests when every one of them reported it;
    else nothing (a part would understate the bill: voicelat's own count is used instead)."""
    if not reported or any(u is None for u in reported):
        return {}
    out: dict[str, int] = {}
    for usage in reported:
        for key, n in (usage or {}).items():
            out[key] = out.get(key, 0) + n
    return out


async def _once(text: str) -> AsyncIterator[str]:
    yield text


@dataclass(frozen=True, kw_only=True)
class OpenAITTSOptions(HttpTTSOptions):
    """``[tts]`` of ``openai-tts``."""

    model: str = "gpt-4o-mini-tts"
    voice: str = "alloy"
    stream_format: Literal["audio", "sse"] = field(
        default="audio", metadata={"expect": "'audio' or 'sse'"}
    )
    response_format: Literal["pcm", "wav"] = field(
        default="pcm", metadata={"expect": "'pcm' or 'wav' (voicelat measures PCM)"}
    )
    instructions: str | None = None
    speed: float = 1.0


class OpenAITTS(HttpTTS):
    """``POST /v1/audio/speech``: raw 24 kHz PCM streamed as the body, or SSE
    ``speech.audio.delta`` events with ``stream_format = "sse"``."""

    stage_name: ClassVar[str] = "openai-tts"
    options_class: ClassVar[type[HttpTTSOptions]] = OpenAITTSOptions

    def __init__(self, options: Mapping[str, Any], *, table: str = "tts") -> None:
        super().__init__(options, table=table)
        o = self.tts_options
        assert isinstance(o, OpenAITTSOptions)
        self.stream_format = o.stream_format
        self.response_format = o.response_format
        self.instructions = o.instructions
        self.speed = o.speed

    def _build(self, text: str) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {
            "model": self.model,
            "input": text,
            "voice": self.voice,
            "response_format": self.response_format,
        }
        if self.stream_format == "sse":
            body["stream_format"] = "sse"
        if self.instructions:
            body["instructions"] = self.instructions
        if self.speed != 1.0:
            body["speed"] = self.speed
        return f"{self.base_url}/audio/speech", body

    def _headers(self) -> dict[str, str]:
        accept = "text/event-stream" if self.stream_format == "sse" else "application/octet-stream"
        return {**super()._headers(), "Accept": accept}

    def _decoder(self) -> AudioDecoder:
        if self.stream_format == "sse":
            return _SpeechSSEDecoder(self.rate)
        return _RawDecoder(self.rate, wav=self.response_format == "wav")

    def describe(self) -> dict[str, Any]:
        return {
            "stage": self.stage_name,
            "base_url": self.base_url,
            "model": self.model,
            "voice": self.voice,
            "stream_format": self.stream_format,
            "response_format": self.response_format,
            "mode": self.mode,
            "server": self._server,
        }


# -- STT ---------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class OpenAISTTOptions(HttpOptions):
    """``[stt]`` of ``openai-stt``."""

    model: str = "gpt-4o-mini-transcribe"
    language: str | None = None
    prompt: str | None = None
    rate: int = 16000
    stream: bool = True


class OpenAISTT(HttpStage):
    """``POST /v1/audio/transcriptions`` with ``stream=true``: transcript deltas over SSE.

    This is not a realtime protocol: the endpoint takes a finished recording. The stage
    collects the paced audio and uploads it as one WAV file once the endpoint is reached, so
    its ``stt`` segment (endpoint -> final) includes the upload as well as the transcription.
    Deltas are reported as partials (they arrive after the endpoint, unlike a streaming
    recognizer's interim results); ``transcript.text.done`` is the final.
    """

    kind: ClassVar[StageName] = "stt"
    stage_name: ClassVar[str] = "openai-stt"

    def __init__(self, options: Mapping[str, Any], *, table: str = "stt") -> None:
        o = parse_options(OpenAISTTOptions, table, options)
        super().__init__(table, o)
        self.model = o.model
        self.language = o.language
        self.prompt = o.prompt
        self.input_rate = o.rate
        self.stream = o.stream

    def describe(self) -> dict[str, Any]:
        return {
            "stage": self.stage_name,
            "base_url": self.base_url,
            "model": self.model,
            "language": self.language,
            "streaming": self.stream,
            "realtime": False,
            "server": self._server,
        }

    def _wav(self, pcm: bytes) -> bytes:
        buf = io.BytesIO()
        with wave.open(buf, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(self.input_rate)
            w.writeframes(pcm)
        return buf.getvalue()

    async def transcribe(self, audio: AsyncIterable[bytes]) -> AsyncIterator[StageEvent]:
        assert self._client is not None, "use the stage as an async context manager"
        frames = [frame async for frame in audio]
        url = f"{self.base_url}/audio/transcriptions"
        data = {"model": self.model, "stream": "true" if self.stream else "false"}
        if self.language:
            data["language"] = self.language
        if self.prompt:
            data["prompt"] = self.prompt
        trace = self._trace()
        request = self._client.build_request(
            "POST",
            url,
            data=data,
            files={"file": ("audio.wav", self._wav(b"".join(frames)), "audio/wav")},
            headers={**self._auth, "Accept-Encoding": "identity"},
            extensions={"trace": trace},
        )
        t_request = self.clock.now_ns()
        yield RequestSent(t_request, "audio_end")
        events, response = await self._send_traced(request, url, trace, t_request)
        for event in events:
            yield event
        if response is None:
            return
        try:
            is_sse = "text/event-stream" in response.headers.get("content-type", "")
            async for event in self._read(response, url, is_sse):
                yield event
        finally:
            await response.aclose()
            self._last_use_ns = self.clock.now_ns()

    async def _read(
        self, response: httpx.Response, url: str, is_sse: bool
    ) -> AsyncIterator[StageEvent]:
        decoder = SSEDecoder()
        transcript = _Transcript(url)
        body = b""
        t_first: int | None = None
        raw = response.aiter_raw()
        while True:
            try:
                chunk, t = await self._read_raw(raw)  # stamped on arrival, before parsing
            except httpx.HTTPError as exc:
                yield self._failed(network_reason(exc, url, self.timeout_s))
                return
            if chunk is None:
                break
            if not is_sse:
                # A model that ignores stream=true (whisper-1) answers one JSON body.
                t_first = t_first or t
                body += chunk
                continue
            for ev in decoder.feed(chunk, t):
                for event in transcript.feed(ev.data, ev.t_ns):
                    yield event
                if transcript.over:
                    if transcript.final:
                        # The final is out (stamped on arrival): read the end of the body so
                        # the pooled connection survives for the next turn's upload.
                        await drain_body(raw)
                    return
        t_end = self.clock.now_ns()
        if is_sse:
            yield Failed(t_end, f"{url}: stream ended before transcript.text.done")
            return
        try:
            obj = jsontext.loads(body)
        except ValueError:
            obj = None
        if isinstance(obj, dict) and isinstance(obj.get("text"), str):
            yield Final(t_first or t_end, obj["text"])
            yield Done(t_end, usage=transcription_usage(obj.get("usage")))
        else:
            yield Failed(t_end, f"{url}: the response is neither SSE nor a JSON transcript")


def _count(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return None
    return int(value)


def transcription_usage(usage: object) -> dict[str, int]:
    """A transcription's ``usage`` as the stage records it (core/judge/cost.py prices it).

    OpenAI bills a transcription by tokens (``{"type": "tokens", "input_tokens",
    "input_token_details": {"audio_tokens", "text_tokens"}, "output_tokens"}``, the
    gpt-4o models) or by the input's duration (``{"type": "duration", "seconds"}``,
    whisper-1): the counts come out as ``input_tokens``/``input_audio_tokens``/
    ``input_text_tokens``/``output_tokens`` or ``audio_ms``. Nothing usable: empty (the cost
    then falls back to the audio voicelat sent, labelled so).
    """
    if not isinstance(usage, dict):
        return {}
    out: dict[str, int] = {}
    if usage.get("type") == "duration" or "seconds" in usage:
        seconds = usage.get("seconds")
        if isinstance(seconds, int | float) and not isinstance(seconds, bool) and seconds >= 0:
            out["audio_ms"] = round(seconds * 1000)
        return out
    for key in ("input_tokens", "output_tokens"):
        n = _count(usage.get(key))
        if n is not None:
            out[key] = n
    details = usage.get("input_token_details")
    if isinstance(details, dict):
        for key in ("audio_tokens", "text_tokens"):
            n = _count(details.get(key))
            if n is not None:
                out[f"input_{key}"] = n
    return out


class _Transcript:
    """Sans-I/O: the data of each SSE event of a streamed transcription in, stage events out
    (deltas as partials of the text so far, ``transcript.text.done`` as the final); ``over``
    once the stream has ended or failed."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.text = ""
        self.over = False
        self.final = False

    def feed(self, data: str, t: int) -> list[StageEvent]:
        if data.startswith("[DONE]"):
            return []
        try:
            obj = jsontext.loads(data)
        except ValueError:
            return self._end(
                Failed(t, f"{self.url}: malformed SSE data: {excerpt(data, 80, quoted=True)}")
            )
        if not isinstance(obj, dict):
            return []
        err = stream_error(obj)
        if err is not None:
            return self._end(Failed(t, f"{self.url}: error event mid-stream: {err}"))
        kind = obj.get("type")
        if kind == "transcript.text.delta":
            self.text += str(obj.get("delta") or "")
            return [Partial(t, self.text)]
        if kind != "transcript.text.done":
            return []
        final = obj.get("text")
        counts = transcription_usage(obj.get("usage"))
        self.final = True
        return self._end(
            Final(t, final if isinstance(final, str) else self.text), Done(t, usage=counts)
        )

    def _end(self, *events: StageEvent) -> list[StageEvent]:
        self.over = True
        return list(events)
