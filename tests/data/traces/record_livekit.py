"""Record REAL LiveKit Agents spans into ``livekit-text.otlp.json`` / ``livekit-voice.otlp.json``.

Not a test, and not run by CI (livekit-agents is not a voicelat dependency): run it by hand in
a virtualenv with ``livekit-agents==1.8.9``, ``livekit-plugins-silero==1.8.9`` and
``opentelemetry-sdk`` when LiveKit changes::

    python tests/data/traces/record_livekit.py          # text turns
    python tests/data/traces/record_livekit.py --voice  # voice turns

A real ``AgentSession`` runs with no room and no LiveKit server (``session.start(agent)``),
its spans through ``livekit.agents.telemetry.set_tracer_provider`` into an in-memory exporter,
then written as one OTLP JSON ``ExportTraceServiceRequest`` (hex ids) by opentelemetry's own
encoder. Its LLM is scripted (a fixed reply streamed after 120 ms), its TTS a silent one
(80 ms to the first byte, through LiveKit's own ChunkedStream and StreamAdapter), its audio
output a sink that reports playback started on the first frame it is given, as LiveKit's
RoomIO does when it pushes the frame to the track. Text: two turns through
``session.run(user_input=...)`` (LiveKit's spans of a text turn have no ``user_turn``: no VAD,
no STT). Voice: ``fixtures/weather_paris.wav`` twice, paced in real time as the session's audio
input (0.5 s of silence before, 3 s after each), LiveKit's Silero VAD with its defaults,
``turn_detection="vad"`` and a scripted non-streaming STT (150 ms; LiveKit runs it on the
VAD's segments): ``user_speaking``, ``user_turn`` and ``eou_wait`` spans beside each reply.
String attributes over 512 characters are cut. recorded-livekit.json says when.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import time
import wave
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict
from livekit import rtc
from livekit.agents import Agent, AgentSession, llm, stt, tts
from livekit.agents.llm import ChatChunk, ChoiceDelta
from livekit.agents.telemetry import set_tracer_provider
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS
from livekit.agents.voice import io as lkio
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

HERE = Path(__file__).resolve().parent
WAV = HERE.parents[2] / "fixtures" / "weather_paris.wav"


class _ScriptLLM(llm.LLM):
    def chat(
        self,
        *,
        chat_ctx: Any,
        tools: Any = None,
        conn_options: Any = DEFAULT_API_CONNECT_OPTIONS,
        **_: Any,
    ) -> Any:
        return _Stream(self, chat_ctx=chat_ctx, tools=tools or [], conn_options=conn_options)


class _Stream(llm.LLMStream):
    async def _run(self) -> None:
        await asyncio.sleep(0.12)
        for word in ["Hello ", "there. ", "How are you?"]:
            self._event_ch.send_nowait(
                ChatChunk(id="c1", delta=ChoiceDelta(role="assistant", content=word))
            )
            await asyncio.sleep(0.02)


class _SilentTTS(tts.TTS):
    def __init__(self) -> None:
        super().__init__(
            capabilities=tts.TTSCapabilities(streaming=False), sample_rate=16000, num_channels=1
        )

    def synthesize(self, text: str, *, conn_options: Any = DEFAULT_API_CONNECT_OPTIONS) -> Any:
        return _Chunked(tts=self, input_text=text, conn_options=conn_options)


class _Chunked(tts.ChunkedStream):
    async def _run(self, output_emitter: Any) -> None:
        output_emitter.initialize(
            request_id="r1", sample_rate=16000, num_channels=1, mime_type="audio/pcm"
        )
        await asyncio.sleep(0.08)
        output_emitter.push(b"\x00\x00" * 3200)
        output_emitter.flush()


class _Sink(lkio.AudioOutput):
    """Plays nothing: playback started on a segment's first frame, finished after its flush."""

    def __init__(self) -> None:
        super().__init__(
            label="sink", capabilities=lkio.AudioOutputCapabilities(pause=False), sample_rate=16000
        )
        self._duration = 0.0
        self._started = False

    async def capture_frame(self, frame: Any) -> None:
        await super().capture_frame(frame)
        if not self._started:
            self._started = True
            self.on_playback_started(created_at=time.time())
        self._duration += frame.duration

    def flush(self) -> None:
        super().flush()
        played, self._duration, self._started = self._duration, 0.0, False
        asyncio.get_running_loop().call_later(
            0.05, lambda: self.on_playback_finished(playback_position=played, interrupted=False)
        )

    def clear_buffer(self) -> None:
        pass


