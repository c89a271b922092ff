"""A sans-I/O Server-Sent Events decoder (WHATWG framing, as the OpenAI SDK parses it).

Bytes go in as they arrive, each piece with the time it arrived; complete events come out
carrying the arrival time of the piece that completed them, so a stage can stamp each event
without re-reading a clock.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event: ``data`` lines joined by newlines."""

    t_ns: int
    data: str
    event: str = ""
    id: str = ""


class SSEDecoder:
    """Incremental decoder; feed it raw bytes in arrival order."""

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[str] = []
        self._event = ""
        self._id = ""
        self._pending_cr = False

    def feed(self, chunk: bytes, t_ns: int) -> list[SSEEvent]:
        """Decode what ``chunk`` completes; events are stamped with ``t_ns``."""
        out: list[SSEEvent] = []
        buf = self._buf + chunk
        start = 0
        i = 0
        n = len(buf)
        while i < n:
            c = buf[i]
            if c == 0x0A and self._pending_cr:
                # \r\n: the \r already ended the line.
                self._pending_cr = False
                i += 1
                start = i
                continue
            self._pending_cr = False
            if c in (0x0A, 0x0D):
                line = buf[start:i].decode("utf-8", errors="replace")
                self._pending_cr = c == 0x0D
                event = self._line(line, t_ns)
                if event is not None:
                    out.append(event)
                i += 1
                start = i
                continue
            i += 1
        self._buf = buf[start:]
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
