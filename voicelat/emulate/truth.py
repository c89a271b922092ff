"""Ground truth: what each emulator did and exactly when, on the measuring clock.

Every HTTP request and every websocket session is an :class:`Exchange`. The server stamps
with ``voicelat.core.measure.clock.now_ns()`` (``time.perf_counter_ns``) right before the write that
hands bytes to the kernel (so a mark means "handed to the socket at t", and a client's arrival
stamp is never earlier), and right after the read that delivered a request. On Linux
``perf_counter_ns`` is CLOCK_MONOTONIC, shared by every process on the machine, so the
stamps compare with a client's even when the emulator runs in another process (write them
with ``voicelat serve --truth FILE``).

Mark names used by the built-in emulators (the first occurrence is kept in ``marks``; every
occurrence is kept in ``events``):

============================  ===========================================================
``accepted``                  the TCP connection was accepted (copied from the connection)
``request_received``          the whole request (head and body) was read: the t0 of delays
``headers_written``           the status line and headers were written
``first_delta_written``       LLM: the first delta of any kind (reasoning included)
``first_reasoning_written``   LLM: the first reasoning delta
``first_content_written``     LLM: the first non-empty content delta (TTFT truth)
``token_written``             LLM: every content or reasoning delta (ITL truth)
``partial_written``           STT: an interim transcript
``final_written``             STT: the final transcript (finalization truth)
``first_audio_written``       TTS: the first audio payload (TTFA truth)
``audio_written``             TTS: every audio chunk
``end_written``               the end of the stream (terminator, [DONE], done event)
``fault``                     a fault struck (``Exchange.fault`` names it)
``upgrade_written``           websocket: the 101 answer was written
``message_received``          websocket: a client message arrived
============================  ===========================================================
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TextIO

__all__ = ["Exchange", "GroundTruth", "ResponseTruth"]


@dataclass
class ResponseTruth:
    """One response of a realtime session (a model turn), as the emulator served it.

    A realtime websocket session is one :class:`Exchange` holding many responses: one per
    user turn, plus a greeting. Times are ``perf_counter_ns`` stamps taken right before the
    write that carried the bytes (None: it never happened). ``last_audio_ns`` is when the
    emulator stopped sending audio: for a cancelled or interrupted response, the stop truth.
    """

    index: int
    """0, 1, 2... in the order the responses were triggered in the session."""
    id: str
    """The provider's id (``resp_0007``) or the emulator's tag (``turn3``)."""
    trigger: str
    """What started it: ``vad`` (server endpoint), ``commit``/``create`` (the client),
    ``activity_end``, ``audio_stream_end``, ``text`` (a client text turn), ``greeting``."""
    trigger_ns: int
    """When the trigger happened (the endpoint decided, the client message read)."""
    first_audio_ns: int | None = None
    last_audio_ns: int | None = None
    first_text_ns: int | None = None
    audio_bytes: int = 0
    status: str = "in_progress"
    """``completed``, ``cancelled`` (response.cancel), ``interrupted`` (barge-in)."""
    cancel_ns: int | None = None
    """When the cancel was decided: the ``response.cancel`` read, or the barge-in speech
    detected (``speech_started`` / ``interrupted`` written)."""
    stop_after_ms: float | None = None
    """The injected stop latency: audio kept flowing this long after ``cancel_ns``."""
    reason: str | None = None
    """Why it was cancelled: ``client_cancelled``, ``turn_detected`` (OpenAI); ``interrupted``
    (Gemini: speech during the reply)."""
    done_ns: int | None = None
    """``response.done`` / ``turnComplete`` written."""

    def sent(self, t_ns: int, *, audio: int = 0, text: bool = False) -> None:
        """A message of this response was written at ``t_ns`` (``audio`` bytes of audio)."""
        if audio:
            if self.first_audio_ns is None:
                self.first_audio_ns = t_ns
            self.last_audio_ns = t_ns
            self.audio_bytes += audio
        if text and self.first_text_ns is None:
            self.first_text_ns = t_ns

    def stop_ms(self) -> float | None:
        """Cancel decided -> last audio byte written (ms): the stop truth of a barge-in."""
        if self.cancel_ns is None or self.last_audio_ns is None:
            return None
        return max(0.0, (self.last_audio_ns - self.cancel_ns) / 1e6)

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index, "id": self.id, "trigger": self.trigger,
            "trigger_ns": self.trigger_ns, "first_audio_ns": self.first_audio_ns,
            "last_audio_ns": self.last_audio_ns, "first_text_ns": self.first_text_ns,
            "audio_bytes": self.audio_bytes, "status": self.status, "cancel_ns": self.cancel_ns,
            "stop_after_ms": self.stop_after_ms, "reason": self.reason, "done_ns": self.done_ns,
        }  # fmt: skip


@dataclass
class Exchange:
    """One request (or websocket session) as the emulator served it."""

    emulator: str
    endpoint: str
    index: int
    connection: int
    t_accept_ns: int
    marks: dict[str, int] = field(default_factory=dict)
    events: list[tuple[str, int]] = field(default_factory=list)
    injected: dict[str, list[float]] = field(default_factory=dict)
    """Every latency drawn for this exchange, in ms, in draw order (``ttft``: [120.0])."""
    scheduled: dict[str, int] = field(default_factory=dict)
    """The intended time (ns) of marks the emulator scheduled: mark minus this is timer error."""
    fault: str | None = None
    status: int | None = None
    model: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    responses: list[ResponseTruth] = field(default_factory=list)
    """Realtime sessions: every response (model turn) in trigger order."""
    finished: bool = False

    def open_response(self, rid: str, trigger: str, t_ns: int) -> ResponseTruth:
        """Record a new response of this session (its index is its position)."""
        r = ResponseTruth(len(self.responses), rid, trigger, t_ns)
        self.responses.append(r)
        return r

    def response(self, index: int) -> ResponseTruth:
        """Response ``index`` of this session; a clear error when there is none."""
        if not 0 <= index < len(self.responses):
            raise LookupError(
                f"{self.emulator} session {self.index} has {len(self.responses)} response(s), "
                f"not one at index {index}"
            )
        return self.responses[index]

    def mark(self, name: str, t_ns: int) -> None:
        """Record that ``name`` happened at ``t_ns`` (the first one also goes into ``marks``)."""
        self.events.append((name, t_ns))
        self.marks.setdefault(name, t_ns)

    def injected_ms(self, name: str, i: int = 0) -> float | None:
        """The ``i``-th value drawn for latency ``name`` (None if it was never drawn)."""
        values = self.injected.get(name)
        return values[i] if values and i < len(values) else None

    def between_ms(self, start: str, end: str) -> float | None:
        """Milliseconds from mark ``start`` to mark ``end`` (first occurrences)."""
        a, b = self.marks.get(start), self.marks.get(end)
        return None if a is None or b is None else (b - a) / 1e6

    def all(self, name: str) -> list[int]:
        """Every stamp of ``name`` in order (e.g. ``token_written`` for inter-token truth)."""
        return [t for n, t in self.events if n == name]

    def to_json(self) -> dict[str, Any]:
        return {
            "emulator": self.emulator,
            "endpoint": self.endpoint,
            "index": self.index,
            "connection": self.connection,
            "t_accept_ns": self.t_accept_ns,
            "marks": self.marks,
            "events": self.events,
            "injected_ms": self.injected,
            "scheduled_ns": self.scheduled,
            "fault": self.fault,
            "status": self.status,
            "model": self.model,
            "detail": self.detail,
            "responses": [r.to_json() for r in self.responses],
        }


class GroundTruth:
    """Every exchange of every emulator of a run, thread-safe (emulators may run on a thread).

    ``max_kept`` bounds the memory of a long-lived server (``voicelat serve``): only the most
    recent exchanges are kept (the ``--truth`` file still gets every one as it closes).
    """

    def __init__(self, max_kept: int | None = None) -> None:
        self._lock = threading.Lock()
        self.exchanges: list[Exchange] = []
        self._listeners: list[Callable[[Exchange], None]] = []
        self.max_kept = max_kept

    def open(
        self, emulator: str, endpoint: str, index: int, connection: int, t_accept_ns: int
    ) -> Exchange:
        ex = Exchange(emulator, endpoint, index, connection, t_accept_ns)
        with self._lock:
            self.exchanges.append(ex)
            limit = self.max_kept
            # Trimmed in batches (a list's front is costly to drop one at a time).
            if limit is not None and len(self.exchanges) > limit + max(1, limit // 10):
                del self.exchanges[: len(self.exchanges) - limit]
        return ex

    def close(self, ex: Exchange) -> None:
        """The exchange is over: listeners (e.g. the ``--truth`` JSONL writer) get it now."""
        if ex.finished:
            return
        ex.finished = True
        for listener in list(self._listeners):
            listener(ex)

    def on_close(self, listener: Callable[[Exchange], None]) -> None:
        self._listeners.append(listener)

    def select(self, emulator: str | None = None, endpoint: str | None = None) -> list[Exchange]:
        """Exchanges in arrival order, optionally only one emulator's or one endpoint's."""
        with self._lock:
            found = list(self.exchanges)
        return [
            e
            for e in found
            if (emulator is None or e.emulator == emulator)
            and (endpoint is None or e.endpoint == endpoint)
        ]

    def last(self, emulator: str | None = None, endpoint: str | None = None) -> Exchange:
        """The most recent matching exchange; a clear error when there is none."""
        found = self.select(emulator, endpoint)
        if not found:
            raise LookupError(f"no exchange recorded for {emulator or '*'}/{endpoint or '*'}")
        return found[-1]

    def response(
        self, emulator: str, index: int, session: int = -1, endpoint: str | None = None
    ) -> ResponseTruth:
        """Response ``index`` of realtime session ``session`` (its position among the
        emulator's sessions in arrival order; -1: the latest)."""
        found = [e for e in self.select(emulator, endpoint) if e.endpoint != "unknown"]
        if not found or not -len(found) <= session < len(found):
            raise LookupError(f"no session {session} recorded for {emulator}")
        return found[session].response(index)

    def __iter__(self) -> Iterator[Exchange]:
        return iter(self.select())

    def __len__(self) -> int:
        with self._lock:
            return len(self.exchanges)

    def clear(self) -> None:
        with self._lock:
            self.exchanges.clear()


class JsonlTruthWriter:
    """Appends each finished exchange as one JSON line (``voicelat serve --truth FILE``)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def __call__(self, ex: Exchange) -> None:
        self.stream.write(json.dumps(ex.to_json(), separators=(",", ":")) + "\n")
        self.stream.flush()