class _ScriptSTT(stt.STT):
    def __init__(self) -> None:
        super().__init__(capabilities=stt.STTCapabilities(streaming=False, interim_results=False))

    async def _recognize_impl(
        self, buffer: Any, *, language: Any = None, conn_options: Any = None
    ) -> Any:
        await asyncio.sleep(0.15)
        return stt.SpeechEvent(
            type=stt.SpeechEventType.FINAL_TRANSCRIPT,
            alternatives=[stt.SpeechData(language="en", text="what is the weather in paris")],
        )


class _PacedInput(lkio.AudioInput):
    """16 kHz mono PCM in 20 ms frames, each due at its place in real time."""

    def __init__(self, pcm: bytes) -> None:
        super().__init__(label="paced")
        self._pcm, self._pos, self._t0 = pcm, 0, 0.0

    async def __anext__(self) -> Any:
        size = 320 * 2
        if not self._t0:
            self._t0 = time.monotonic()
        if self._pos >= len(self._pcm):
            raise StopAsyncIteration
        chunk = self._pcm[self._pos : self._pos + size].ljust(size, b"\0")
        self._pos += size
        await asyncio.sleep(max(0.0, self._t0 + self._pos / 2 / 16000 - time.monotonic()))
        return rtc.AudioFrame(chunk, 16000, 1, 320)


async def _voice(provider: TracerProvider) -> None:
    from livekit.plugins import silero

    with wave.open(str(WAV)) as w:
        speech = w.readframes(w.getnframes())
    pcm = b"\0\0" * 8000 + speech + b"\0\0" * 48000 + speech + b"\0\0" * 48000
    session: AgentSession[Any] = AgentSession(
        vad=silero.VAD.load(),
        stt=_ScriptSTT(),
        llm=_ScriptLLM(),
        tts=_SilentTTS(),
        turn_detection="vad",
    )
    session.input.audio = _PacedInput(pcm)
    session.output.audio = _Sink()
    await session.start(Agent(instructions="be brief"))
    await asyncio.sleep(len(pcm) / 2 / 16000 + 1.0)
    await session.aclose()
    provider.force_flush()


async def _session(provider: TracerProvider) -> None:
    session: AgentSession[Any] = AgentSession(llm=_ScriptLLM(), tts=_SilentTTS())
    session.output.audio = _Sink()
    await session.start(Agent(instructions="be brief"))
    for text in ["hi", "what time is it"]:
        await session.run(user_input=text)
    await session.aclose()
    provider.force_flush()


def _cut(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {k: _cut(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_cut(v) for v in doc]
    return doc[:512] if isinstance(doc, str) else doc


def main() -> None:
    voice = "--voice" in sys.argv[1:]
    out = HERE / ("livekit-voice.otlp.json" if voice else "livekit-text.otlp.json")
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "livekit-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    set_tracer_provider(provider)
    asyncio.run((_voice if voice else _session)(provider))
    doc = MessageToDict(encode_spans(exporter.get_finished_spans()))
    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    out.write_text(json.dumps(_cut(doc), indent=1) + "\n")
    count = sum(len(ss["spans"]) for rs in doc["resourceSpans"] for ss in rs["scopeSpans"])
    print(f"{count} spans -> {out}")


if __name__ == "__main__":
    main()
