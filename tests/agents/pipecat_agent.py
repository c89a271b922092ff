"""A real Pipecat agent on loopback for the agent-transport tests (no models, no credentials).

Run as ``python -m tests.agents.pipecat_agent --port P`` (from the repository root); the
tests start it with :func:`running_agent`. A FastAPI/uvicorn app whose websocket endpoints
run real Pipecat pipelines: Pipecat's own ``FastAPIWebsocketTransport``, its serializers and
the Silero VAD analyzer bundled with pipecat (``stop_secs`` = ``--stop-ms``), then
:class:`CannedReply`, which answers each user turn (``VADUserStoppedSpeakingFrame``) with a
known clip: ``--lead-ms`` of digital silence then ``--tone-ms`` of a 440 Hz tone, at 16 kHz
(Pipecat's serializer resamples it to what its transport carries), as ``TTSAudioRawFrame``s
of 20 ms. So a turn's timing is known: the reply's first byte comes ``stop_ms`` (plus the
VAD's analysis window) after the user's speech ends, its first audible sample ``lead_ms``
after that.

Endpoints:

* ``/twilio``: Twilio Media Streams (``parse_telephony_websocket`` + ``TwilioFrameSerializer``
  with ``auto_hang_up=False``: no Twilio account is involved).
* ``/twilio-mute``: the same call, never answering (VAD only).
* ``/protobuf``: Pipecat's protobuf serializer (the ``pipecat-ws`` transport), greeting the
  caller as the call opens: what a Twilio client sees when pointed at the wrong transport.
* ``/refuse``: closes before accepting (the upgrade is refused with HTTP 403).

H4's transports (pipecat-ws, webrtc) can reuse :func:`canned_pipeline` and :class:`CannedReply`
with their own transport.
"""

# No ``from __future__ import annotations``: FastAPI reads the endpoints' ``WebSocket``
# annotations at run time, and they are imported inside build_app.
import argparse
import asyncio
import contextlib
import math
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RATE = 16000


