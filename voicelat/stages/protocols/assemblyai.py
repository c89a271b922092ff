"""AssemblyAI Universal-Streaming v3 (PROTOCOLS.md §7), sans-I/O.

AssemblyAI wants 50-1000 ms of audio per binary message (it closes the socket with 3007
otherwise), so frames are grouped into ``chunk_bytes`` messages and the last, shorter group
is padded with silence. ``Turn`` messages with a non-empty ``transcript`` (only finalized
words) are :class:`~voicelat.core.events.Partial`; ``end_of_turn: true`` is both
:class:`~voicelat.core.events.EndOfTurn` and :class:`~voicelat.core.events.Final` (with
``wait_formatted``, the ``turn_is_formatted`` copy is the Final). At the end of the audio an
open turn is closed with ``ForceEndpoint``; a turn the server already ended needs nothing.
Turns of earlier requests on the session (a late formatted copy) are told apart by
``turn_order`` (``next_order``, which the session carries from request to request).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from voicelat.core.events import EndOfTurn, Final, Partial, RequestSent, StageEvent
from voicelat.stages.protocols.base import Send, WsProtocol, json_object, json_text

__all__ = ["TERMINATE", "AssemblyAIProtocol"]

TERMINATE = json_text({"type": "Terminate"})
_FORCE_ENDPOINT = json_text({"type": "ForceEndpoint"})


class AssemblyAIProtocol(WsProtocol[bytes]):
    """One turn on a streaming session."""

    awaiting: ClassVar[str] = "the end of turn"
    sending: ClassVar[str] = "audio"

    def __init__(
        self, url: str, *, chunk_bytes: int, wait_formatted: bool = False, next_order: int = 0
    ) -> None:
        super().__init__(url)
        self.chunk_bytes = chunk_bytes
        self.wait_formatted = wait_formatted
        self.next_order = next_order
        self.open_turn = False
        self.ended = 0
        self.audio_ended = False
        self._buf = b""

    def send_input(self, item: bytes) -> Iterator[Send]:
        self._buf += item
        if len(self._buf) >= self.chunk_bytes:
            chunk, self._buf = self._buf, b""
            yield Send(chunk)

    def send_end(self) -> Iterator[Send]:
        if self._buf:
            chunk, self._buf = self._buf, b""
            yield Send(chunk + bytes(self.chunk_bytes - len(chunk)))
        if self._turn_closed():
            yield Send(None, RequestSent(0, "audio_end"))  # the server already ended the turn
        else:
            yield Send(_FORCE_ENDPOINT, RequestSent(0, "audio_end"))

    def _turn_closed(self) -> bool:
        return bool(self.ended) and not self.open_turn

    def input_ended(self, t_ns: int) -> list[StageEvent]:
        self.audio_ended = True
        return [self._done(t_ns)] if self._turn_closed() else []

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
        if kind != "Turn":
            return []  # Begin, SpeechStarted, Warning, Heartbeat, Termination
        order = data.get("turn_order")
        if not isinstance(order, int) or order < self.next_order:
            return []  # a turn an earlier request already ended (its formatted copy)
        return self._turn(data, order, t_ns)

    def _turn(self, data: Mapping[str, Any], order: int, t: int) -> list[StageEvent]:
        text = str(data.get("transcript") or "").strip()
        if not data.get("end_of_turn"):
            self.open_turn = True
            return [Partial(t, text)] if text else []
        if self.wait_formatted and not data.get("turn_is_formatted"):
            return [EndOfTurn(t)]
        self.next_order = order + 1
        self.ended += 1
        self.open_turn = False
        events: list[StageEvent] = [] if self.wait_formatted else [EndOfTurn(t)]
        if text:
            events.append(Final(t, text))
        if self.audio_ended:
            events.append(self._done(t))
        return events
