"""A real OTLP/HTTP receiver on loopback: decodes what an exporter POSTs with opentelemetry-proto."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


class Sink:
    """What the receiver got, and the status it answers with (200 unless told otherwise)."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.traces: list[ExportTraceServiceRequest] = []
        self.metrics: list[ExportMetricsServiceRequest] = []
        self.requests = 0
        self.url = ""

    def spans(self) -> list[Any]:
        return [
            span
            for req in self.traces
            for rs in req.resource_spans
            for ss in rs.scope_spans
            for span in ss.spans
        ]


def attributes(span: Any) -> dict[str, Any]:
    """A decoded span's attributes as a plain dict (arrays as lists)."""
    out: dict[str, Any] = {}
    for kv in span.attributes:
        v = kv.value
        kind = v.WhichOneof("value")
        if kind == "array_value":
            out[kv.key] = [getattr(x, x.WhichOneof("value")) for x in v.array_value.values]
        else:
            out[kv.key] = getattr(v, kind)
    return out


@contextmanager
def otlp_receiver(status: int = 200) -> Iterator[Sink]:
    sink = Sink(status)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            sink.requests += 1
            if sink.status == 200:
                if self.path == "/v1/traces":
                    sink.traces.append(ExportTraceServiceRequest.FromString(body))
                elif self.path == "/v1/metrics":
                    sink.metrics.append(ExportMetricsServiceRequest.FromString(body))
            payload = ExportTraceServiceResponse().SerializeToString()
            self.send_response(sink.status)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    sink.url = f"http://127.0.0.1:{server.server_port}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield sink
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
