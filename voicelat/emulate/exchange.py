"""What a provider handler works with: the request, and a writer that controls every byte.

:class:`HttpExchange` writes an HTTP/1.1 response; a streamed body uses chunked transfer
encoding and each :meth:`HttpExchange.send` is exactly one ``transport.write`` (one chunk, one
TCP segment on loopback with TCP_NODELAY). :class:`WsExchange` does the same for websocket
frames on top of the ``websockets`` sans-I/O protocol. Both share the scheduling, latency
sampling, ground-truth stamping and mid-stream fault logic of :class:`_Exchange`, so a
provider handler only says *what* to send and *when*.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import socket
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol
from urllib.parse import parse_qsl, urlsplit

from websockets.datastructures import Headers
from websockets.frames import Frame, Opcode
from websockets.protocol import State
from websockets.server import ServerProtocol

from voicelat.core.measure.clock import now_ns
from voicelat.emulate.profile import STREAM_FAULTS, EmulatorConfig, Fault
from voicelat.emulate.truth import Exchange

__all__ = [
    "BadRequest",
    "ClientGone",
    "EmulatorHooks",
    "HttpExchange",
    "HttpRequest",
    "StreamEnded",
    "Upload",
    "WsExchange",
]

_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Payload Too Large",
    426: "Upgrade Required",
    429: "Too Many Requests",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


class StreamEnded(Exception):
    """Raised inside a handler when a fault ended the stream; the server stops the handler."""


class ClientGone(Exception):
    """The client closed the connection while the emulator was still answering."""


class BadRequest(Exception):
    """The request cannot be served; the handler's emulator answers with its 400 error body."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


@dataclass(frozen=True)
class Upload:
    """One file part of a multipart form."""

    filename: str
    content_type: str
    data: bytes


@dataclass
class HttpRequest:
    """A parsed request; ``t_received_ns`` is when its last byte was read (the t0 of delays)."""

    method: str
    target: str
    headers: Headers
    body: bytes
    raw_head: bytes
    t_received_ns: int
    params: dict[str, str] = field(default_factory=dict)

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    @property
    def query(self) -> dict[str, str]:
        """Query parameters (the last value of a repeated one)."""
        return dict(parse_qsl(urlsplit(self.target).query, keep_blank_values=True))

    def header(self, name: str) -> str | None:
        return self.headers.get(name)

    def json(self) -> dict[str, Any]:
        """The JSON object body, or :class:`BadRequest` with a message like the provider's."""
        try:
            data = json.loads(self.body or b"null")
        except ValueError:
            raise BadRequest(
                "We could not parse the JSON body of your request. (HINT: This likely means "
                "you aren't using your HTTP library correctly.)"
            ) from None
        if not isinstance(data, dict):
            raise BadRequest("The request body must be a JSON object.")
        return data

    def form(self) -> dict[str, str | Upload]:
        """A ``multipart/form-data`` body: text fields as str, file parts as :class:`Upload`."""
        ctype = self.headers.get("content-type", "")
        if not ctype.lower().startswith("multipart/form-data"):
            raise BadRequest("Expected a multipart/form-data body.")
        boundary = ""
        for part in ctype.split(";")[1:]:
            key, _, value = part.strip().partition("=")
            if key.lower() == "boundary":
                boundary = value.strip('"')
        if not boundary:
            raise BadRequest("The multipart body has no boundary.")
        return _parse_multipart(self.body, boundary.encode("latin-1"))


def _parse_multipart(body: bytes, boundary: bytes) -> dict[str, str | Upload]:
    out: dict[str, str | Upload] = {}
    delimiter = b"--" + boundary
    for raw in body.split(delimiter)[1:]:
        if raw.startswith(b"--"):
            break
        part = raw[2:] if raw.startswith(b"\r\n") else raw
        head, sep, data = part.partition(b"\r\n\r\n")
        if not sep:
            continue
        if data.endswith(b"\r\n"):
            data = data[:-2]
        name = filename = None
        ptype = "application/octet-stream"
        for line in head.decode("utf-8", errors="replace").split("\r\n"):
            key, _, value = line.partition(":")
            if key.strip().lower() == "content-disposition":
                for item in value.split(";")[1:]:
                    k, _, v = item.strip().partition("=")
                    if k == "name":
                        name = v.strip('"')
                    elif k == "filename":
                        filename = v.strip('"')
            elif key.strip().lower() == "content-type":
                ptype = value.strip()
        if name is None:
            continue
        if filename is not None:
            out[name] = Upload(filename, ptype, data)
        else:
            out[name] = data.decode("utf-8", errors="replace")
    return out


