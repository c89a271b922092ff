"""An example LiveKit Agents voice agent, hosted without a LiveKit server, for voicelat to profile.

A plain ``livekit-agents`` 1.8 ``AgentSession`` as a team would write it (this file imports
LiveKit and OpenTelemetry, never voicelat): Silero VAD (``livekit-plugins-silero``) with
``turn_detection="vad"``, and LiveKit's OpenAI plugins (``livekit-plugins-openai``) for STT, LLM
and TTS. By default they talk to voicelat's OpenAI emulator (``voicelat serve openai``), so the
agent runs offline and costs nothing; ``--openai-url`` points them at any OpenAI-compatible server.

There is no room: the session's ``input.audio`` and ``output.audio`` are bridged to a websocket,
a fresh ``AgentSession`` per connection (one call). The bridge's wire format (documented in
voicelat's ``voicelat/stages/protocols/livekit.py``, which is its client):

* ``GET /ws?conversation_id=ID`` upgrades; once ``session.start(agent)`` returned the host sends
  ``{"type": "ready", "input_rate": 16000, "output_rate": 24000}``;
* the caller sends binary PCM16LE mono frames at ``input_rate`` (the session's ``AudioInput``
  yields each as an ``rtc.AudioFrame``);
* the host sends each frame the session's ``AudioOutput`` captured, as binary PCM16LE mono at
  ``output_rate``, at most 200 ms ahead of real time (as a track's audio source queues it), and
  text JSON: ``user_state`` (LiveKit's ``user_state_changed``), ``playback_finished`` (the
  segment's real-time playout is over and LiveKit's agent state has left ``speaking``: the
  reply is done), ``clear`` (LiveKit cleared the buffer: an interruption), ``error``.

Playback is reported as LiveKit's RoomIO does: ``on_playback_started`` when the segment's first
frame is handed over (here: written to the websocket), ``on_playback_finished`` when its audio
would have played out in real time. GET ``/health`` answers once the VAD is loaded.

Spans go to ``--otlp-endpoint`` over OTLP/HTTP protobuf (LiveKit's ``set_tracer_provider``,
a ``BatchSpanProcessor`` sending every 50 ms from its own thread); each span of a call carries
``conversation.id`` (the query's ``conversation_id``), so voicelat's trace receiver tells calls
apart. Run: ``python agent.py --port 7880 --openai-url http://127.0.0.1:8401/v1``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import importlib
import importlib.util
import inspect
import json
import logging
import os
import sys
import time
import uuid
from typing import Any, NoReturn

from aiohttp import WSMsgType, web
from livekit import rtc
from livekit.agents import Agent, AgentSession
from livekit.agents.telemetry import set_tracer_provider
from livekit.agents.voice import io as lkio
from livekit.plugins import openai, silero
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

IN_RATE = 16000
#: OpenAI's TTS speaks 24 kHz PCM: the output takes it as it comes (no resampling).
OUT_RATE = 24000
INSTRUCTIONS = "You are a helpful voice assistant. Answer in one short sentence."

#: The call a span belongs to: set by the websocket handler, copied into every task LiveKit
#: starts for the session (asyncio tasks inherit the context they are created in).
_CALL: contextvars.ContextVar[str | None] = contextvars.ContextVar("call", default=None)


class _CallIdProcessor(SpanProcessor):
    """Puts ``conversation.id`` on each span started inside a call (LiveKit sets
    ``gen_ai.conversation.id`` only from a room's sid, and there is no room)."""

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        call = _CALL.get()
        if call is not None:
            span.set_attribute("conversation.id", call)

    def on_end(self, span: ReadableSpan) -> None:
        pass


class WsAudioInput(lkio.AudioInput):
    """The caller's frames from the websocket, one ``rtc.AudioFrame`` each."""

    def __init__(self) -> None:
        super().__init__(label="websocket")
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue()

    def push(self, pcm: bytes | None) -> None:
        self._queue.put_nowait(pcm)

    async def __anext__(self) -> rtc.AudioFrame:
        pcm = await self._queue.get()
        if pcm is None:
            raise StopAsyncIteration
        pcm = pcm[: len(pcm) // 2 * 2]
        return rtc.AudioFrame(pcm, IN_RATE, 1, len(pcm) // 2)


class WsAudioOutput(lkio.AudioOutput):
    """The session's audio to the websocket, paced as a track's audio source paces it.

    LiveKit pushes frames faster than real time; RoomIO's ``rtc.AudioSource`` takes them into a
    short queue and makes ``capture_frame`` wait while it is full. This output does the same
    with a :data:`QUEUE_S` lead over a real-time playout timeline (which restarts at the next
    frame after an underrun, as a device does), and reports the segment finished when that
    timeline has played out.
    """

    #: How far ahead of real time the output may run (a track source's queue).
    QUEUE_S = 0.2

    def __init__(self, ws: web.WebSocketResponse) -> None:
        super().__init__(
            label="websocket",
            capabilities=lkio.AudioOutputCapabilities(pause=False),
            sample_rate=OUT_RATE,
        )
        self._ws = ws
        self._playing = False  # a segment's first frame went out
        self._play_end = 0.0  # monotonic time the audio handed over so far ends playing
        self._pushed = 0.0  # seconds of audio handed over in this segment
        self._finish: asyncio.TimerHandle | None = None
        self._done_msg: dict[str, Any] | None = None
        self._done_timer: asyncio.TimerHandle | None = None

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        await super().capture_frame(frame)
        if self._ws.closed:
            return
        await self._ws.send_bytes(frame.data.tobytes())
        now = time.monotonic()
        if not self._playing:
            # As RoomIO: the segment started playing when its first frame was pushed out.
            self._playing = True
            self.on_playback_started(created_at=time.time())
        self._play_end = max(self._play_end, now) + frame.duration
        self._pushed += frame.duration
        ahead = self._play_end - now - self.QUEUE_S
        if ahead > 0:
            await asyncio.sleep(ahead)

    def flush(self) -> None:
        super().flush()
        remaining = max(0.0, self._play_end - time.monotonic()) if self._playing else 0.0
        loop = asyncio.get_running_loop()
        self._finish = loop.call_later(remaining, self._finished, self._pushed, False)

    def clear_buffer(self) -> None:
        if self._finish is not None:
            self._finish.cancel()
        if not self._playing and self._finish is None:
            return
        unplayed = max(0.0, self._play_end - time.monotonic())
        self._send_text({"type": "clear"})
        self._finished(max(0.0, self._pushed - unplayed), True)

    def _finished(self, played: float, interrupted: bool) -> None:
        self._playing, self._pushed, self._finish = False, 0.0, None
        self.on_playback_finished(playback_position=played, interrupted=interrupted)
        msg = {"type": "playback_finished", "interrupted": interrupted, "position": played}
        if interrupted:
            self._send_text(msg)
            return
        # The caller hangs up on this message: send it once LiveKit has taken the playout as
        # over (its agent state leaves "speaking", see agent_done), or a closing session would
        # interrupt the reply it is still finishing (lk.interrupted on a reply that played).
        self._done_msg = msg
        loop = asyncio.get_running_loop()
        self._done_timer = loop.call_later(1.0, self.agent_done)

    def agent_done(self) -> None:
        """LiveKit's reply is over (or a second passed): the caller may hear so now."""
        msg, self._done_msg = self._done_msg, None
        if self._done_timer is not None:
            self._done_timer.cancel()
            self._done_timer = None
        if msg is not None:
            self._send_text(msg)

    def _send_text(self, msg: dict[str, Any]) -> None:
        if not self._ws.closed:
            task = asyncio.ensure_future(self._ws.send_str(json.dumps(msg)))
            task.add_done_callback(lambda t: t.cancelled() or t.exception())


def _session(args: argparse.Namespace, vad: Any) -> AgentSession[Any]:
    url, key = args.openai_url, args.api_key
    return AgentSession(
        vad=vad,
        # A non-streaming STT: LiveKit runs it on each of the VAD's speech segments.
        stt=openai.STT(model=args.stt_model, base_url=url, api_key=key, language="en"),
        llm=openai.LLM(model=args.llm_model, base_url=url, api_key=key, temperature=0.0),
        tts=openai.TTS(
            model=args.tts_model, voice="alloy", base_url=url, api_key=key, response_format="pcm"
        ),
        turn_handling={
            # LiveKit's VAD endpoints (no turn detector model: it would download weights),
            # with its default endpointing delay (0.5 s after the end of speech).
            "turn_detection": "vad",
            # A plain turn: no reply started before the user's turn is committed.
            "preemptive_generation": {"enabled": False},
        },
    )


def _usage(message: str) -> NoReturn:
    print(f"livekit-agent: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def load_factory(spec: str) -> Any:
    """``MODULE:FUNC`` or ``path/to/file.py:FUNC``: a function returning ``(AgentSession,
    Agent)`` (or an awaitable of them) for each call; the host gives the session its audio."""
    target, _, name = spec.rpartition(":")
    if not target or not name:
        _usage(f"--session {spec!r} is not MODULE:FUNC")
    if target.endswith(".py"):
        if not os.path.isfile(target):
            _usage(f"--session: no file {target}")
        loader = importlib.util.spec_from_file_location("livekit_agent_session", target)
        if loader is None or loader.loader is None:
            _usage(f"--session: cannot load {target}")
        module = importlib.util.module_from_spec(loader)
        loader.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    factory = getattr(module, name, None)
    if not callable(factory):
        _usage(f"--session: {target} has no function {name!r}")
    return factory


def build_app(args: argparse.Namespace) -> web.Application:
    factory = load_factory(args.session) if args.session else None
    vad = None if factory is not None else silero.VAD.load()  # once: sessions share it

    async def health(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "tracing": not args.no_traces})

    async def call(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(max_msg_size=4 * 1024 * 1024)
        await ws.prepare(request)
        _CALL.set(request.query.get("conversation_id") or uuid.uuid4().hex)
        if factory is None:
            session, agent = _session(args, vad), Agent(instructions=INSTRUCTIONS)
        else:  # the team's own session and agent, hosted as they are
            built = factory()
            session, agent = await built if inspect.isawaitable(built) else built
        audio_in, audio_out = WsAudioInput(), WsAudioOutput(ws)
        session.input.audio = audio_in
        session.output.audio = audio_out

        @session.on("user_state_changed")
        def _user_state(ev: Any) -> None:
            audio_out._send_text({"type": "user_state", "state": ev.new_state})

        @session.on("agent_state_changed")
        def _agent_state(ev: Any) -> None:
            if ev.old_state == "speaking":
                audio_out.agent_done()

        try:
            await session.start(agent)
            await ws.send_str(
                json.dumps({"type": "ready", "input_rate": IN_RATE, "output_rate": OUT_RATE})
            )
            async for msg in ws:
                if msg.type == WSMsgType.BINARY:
                    audio_in.push(msg.data)
                elif msg.type == WSMsgType.ERROR:
                    break
        except Exception as exc:  # the caller hears why, then the call ends
            if not ws.closed:
                await ws.send_str(json.dumps({"type": "error", "message": repr(exc)[:200]}))
        finally:
            audio_in.push(None)
            await session.aclose()
            await ws.close()
        return ws

    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_get("/ws", call)
    return app


def _tracing(endpoint: str) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": "livekit-agent"}))
    provider.add_span_processor(_CallIdProcessor())
    # 50 ms: the spans leave as the turn ends, from the processor's thread (not the loop).
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint), schedule_delay_millis=50)
    )
    set_tracer_provider(provider)
    return provider


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="livekit-agent", description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=int(os.environ.get("VOICELAT_AGENT_PORT", 7880)))
    p.add_argument("--openai-url", default="http://127.0.0.1:8401/v1",
                   help="the OpenAI-compatible server (default: voicelat serve openai)")  # fmt: skip
    p.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY", "emulator-key"))
    p.add_argument("--stt-model", default="gpt-4o-mini-transcribe")
    p.add_argument("--llm-model", default="gpt-4o-mini")
    p.add_argument("--tts-model", default="gpt-4o-mini-tts")
    p.add_argument("--otlp-endpoint", default=os.environ.get(
        "VOICELAT_AGENT_OTLP", "http://127.0.0.1:4318/v1/traces"))  # fmt: skip
    p.add_argument("--no-traces", action="store_true")
    p.add_argument("--session", metavar="MODULE:FUNC", default=None,
                   help="host your own agent: FUNC() returns (AgentSession, Agent) per call "
                   "(MODULE: an importable module or a .py file); the example's otherwise")  # fmt: skip
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    provider = None if args.no_traces else _tracing(args.otlp_endpoint)
    try:
        return asyncio.run(_serve(args, build_app(args), provider is not None))
    except KeyboardInterrupt:
        return 0
    finally:
        if provider is not None:
            provider.shutdown()  # what is still queued leaves before the process does


async def _serve(args: argparse.Namespace, app: web.Application, tracing: bool) -> int:
    """Listen, say so once bound, serve until SIGTERM / SIGINT."""
    import signal

    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    try:
        await web.TCPSite(runner, args.host, args.port).start()
    except OSError as exc:
        print(f"livekit-agent: error: cannot listen on {args.host}:{args.port}: {exc.strerror}",
              file=sys.stderr)  # fmt: skip
        await runner.cleanup()
        return 3
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    on = "on" if tracing else "off"
    print(f"livekit-agent ready http://{args.host}:{args.port} tracing={on}", flush=True)
    await stop.wait()
    await runner.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
