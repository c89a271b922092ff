"""A tiny OTLP/HTTP trace collector: decode each POST /v1/traces and dump the spans as JSON.

Used to record ``sample-trace.json`` (what the bot really emits); not part of voicelat::

    python otlp_dump.py --port 9151 --out sample-trace.json   # Ctrl-C or SIGTERM writes the file

Each span is written as {name, trace_id, span_id, parent_span_id, start_unix_nano,
end_unix_nano, duration_ms, attributes, resource, scope}, in arrival order.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    if kind == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, kind) if kind else None


def spans_of(request: ExportTraceServiceRequest) -> list[dict[str, Any]]:
    """Flatten one export request into plain span dicts."""
    out: list[dict[str, Any]] = []
    for rs in request.resource_spans:
        resource = {kv.key: _value(kv.value) for kv in rs.resource.attributes}
        for ss in rs.scope_spans:
            for span in ss.spans:
                out.append(
                    {
                        "name": span.name,
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent_span_id": span.parent_span_id.hex() or None,
                        "kind": int(span.kind),
                        "start_unix_nano": span.start_time_unix_nano,
                        "end_unix_nano": span.end_time_unix_nano,
                        "duration_ms": round(
                            (span.end_time_unix_nano - span.start_time_unix_nano) / 1e6, 3
                        ),
                        "attributes": {kv.key: _value(kv.value) for kv in span.attributes},
                        "status": MessageToDict(span.status),
                        "scope": ss.scope.name,
                        "resource": resource,
                    }
                )
    return out


class Collector:
    """Collects spans from OTLP/HTTP protobuf posts, in a thread of its own."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.spans: list[dict[str, Any]] = []
        self.posts = 0
        self._lock = threading.Lock()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                request = ExportTraceServiceRequest()
                try:
                    request.ParseFromString(body)
                except Exception:
                    self.send_response(400)
                    self.end_headers()
                    return
                with collector._lock:
                    collector.posts += 1
                    collector.spans.extend(spans_of(request))
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1/traces"

    def start(self) -> Collector:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.spans)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--port", type=int, default=4318)
    p.add_argument("--out", default="sample-trace.json")
    args = p.parse_args()
    collector = Collector(port=args.port).start()
    print(f"collecting at {collector.url}; Ctrl-C or SIGTERM writes {args.out}", flush=True)
    stop = threading.Event()
    # SIGTERM too: a background job started by a script has SIGINT ignored.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    collector.stop()
    with open(args.out, "w") as f:
        json.dump(collector.snapshot(), f, indent=1)


if __name__ == "__main__":
    main()
