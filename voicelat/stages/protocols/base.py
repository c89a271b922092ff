"""What every websocket provider protocol has: the message shapes and the request's end state.

A protocol object serves one request (one turn) on a connection. The driver hands it each
input item (an audio frame, a text piece) and sends what :meth:`WsProtocol.send_input` returns,
then what :meth:`WsProtocol.send_end` returns; it feeds every message with its arrival stamp to
:meth:`WsProtocol.receive` and reports the events it returns. The request is over when
:attr:`WsProtocol.finished` is set (it ended as the protocol says) or an event is ``Failed``.
The ``send_*`` methods are generators the driver reads one message at a time: a decision made
for a later message (is a flush needed?) sees every message received while the earlier one
was being sent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from voicelat.core.base import jsontext
from voicelat.core.measure.events import Done, Failed, RequestSent, StageEvent, TextSent

__all__ = ["In", "Send", "WsProtocol", "json_object", "json_text"]

In = TypeVar("In", bytes, str)


@dataclass(frozen=True, slots=True)
class Send:
    """One message to send (``data`` None: nothing to send, only ``event`` to report) and the
    event its hand-over is reported as; the driver stamps ``event`` when it hands the message
    to the socket (the ``t_ns`` given here is a placeholder)."""

    data: str | bytes | None
    event: TextSent | RequestSent | None = None


def json_text(obj: Any) -> str:
    """The compact JSON text a message goes out as."""
    return json.dumps(obj, separators=(",", ":"))


def json_object(message: str | bytes) -> dict[str, Any] | None:
    """A text message's JSON object; None for a binary message, bad JSON or another value.

    A message nested too deeply to parse raises :class:`~voicelat.core.base.jsontext.TooDeep`:
    it is no message a provider sends (a hostile or broken server), and the driver fails the
    request with a reason naming the stage rather than skip it and wait for a read timeout.
    """
    if isinstance(message, bytes):
        return None
    try:
        data = jsontext.loads(message)
    except jsontext.TooDeep:
        raise
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


class WsProtocol(Generic[In]):
    """One request's protocol state; subclasses parse their provider's messages."""

    #: What the request waits for at the end (for "closed ... before <awaiting>").
    awaiting: ClassVar[str] = "the end of the request"
    #: What the sender sends ("sending <sending> to <url> failed").
    sending: ClassVar[str] = "audio"
    #: A protocol with deadlines of its own (a reply that ends by going quiet) is ticked at
    #: least this often (:meth:`tick`); it then owns its stall detection too. None: no ticks.
    tick_s: ClassVar[float | None] = None

    def __init__(self, url: str) -> None:
        self.url = url
        self.finished = False

    def send_input(self, item: In) -> Iterator[Send]:
        """The messages one input item goes out as (none for an item worth nothing)."""
        yield Send(item)

    def send_end(self) -> Iterator[Send]:
        """The messages that end the input."""
        yield from ()

    def input_ended(self, t_ns: int) -> list[StageEvent]:
        """The sender has sent everything (``t_ns``: its last hand-over)."""
        return []

    def receive(self, message: str | bytes, t_ns: int) -> list[StageEvent]:
        """The events one message, stamped on arrival, stands for."""
        raise NotImplementedError

    def tick(self, now_ns: int) -> list[StageEvent]:
        """The events the protocol's own deadlines give at ``now_ns`` (only with ``tick_s``)."""
        return []

    def stalled(self, timeout_s: float) -> str:
        """Why the request failed when nothing came for ``timeout_s`` after the input ended."""
        return f"no audio from {self.url} for {timeout_s:g} s (read timeout): the server stalled"

    # -- for subclasses --------------------------------------------------------------------------
    def _done(self, t_ns: int) -> Done:
        self.finished = True
        return Done(t_ns)

    def _error(self, t_ns: int, detail: str) -> Failed:
        return Failed(t_ns, f"error from {self.url}: {detail}")

    def _failed(self, t_ns: int, problem: str) -> Failed:
        return Failed(t_ns, f"{self.url}: {problem}")
