"""Record REAL OpenAI Agents SDK voice pipeline spans into ``openai-agents.otlp.json``.

Not a test, and not run by CI (openai-agents is not a voicelat dependency): run it by hand in a
virtualenv with ``openai-agents==0.24.0``, ``openinference-instrumentation-openai-agents==2.6.0``
and ``opentelemetry-sdk``, with voicelat's OpenAI emulator serving on loopback::

    voicelat serve openai --port 0 --profile realistic     # prints `openai BASE_URL`
    python tests/data/traces/record_openai_agents.py BASE_URL

The SDK's own ``VoicePipeline`` (``SingleAgentVoiceWorkflow`` over an ``Agent`` on
``OpenAIChatCompletionsModel``, ``OpenAISTTModel``, ``OpenAITTSModel``, all through one
``AsyncOpenAI`` client on the emulator) runs two single-turn calls on
``fixtures/weather_paris.wav`` (an ``AudioInput``: one trace each). Its spans reach
OpenTelemetry through openinference's ``OpenInferenceTracingProcessor`` (the only trace
processor: nothing goes to OpenAI), subclassed to copy each speech span's
``first_content_at`` onto its OTel span before it ends (openinference drops it: the recipe in
docs/PRODUCTION.md). Written as one OTLP JSON ``ExportTraceServiceRequest`` (hex ids); string
attributes over 512 characters are cut.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import wave
from pathlib import Path
from typing import Any

import numpy as np
from agents import Agent, OpenAIChatCompletionsModel, set_trace_processors
from agents.tracing import SpeechSpanData
from agents.voice import (
    AudioInput,
    OpenAISTTModel,
    OpenAITTSModel,
    SingleAgentVoiceWorkflow,
    VoicePipeline,
)
from google.protobuf.json_format import MessageToDict
from openai import AsyncOpenAI
from openinference.instrumentation.openai_agents._processor import (
    OpenInferenceTracingProcessor,
)
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

HERE = Path(__file__).resolve().parent
WAV = HERE.parents[2] / "fixtures" / "weather_paris.wav"
OUT = HERE / "openai-agents.otlp.json"


class KeepFirstContent(OpenInferenceTracingProcessor):
    """openinference's bridge, keeping the speech span's first audio chunk time."""

    def on_span_end(self, span: Any) -> None:
        otel = self._otel_spans.get(span.span_id)
        data = span.span_data
        if otel is not None and isinstance(data, SpeechSpanData) and data.first_content_at:
            otel.set_attribute("openai_agents.first_content_at", data.first_content_at)
        super().on_span_end(span)


async def _calls(base_url: str) -> None:
    client = AsyncOpenAI(base_url=base_url, api_key="emulator")
    agent = Agent(
        name="assistant",
        instructions="Answer in one short sentence.",
        model=OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client),
    )
    pipeline = VoicePipeline(
        workflow=SingleAgentVoiceWorkflow(agent),
        stt_model=OpenAISTTModel("gpt-4o-transcribe", client),
        tts_model=OpenAITTSModel("gpt-4o-mini-tts", client),
    )
    with wave.open(str(WAV)) as w:
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16)
    for _ in range(2):
        result = await pipeline.run(AudioInput(buffer=pcm, frame_rate=16000))
        async for _event in result.stream():
            pass
        await asyncio.sleep(0.5)


def main() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "openai-voice-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    set_trace_processors([KeepFirstContent(provider.get_tracer("openai-agents"))])
    asyncio.run(_calls(sys.argv[1]))
    provider.force_flush()
    doc = MessageToDict(encode_spans(exporter.get_finished_spans()))
    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
                for attr in span.get("attributes", []):
                    value = attr.get("value", {})
                    if isinstance(value.get("stringValue"), str):
                        value["stringValue"] = value["stringValue"][:512]
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    count = sum(len(ss["spans"]) for rs in doc["resourceSpans"] for ss in rs["scopeSpans"])
    print(f"{count} spans -> {OUT}")


if __name__ == "__main__":
    main()
