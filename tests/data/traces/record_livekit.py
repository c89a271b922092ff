"""Record REAL LiveKit Agents spans into ``livekit-text.otlp.json`` beside this script.

Not a test, and not run by CI (livekit-agents is not a voicelat dependency): run it by hand in
a virtualenv with ``livekit-agents==1.8.9`` and ``opentelemetry-sdk`` when LiveKit changes::

    python tests/data/traces/record_livekit.py

A real ``AgentSession`` runs with no room and no LiveKit server (``session.start(agent)``),
its spans through ``livekit.agents.telemetry.set_tracer_provider`` into an in-memory exporter,
then written as one OTLP JSON ``ExportTraceServiceRequest`` (hex ids) by opentelemetry's own
encoder. Its LLM is scripted (a fixed reply streamed after 120 ms), its TTS a silent one
(80 ms to the first byte, through LiveKit's own ChunkedStream and StreamAdapter), its audio
output a sink that reports playback started on the first frame it is given, as LiveKit's
RoomIO does when it pushes the frame to the track. Two text turns through
``session.run(user_input=...)``: LiveKit's spans of a text turn have no ``user_turn`` (no
VAD, no STT); a voice turn's ``user_turn`` / ``eou_detection`` spans are not recorded here.
String attributes over 512 characters are cut.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict
from livekit.agents import Agent, AgentSession, llm, tts
from livekit.agents.llm import ChatChunk, ChoiceDelta
from livekit.agents.telemetry import set_tracer_provider
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS
from livekit.agents.voice import io as lkio
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

OUT = Path(__file__).resolve().parent / "livekit-text.otlp.json"


class _ScriptLLM(llm.LLM):
    def chat(self, *, chat_ctx: Any, tools: Any = None, conn_options: Any = DEFAULT_API_CONNECT_OPTIONS, **_: Any) -> Any:
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
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "livekit-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    set_tracer_provider(provider)
    asyncio.run(_session(provider))
    doc = MessageToDict(encode_spans(exporter.get_finished_spans()))
    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    OUT.write_text(json.dumps(_cut(doc), indent=1) + "\n")
    print(f"{sum(len(ss['spans']) for rs in doc['resourceSpans'] for ss in rs['scopeSpans'])} spans -> {OUT}")


if __name__ == "__main__":
    main()
