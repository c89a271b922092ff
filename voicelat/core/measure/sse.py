"""A sans-I/O Server-Sent Events decoder (WHATWG framing, as the OpenAI SDK parses it).

Bytes go in as they arrive, each piece with the time it arrived; complete events come out
carrying the arrival time of the piece that completed them, so a stage can stamp each event
without re-reading a clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: A line ends at CRLF, CR or LF (WHATWG); CRLF first so it counts as one end.
_LINE_END = re.compile(rb"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event: ``data`` lines joined by newlines."""

    t_ns: int
    data: str
    event: str = ""
    id: str = ""


class SSEDecoder:
    """Incremental decoder; feed it raw bytes in arrival order.

    Each byte is looked at once: a chunk is searched for line ends by the regex engine, and the
    unfinished line is kept as a list of pieces joined only when its end arrives. (Rescanning the
    whole buffer per chunk made a 1 MB event in 4 KiB reads cost seconds on the measuring loop.)
    """

    def __init__(self) -> None:
        self._partial: list[bytes] = []
        self._data: list[str] = []
        self._event = ""
        self._id = ""
        self._pending_cr = False

    def feed(self, chunk: bytes, t_ns: int) -> list[SSEEvent]:
        """Decode what ``chunk`` completes; events are stamped with ``t_ns``."""
        out: list[SSEEvent] = []
        if self._pending_cr and chunk[:1] == b"\n":
            chunk = chunk[1:]  # \r\n split across two chunks: the \r already ended the line
        self._pending_cr = False
        start = 0
        for m in _LINE_END.finditer(chunk):
            piece = chunk[start : m.start()]
            if self._partial:
                self._partial.append(piece)
                piece = b"".join(self._partial)
                self._partial = []
            event = self._line(piece.decode("utf-8", errors="replace"), t_ns)
            if event is not None:
                out.append(event)
            start = m.end()
        if start < len(chunk):
            self._partial.append(chunk[start:])
        elif chunk.endswith(b"\r"):
            self._pending_cr = True
        return out

    def _line(self, line: str, t_ns: int) -> SSEEvent | None:
        if not line:
            if not self._data:
                self._event = ""
                return None
            event = SSEEvent(t_ns, "\n".join(self._data), self._event, self._id)
            self._data = []
            self._event = ""
            return event
        if line.startswith(":"):
            return None
        field, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id":
            self._id = value
        return None
