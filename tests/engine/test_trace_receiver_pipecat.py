"""Pipecat's OWN tracing module exporting to the receiver: a real Pipecat 1.14 pipeline in a
subprocess (setup_tracing with the OTLP/HTTP exporter, PipelineWorker(enable_tracing=True), the
real traced service base classes; only the model calls are canned: no models needed, a few
seconds). The spans arrive, are placed on voicelat's clock, and split into all four milestones,
with the agent's end of speech where Pipecat's VAD stop frame was stamped.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

from voicelat.core.traces.agent_trace import split_from_spans
from voicelat.engine.trace_receiver import TraceReceiver

PIPELINE = r"""# A real Pipecat 1.14 pipeline with traced stand-in services, tracing to argv[1].
#
# Pipecat's own tracing (setup_tracing, TurnTraceObserver, traced_stt/llm/tts) on a pipeline of
# its real service base classes (SegmentedSTTService, LLMService, TTSService) whose model calls
# are canned, driven by the frames a transport and its VAD would push. Prints VAD_STOP <ns> <ns>:
# voicelat's clock read just before and just after the VAD stop frame was stamped.
import asyncio, os, sys, time
os.environ["OTEL_BSP_SCHEDULE_DELAY"] = "20"
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from pipecat.utils.tracing.setup import setup_tracing
assert setup_tracing("h3-test-bot", exporter=OTLPSpanExporter(endpoint=sys.argv[1]))
from opentelemetry import trace
from pipecat.frames.frames import (
    EndFrame, InputAudioRawFrame, LLMContextFrame, LLMFullResponseEndFrame,
    LLMFullResponseStartFrame, LLMTextFrame, TranscriptionFrame, TTSAudioRawFrame,
    UserStartedSpeakingFrame, UserStoppedSpeakingFrame, VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameProcessor
from pipecat.services.llm_service import LLMService
from pipecat.services.stt_service import SegmentedSTTService
from pipecat.services.tts_service import TTSService
from pipecat.utils.time import time_now_iso8601
from pipecat.utils.tracing.service_decorators import traced_llm, traced_stt, traced_tts
from pipecat.workers.runner import WorkerRunner

class EchoSTT(SegmentedSTTService):
    def can_generate_metrics(self): return True
    @traced_stt
    async def _handle_transcription(self, transcript, is_final, language=None):
        pass
    async def run_stt(self, audio):
        await asyncio.sleep(0.05)
        await self._handle_transcription("hello there", True)
        yield TranscriptionFrame("hello there", "user", time_now_iso8601())

class ToContext(FrameProcessor):
    async def process_frame(self, frame, direction):
        await super().process_frame(frame, direction)
        if isinstance(frame, TranscriptionFrame):
            ctx = LLMContext(messages=[{"role": "user", "content": frame.text}])
            await self.push_frame(LLMContextFrame(context=ctx))
        else:
            await self.push_frame(frame, direction)

class CannedLLM(LLMService):
    def can_generate_metrics(self): return True
    @traced_llm
    async def _process_context(self, context):
        await self.start_ttfb_metrics()
        await asyncio.sleep(0.08)
        await self.stop_ttfb_metrics()
        await self.push_frame(LLMTextFrame("Hello back to you."))
    async def process_frame(self, frame, direction):
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMContextFrame):
            await self.push_frame(LLMFullResponseStartFrame())
            await self._process_context(frame.context)
            await self.push_frame(LLMFullResponseEndFrame())
        else:
            await self.push_frame(frame, direction)

class ToneTTS(TTSService):
    def can_generate_metrics(self): return True
    @traced_tts
    async def run_tts(self, text, context_id):
        await asyncio.sleep(0.03)
        await self.stop_ttfb_metrics()  # as Piper's run_tts does, on its first chunk
        yield TTSAudioRawFrame(b"\x01\x00" * 1600, 16000, 1, context_id=context_id)

