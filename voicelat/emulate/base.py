"""The provider side of the emulator framework: what one emulator declares and implements.

A provider emulator is a subclass of :class:`Emulator` that declares its name, endpoints,
the latency keys, content options and faults it understands (with defaults), and returns
:class:`Route` objects binding HTTP paths and websocket paths to handlers. The framework
(:mod:`voicelat.emulate.server`) does the rest: parsing, auth, fault draws, the websocket
handshake, ground truth. See docs/EMULATORS.md, "Adding a provider".
"""

from __future__ import annotations

import base64
import hmac
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from voicelat.emulate.exchange import HttpExchange, HttpRequest, WsExchange
from voicelat.emulate.profile import EmulatorConfig
from voicelat.emulate.spec import EmulatorSpec

__all__ = ["Emulator", "HttpHandler", "Route", "WsHandler", "b64", "basic_key", "bearer_key"]

HttpHandler = Callable[[HttpExchange], Awaitable[None]]
WsHandler = Callable[[WsExchange], Awaitable[None]]


@dataclass(frozen=True)
class Route:
    """``method`` is GET/POST, or ``WS`` for a websocket upgrade on ``path``.

    ``path`` may hold ``{name}`` segments (``/v1/text-to-speech/{voice_id}/stream``); their
    values reach the handler as ``request.params``. ``endpoint`` names the route in fault
    filters and the ground truth. ``work`` routes take faults; metadata routes do not.
    """

    method: str
    path: str
    handler: Callable[[Any], Awaitable[None]]
    endpoint: str
    work: bool = True

    def match(self, path: str) -> dict[str, str] | None:
        return _params(_compile(self.path), path)


_PATTERNS: dict[str, re.Pattern[str]] = {}


def _compile(template: str) -> re.Pattern[str]:
    pattern = _PATTERNS.get(template)
    if pattern is None:
        regex = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(template))
        pattern = _PATTERNS[template] = re.compile(f"^{regex}$")
    return pattern


def _params(pattern: re.Pattern[str], path: str) -> dict[str, str] | None:
    m = pattern.match(path)
    return dict(m.groupdict()) if m else None


def bearer_key(request: HttpRequest, scheme: str = "bearer") -> str | None:
    """The credential of ``Authorization: <scheme> <key>`` (scheme matched case-insensitively)."""
    value = request.headers.get("authorization")
    if not value:
        return None
    got, _, key = value.strip().partition(" ")
    if got.lower() != scheme.lower():
        return None
    return key.strip() or None


def basic_key(request: HttpRequest) -> str | None:
    """Inworld-style ``Authorization: Basic <key>``: the key is used as it was copied."""
    return bearer_key(request, "basic")


class Emulator(EmulatorSpec):
    """Base class of a provider emulator. One instance serves one port.

    Subclasses set the class attributes of :class:`~voicelat.emulate.spec.EmulatorSpec` (name,
    endpoints, latency keys, content options, faults) and implement :meth:`routes`,
    :meth:`authenticate`, :meth:`error_response` and (for faults) :meth:`stream_error_event`
    and/or :meth:`ws_error`.
    """

    def __init__(self, config: EmulatorConfig) -> None:
        self.config = config
        self.content: Mapping[str, Any] = config.content

    # -- lifecycle --------------------------------------------------------------------------
    async def startup(self) -> None:
        """Load what the content needs (local engines run off the event loop)."""

    async def shutdown(self) -> None:
        """Release what :meth:`startup` loaded."""

    # -- what subclasses implement --------------------------------------------------------
    def routes(self) -> Sequence[Route]:
        raise NotImplementedError

    def authenticate(self, request: HttpRequest) -> str | None:
        """None when the request may proceed, else the provider's 401 message."""
        return None

    def ws_reject(self, request: HttpRequest, endpoint: str) -> tuple[int, str] | None:
        """Before a websocket upgrade is accepted: None, or the HTTP status and message to
        refuse it with (a provider that validates query parameters at the handshake)."""
        return None

    def error_response(
        self, status: int, message: str | None, endpoint: str
    ) -> tuple[list[tuple[str, str]], bytes]:
        """Headers and body of an HTTP error (401, 404, 429, 500, ...) in the provider's shape."""
        body = json.dumps({"error": {"message": message or _DEFAULT_MESSAGES.get(status, "")}})
        return [("content-type", "application/json")], body.encode()

    def stream_error_event(self, x: HttpExchange, message: str | None) -> bytes:
        """The bytes of one mid-stream error event (one chunk of the streamed body); empty
        when the stream has no way to carry one (raw audio): the stream is then cut."""
        return b""

    def ws_error(self, x: WsExchange, message: str | None) -> tuple[str | None, int, str]:
        """A websocket error: the message to send first (or None), then close code and reason."""
        return None, 1011, message or self.CLOSE_REASONS.get(1011, "internal error")

    def response_headers(self) -> list[tuple[str, str]]:
        """Headers on every response (a request id, the server name...)."""
        return [("server", f"voicelat-emulator/{self.name}")]

    # -- helpers for subclasses ---------------------------------------------------------
    def check_key(self, presented: str | None) -> str | None:
        """'missing', 'wrong' or None: any non-empty key passes unless the profile pins one."""
        if not self.config.auth:
            return None
        if not presented:
            return "missing"
        pinned = self.config.api_key
        if pinned is not None and not hmac.compare_digest(presented.encode(), pinned.encode()):
            return "wrong"
        return None


_DEFAULT_MESSAGES = {
    400: "Bad request.",
    401: "Unauthorized.",
    404: "Not found.",
    429: "Rate limit exceeded.",
    500: "Internal server error.",
}


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
