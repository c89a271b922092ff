"""Record the example Pipecat bot's REAL spans into the fixture files beside this script.

Not a test: run it by hand when the bot or Pipecat changes (a few minutes on 2 cores)::

    PYTHONPATH=$PWD python tests/data/traces/record.py

It starts the embedded stack and the example bot (examples/pipecat-bot/bot.py through
:class:`voicelat.stack.agent.PipecatBot`) exporting to a raw OTLP/HTTP collector on loopback
that keeps every request body as the bot's exporter sent it (protobuf), then places one call
per transport with ``examples/pipecat-bot/call.py``: two fixtures in one call, a long silence
between them, so each call is a conversation of two turns. The bodies of each call are written
in one of the formats ``voicelat import`` reads, re-encoded byte for byte or through
opentelemetry-proto's own JSON mapping (the spans are the bot's; only the container differs):

* ``pipecat-twilio.otlp.pb``: one ``ExportTraceServiceRequest`` (the bodies merged);
* ``pipecat-ws.collector.pb``: the collector file exporter's ``format: proto`` (each body after
  its 4-byte big-endian length);
* ``pipecat-webrtc.otlp.jsonl``: OTLP JSON lines (the collector's ``format: json``), hex ids.

String attributes over 512 characters (the LLM span's whole context) are cut to keep the files
small; nothing the mapping reads is that long. ``recorded.json`` says when and how.
"""

from __future__ import annotations

import asyncio
import base64
import importlib.util
import json
import socket
import sys
import tempfile
import threading
import time
import wave
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from voicelat.stack.agent import AgentConfig, PipecatBot
from voicelat.stack.config import StackConfig

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
FIXTURES = [ROOT / "fixtures" / "weather_paris.wav", ROOT / "fixtures" / "rain_tomorrow.wav"]
GAP_S = 9.0  # silence between the two utterances: the first reply is over by then
LISTEN_S = 10.0
FLUSH_S = 4.0  # after a call: the turn and conversation spans end at hang-up, then export
MAX_STRING = 512


class _Collector(ThreadingHTTPServer):
    bodies: list[bytes]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        server = self.server
        assert isinstance(server, _Collector)
        server.bodies.append(body)
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: Any) -> None:
        return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _two_turn_wav(out: Path) -> Path:
    """The fixtures one after another, GAP_S of silence between them (16 kHz mono)."""
    frames = b""
    rate = 16000
    for i, path in enumerate(FIXTURES):
        with wave.open(str(path), "rb") as w:
            assert w.getframerate() == rate and w.getnchannels() == 1
            frames += w.readframes(w.getnframes())
        if i < len(FIXTURES) - 1:
            frames += b"\x00\x00" * int(GAP_S * rate)
    with wave.open(str(out), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(frames)
    return out


def _trimmed(body: bytes) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                for kv in span.attributes:
                    if kv.value.WhichOneof("value") == "string_value":
                        kv.value.string_value = kv.value.string_value[:MAX_STRING]
    return request


def _hex_ids(doc: dict[str, Any]) -> dict[str, Any]:
    """protobuf's JSON mapping writes bytes as base64; OTLP JSON wants hex ids."""
    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if span.get(key):
                        span[key] = base64.b64decode(span[key]).hex()
    return doc


def _write(transport: str, bodies: list[bytes]) -> str:
    requests = [_trimmed(b) for b in bodies]
    if transport == "twilio":
        merged = ExportTraceServiceRequest()
        for r in requests:
            merged.MergeFrom(r)
        path = HERE / "pipecat-twilio.otlp.pb"
        path.write_bytes(merged.SerializeToString())
    elif transport == "pipecat-ws":
        path = HERE / "pipecat-ws.collector.pb"
        chunks = [r.SerializeToString() for r in requests]
        path.write_bytes(b"".join(len(c).to_bytes(4, "big") + c for c in chunks))
    else:
        path = HERE / "pipecat-webrtc.otlp.jsonl"
        lines = [json.dumps(_hex_ids(MessageToDict(r)), separators=(",", ":")) for r in requests]
        path.write_text("\n".join(lines) + "\n")
    return path.name


def _load_call() -> Any:
    path = ROOT / "examples" / "pipecat-bot" / "call.py"
    spec = importlib.util.spec_from_file_location("pipecat_bot_call", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    collector = _Collector(("127.0.0.1", _free_port()), _Handler)
    collector.bodies = []
    threading.Thread(target=collector.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{collector.server_address[1]}/v1/traces"
    call = _load_call()
    notes: dict[str, Any] = {"recorded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    with tempfile.TemporaryDirectory() as tmp:
        wav = _two_turn_wav(Path(tmp) / "two_turns.wav")
        ports = [_free_port() for _ in range(4)]
        stack = StackConfig(
            stt_port=ports[0],
            tts_port=ports[1],
            llm_port=ports[2],
            state_dir=Path(tmp) / "state",
            llm_extra_args=("--interrupt_requests", "false"),
        )
        with PipecatBot(AgentConfig(stack=stack, port=ports[3], otlp_endpoint=url)) as bot:
            status = bot.up()
            for transport in ("twilio", "pipecat-ws", "webrtc"):
                target = status.urls[transport]
                if transport == "pipecat-ws":
                    target += "?conversation_id=vl-record-pipecat-ws"
                start = len(collector.bodies)
                result = asyncio.run(
                    call.CALLS[transport](target, str(wav), listen_s=LISTEN_S, idle_s=None)
                )
                time.sleep(FLUSH_S)
                name = _write(transport, collector.bodies[start:])
                notes[name] = {
                    "transport": transport,
                    "requests": len(collector.bodies) - start,
                    "caller_heard_reply_s": round(result.reply_s, 2),
                }
                print(transport, notes[name], flush=True)
    collector.shutdown()
    notes["how"] = (
        "tests/data/traces/record.py: the example Pipecat bot (pipecat-ai 1.14, Whisper tiny.en, "
        "gemma 270m on llama.cpp, piper joe, Silero VAD stop_secs stated) on loopback, one call "
        f"per transport playing {', '.join(p.name for p in FIXTURES)} with {GAP_S} s between"
    )
    (HERE / "recorded.json").write_text(json.dumps(notes, indent=1) + "\n")


if __name__ == "__main__":
    main()
