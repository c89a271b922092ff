"""``voicelat watch``: production agents export their spans here; traced turns as they finish.

A :class:`WatchReceiver` is the trace receiver (the same OTLP/HTTP server, answers and limits:
:mod:`voicelat.engine.trace_receiver`) keeping the spans as exported, on the agent's wall
clock, in a bounded buffer (:class:`SpanBuffer`: ``max_spans``, the oldest trace dropped first
and every dropped span counted). The :class:`Watcher` turns each turn container that arrived
into a traced turn with the import's own code (:func:`voicelat.core.traces.traced.import_spans` on its
trace), keeps a rolling window of them (``window_s``, at most ``max_window_turns``, the excess
counted), feeds the run's exporters (Prometheus: the same histograms as a run), and writes a
results directory per period (:meth:`Watcher.flush`). Memory is bounded by the two caps.

A turn is taken when its container (Pipecat ``turn``) arrived and either its ancestors did too
(Pipecat's ``conversation`` span carries the stated VAD hangover, but ends only with the call)
or ``settle_s`` has passed: then it is timed without them (labelled, docs/PRODUCTION.md).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from voicelat.core.base.turn import Turn
from voicelat.core.summaries.run_summary import RunSummary
from voicelat.core.summaries.summary import summarize
from voicelat.core.traces.agent_trace import AgentSpan, is_turn_container
from voicelat.core.traces.trace_checks import Finding
from voicelat.core.traces.traced import TracedImport, import_spans
from voicelat.engine.trace_receiver import TraceReceiver
from voicelat.export.base import Exporter
from voicelat.files.otlp import convert, decode_request
from voicelat.files.traced import write_traced_run

__all__ = ["SpanBuffer", "WatchReceiver", "Watcher"]

#: Spans kept while their turns are not done (a Pipecat turn is 6-10 spans).
MAX_SPANS = 200_000
#: Turns in the rolling window at most (the summary of the window is computed from them).
MAX_WINDOW_TURNS = 50_000
#: A trace with no new span for this long is done: its spans are let go (not a drop). A call's
#: turns come every few seconds; its last span (Pipecat's conversation) at hang-up.
IDLE_S = 120.0


class SpanBuffer:
    """Spans by trace, bounded, under a lock: the HTTP threads add, the watcher takes turns."""

    def __init__(self, max_spans: int = MAX_SPANS, mapping: str = "pipecat") -> None:
        self.lock = threading.Lock()
        self.max_spans = max_spans
        self.mapping = mapping
        self.traces: OrderedDict[str, list[AgentSpan]] = OrderedDict()
        self.ids: dict[str, set[str]] = {}  # each trace's span ids: a re-sent span counts once
        self.last_seen: dict[str, float] = {}
        # Turn containers not yet taken: span id -> (trace id, when it arrived).
        self.pending: dict[str, tuple[str, float]] = {}
        self.count = 0
        # Spans of traces let go under the cap while a turn of theirs was still to be taken:
        # lost turns, counted, never silent; the turns themselves in dropped_turns.
        self.dropped_spans = 0
        self.dropped_turns = 0
        self.released_spans = 0  # let go under the cap with nothing pending: no turn lost
        self.duplicate_spans = 0  # spans sent again (an exporter's retry): kept once

    def add(self, spans: Sequence[AgentSpan], now: float) -> None:
        with self.lock:
            for span in spans:
                seen = self.ids.setdefault(span.trace_id, set())
                if span.span_id in seen:
                    self.duplicate_spans += 1
                    continue
                seen.add(span.span_id)
                self.traces.setdefault(span.trace_id, []).append(span)
                self.traces.move_to_end(span.trace_id)
                self.last_seen[span.trace_id] = now
                if is_turn_container(span, self.mapping):
                    self.pending[span.span_id] = (span.trace_id, now)
                self.count += 1
            while self.count > self.max_spans and self.traces:
                trace_id, dropped = self.traces.popitem(last=False)  # the least recently fed
                self.count -= len(dropped)
                lost = self._forget(trace_id, dropped, counted=True)
                if lost:
                    self.dropped_spans += len(dropped)
                else:
                    self.released_spans += len(dropped)

    def _forget(self, trace_id: str, spans: Sequence[AgentSpan], counted: bool) -> int:
        """Let a trace go; how many of its turns were still pending (counted as dropped)."""
        self.last_seen.pop(trace_id, None)
        self.ids.pop(trace_id, None)
        lost = sum(self.pending.pop(s.span_id, None) is not None for s in spans)
        if counted:
            self.dropped_turns += lost
        return lost

    def ready(self, now: float, settle_s: float) -> list[tuple[list[AgentSpan], set[str]]]:
        """The traces with turn containers to take now, each with their container ids (taken:
        not returned again). Idle traces are let go after :data:`IDLE_S`."""
        out: dict[str, set[str]] = {}
        with self.lock:
            for span_id, (trace_id, arrived) in list(self.pending.items()):
                spans = self.traces.get(trace_id, [])
                if now - arrived >= settle_s or _ancestors_complete(spans, span_id):
                    out.setdefault(trace_id, set()).add(span_id)
                    del self.pending[span_id]
            found = [(list(self.traces.get(t, [])), ids) for t, ids in out.items()]
            for trace_id in [t for t, seen in self.last_seen.items() if now - seen > IDLE_S]:
                spans = self.traces.pop(trace_id, [])
                self.count -= len(spans)
                self._forget(trace_id, spans, counted=bool(spans))
        return found


def _ancestors_complete(spans: Sequence[AgentSpan], span_id: str) -> bool:
    by_id = {s.span_id: s for s in spans}
    current = by_id.get(span_id)
    seen: set[str] = set()
    while current is not None and current.parent_id is not None:
        if current.parent_id in seen:
            return True
        seen.add(current.parent_id)
        current = by_id.get(current.parent_id)
        if current is None:
            return False
    return True


class WatchReceiver(TraceReceiver):
    """The trace receiver, its spans kept as exported (agent wall clock) in a :class:`SpanBuffer`."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 4318,
        *,
        mapping: str = "pipecat",
        max_spans: int = MAX_SPANS,
    ) -> None:
        super().__init__(host, port, mapping=mapping, max_spans=1)
        self.buffer = SpanBuffer(max_spans, mapping)

    def _ingest(self, body: bytes, content_type: str, encoding: str) -> int:
        request = decode_request(body, content_type, encoding)
        spans, rejected = convert(request)
        self.buffer.add(spans, time.monotonic())
        with self._counts_lock:
            self.accepted += 1
            self.rejected_spans += rejected
        return rejected


