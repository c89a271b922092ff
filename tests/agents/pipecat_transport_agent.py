"""A real Pipecat bot without models behind pipecat-ws, SmallWebRTC and Twilio Media Streams, for
the transport tests, bench/agent_transport.py and bench/bargein_bot.py
(tests/agents/pipecat_agent.py is the twilio agent tests' simpler twin; the clip is its
:func:`~tests.agents.pipecat_agent.canned_clip`).

Run from the repository root (a subprocess of the test: its own event loop, as a deployed bot
has)::

    python -m tests.agents.pipecat_transport_agent ws --port 9251
    python -m tests.agents.pipecat_transport_agent webrtc --port 9252
    python -m tests.agents.pipecat_transport_agent twilio --port 9253   # ws://.../ws

The pipeline is Pipecat's own: its transport (``SingleClientWebsocketServerTransport`` with
``ProtobufFrameSerializer``, or ``SmallWebRTCTransport`` behind a FastAPI ``POST /api/offer``
using ``SmallWebRTCRequestHandler``, as pipecat's runner does, or ``FastAPIWebsocketTransport``
with ``TwilioFrameSerializer`` behind ``parse_telephony_websocket`` on ``/ws``, as its runner's
telephony route does, ``auto_hang_up`` off: no Twilio account), the Silero VAD bundled with
pipecat (``VADProcessor``), and :class:`CannedReply`, which answers each user turn (the VAD's
stop) with a canned clip after ``--delay-ms``: ``--lead-ms`` of digital silence, then a
``--tone-ms`` 440 Hz tone, at the output transport's rate (``--out-rate``). ``--mode mute``
never answers. RTVI stays on (pipecat's default). ``--interruptible``: the user's speech
starting during a reply (the VAD's start) interrupts it, as Pipecat does it
(``broadcast_interruption``: the output transport drops its queued audio and the serializer
tells the client: the protobuf interruption frame, or Twilio's ``clear``); without it the bot
talks over the user to the end of its clip.

It prints ``READY`` once it listens, then one JSON line per event with ``time.monotonic_ns()``
(the same clock as voicelat's on one host): ``vad_stop`` (the VAD decided), ``reply`` (the clip
was pushed), ``write`` (the output transport took the first chunk of a reply: after pipecat's
resampling and chunking), ``track`` (WebRTC only: the outgoing track handed the first chunk
with sound to aiortc's encoder). bench/agent_transport.py splits the transport remainder with
them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from typing import Any

os.environ.setdefault("LOGURU_LEVEL", "WARNING")

from loguru import logger
from pipecat.audio.vad.silero import SileroVADAnalyzer
from pipecat.audio.vad.vad_analyzer import VADParams
from pipecat.frames.frames import (
    Frame,
    OutputAudioRawFrame,
    TTSAudioRawFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.audio.vad_processor import VADProcessor
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.workers.runner import WorkerRunner

from tests.agents.pipecat_agent import canned_clip

logger.remove()
logger.add(sys.stderr, level="WARNING")


def log(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, "t_ns": time.monotonic_ns(), **fields}), flush=True)


class CannedReply(FrameProcessor):
    """Answers every VAD stop with the canned clip (after ``delay_ms``), unless muted.

    Unlike the twilio twin's, it frames the reply as a TTS service does (started, audio,
    stopped) and logs its timing: the websocket server transport keeps its pipeline across
    calls, and without ``TTSStoppedFrame`` the last partial chunk of one reply would open the
    next one."""

    def __init__(
        self, clip: bytes, rate: int, delay_ms: int, mute: bool, interruptible: bool = False
    ) -> None:
        super().__init__()
        self.clip, self.rate, self.delay_s, self.mute = clip, rate, delay_ms / 1000, mute
        self.interruptible = interruptible
        self.replying_until = 0.0  # monotonic s: the clip's end, once pushed

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        await self.push_frame(frame, direction)
        if isinstance(frame, VADUserStartedSpeakingFrame):
            if self.interruptible and time.monotonic() < self.replying_until:
                log("interrupt")
                self.replying_until = 0.0
                await self.broadcast_interruption()
            return
        if isinstance(frame, VADUserStoppedSpeakingFrame):
            log("vad_stop")
            if self.mute:
                return
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            # As a TTS service does: started, audio, stopped (the stop flushes the output
            # transport's last partial chunk; without it the tail would open the next reply).
            context = f"reply-{time.monotonic_ns()}"
            log("reply", samples=len(self.clip) // 2)
            self.replying_until = time.monotonic() + len(self.clip) / 2 / self.rate + 0.5
            await self.push_frame(TTSStartedFrame(context_id=context))
            await self.push_frame(TTSAudioRawFrame(self.clip, self.rate, 1, context_id=context))
            await self.push_frame(TTSStoppedFrame(context_id=context))


def _log_writes(output: Any) -> None:
    """Log when the output transport takes the first chunk with sound of each reply."""
    original = output.write_audio_frame
    last = {"t": 0.0}

    async def write_audio_frame(frame: OutputAudioRawFrame) -> bool:
        now = time.monotonic()
        if any(frame.audio):
            if now - last["t"] > 0.2:  # the first chunk with sound after a gap: a new reply
                log("write", rate=frame.sample_rate, bytes=len(frame.audio))
            last["t"] = now
        return bool(await original(frame))

    output.write_audio_frame = write_audio_frame


def _greeter(transport: Any, worker: PipelineWorker, args: argparse.Namespace) -> None:
    """``--greet``: the bot speaks first, the canned clip as soon as a caller connects (logged
    ``greet`` when it goes into the pipeline)."""
    if not args.greet:
        return
    rate = args.clip_rate or args.out_rate
    clip = canned_clip(args.lead_ms, args.tone_ms, rate)

    @transport.event_handler("on_client_connected")
    async def greet(_transport: Any, _client: Any) -> None:
        context = f"greeting-{time.monotonic_ns()}"
        log("greet", samples=len(clip) // 2)
        await worker.queue_frames(
            [
                TTSStartedFrame(context_id=context),
                TTSAudioRawFrame(clip, rate, 1, context_id=context),
                TTSStoppedFrame(context_id=context),
            ]
        )


def _pipeline(transport: Any, args: argparse.Namespace) -> PipelineWorker:
    vad = VADProcessor(
        vad_analyzer=SileroVADAnalyzer(params=VADParams(stop_secs=args.stop_ms / 1000))
    )
    rate = args.clip_rate or args.out_rate  # another rate than the transport's: pipecat resamples
    clip = canned_clip(args.lead_ms, args.tone_ms, rate)
    reply = CannedReply(clip, rate, args.delay_ms, args.mode == "mute", args.interruptible)
    _log_writes(transport.output())
    pipeline = Pipeline([transport.input(), vad, reply, transport.output()])
    worker = PipelineWorker(
        pipeline,
        params=PipelineParams(
            audio_in_sample_rate=args.in_rate, audio_out_sample_rate=args.out_rate
        ),
        idle_timeout_secs=None,
        enable_turn_tracking=False,
    )
    _greeter(transport, worker, args)
    return worker


def _transport_params(cls: Any, args: argparse.Namespace, **extra: Any) -> Any:
    return cls(
        audio_in_enabled=True,
        audio_out_enabled=True,
        audio_in_sample_rate=args.in_rate,
        audio_out_sample_rate=args.out_rate,
        **extra,
    )


async def run_ws(args: argparse.Namespace) -> None:
    from pipecat.serializers.protobuf import ProtobufFrameSerializer
    from pipecat.transports.websocket.server import (
        SingleClientWebsocketServerParams,
        SingleClientWebsocketServerTransport,
    )

    origins = [args.allowed_origin] if args.allowed_origin else []
    params = _transport_params(
        SingleClientWebsocketServerParams,
        args,
        serializer=ProtobufFrameSerializer(),
        allowed_origins=origins,
    )
    transport = SingleClientWebsocketServerTransport(params, host="127.0.0.1", port=args.port)

    @transport.event_handler("on_websocket_ready")
    async def ready(_transport: Any) -> None:
        print("READY", flush=True)

    runner = WorkerRunner(handle_sigint=True)
    await runner.add_workers(_pipeline(transport, args))
    await runner.run()


async def run_webrtc(args: argparse.Namespace) -> None:
    import uvicorn
    from fastapi import FastAPI, HTTPException
    from pipecat.transports.base_transport import TransportParams
    from pipecat.transports.smallwebrtc.request_handler import (
        SmallWebRTCRequest,
        SmallWebRTCRequestHandler,
    )
    from pipecat.transports.smallwebrtc.transport import RawAudioTrack, SmallWebRTCTransport

    _log_track(RawAudioTrack)
    app = FastAPI()
    handler = SmallWebRTCRequestHandler()
    tasks: set[asyncio.Task[None]] = set()

    async def start(connection: Any) -> None:
        if args.jitter_packets != 4:  # the bot's own receiver (the inbound leg), as voicelat's
            from aiortc.jitterbuffer import JitterBuffer

            for transceiver in connection.pc.getTransceivers():
                if transceiver.kind == "audio":
                    transceiver.receiver._RTCRtpReceiver__jitter_buffer = JitterBuffer(
                        capacity=16, prefetch=args.jitter_packets
                    )
        transport = SmallWebRTCTransport(connection, _transport_params(TransportParams, args))
        runner = WorkerRunner(handle_sigint=False)
        await runner.add_workers(_pipeline(transport, args))
        task = asyncio.create_task(runner.run())
        tasks.add(task)
        task.add_done_callback(tasks.discard)

        @transport.event_handler("on_client_disconnected")
        async def gone(_transport: Any, _client: Any) -> None:
            task.cancel()

    @app.post("/api/offer")
    async def offer(body: dict[str, Any]) -> Any:
        if args.mode == "refuse":
            raise HTTPException(status_code=403, detail="offers refused by this test bot")
        request = SmallWebRTCRequest.from_dict(body)
        return await handler.handle_web_request(request, start)

    config = uvicorn.Config(app, host="127.0.0.1", port=args.port, log_level="warning")
    server = uvicorn.Server(config)
    started = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.02)
    print("READY", flush=True)
    await started


async def run_twilio(args: argparse.Namespace) -> None:
    """One Media Streams call per websocket on ``/ws``: Twilio's ``connected`` and ``start``
    read by Pipecat's own ``parse_telephony_websocket``, then its Twilio serializer (8 kHz
    mu-law both ways, resampled to the pipeline's rates; an interruption goes out as
    ``clear``)."""
    import uvicorn
    from fastapi import FastAPI
    from pipecat.runner.utils import parse_telephony_websocket
    from pipecat.serializers.twilio import TwilioFrameSerializer
    from pipecat.transports.websocket.fastapi import (
        FastAPIWebsocketParams,
        FastAPIWebsocketTransport,
    )
    from starlette.routing import WebSocketRoute
    from starlette.websockets import WebSocket

    app = FastAPI()

    async def call(ws: WebSocket) -> None:
        await ws.accept()
        _, data = await parse_telephony_websocket(ws)
        serializer = TwilioFrameSerializer(
            stream_sid=data["stream_id"],
            call_sid=data["call_id"],
            params=TwilioFrameSerializer.InputParams(auto_hang_up=False),
        )
        params = _transport_params(FastAPIWebsocketParams, args, serializer=serializer)
        transport = FastAPIWebsocketTransport(websocket=ws, params=params)
        runner = WorkerRunner(handle_sigint=False)
        await runner.add_workers(_pipeline(transport, args))
        await runner.run()

    # Starlette's own route: it hands the socket over without reading annotations (this
    # module's are strings, which FastAPI would resolve at run time).
    app.router.routes.append(WebSocketRoute("/ws", call))
    config = uvicorn.Config(app, host="127.0.0.1", port=args.port, log_level="warning")
    server = uvicorn.Server(config)
    started = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.02)
    print("READY", flush=True)
    await started


def _log_track(track_cls: Any) -> None:
    """Log when the outgoing track hands the first frame with sound of a reply to aiortc."""
    original = track_cls.recv

    async def recv(self: Any) -> Any:
        frame = await original(self)
        if frame.to_ndarray().any():
            now = time.monotonic()
            if now - getattr(self, "_voicelat_last", 0.0) > 0.2:
                log("track", rate=frame.sample_rate)
            self._voicelat_last = now
        return frame

    track_cls.recv = recv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("transport", choices=("ws", "webrtc", "twilio"))
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--in-rate", type=int, default=16000)
    parser.add_argument("--out-rate", type=int, default=24000)
    parser.add_argument("--jitter-packets", type=int, default=4, help="webrtc: the bot's")
    parser.add_argument("--clip-rate", type=int, default=0, help="the reply's rate (default out)")
    parser.add_argument("--stop-ms", type=int, default=300, help="the VAD's stop_secs, in ms")
    parser.add_argument("--delay-ms", type=int, default=0, help="think time before the reply")
    parser.add_argument("--lead-ms", type=int, default=30)
    parser.add_argument("--tone-ms", type=int, default=400)
    parser.add_argument("--mode", choices=("answer", "mute", "refuse"), default="answer")
    parser.add_argument("--allowed-origin", default="", help="ws: refuse other Origins (403)")
    parser.add_argument("--greet", action="store_true", help="speak the clip first on connect")
    parser.add_argument(
        "--interruptible", action="store_true", help="the user's speech interrupts a reply"
    )
    args = parser.parse_args()
    run = {"ws": run_ws, "webrtc": run_webrtc, "twilio": run_twilio}[args.transport]
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
