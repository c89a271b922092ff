"""Deepgram's websocket protocols (PROTOCOLS.md §3), sans-I/O: live ``/v1/listen`` (STT) and
Aura ``/v1/speak`` (TTS).

**STT.** Interim ``Results`` are :class:`~voicelat.core.measure.events.Partial` (the request's
finalized text plus the interim), ``is_final`` segments are
:class:`~voicelat.core.measure.events.Final`, and ``speech_final`` or ``UtteranceEnd`` (only after
words of this request) is :class:`~voicelat.core.measure.events.EndOfTurn`. At the end of the audio
the client sends ``Finalize`` (or ``CloseStream``) and the request ends on the result marked
``from_finalize`` (or ``Metadata``); when the last result was a ``speech_final`` with nothing
after it there is nothing to flush and the request ends with the audio.

**TTS.** Each text piece is a ``Speak`` and a ``Flush``; binary messages are raw linear16
(an odd byte waits for the next message); the request ends at the ``Flushed`` of the last
piece.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from voicelat.core.measure.events import (
    Audio,
    Done,
    EndOfTurn,
    Final,
    Partial,
    RequestSent,
    StageEvent,
    TextSent,
)
from voicelat.stages.protocols.base import Send, WsProtocol, json_object, json_text

__all__ = [
    "CLOSE_STREAM",
    "KEEPALIVE",
    "DeepgramSTTProtocol",
    "DeepgramTTSProtocol",
    "audio_end_s",
    "flush_answered",
    "metadata_usage",
]

KEEPALIVE = json_text({"type": "KeepAlive"})
CLOSE_STREAM = json_text({"type": "CloseStream"})
_FINALIZE = json_text({"type": "Finalize"})
_FLUSH = json_text({"type": "Flush"})
#: Rounding of Deepgram's times (ms) and a word's least length: a word of this request ends
#: well after its first audio; one ending at most this much later is an earlier request's.
_STREAM_TOLERANCE_S = 0.01
#: Audio that may follow an end-of-turn the caller stopped on: provider endpointing stops the
#: audio on the EndOfTurn, after the frame it had in hand and any it had queued (20 ms each).
#: A caller that sent more kept listening (its own VAD ends the turn): its audio counts.
STOPPED_ON_EOT_MS = 100


def error_text(data: Mapping[str, Any]) -> str:
    """An ``Error`` message as one line: its description and code."""
    parts = [str(data.get(k)) for k in ("description", "message", "err_msg") if data.get(k)]
    code = data.get("err_code") or data.get("code") or data.get("variant")
    text = parts[0] if parts else "(no description)"
    return f"{text} ({code})" if code else text


def transcript(data: Mapping[str, Any]) -> str:
    """``channel.alternatives[0].transcript`` of a ``Results`` message ("" when absent)."""
    channel = data.get("channel")
    if not isinstance(channel, dict):
        return ""
    alternatives = channel.get("alternatives")
    if not isinstance(alternatives, list) or not alternatives:
        return ""
    first = alternatives[0]
    text = first.get("transcript") if isinstance(first, dict) else None
    return text.strip() if isinstance(text, str) else ""


def audio_end_s(data: Mapping[str, Any]) -> float | None:
    """Where a ``Results`` message's audio ends in stream seconds: its last word's ``end``,
    else ``start + duration``; None when it carries no times."""
    channel = data.get("channel")
    alternatives = channel.get("alternatives") if isinstance(channel, dict) else None
    first = alternatives[0] if isinstance(alternatives, list) and alternatives else None
    words = first.get("words") if isinstance(first, dict) else None
    ends = [w.get("end") for w in words or () if isinstance(w, dict)]
    times = [float(e) for e in ends if isinstance(e, int | float)]
    if times:
        return max(times)
    start, duration = data.get("start"), data.get("duration")
    if isinstance(start, int | float) and isinstance(duration, int | float):
        return float(start) + float(duration)
    return None


def metadata_usage(data: Mapping[str, Any]) -> dict[str, int]:
    """The closing ``Metadata``'s ``duration`` (the seconds of audio Deepgram processed on the
    stream, what it bills) as ``audio_ms``; empty without one."""
    duration = data.get("duration")
    if isinstance(duration, bool) or not isinstance(duration, int | float) or duration < 0:
        return {}
    return {"audio_ms": round(float(duration) * 1000)}


def flush_answered(message: str | bytes) -> bool:
    """Whether ``message`` is the answer to a ``Finalize`` (a result ``from_finalize``)."""
    try:
        data = json_object(message)
    except ValueError:  # nested too deeply: not the answer
        return False
    return data is not None and data.get("type") == "Results" and bool(data.get("from_finalize"))


class DeepgramSTTProtocol(WsProtocol[bytes]):
    """One turn on a live-transcription socket."""

    awaiting: ClassVar[str] = "the final result"
    sending: ClassVar[str] = "audio"

    def __init__(
        self,
        url: str,
        *,
        close_stream: bool = False,
        stream_start_s: float = 0.0,
        rate: int = 16000,
    ) -> None:
        super().__init__(url)
        self.close_stream = close_stream
        self.stream_start_s = stream_start_s
        self.text_final = ""
        self.heard = False
        self.audio_ended = False
        #: The last result was a speech_final: everything heard is final already.
        self.nothing_pending = False
        #: Audio bytes sent since the last speech_final arrived (None: none yet). Any may
        #: hold the start of a new utterance (the user spoke on before it arrived).
        self.since_eot: int | None = None
        self._slack_bytes = rate * 2 * STOPPED_ON_EOT_MS // 1000
        #: The audio ended on a final transcript: the turn is over, later results are not its.
        self.turn_over = False
        #: The request ended with a Finalize for that leftover whose answer it did not wait
        #: for (the stage drops it: it is neither this turn's nor the next's).
        self.flushed_leftover = False
        self.sent_bytes = 0

    def send_input(self, item: bytes) -> Iterator[Send]:
        self.sent_bytes += len(item)
        if self.since_eot is not None:
            self.since_eot += len(item)
        yield Send(item)

    def stopped_on_eot(self) -> bool:
        """The audio ended on the last speech_final: the turn ended there (provider
        endpointing), whatever interim of the user speaking on came after it."""
        return self.since_eot is not None and self.since_eot <= self._slack_bytes

    def send_end(self) -> Iterator[Send]:
        if not self.close_stream and (self.nothing_pending or self.stopped_on_eot()):
            # The turn is over (its transcript is what was final at its speech_final); the
            # audio sent after it is flushed now, so that the next turn on this socket does
            # not end on it, but not waited for.
            self.turn_over = True
            self.flushed_leftover = bool(self.since_eot)
            yield Send(_FINALIZE if self.flushed_leftover else None, RequestSent(0, "audio_end"))
            return
        yield Send(CLOSE_STREAM if self.close_stream else _FINALIZE, RequestSent(0, "audio_end"))

    def input_ended(self, t_ns: int) -> list[StageEvent]:
        self.audio_ended = True
        return [self._done(t_ns)] if self.turn_over else []

    def stalled(self, timeout_s: float) -> str:
        return (
            f"no final transcript from {self.url} within {timeout_s:g} s after the end of "
            "audio (read timeout): the server stalled"
        )

    def receive(self, message: str | bytes, t_ns: int) -> list[StageEvent]:
        data = json_object(message)
        if data is None:
            return []
        kind = data.get("type")
        if self.turn_over and kind in ("Results", "UtteranceEnd"):
            return []  # the leftover's, between the end of audio and the request's end
        if kind == "Results":
            return self._results(data, t_ns)
        if kind == "UtteranceEnd" and (self.text_final or self.heard):
            # Only after words of this request: a late UtteranceEnd of the previous
            # utterance must not end this turn before it has begun.
            return [EndOfTurn(t_ns)]
        if kind == "Metadata" and self.close_stream and self.audio_ended:
            done = self._done(t_ns)
            return [Done(done.t_ns, usage=metadata_usage(data))]
        if kind == "Error":
            return [self._error(t_ns, error_text(data))]
        return []

    def _earlier(self, data: Mapping[str, Any], text: str) -> bool:
        """Words that all ended before this request's first audio: an earlier request's."""
        end = audio_end_s(data) if text else None
        return end is not None and end <= self.stream_start_s + _STREAM_TOLERANCE_S

    def _results(self, data: Mapping[str, Any], t: int) -> list[StageEvent]:
        text = transcript(data)
        if self._earlier(data, text):
            return []
        if not data.get("is_final"):
            self.nothing_pending = False
            self.heard = self.heard or bool(text)
            return [Partial(t, _join(self.text_final, text))] if text else []
        events: list[StageEvent] = []
        if text:
            self.text_final = _join(self.text_final, text)
            events.append(Final(t, text))
        if data.get("speech_final"):
            self.nothing_pending = True
            self.since_eot = 0  # only audio sent after this one can open a new utterance
            if self.text_final:
                events.append(EndOfTurn(t))
        if data.get("from_finalize") and self.audio_ended:
            events.append(self._done(t))
        return events


def _join(*parts: str) -> str:
    return " ".join(p for p in parts if p)


class DeepgramTTSProtocol(WsProtocol[str]):
    """One reply on an Aura socket: a ``Speak`` and a ``Flush`` per piece."""

    awaiting: ClassVar[str] = "Flushed"
    sending: ClassVar[str] = "text"

    def __init__(self, url: str, *, rate: int) -> None:
        super().__init__(url)
        self.rate = rate
        self.pieces = 0
        self.flushed = 0
        self.text_ended = False
        self._carry = b""

    def send_input(self, item: str) -> Iterator[Send]:
        if not item.strip():
            return
        self.pieces += 1
        yield Send(json_text({"type": "Speak", "text": item}), TextSent(0, item))
        yield Send(_FLUSH)

    def input_ended(self, t_ns: int) -> list[StageEvent]:
        self.text_ended = True
        return [self._done(t_ns)] if self.flushed >= self.pieces else []

    def receive(self, message: str | bytes, t_ns: int) -> list[StageEvent]:
        if isinstance(message, bytes):
            pcm = self._carry + message
            cut = len(pcm) - len(pcm) % 2
            self._carry = pcm[cut:]
            return [Audio(t_ns, pcm[:cut], self.rate)] if cut else []
        data = json_object(message)
        if data is None:
            return []
        kind = data.get("type")
        if kind == "Flushed":
            self.flushed += 1
            if self.text_ended and self.flushed >= self.pieces:
                return [self._done(t_ns)]
        elif kind == "Error":
            return [self._error(t_ns, error_text(data))]
        # Metadata, Warning (flush rate), Cleared: nothing to measure.
        return []