async def main():
    pipeline = Pipeline([EchoSTT(), ToContext(), CannedLLM(), ToneTTS(sample_rate=16000, push_start_frame=True, push_stop_frames=True)])
    worker = PipelineWorker(pipeline, params=PipelineParams(enable_metrics=True),
                            enable_tracing=True, conversation_id="h3-conv",
                            additional_span_attributes={"voicelat.vad_stop_secs": 0.2},
                            idle_timeout_secs=None)
    started = asyncio.Event()
    @worker.event_handler("on_pipeline_started")
    async def _s(w, f): started.set()
    async def push():
        await started.wait()
        await worker.queue_frame(VADUserStartedSpeakingFrame(start_secs=0.2))
        await worker.queue_frame(UserStartedSpeakingFrame())
        for _ in range(25):
            await worker.queue_frame(InputAudioRawFrame(audio=b"\x00\x01" * 320, sample_rate=16000, num_channels=1))
            await asyncio.sleep(0.02)
        before = time.perf_counter_ns()  # voicelat's clock, system-wide on Linux
        stop = VADUserStoppedSpeakingFrame(stop_secs=0.2)  # stamped time.time() on creation
        after = time.perf_counter_ns()
        print("VAD_STOP", before, after, flush=True)
        await worker.queue_frame(stop)
        await worker.queue_frame(UserStoppedSpeakingFrame())
        await asyncio.sleep(0.5)
        await worker.queue_frame(EndFrame())
    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    await asyncio.gather(runner.run(), push())
    trace.get_tracer_provider().shutdown()

asyncio.run(main())
"""


def test_pipecat_tracing_exports_a_turn_the_split_reads(tmp_path: Path) -> None:
    bot = tmp_path / "traced_pipeline.py"
    bot.write_text(PIPELINE)
    with TraceReceiver(port=0, mapping="pipecat") as rx:
        start = time.perf_counter_ns()
        run = subprocess.run(
            [sys.executable, str(bot), rx.url], capture_output=True, text=True, timeout=120
        )
        assert run.returncode == 0, run.stderr[-2000:]
        (vad_stop,) = [
            tuple(int(x) for x in line.split()[1:])
            for line in run.stdout.splitlines()
            if line.startswith("VAD_STOP")
        ]
        window = (start, time.perf_counter_ns())
        spans = asyncio.run(rx.spans_for(window, wait_s=5.0))
    assert sorted(s.name for s in spans) == ["conversation", "llm", "stt", "tts", "turn"]
    assert rx.rejected == 0
    split = split_from_spans(spans, window, "pipecat")
    assert split is not None
    assert split.flags == ()
    m = split.milestones
    # The stated stop_secs (additional_span_attributes) puts the endpoint at the VAD's decision:
    # Pipecat's frame timestamp, placed on voicelat's clock through the receiver's anchor.
    # The frame was stamped between the two reads. The span closes a little after the TTFB
    # clock stops (the metrics frame is pushed in between), so the endpoint may come late by
    # that much: 0.7 ms seen on this loaded 2-core machine; never early.
    assert vad_stop[0] - 100_000 <= m["agent_endpoint"] <= vad_stop[1] + 5_000_000
    # The canned STT answers 50 ms after the stop, the LLM's first token 80 ms after it starts,
    # the TTS's first chunk 30 ms after its context opens.
    assert m["agent_endpoint"] + 50_000_000 <= m["agent_stt_final"]
    assert m["agent_stt_final"] <= m["agent_llm_first_token"] <= m["agent_tts_first_byte"]
    llm = next(s for s in spans if s.name == "llm")
    assert 80e6 <= m["agent_llm_first_token"] - llm.start_ns < 500e6
    assert 80 <= split.reported["agent_reported_llm_ttfb_ms"] < 500
    assert 30 <= split.reported["agent_reported_tts_ttfb_ms"] < 500
    assert 250 <= split.reported["agent_reported_stt_ttfb_ms"] < 750  # stop_secs + 50 ms