class EmulatorHooks(Protocol):
    """What an exchange asks of its emulator (:class:`~voicelat.emulate.base.Emulator` has it).

    A protocol rather than the class itself: the emulator's methods take exchanges, so the
    class sits above this module and importing it here would close a circle.
    """

    config: EmulatorConfig
    FAULTS: ClassVar[frozenset[str]]
    CLOSE_REASONS: ClassVar[Mapping[int, str]]

    def response_headers(self) -> list[tuple[str, str]]: ...

    def error_response(
        self, status: int, message: str | None, endpoint: str
    ) -> tuple[list[tuple[str, str]], bytes]: ...

    def stream_error_event(self, x: HttpExchange, message: str | None) -> bytes: ...

    def ws_error(self, x: WsExchange, message: str | None) -> tuple[str | None, int, str]: ...


class _Exchange:
    """Scheduling, latency draws, truth stamps and stream faults shared by HTTP and websocket."""

    endpoint: str

    def __init__(
        self,
        emulator: EmulatorHooks,
        writer: asyncio.StreamWriter,
        truth: Exchange,
        rng: random.Random,
        t0_ns: int,
    ) -> None:
        self.emulator = emulator
        self.config: EmulatorConfig = emulator.config
        self.writer = writer
        self.transport = writer.transport
        self.truth = truth
        self.rng = rng
        self.t0_ns = t0_ns
        self.fault: Fault | None = None
        self.content_sent = 0
        self._fault_done = False
        #: HTTP: the connection's reader, watched for the client going away mid-response.
        self.watched: asyncio.StreamReader | None = None
        self.last_write_ns: int | None = None

    # -- time -----------------------------------------------------------------------------
    def sample(self, name: str) -> float:
        """Draw latency ``name`` (ms) from the profile; the draw is kept in the ground truth."""
        value = self.config.latency[name].sample(self.rng)
        self.truth.injected.setdefault(name, []).append(value)
        return value

    def at(self, offset_ms: float) -> int:
        """The absolute time ``offset_ms`` after t0 (the end of the request)."""
        return self.t0_ns + round(offset_ms * 1e6)

    async def sleep_until(self, t_ns: int, schedule: str | None = None) -> None:
        """Wait for ``t_ns`` (absolute deadlines: cadence errors never accumulate).

        ``schedule`` names the mark this deadline is for, so the truth keeps intended vs actual.
        """
        if schedule is not None:
            self.truth.scheduled.setdefault(schedule, t_ns)
        self.check_client()
        delay = t_ns - now_ns()
        if delay <= 0:
            return
        if self.config.wire.timer == "spin":
            # The loop's timers wake up to ~1 ms late (epoll has ms resolution): sleep to
            # just before the deadline, then yield-spin to it (other tasks still run).
            if delay > 2_000_000:
                await asyncio.sleep((delay - 2_000_000) / 1e9)
            while now_ns() < t_ns:
                await asyncio.sleep(0)
        else:
            await asyncio.sleep(delay / 1e9)
        self.check_client()

    def check_client(self) -> None:
        """Raise :class:`ClientGone` once the client has closed its side (HTTP: EOF on the
        request stream; any: the transport closing), so a stream stops at the next deadline
        instead of writing on. The truth gets ``client_gone`` (when it was noticed) and
        ``detail["stopped_ns"]`` (the last write: when the emulator stopped sending)."""
        gone = self.transport.is_closing() or (self.watched is not None and self.watched.at_eof())
        if not gone:
            return
        if "client_gone" not in self.truth.marks:
            self.truth.mark("client_gone", now_ns())
            self.truth.detail["stopped_ns"] = self.last_write_ns
        raise ClientGone

    # -- bytes ----------------------------------------------------------------------------
    def _write(self, data: bytes, marks: Iterable[str]) -> int:
        if self.transport.is_closing():
            raise ClientGone
        # Stamped (and recorded) right before the write: a stamp taken after it can land
        # later than the client's receive stamp (with the emulator on a thread, the GIL may go
        # to the client between the send() syscall and the clock read). Before, truth <=
        # arrival, always, and a client that got the bytes can already read the mark.
        t = now_ns()
        for name in marks:
            self.truth.mark(name, t)
        self.last_write_ns = t
        self.transport.write(data)
        if self.transport.get_write_buffer_size():
            # The kernel did not take it all: this stamp is not when the bytes left.
            self.truth.detail["buffered_writes"] = self.truth.detail.get("buffered_writes", 0) + 1
        return t

    async def _drain(self) -> None:
        try:
            await self.writer.drain()
        except (ConnectionError, RuntimeError):
            raise ClientGone from None

    def abort(self) -> None:
        """Drop the connection at once: no terminator, no close frame."""
        self.transport.abort()

    def reset(self) -> None:
        """Drop the connection with a TCP RST (SO_LINGER 0), as a refusing balancer does."""
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.transport.abort()

    # -- faults ---------------------------------------------------------------------------
    async def checkpoint(self) -> None:
        """Before each content chunk: strike the planned mid-stream fault at its chunk index."""
        fault = self.fault
        if fault is None or self._fault_done or fault.kind not in STREAM_FAULTS:
            return
        if self.content_sent < fault.after:
            return
        self._fault_done = True
        self.truth.fault = fault.kind
        self.truth.mark("fault", now_ns())
        if fault.kind == "stall":
            self.truth.detail["stall_s"] = fault.seconds
            await asyncio.sleep(fault.seconds)
            return
        await self._strike(fault)
        raise StreamEnded

    async def _strike(self, fault: Fault) -> None:
        raise NotImplementedError


