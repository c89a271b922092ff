"""Inworld TTS over its HTTP stream: ``inworld-tts`` (``POST /tts/v1/voice:stream``).

The response is one JSON object per line, ``{"result":{"audioContent":"<base64>"}}`` (with
``"usage": {"processedCharactersCount": N}``, the characters billed, recorded as the stage's
usage), and with
LINEAR16 every chunk carries its own complete WAV header (PROTOCOLS.md §6a): the stage strips
the header of every chunk, so the first :class:`~voicelat.core.measure.events.Audio` is the first real
sample (a header is not audio). Auth is ``Authorization: Basic <key>``, the key exactly as
Inworld's portal gives it. The Inworld LLM Router needs no stage of its own: it is the
``openai`` stage with ``auth = "basic"`` (see pipelines/inworld.toml).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from voicelat.core.base import jsontext
from voicelat.core.base.secrets import excerpt
from voicelat.stages.http import AUTH_OPTION, AuthScheme, stream_error
from voicelat.stages.openai_audio import AudioDecoder, HttpTTS, HttpTTSOptions, strip_wav

__all__ = ["InworldTTS", "InworldTTSOptions"]


@dataclass(frozen=True, kw_only=True)
class InworldTTSOptions(HttpTTSOptions):
    """``[tts]`` of ``inworld-tts`` (the key goes out as ``Basic``, as Inworld gives it)."""

    auth: AuthScheme = field(default="basic", metadata=AUTH_OPTION)
    model: str = "inworld-tts-1.5-max"
    voice: str = "Ashley"
    temperature: float | None = None
    speaking_rate: float = 1.0


class _NDJSONAudioDecoder(AudioDecoder):
    """Lines of ``{"result":{"audioContent"}}`` or ``{"error":{...}}``; the end is EOF."""

    def __init__(self, rate: int) -> None:
        super().__init__(rate)
        self._buf = b""
        self.chunks = 0

    def feed(self, data: bytes) -> list[bytes]:
        self._buf += data
        out: list[bytes] = []
        while b"\n" in self._buf and self.error is None:
            line, _, self._buf = self._buf.partition(b"\n")
            pcm = self._line(line.strip())
            if pcm:
                out.append(pcm)
        return out

    def _line(self, line: bytes) -> bytes:
        if not line:
            return b""
        try:
            obj = jsontext.loads(line)
        except ValueError:
            text = line.decode("utf-8", "replace")
            self.error = f"malformed stream line: {excerpt(text, 80, quoted=True)}"
            return b""
        if not isinstance(obj, dict):
            return b""
        err = stream_error(obj)
        if err is not None:
            self.error = f"error mid-stream: {err}"
            return b""
        result = obj.get("result")
        if not isinstance(result, dict):
            return b""
        self._usage(result.get("usage"))
        status = result.get("status")
        if isinstance(status, dict) and status.get("code"):
            self.error = f"error mid-stream: {status.get('message')} (code {status.get('code')})"
            return b""
        content = result.get("audioContent")
        if not isinstance(content, str) or not content:
            return b""
        try:
            blob = base64.b64decode(content)
        except ValueError:
            self.error = "audioContent is not valid base64"
            return b""
        samples, rate = strip_wav(blob)
        if rate:
            self.rate = rate
        self.chunks += 1
        return self._pcm(samples)

    def _usage(self, usage: object) -> None:
        """``usage.processedCharactersCount``: the characters Inworld bills for the request.
        Kept as the largest seen, so a count repeated on every line is counted once."""
        if not isinstance(usage, dict):
            return
        n = usage.get("processedCharactersCount")
        if isinstance(n, int) and not isinstance(n, bool) and n >= 0:
            seen = (self.usage or {}).get("characters", 0)
            self.usage = {"characters": max(seen, n)}

    def flush(self) -> list[bytes]:
        # The last line may come without its newline.
        tail, self._buf = self._buf.strip(), b""
        pcm = self._line(tail) if tail else b""
        return [pcm] if pcm else []

    def eof(self) -> str | None:
        if self.error:
            return self.error
        return None if self.chunks else "the stream ended without any audio"


class InworldTTS(HttpTTS):
    """Inworld TTS HTTP streaming (LINEAR16; the WAV header of every chunk is stripped)."""

    stage_name: ClassVar[str] = "inworld-tts"
    warm_path: ClassVar[str] = "/tts/v1/voices"
    options_class: ClassVar[type[HttpTTSOptions]] = InworldTTSOptions

    def __init__(self, options: Mapping[str, Any], *, table: str = "tts") -> None:
        super().__init__(options, table=table)
        o = self.tts_options
        assert isinstance(o, InworldTTSOptions)
        self.temperature = o.temperature
        self.speaking_rate = o.speaking_rate

    def _build(self, text: str) -> tuple[str, dict[str, Any]]:
        config: dict[str, Any] = {"audioEncoding": "LINEAR16", "sampleRateHertz": self.rate}
        if self.speaking_rate != 1.0:
            config["speakingRate"] = self.speaking_rate
        body: dict[str, Any] = {
            "text": text,
            "voiceId": self.voice,
            "modelId": self.model,
            "audioConfig": config,
        }
        if self.temperature is not None:
            body["temperature"] = self.temperature
        return f"{self.base_url}/tts/v1/voice:stream", body

    def _decoder(self) -> AudioDecoder:
        return _NDJSONAudioDecoder(self.rate)

    def describe(self) -> dict[str, Any]:
        return {
            "stage": self.stage_name,
            "base_url": self.base_url,
            "model": self.model,
            "voice": self.voice,
            "rate": self.rate,
            "mode": self.mode,
            "server": self._server,
        }