def canned_clip(lead_ms: int, tone_ms: int, rate: int = RATE) -> bytes:
    """``lead_ms`` of zeros then a 440 Hz tone at about -12 dBFS, PCM16 mono."""
    lead = bytes(rate * lead_ms // 1000 * 2)
    n = rate * tone_ms // 1000
    tone = b"".join(
        int(8000 * math.sin(2 * math.pi * 440 * i / rate)).to_bytes(2, "little", signed=True)
        for i in range(n)
    )
    return lead + tone


def make_processor(clip: bytes, *, on_start: bool = False) -> Any:
    """A :class:`CannedReply` (built here so importing this module needs no pipecat)."""
    from pipecat.frames.frames import StartFrame, TTSAudioRawFrame, VADUserStoppedSpeakingFrame
    from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

    class CannedReply(FrameProcessor):  # type: ignore[misc]
        """Answers each user turn (or the call's start) with ``clip`` in 20 ms frames."""

        async def process_frame(self, frame: Any, direction: FrameDirection) -> None:
            await super().process_frame(frame, direction)
            await self.push_frame(frame, direction)
            if isinstance(frame, VADUserStoppedSpeakingFrame) and not on_start:
                await self._speak()
            elif isinstance(frame, StartFrame) and on_start:
                self.create_task(self._greet())

        async def _greet(self) -> None:
            await asyncio.sleep(0.05)
            await self._speak()

        async def _speak(self) -> None:
            step = RATE * 20 // 1000 * 2
            for i in range(0, len(clip), step):
                await self.push_frame(TTSAudioRawFrame(clip[i : i + step], RATE, 1))

    return CannedReply()


def canned_pipeline(transport: Any, clip: bytes, *, stop_ms: int, answer: bool = True) -> Any:
    """input -> Silero VAD -> canned reply -> output, as a PipelineTask at 16 kHz."""
    from pipecat.audio.vad.silero import SileroVADAnalyzer
    from pipecat.audio.vad.vad_analyzer import VADParams
    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.pipeline.task import PipelineParams, PipelineTask
    from pipecat.processors.audio.vad_processor import VADProcessor

    vad = VADProcessor(vad_analyzer=SileroVADAnalyzer(params=VADParams(stop_secs=stop_ms / 1000)))
    steps = [transport.input(), vad]
    if answer:
        steps.append(make_processor(clip))
    steps.append(transport.output())
    return PipelineTask(
        Pipeline(steps),
        params=PipelineParams(audio_in_sample_rate=RATE, audio_out_sample_rate=RATE),
    )


def build_app(clip: bytes, stop_ms: int) -> Any:
    """The FastAPI app with the endpoints of the module docstring."""
    from fastapi import FastAPI, WebSocket
    from pipecat.pipeline.runner import PipelineRunner
    from pipecat.runner.utils import parse_telephony_websocket
    from pipecat.serializers.protobuf import ProtobufFrameSerializer
    from pipecat.serializers.twilio import TwilioFrameSerializer
    from pipecat.transports.websocket.fastapi import (
        FastAPIWebsocketParams,
        FastAPIWebsocketTransport,
    )

    app = FastAPI()

    def transport(ws: WebSocket, serializer: Any) -> Any:
        params = FastAPIWebsocketParams(
            audio_in_enabled=True, audio_out_enabled=True, serializer=serializer
        )
        return FastAPIWebsocketTransport(websocket=ws, params=params)

    async def run(task: Any) -> None:
        await PipelineRunner(handle_sigint=False).run(task)

    async def twilio_call(ws: WebSocket, *, answer: bool) -> None:
        await ws.accept()
        _, call = await parse_telephony_websocket(ws)
        serializer = TwilioFrameSerializer(
            stream_sid=call["stream_id"],
            call_sid=call["call_id"],
            params=TwilioFrameSerializer.InputParams(auto_hang_up=False),
        )
        await run(canned_pipeline(transport(ws, serializer), clip, stop_ms=stop_ms, answer=answer))

    @app.websocket("/twilio")
    async def twilio(ws: WebSocket) -> None:
        await twilio_call(ws, answer=True)

    @app.websocket("/twilio-mute")
    async def twilio_mute(ws: WebSocket) -> None:
        await twilio_call(ws, answer=False)

    @app.websocket("/protobuf")
    async def protobuf(ws: WebSocket) -> None:
        from pipecat.pipeline.pipeline import Pipeline
        from pipecat.pipeline.task import PipelineParams, PipelineTask

        await ws.accept()
        t = transport(ws, ProtobufFrameSerializer())
        steps = [t.input(), make_processor(clip, on_start=True), t.output()]
        params = PipelineParams(audio_in_sample_rate=RATE, audio_out_sample_rate=RATE)
        await run(PipelineTask(Pipeline(steps), params=params))

    @app.websocket("/refuse")
    async def refuse(ws: WebSocket) -> None:
        await ws.close(code=1008)  # before accept: the upgrade is answered with HTTP 403

    return app


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def running_agent(
    port: int, *, stop_ms: int = 300, lead_ms: int = 100, tone_ms: int = 600
) -> Iterator[str]:
    """The agent in a subprocess on 127.0.0.1:``port``; yields ``ws://127.0.0.1:port``."""
    cmd = [
        sys.executable, "-m", "tests.agents.pipecat_agent", "--port", str(port),
        "--stop-ms", str(stop_ms), "--lead-ms", str(lead_ms), "--tone-ms", str(tone_ms),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 60
        while not _port_open(port):
            if proc.poll() is not None:
                err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                raise RuntimeError(f"the Pipecat test agent exited: {err[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError("the Pipecat test agent did not listen within 60 s")
            time.sleep(0.1)
        yield f"ws://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(3)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--stop-ms", type=int, default=300)
    ap.add_argument("--lead-ms", type=int, default=100)
    ap.add_argument("--tone-ms", type=int, default=600)
    args = ap.parse_args()
    import uvicorn
    from loguru import logger

    logger.remove()
    logger.add(sys.stderr, level="WARNING")
    app = build_app(canned_clip(args.lead_ms, args.tone_ms), args.stop_ms)
    uvicorn.run(
        app, host="127.0.0.1", port=args.port, log_level="warning", timeout_graceful_shutdown=1
    )


if __name__ == "__main__":
    main()
