"""What the agent-trace receiver costs and how well it places spans (docs/AGENT-TRACES.md).

    python bench/trace_receiver.py [--spans 200] [--batch 512] [--batches 20] [--seconds 3]
        [--turn-batch 16] [--rate 20]

1. placement: real SDK spans (explicit times read paired with voicelat's clock) exported by the
   OpenTelemetry SDK's OTLP/HTTP exporter to the receiver on loopback; |placed - stamped| (us);
2. decode: decoding + placing one exporter batch of ``--batch`` Pipecat-like spans (the work
   the receiver's thread does per request, ms), median of ``--batches``;
3. loop lag: an asyncio loop waking every 5 ms for ``--seconds``: quiet; while a client posts
   ``--rate`` batches of ``--turn-batch`` spans a second (already more than an agent sends: a
   Pipecat turn is ~6 spans); and while it floods ``--batch``-span batches back to back (the
   GIL is shared: the receiver's thread can delay the loop; this is the worst case).
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import os
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from voicelat.engine.trace_receiver import (
    Placement,
    TraceReceiver,
    convert,
    decode_request,
    take_anchor,
)


def placement_errors_ns(rx: TraceReceiver, n: int) -> list[float]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=rx.url)))
    tracer = provider.get_tracer("bench")
    stamps: dict[str, int] = {}
    for i in range(n):
        anchor = take_anchor(3)
        stamps[f"s{i}"] = anchor.mono_ns
        tracer.start_span(f"s{i}", start_time=anchor.wall_ns).end(end_time=anchor.wall_ns + 1000)
    provider.shutdown()
    spans = {s.name: s for s in rx.spans()}
    return [float(abs(spans[name].start_ns - mono)) for name, mono in stamps.items()]


def pipecat_like_batch(size: int) -> bytes:
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    now = time.time_ns()
    for i in range(size):
        span = spans.add(
            name=("stt", "llm", "tts")[i % 3],
            trace_id=os.urandom(16),
            span_id=os.urandom(8),
            parent_span_id=os.urandom(8),
            start_time_unix_nano=now + i,
            end_time_unix_nano=now + i + 10**8,
        )
        for key, value in (("gen_ai.operation.name", "chat"), ("text", "x" * 60)):
            kv = span.attributes.add()
            kv.key, kv.value.string_value = key, value
        kv = span.attributes.add()
        kv.key, kv.value.double_value = "metrics.ttfb", 0.123
    body: bytes = request.SerializeToString()
    return body


def decode_ms(body: bytes, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t = time.perf_counter_ns()
        request = decode_request(body, "application/x-protobuf", "")
        convert(request, Placement(take_anchor(), 0))
        out.append((time.perf_counter_ns() - t) / 1e6)
    return out


async def _lags(seconds: float) -> list[float]:
    lags = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t = time.perf_counter()
        await asyncio.sleep(0.005)
        lags.append((time.perf_counter() - t - 0.005) * 1e3)
    return lags


def loop_lag_ms(rx: TraceReceiver, body: bytes | None, seconds: float, rate: float) -> list[float]:
    """Loop wake lags while ``body`` is posted ``rate`` times a second (0: back to back)."""
    stop = threading.Event()

    def post_forever() -> None:
        conn = http.client.HTTPConnection(rx.host, rx.port, timeout=10)
        while not stop.is_set():
            conn.request("POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"})
            conn.getresponse().read()
            if rate:
                stop.wait(1 / rate)
        conn.close()

    thread = threading.Thread(target=post_forever, daemon=True)
    if body is not None:
        thread.start()
    try:
        return asyncio.run(_lags(seconds))
    finally:
        stop.set()
        if body is not None:
            thread.join(10)


def _p99(values: list[float]) -> float:
    return sorted(values)[int(0.99 * (len(values) - 1))]


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--spans", type=int, default=200)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--turn-batch", type=int, default=16)
    ap.add_argument("--rate", type=float, default=20.0)
    args = ap.parse_args()
    gaps = [take_anchor().gap_ns for _ in range(200)]
    with TraceReceiver(port=0) as rx:
        errors = placement_errors_ns(rx, args.spans)
    body = pipecat_like_batch(args.batch)
    decode = decode_ms(body, args.batches)
    with TraceReceiver(port=0, max_spans=10 * args.batch) as rx:
        quiet = loop_lag_ms(rx, None, args.seconds, 0)
        steady = loop_lag_ms(rx, pipecat_like_batch(args.turn_batch), args.seconds, args.rate)
        steady_posts = rx.accepted
        busy = loop_lag_ms(rx, body, args.seconds, 0)
        posted = rx.accepted - steady_posts
    print(f"anchor pairing gap: median {statistics.median(gaps)} ns, max {max(gaps)} ns")
    print(
        f"placement of {len(errors)} SDK spans: |error| median {statistics.median(errors):.0f} ns,"
        f" max {max(errors):.0f} ns"
    )
    print(
        f"decode+place one batch of {args.batch} spans ({len(body)} bytes): median "
        f"{statistics.median(decode):.2f} ms"
    )
    for label, lags in (
        ("quiet", quiet),
        (f"{steady_posts} batches of {args.turn_batch} spans", steady),
        (f"flood of {posted} batches of {args.batch} spans", busy),
    ):
        print(
            f"5 ms loop wake lag over {args.seconds:.0f} s, {label}: median "
            f"{statistics.median(lags):.3f} ms, P99 {_p99(lags):.3f} ms, max {max(lags):.3f} ms"
        )
    print(f"load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
