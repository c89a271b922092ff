"""Pieces the websocket provider emulators share: an outbox of messages scheduled at absolute
deadlines (sent while the handler keeps reading), a tiny energy VAD for the STT emulators,
and helpers for query parameters.

A websocket handler here is one loop: wait for the next client message, but never past the
next scheduled send; handle what arrived (schedule answers from its arrival stamp); send
what is due. One task, so there is nothing to cancel when the handler returns, and every send
goes through :class:`~voicelat.emulate.exchange.WsExchange` (stamps, mid-stream faults).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from voicelat.core.measure.clock import now_ns
from voicelat.emulate.content import Transcriber
from voicelat.emulate.exchange import WsExchange

__all__ = [
    "Listener",
    "Outbox",
    "fixture_speech_ms",
    "flag",
    "match_speech",
    "number",
    "record_stop",
]


def record_stop(x: WsExchange, t_ns: int) -> None:
    """A TTS generation was cancelled at ``t_ns`` (Deepgram ``Clear``, Cartesia ``cancel``):
    the truth gets ``cancel_received`` and, in ``detail["stops"]``, the cancel and the last
    audio written before it (what was scheduled after it is dropped: nothing follows)."""
    x.truth.mark("cancel_received", t_ns)
    audio = x.truth.all("audio_written")
    x.truth.detail.setdefault("stops", []).append(
        {"cancel_ns": t_ns, "last_audio_ns": audio[-1] if audio else None}
    )

# With timer = "spin", wake this early and let sleep_until() spin to the exact deadline.
_SPIN_EARLY_NS = 2_000_000


def flag(query: Mapping[str, str], name: str, default: bool) -> bool:
    """A boolean query parameter: ``true``/``false`` in any case (AssemblyAI's SDK sends
    Python's ``True``), ``1``/``0``."""
    value = query.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in ("true", "1", "yes")


def number(query: Mapping[str, str], name: str, default: float | None) -> float | None:
    """A numeric query parameter; None for ``false`` (Deepgram's ``endpointing=false``)."""
    value = query.get(name)
    if value is None or value == "":
        return default
    if value.strip().lower() == "false":
        return None
    try:
        return float(value)
    except ValueError:
        return default


@dataclass(order=True)
class _Item:
    t_ns: int
    seq: int
    payload: str | bytes | dict[str, Any] = field(compare=False)
    marks: tuple[str, ...] = field(compare=False, default=())
    content: bool = field(compare=False, default=False)
    tag: str = field(compare=False, default="")
    on_sent: Callable[[int], None] | None = field(compare=False, default=None)
    """Called with the write's stamp once sent (per-response ground truth)."""


class Outbox:
    """Messages to send at absolute times, in the order they were scheduled (a message is
    never sent before one scheduled earlier, so a final never overtakes its interims)."""

    def __init__(self, x: WsExchange, *, per_tag: bool = False) -> None:
        self.x = x
        self._heap: list[_Item] = []
        self._seq = itertools.count()
        self._last = 0
        #: ``per_tag``: the order floor is kept per tag, so a session event (speech_started,
        #: truncated) is not held behind a response still being sent; within a tag the order
        #: holds as always.
        self.per_tag = per_tag
        self._floors: dict[str, int] = {}
        self.spin = x.config.wire.timer == "spin"

    def at(
        self,
        t_ns: int,
        payload: str | bytes | dict[str, Any],
        marks: Iterable[str] = (),
        *,
        content: bool = False,
        tag: str = "",
        on_sent: Callable[[int], None] | None = None,
    ) -> int:
        """Schedule ``payload`` (dict: JSON text; str: text; bytes: binary) at ``t_ns``;
        ``on_sent`` gets the write's stamp once it went out."""
        if self.per_tag:
            t = max(t_ns, self._floors.get(tag, 0))
            self._floors[tag] = t
            self._last = max(self._last, t)
        else:
            t = max(t_ns, self._last)
            self._last = t
        item = _Item(t, next(self._seq), payload, tuple(marks), content, tag, on_sent)
        heapq.heappush(self._heap, item)
        return t

    @property
    def last(self) -> int:
        """When the last scheduled message goes out (0 if none was)."""
        return self._last

    def last_of(self, tag: str) -> int:
        """When the last message scheduled with ``tag`` goes out (``per_tag`` outboxes)."""
        return self._floors.get(tag, 0) if self.per_tag else self._last

    def empty(self) -> bool:
        return not self._heap

    def drop(self, tag: str) -> int:
        """Unschedule every message with ``tag`` (a cleared or cancelled generation)."""
        return len(self.take(tag))

    def take(self, tag: str) -> list[_Item]:
        """Unschedule and return (in send order) every message with ``tag``."""
        taken = sorted(i for i in self._heap if i.tag == tag)
        if taken:
            self._heap = [i for i in self._heap if i.tag != tag]
            heapq.heapify(self._heap)
            # What is left sets the order floor again: later messages must not wait for the
            # dropped ones' deadlines.
            self._last = max((i.t_ns for i in self._heap), default=now_ns())
            self._floors.pop(tag, None)
        return taken

    def put(self, item: _Item, t_ns: int | None = None) -> int:
        """Schedule a message :meth:`take` returned again (at ``t_ns``, or its own time)."""
        return self.at(
            item.t_ns if t_ns is None else t_ns, item.payload, item.marks,
            content=item.content, tag=item.tag, on_sent=item.on_sent,
        )  # fmt: skip

    def wait_s(self, limit_ns: int | None = None) -> float | None:
        """How long a receive may wait before the next send is due (None: forever)."""
        due = self._heap[0].t_ns if self._heap else None
        if limit_ns is not None:
            due = limit_ns if due is None else min(due, limit_ns)
        if due is None:
            return None
        early = _SPIN_EARLY_NS if self.spin else 0
        return max(0.0, (due - early - now_ns()) / 1e9)

    async def send_due(self) -> None:
        """Send everything due now (with ``spin``, also what is due within 2 ms, exactly)."""
        early = _SPIN_EARLY_NS if self.spin else 0
        while self._heap and self._heap[0].t_ns <= now_ns() + early:
            item = heapq.heappop(self._heap)
            await self.x.sleep_until(item.t_ns, item.marks[0] if item.marks else None)
            await self._send(item)

    async def drain(self) -> None:
        """Send everything still scheduled, each at its time."""
        while self._heap:
            item = heapq.heappop(self._heap)
            await self.x.sleep_until(item.t_ns, item.marks[0] if item.marks else None)
            await self._send(item)

    async def _send(self, item: _Item) -> None:
        if isinstance(item.payload, bytes):
            t = await self.x.send_bytes(item.payload, item.marks, content=item.content)
        elif isinstance(item.payload, str):
            t = await self.x.send_text(item.payload, item.marks, content=item.content)
        else:
            t = await self.x.send_json(item.payload, item.marks, content=item.content)
        if item.on_sent is not None:
            item.on_sent(t)


class Listener:
    """What a streaming STT server has heard in the current turn: the samples, and speech vs
    silence by a simple energy VAD on 20 ms frames (the threshold the runner's endpointer
    uses by default). Enough to place interim results, endpoints and utterance ends where a
    recognizer would, without a model."""

    FRAME_MS = 20

    def __init__(self, rate: int, threshold_dbfs: float = -40.0) -> None:
        self.rate = rate
        self.threshold = 32768.0 * 10 ** (threshold_dbfs / 20)
        self.frame_bytes = max(2, rate * self.FRAME_MS // 1000 * 2)
        self.reset()

    def reset(self) -> None:
        self.pcm = bytearray()
        self._pending = b""
        self.heard_ms = 0.0
        self.speech_ms = 0.0
        self.silence_ms = 0.0
        self.in_speech = False
        self.heard_speech = False
        self.speech_start_ms: float | None = None
        self.last_speech_end_ms = 0.0

    def feed(self, data: bytes) -> None:
        """Add audio; VAD state moves on by whole frames."""
        self.pcm += data
        buf = self._pending + data
        n = len(buf) // self.frame_bytes * self.frame_bytes
        self._pending = buf[n:]
        for i in range(0, n, self.frame_bytes):
            frame = np.frombuffer(buf[i : i + self.frame_bytes], dtype="<i2").astype(np.float64)
            rms = math.sqrt(float(np.mean(frame * frame))) if len(frame) else 0.0
            self.heard_ms += self.FRAME_MS
            if rms >= self.threshold:
                if not self.heard_speech:
                    self.speech_start_ms = self.heard_ms - self.FRAME_MS
                self.in_speech = self.heard_speech = True
                self.speech_ms += self.FRAME_MS
                self.silence_ms = 0.0
                self.last_speech_end_ms = self.heard_ms
            else:
                self.silence_ms += self.FRAME_MS
                if self.silence_ms >= 200:
                    self.in_speech = False

    def samples(self) -> np.ndarray[Any, Any]:
        data = bytes(self.pcm[: len(self.pcm) // 2 * 2])
        return np.frombuffer(data, dtype="<i2")


def _trim(samples: np.ndarray[Any, Any], threshold: float) -> np.ndarray[Any, Any]:
    """Samples from the first 20 ms frame (at 16 kHz) above ``threshold`` on."""
    frame = 320
    n = len(samples) // frame * frame
    if not n:
        return samples[:0]
    rms = np.sqrt(np.mean(samples[:n].astype(np.float64).reshape(-1, frame) ** 2, axis=1))
    loud = np.nonzero(rms >= threshold)[0]
    if not len(loud):
        return samples[:0]
    # To the sample: the first one at the threshold near that frame. A frame boundary falls
    # anywhere in a live stream (a segment starts where the last one ended), so two copies of
    # the same speech are only aligned by a point of the waveform itself.
    start = int(loud[0]) * frame
    lo = max(0, start - 2 * frame)
    above = np.nonzero(np.abs(samples[lo : start + frame].astype(np.int32)) >= threshold)[0]
    return samples[lo + int(above[0]) :] if len(above) else samples[start:]


async def match_speech(
    transcriber: Transcriber, samples: np.ndarray[Any, Any], rate: int, threshold_dbfs: float
) -> str:
    """The transcript of a live segment of audio.

    A streaming recognizer hears one continuous stream: the audio of a turn starts after
    whatever silence followed the last one. The fixture matcher compares a recording from
    its first sample, so both sides are aligned on their speech onset first (manifest
    modes); other modes go to the transcriber as they are. The numpy work runs on a worker
    thread, never on the loop that stamps the ground truth.
    """
    fixtures = getattr(transcriber, "_fixtures", None)
    if transcriber.mode not in ("auto", "manifest") or not fixtures:
        return await transcriber.transcribe(samples, rate)
    threshold = 32768.0 * 10 ** (threshold_dbfs / 20)
    loop = asyncio.get_running_loop()
    found = await loop.run_in_executor(None, _match_at, fixtures, samples, rate, threshold)
    return found if found is not None else transcriber.canned


def _match_at(
    fixtures: list[tuple[str, np.ndarray[Any, Any]]],
    samples: np.ndarray[Any, Any],
    rate: int,
    threshold: float,
) -> str | None:
    """:func:`_match_sync` on audio at any rate (the fixtures are matched at 16 kHz)."""
    if rate != 16000:
        from voicelat.audio import resample_array

        resampled = resample_array(samples.astype(np.float64), rate, 16000)
        samples = np.clip(np.round(resampled), -32768, 32767).astype("<i2")
    return _match_sync(fixtures, samples, threshold)


def _match_sync(
    fixtures: list[tuple[str, np.ndarray[Any, Any]]],
    samples: np.ndarray[Any, Any],
    threshold: float,
) -> str | None:
    recv = _trim(samples, threshold)
    if len(recv) < 1600:
        return None
    # Keyed by the fixture set too, and checked by identity (an id is reused once its object
    # is freed): two emulators with different fixture directories in one process must not
    # answer each other's matches.
    key = (hash(recv.tobytes()), id(fixtures), threshold)
    cached = _MATCH_CACHE.get(key)
    if cached is not None and cached[0] is fixtures:
        return cached[1]
    best: tuple[float, str] | None = None
    for text, ref in fixtures:
        kept = _TRIMMED.get((id(ref), threshold))
        if kept is not None and kept[0] is ref:
            r = kept[1]
        else:
            r = _trim(ref, threshold)
            _TRIMMED[(id(ref), threshold)] = (ref, r)
        # One second of speech after the onset tells the fixtures apart.
        n = min(len(recv), len(r), 16000)
        if n < 1600:
            continue
        a, b = recv[:n].astype(np.float64), r[:n].astype(np.float64)
        score = float(np.mean(np.abs(a - b)) / (np.mean(np.abs(b)) + 1.0))
        if best is None or score < best[0]:
            best = (score, text)
    found = best[1] if best is not None and best[0] < 0.2 else None
    if len(_MATCH_CACHE) > 4096:
        _MATCH_CACHE.clear()
    _MATCH_CACHE[key] = (fixtures, found)
    return found


def fixture_speech_ms(transcriber: Transcriber, text: str, threshold_dbfs: float) -> float | None:
    """How much speech (20 ms frames above the threshold, as :class:`Listener` counts it) the
    fixture with transcript ``text`` holds; None when no loaded fixture has that text. Lets a
    streaming emulator finalize a fixture's words in proportion to the speech heard so far."""
    key = (text, threshold_dbfs)
    if key in _SPEECH_MS:
        return _SPEECH_MS[key]
    threshold = 32768.0 * 10 ** (threshold_dbfs / 20)
    found: float | None = None
    for fixture_text, ref in getattr(transcriber, "_fixtures", None) or []:
        if fixture_text == text:
            n = len(ref) // 320 * 320
            rms = np.sqrt(np.mean(ref[:n].astype(np.float64).reshape(-1, 320) ** 2, axis=1))
            found = float(np.count_nonzero(rms >= threshold) * Listener.FRAME_MS)
            break
    _SPEECH_MS[key] = found
    return found


_SPEECH_MS: dict[tuple[str, float], float | None] = {}
_Fixtures = list[tuple[str, np.ndarray[Any, Any]]]
_MATCH_CACHE: dict[tuple[int, int, float], tuple[_Fixtures, str | None]] = {}
_TRIMMED: dict[tuple[int, float], tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]] = {}