class Watcher:
    """Takes finished turns from a :class:`WatchReceiver`; a rolling window and periods."""

    def __init__(
        self,
        receiver: WatchReceiver,
        out: Path,
        *,
        window_s: float = 300.0,
        settle_s: float = 5.0,
        exporters: Sequence[Exporter] = (),
        max_window_turns: int = MAX_WINDOW_TURNS,
        hangover_ns: int | None = None,
    ) -> None:
        self.receiver = receiver
        self.hangover_ns = hangover_ns
        self.out = out
        self.window_s = window_s
        self.settle_s = settle_s
        self.exporters = list(exporters)
        self.max_window_turns = max_window_turns
        self.window: deque[tuple[float, Turn]] = deque()
        self.period: list[Turn] = []
        self.findings: list[Finding] = []
        self.turns_seen = 0
        self.window_dropped = 0
        self.periods_written = 0
        self.started = time.time()

    @property
    def mapping(self) -> str:
        return self.receiver.buffer.mapping

    def tick(self, now: float | None = None) -> int:
        """Take the turns ready now; returns how many."""
        now = time.monotonic() if now is None else now
        taken = 0
        for spans, ids in self.receiver.buffer.ready(now, self.settle_s):
            result = import_spans(spans, self.mapping, self.hangover_ns)
            for turn in result.turns:
                if turn.extra.get("turn_span_id") not in ids:
                    continue
                turn = dataclasses.replace(turn, index=self.turns_seen)
                self.turns_seen += 1
                taken += 1
                self.window.append((now, turn))
                self.period.append(turn)
                for exporter in self.exporters:
                    exporter.on_turn(turn)
                # Its own findings only: the trace's earlier turns were counted when taken.
                self.findings.extend(
                    Finding(f["check"], turn.fixture, f.get("span_id"), f["detail"])
                    for f in turn.extra.get("findings", [])
                )
        while self.window and (
            now - self.window[0][0] > self.window_s or len(self.window) > self.max_window_turns
        ):
            taken_at, _ = self.window.popleft()
            if now - taken_at <= self.window_s:
                self.window_dropped += 1  # over the cap, not out of the window: counted
        return taken

    def window_summary(self) -> RunSummary:
        """The summary of the turns in the rolling window (percentiles, waterfall)."""
        return summarize(
            [t for _, t in self.window],
            run=self._run("window"),
            pipeline={"name": f"traced-{self.mapping}", "kind": "traced", "mapping": self.mapping},
            fixtures=(),
            stages={},
        )

    def counters(self) -> dict[str, int]:
        """What was received, taken and dropped so far (the summary's ``watch`` section)."""
        buffer = self.receiver.buffer
        return {
            "requests_accepted": self.receiver.accepted,
            "requests_rejected": self.receiver.rejected,
            "spans_rejected": self.receiver.rejected_spans,
            "spans_dropped": buffer.dropped_spans,
            "spans_duplicate": buffer.duplicate_spans,
            "spans_released": buffer.released_spans,
            "turns_dropped": buffer.dropped_turns,
            "window_turns_dropped": self.window_dropped,
            "turns": self.turns_seen,
        }

    def flush(self, reason: str) -> Path | None:
        """Write the period's turns as a results directory (None: no turn since the last)."""
        if not self.period:
            return None
        self.periods_written += 1
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        path = self.out / f"{self.periods_written:04d}-{stamp}"
        turns = tuple(self.period)
        imported = TracedImport(
            turns=turns,
            findings=tuple(self.findings),
            conversations=len({t.fixture for t in turns}),
            spans=0,
        )
        write_traced_run(path, imported, mapping=self.mapping, sources=[], run=self._run(reason))
        self.period, self.findings = [], []
        return path

    def _run(self, status: str) -> dict[str, Any]:
        return {
            "tool": "voicelat",
            "status": "complete" if status in ("period", "final", "reopen") else status,
            "source": "watch",
            "watch": {"reason": status, **self.counters()},
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
        }
