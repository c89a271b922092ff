"""AssemblyAI Universal-Streaming v3 (PROTOCOLS.md §7), sans-I/O.

AssemblyAI wants 50-1000 ms of audio per binary message (it closes the socket with 3007
otherwise), so frames are grouped into ``chunk_bytes`` messages and the last, shorter group
is padded with silence. ``Turn`` messages with a non-empty ``transcript`` (only finalized
words) are :class:`~voicelat.core.measure.events.Partial`; ``end_of_turn: true`` is both
:class:`~voicelat.core.measure.events.EndOfTurn` and :class:`~voicelat.core.measure.events.Final` (with
``wait_formatted``, the ``turn_is_formatted`` copy is the Final). At the end of the audio an
open turn is closed with ``ForceEndpoint``. When the server already ended the turn, the
request ends with the audio; audio that went out after that end of turn (the client kept
sending until it arrived: the user may have spoken on) may have opened a new turn, which is
closed with ``ForceEndpoint`` too but not waited for (:attr:`AssemblyAIProtocol.
flushed_leftover`): the stage drops the answer (:class:`LeftoverTurn`,
:mod:`voicelat.stages._leftover`). Turns of earlier requests on the session (a late formatted
copy, a leftover's turn) are told apart by ``turn_order`` (``next_order``, which the session
carries from request to request) and by stream time: a ``Turn`` whose words all ended before
the request's first audio (``stream_start_ms``, the ms of audio sent on the session before
it, as ``words[].end`` counts) is an earlier request's.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from voicelat.core.measure.events import EndOfTurn, Final, Partial, RequestSent, StageEvent
from voicelat.stages.protocols.base import Send, WsProtocol, json_object, json_text

__all__ = ["TERMINATE", "AssemblyAIProtocol", "LeftoverTurn", "words_end_ms"]

TERMINATE = json_text({"type": "Terminate"})
_FORCE_ENDPOINT = json_text({"type": "ForceEndpoint"})
#: A word of this request ends well after its first audio; one ending at most this much later
#: (rounding to ms, the padding of the last chunk) is an earlier request's.
_STREAM_TOLERANCE_MS = 10
#: Audio that may follow an end of turn the caller stopped on (see the Deepgram protocol).
STOPPED_ON_EOT_MS = 100


def words_end_ms(data: Mapping[str, Any]) -> int | None:
    """The latest ``words[].end`` of a ``Turn`` (ms of the session's audio); None: no words."""
    words = data.get("words")
    ends = [w.get("end") for w in words if isinstance(w, dict)] if isinstance(words, list) else []
    times = [int(e) for e in ends if isinstance(e, int | float)]
    return max(times) if times else None


class LeftoverTurn:
    """Reads the answer to a leftover's ``ForceEndpoint`` off the session between requests:
    :meth:`answered` is true at the end of turn of an order not ended yet; ``next_order``
    then says which order the next request starts at."""

    def __init__(self, next_order: int) -> None:
        self.next_order = next_order

    def answered(self, message: str | bytes) -> bool:
        try:
            data = json_object(message)
        except ValueError:  # nested too deeply: not the end of a turn
            return False
        if data is None or data.get("type") != "Turn" or not data.get("end_of_turn"):
            return False
        order = data.get("turn_order")
        if not isinstance(order, int) or order < self.next_order:
            return False  # an earlier turn's formatted copy
        self.next_order = order + 1
        return True


class AssemblyAIProtocol(WsProtocol[bytes]):
    """One turn on a streaming session."""

    awaiting: ClassVar[str] = "the end of turn"
    sending: ClassVar[str] = "audio"

    def __init__(
        self,
        url: str,
        *,
        chunk_bytes: int,
        wait_formatted: bool = False,
        next_order: int = 0,
        stream_start_ms: float = 0.0,
        rate: int = 16000,
    ) -> None:
        super().__init__(url)
        self.chunk_bytes = chunk_bytes
        self.wait_formatted = wait_formatted
        self.next_order = next_order
        self.stream_start_ms = stream_start_ms
        self.open_turn = False
        self.ended = 0
        self.audio_ended = False
        #: Audio bytes sent since the last end of turn arrived (None: none yet). Any may
        #: hold the start of a new turn (the user spoke on before it arrived).
        self.since_eot: int | None = None
        self._slack_bytes = rate * 2 * STOPPED_ON_EOT_MS // 1000
        #: The audio ended after the server had ended the turn: later Turns are not this one's.
        self.turn_over = False
        #: The request ended with a ForceEndpoint for that leftover whose answer it did not
        #: wait for (the stage drops it: it is neither this turn's nor the next's).
        self.flushed_leftover = False
        self.sent_bytes = 0
        self._buf = b""

    def send_input(self, item: bytes) -> Iterator[Send]:
        self._buf += item
        if self.since_eot is not None:
            self.since_eot += len(item)
        if len(self._buf) >= self.chunk_bytes:
            chunk, self._buf = self._buf, b""
            self.sent_bytes += len(chunk)
            yield Send(chunk)

    def stopped_on_eot(self) -> bool:
        """The audio ended on the last end of turn: the turn ended there (provider
        endpointing), whatever Turn of the user speaking on came after it."""
        return self.since_eot is not None and self.since_eot <= self._slack_bytes

    def send_end(self) -> Iterator[Send]:
        if self._buf:
            chunk, self._buf = self._buf, b""
            chunk += bytes(self.chunk_bytes - len(chunk))
            self.sent_bytes += len(chunk)
            yield Send(chunk)
        if self._turn_closed() or (self.ended and self.stopped_on_eot()):
            # The server already ended the turn; the audio sent after it is closed now, so
            # that the next request on this session does not end on it, but not waited for.
            self.turn_over = True
            self.flushed_leftover = bool(self.since_eot)
            yield Send(
                _FORCE_ENDPOINT if self.flushed_leftover else None, RequestSent(0, "audio_end")
            )
        else:
            yield Send(_FORCE_ENDPOINT, RequestSent(0, "audio_end"))

    def _turn_closed(self) -> bool:
        return bool(self.ended) and not self.open_turn

    def input_ended(self, t_ns: int) -> list[StageEvent]:
        self.audio_ended = True
        return [self._done(t_ns)] if self.turn_over or self._turn_closed() else []

    def stalled(self, timeout_s: float) -> str:
        return (
            f"no end of turn from {self.url} within {timeout_s:g} s after the end of audio "
            "(read timeout): the server stalled"
        )

    def receive(self, message: str | bytes, t_ns: int) -> list[StageEvent]:
        data = json_object(message)
        if data is None:
            return []
        kind = data.get("type")
        if kind == "Error" or ("error" in data and kind is None):
            code = data.get("error_code")
            suffix = f" ({code})" if code else ""
            return [self._error(t_ns, f"{data.get('error')}{suffix}")]
        if kind != "Turn" or self.turn_over:
            # Begin, SpeechStarted, Warning, Heartbeat, Termination; or a leftover's Turn
            # between the end of audio and the request's end.
            return []
        order = data.get("turn_order")
        if not isinstance(order, int) or order < self.next_order:
            return []  # a turn an earlier request already ended (its formatted copy)
        end = words_end_ms(data)
        if end is not None and end <= self.stream_start_ms + _STREAM_TOLERANCE_MS:
            # Its words ended before this request's first audio: an earlier request's.
            if data.get("end_of_turn"):
                self.next_order = order + 1
            return []
        return self._turn(data, order, t_ns)

    def _turn(self, data: Mapping[str, Any], order: int, t: int) -> list[StageEvent]:
        text = str(data.get("transcript") or "").strip()
        if not data.get("end_of_turn"):
            self.open_turn = True
            return [Partial(t, text)] if text else []
        if self.wait_formatted and not data.get("turn_is_formatted"):
            self.since_eot = 0
            return [EndOfTurn(t)]
        self.next_order = order + 1
        self.ended += 1
        self.open_turn = False
        self.since_eot = 0  # only audio sent after this one can open a new turn
        events: list[StageEvent] = [] if self.wait_formatted else [EndOfTurn(t)]
        if text:
            events.append(Final(t, text))
        if self.audio_ended:
            events.append(self._done(t))
        return events