class HttpExchange(_Exchange):
    """One HTTP request and the response a handler writes to it."""

    def __init__(
        self,
        emulator: EmulatorHooks,
        writer: asyncio.StreamWriter,
        request: HttpRequest,
        endpoint: str,
        truth: Exchange,
        rng: random.Random,
    ) -> None:
        super().__init__(emulator, writer, truth, rng, request.t_received_ns)
        self.request = request
        self.endpoint = endpoint
        self.head_sent = False
        self.finished = False
        self.keep_alive = request.headers.get("connection", "").lower() != "close"
        self._pending = b""
        self._pending_marks: list[str] = []

    # -- response head ----------------------------------------------------------------------
    def _head(self, status: int, headers: Iterable[tuple[str, str]], extra: str) -> bytes:
        lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
        lines += [f"{k}: {v}" for k, v in headers]
        lines.append(extra)
        if not self.keep_alive:
            lines.append("connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def start(
        self, status: int = 200, headers: Iterable[tuple[str, str]] = (), *, hold: bool = False
    ) -> None:
        """Send the status line and headers of a chunked (streamed) response.

        With the profile's ``wire.coalesce_headers`` (or ``hold``) nothing is written yet: the
        head leaves in the same write as the first content chunk.
        """
        self.truth.status = status
        head = self._head(
            status, [*self.emulator.response_headers(), *headers], "transfer-encoding: chunked"
        )
        self.head_sent = True
        if hold or self.config.wire.coalesce_headers:
            self._pending += head
            self._pending_marks.append("headers_written")
            return
        self._write(head, ["headers_written"])
        await self._drain()

    async def send(self, data: bytes, marks: Iterable[str] = (), *, content: bool = False) -> None:
        """Write one chunk of the streamed body in one write.

        ``content`` chunks (tokens, transcript deltas, audio) count for mid-stream faults and
        flush a coalesced head; other chunks (e.g. a role-only chunk) are held with the head
        while it is held.
        """
        if not data:
            return
        if content:
            await self.checkpoint()
        frame = b"%x\r\n%s\r\n" % (len(data), data)
        if self._pending and not content:
            self._pending += frame
            self._pending_marks.extend(marks)
            return
        payload, all_marks = self._pending + frame, [*self._pending_marks, *marks]
        self._pending, self._pending_marks = b"", []
        self._write(payload, all_marks)
        if content:
            self.content_sent += 1
        await self._drain()

    async def end(self, marks: Iterable[str] = ("end_written",)) -> None:
        """Terminate the chunked body (with anything still held)."""
        if self.finished:
            return
        self.finished = True
        payload = self._pending + b"0\r\n\r\n"
        all_marks = [*self._pending_marks, *marks]
        self._pending, self._pending_marks = b"", []
        self._write(payload, all_marks)
        await self._drain()

    async def respond(
        self,
        status: int,
        body: bytes,
        headers: Iterable[tuple[str, str]] = (),
        marks: Iterable[str] = ("headers_written", "end_written"),
    ) -> None:
        """A complete (non-streamed) response in one write."""
        self.truth.status = status
        head = self._head(
            status, [*self.emulator.response_headers(), *headers], f"content-length: {len(body)}"
        )
        self.head_sent = self.finished = True
        self._write(head + body, marks)
        await self._drain()

    async def respond_json(
        self, status: int, data: Any, headers: Iterable[tuple[str, str]] = ()
    ) -> None:
        body = json.dumps(data, separators=(",", ":")).encode()
        await self.respond(status, body, [("content-type", "application/json"), *headers])

    async def respond_error(self, status: int, message: str | None) -> None:
        """The provider's own error response (status and JSON body shape)."""
        headers, body = self.emulator.error_response(status, message, self.endpoint)
        await self.respond(status, body, headers)

    async def _strike(self, fault: Fault) -> None:
        if fault.kind == "error_event":
            data = self.emulator.stream_error_event(self, fault.message)
            if not data:
                self.truth.detail["error_event_as"] = "truncate"
                self.keep_alive = False
                self.abort()
                return
            frame = b"%x\r\n%s\r\n" % (len(data), data)
            self._write(self._pending + frame, [*self._pending_marks])
            self._pending, self._pending_marks = b"", []
            await self.end()
        elif fault.kind == "truncate":
            if fault.mode == "eof":
                await self.end()
            else:
                if self._pending:
                    self._write(self._pending, self._pending_marks)
                    self._pending = b""
                self.keep_alive = False
                self.abort()
        else:  # close_* faults are websocket-only; on HTTP they drop the connection
            self.keep_alive = False
            self.abort()


_Message = str | bytes


class WsExchange(_Exchange):
    """One websocket session: messages in (stamped as read), frames out (one write each)."""

    def __init__(
        self,
        emulator: EmulatorHooks,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        request: HttpRequest,
        protocol: ServerProtocol,
        endpoint: str,
        truth: Exchange,
        rng: random.Random,
    ) -> None:
        super().__init__(emulator, writer, truth, rng, request.t_received_ns)
        self.request = request
        self.protocol = protocol
        self.endpoint = endpoint
        self.reader = reader
        self._inbox: asyncio.Queue[tuple[_Message | None, int]] = asyncio.Queue()
        self._reader_task: asyncio.Task[None] | None = None
        self.close_code: int | None = None
        self.close_reason: str | None = None

    @property
    def params(self) -> Mapping[str, str]:
        return self.request.params

    def start_reader(self) -> None:
        self._reader_task = asyncio.create_task(self._read_loop())

    async def _read_loop(self) -> None:
        fragments: list[bytes] = []
        opcode: Opcode | None = None
        try:
            while True:
                data = await self.reader.read(65536)
                t = now_ns()
                if not data:
                    self.protocol.receive_eof()
                else:
                    self.protocol.receive_data(data)
                for frame in self.protocol.events_received():
                    if not isinstance(frame, Frame):
                        continue
                    if frame.opcode in (Opcode.TEXT, Opcode.BINARY):
                        opcode, fragments = frame.opcode, [bytes(frame.data)]
                    elif frame.opcode == Opcode.CONT:
                        fragments.append(bytes(frame.data))
                    else:
                        continue
                    if frame.fin and opcode is not None:
                        raw = b"".join(fragments)
                        message: _Message = (
                            raw.decode("utf-8", errors="replace") if opcode == Opcode.TEXT else raw
                        )
                        self.truth.mark("message_received", t)
                        self._inbox.put_nowait((message, t))
                        fragments, opcode = [], None
                self._flush()
                if not data or self.protocol.close_rcvd is not None:
                    # The client closed (our close reply is flushed): the session is over.
                    break
        except (ConnectionError, OSError):
            pass
        finally:
            if self.protocol.close_rcvd is not None and self.close_code is None:
                self.close_code = self.protocol.close_rcvd.code
                self.close_reason = self.protocol.close_rcvd.reason
            self._inbox.put_nowait((None, now_ns()))

    def _flush(self, marks: Iterable[str] = ()) -> int | None:
        out = self.protocol.data_to_send()
        payload = b"".join(out)
        t: int | None = None
        if payload:
            try:
                t = self._write(payload, marks)
            except ClientGone:
                return None
        if out and out[-1] == b"":
            # The protocol's "end of data": after the closing handshake the server closes
            # the TCP connection first (RFC 6455 §7.1.1), or the client waits for it.
            self.transport.close()
        return t

    async def recv_stamped(self, timeout: float | None = None) -> tuple[_Message | None, int]:
        """The next message and when it was read; ``(None, t)`` once the client has closed."""
        if timeout is None:
            return await self._inbox.get()
        return await asyncio.wait_for(self._inbox.get(), timeout)

    async def recv(self, timeout: float | None = None) -> _Message | None:
        """The next text (str) or binary (bytes) message; None once the client has closed."""
        return (await self.recv_stamped(timeout))[0]

    async def send_text(
        self, text: str, marks: Iterable[str] = (), *, content: bool = False
    ) -> int:
        """Send one text frame (one write); returns its stamp (taken right before the write)."""
        return await self._send(Opcode.TEXT, text.encode("utf-8"), marks, content)

    async def send_json(
        self, data: Any, marks: Iterable[str] = (), *, content: bool = False
    ) -> int:
        return await self.send_text(json.dumps(data, separators=(",", ":")), marks, content=content)

    async def send_bytes(
        self, data: bytes, marks: Iterable[str] = (), *, content: bool = False
    ) -> int:
        return await self._send(Opcode.BINARY, data, marks, content)

    async def _send(self, opcode: Opcode, data: bytes, marks: Iterable[str], content: bool) -> int:
        if content:
            await self.checkpoint()
        if self.protocol.state is not State.OPEN:
            raise ClientGone
        if opcode == Opcode.TEXT:
            self.protocol.send_text(data)
        else:
            self.protocol.send_binary(data)
        payload = b"".join(self.protocol.data_to_send())
        t = self._write(payload, marks)
        if content:
            self.content_sent += 1
        await self._drain()
        return t

    async def close(self, code: int = 1000, reason: str = "", wait_s: float = 1.0) -> None:
        """Send a close frame, wait (briefly) for the client's, then close the socket."""
        if self.protocol.state is State.OPEN:
            self.protocol.send_close(code, reason)
            self._flush(["closed"])
            self.truth.detail["close_code"] = code
        if self._reader_task is not None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(self._reader_task), wait_s)
        self.writer.close()

    async def _strike(self, fault: Fault) -> None:
        if fault.kind in ("close_1011", "close_1008"):
            code = int(fault.kind.removeprefix("close_"))
            reason = fault.message or self.emulator.CLOSE_REASONS.get(code, "")
            await self.close(code, reason)
        elif fault.kind == "error_event":
            message, code, reason = self.emulator.ws_error(self, fault.message)
            if message is not None:
                self.protocol.send_text(message.encode("utf-8"))
                self._flush()
            await self.close(code, reason)
        elif fault.kind == "truncate":
            self.abort()
        else:
            self.abort()

    def redraw_fault(self) -> Fault | None:
        """Draw a fresh mid-stream fault (e.g. per turn on a long-lived socket)."""
        from voicelat.emulate.profile import WS_FAULTS

        kinds = frozenset(WS_FAULTS & self.emulator.FAULTS & STREAM_FAULTS)
        self.fault = self.config.draw_fault(self.rng, self.endpoint, kinds)
        self._fault_done = False
        self.content_sent = 0
        return self.fault

    async def finish(self) -> None:
        """Stop reading (the server calls this when the handler returns)."""
        if self._reader_task is not None and not self._reader_task.done():
            self._reader_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader_task
