"""``acme-llm``: Acme's streaming chat API (OpenAI-compatible ``/chat/completions`` over SSE).

A complete voicelat LLM stage in one module, using only voicelat's public pieces: the stage
contract (``voicelat.stages.base``), option parsing (``voicelat.stages.options``), the stage
events (``voicelat.core.measure.events``), the clock seam and an SSE decoder (``voicelat.core``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Self

import httpx

from voicelat.core.base.errors import StageError
from voicelat.core.measure.clock import Clock
from voicelat.core.measure.events import (
    Connected,
    Delta,
    Done,
    Failed,
    RequestSent,
    Span,
    StageEvent,
    StageName,
)
from voicelat.core.measure.sse import SSEDecoder
from voicelat.stages.base import MONOTONIC
from voicelat.stages.options import OptionProblem, parse_options, read_secret


@dataclass(frozen=True, kw_only=True)
class AcmeLLMOptions:
    """The ``[llm]`` table of a pipeline using ``stage = "acme-llm"``: one field per key."""

    base_url: str = "https://api.acme.example/v1"
    model: str = "acme-mini"
    max_tokens: int = 120
    temperature: float = 0.0
    system: str | None = None
    api_key_env: str | None = "ACME_API_KEY"  # the NAME of the variable, never the key
    timeout_s: float = 30.0

    def check(self) -> None:
        """Values of the right type that still cannot work (parse_options calls this)."""
        if not self.base_url.startswith(("http://", "https://")):
            raise OptionProblem(
                "base_url", f"base_url must start with http:// or https://, got {self.base_url!r}"
            )
        if self.max_tokens < 1:
            raise OptionProblem(
                "max_tokens", f"max_tokens must be at least 1, got {self.max_tokens}"
            )


class AcmeLLM:
    """Streams a reply from Acme's chat API and reports every delta as it arrives."""

    kind: ClassVar[StageName] = "llm"
    #: With ``stack = "local"`` and no ``base_url``, voicelat fills this option with the
    #: embedded LLM server's address (its llama.cpp server speaks the same API).
    stack_url_option: ClassVar[str] = "base_url"

    def __init__(self, options: Mapping[str, Any], *, table: str = "llm") -> None:
        # Configuration errors surface here, before anything connects: one line, exit 2.
        self.options = parse_options(AcmeLLMOptions, table, options)
        self._key = read_secret(table, self.options.api_key_env)
        self.base_url = self.options.base_url.rstrip("/")
        #: voicelat replaces this before ``__aenter__`` (a fake clock in its unit tests).
        self.clock: Clock = MONOTONIC
        self._client: httpx.AsyncClient | None = None
        self._server: str | None = None

    # -- lifecycle: connect and warm up outside any measured turn ----------------------------
    async def __aenter__(self) -> Self:
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        self._client = httpx.AsyncClient(headers=headers, timeout=self.options.timeout_s)
        try:
            r = await self._client.get(f"{self.base_url}/models")
        except httpx.HTTPError as exc:
            await self._client.aclose()
            raise StageError(
                f"acme-llm: server not reachable at {self.base_url} ({type(exc).__name__}): "
                "start it or fix base_url",
                exit_code=3,
            ) from None
        if r.status_code in (401, 403):
            await self._client.aclose()
            raise StageError(
                f"acme-llm: {self.base_url} refused the API key (HTTP {r.status_code}): "
                f"check ${self.options.api_key_env}",
                exit_code=3,
            )
        self._server = r.headers.get("server")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def prepare(self) -> None:
        """Nothing to re-warm: httpx keeps the connection the warm-up opened."""

    def describe(self) -> dict[str, Any]:
        return {
            "stage": "acme-llm",
            "base_url": self.base_url,
            "model": self.options.model,
            "server": self._server,
        }

    # -- one turn ----------------------------------------------------------------------------
    def _body(self, text: str) -> dict[str, Any]:
        o = self.options
        messages = [{"role": "system", "content": o.system}] if o.system else []
        messages.append({"role": "user", "content": text})
        return {
            "model": o.model,
            "messages": messages,
            "stream": True,
            "max_tokens": o.max_tokens,
            "temperature": o.temperature,
        }

    async def complete(self, text: str) -> AsyncIterator[StageEvent]:
        assert self._client is not None, "use the stage as an async context manager"
        t_request = self.clock.now_ns()
        yield RequestSent(t_request, "completion")
        try:
            async with self._client.stream(
                "POST", f"{self.base_url}/chat/completions", json=self._body(text)
            ) as response:
                t_headers = self.clock.now_ns()  # first statement after the headers arrived
                # The warm-up opened the connection: this request reuses it (not cold).
                yield Connected(t_headers, cold=False, new_connection=False)
                yield Span("response_headers", t_request, t_headers)
                if response.status_code != 200:
                    body = (await response.aread())[:200].decode(errors="replace")
                    yield Failed(self.clock.now_ns(), f"HTTP {response.status_code}: {body}")
                    return
                async for event in self._read(response):
                    yield event
        except httpx.HTTPError as exc:
            yield Failed(self.clock.now_ns(), f"{type(exc).__name__} from {self.base_url}: {exc}")

    async def _read(self, response: httpx.Response) -> AsyncIterator[StageEvent]:
        decoder = SSEDecoder()
        finish: str | None = None
        async for chunk in response.aiter_raw():
            t = self.clock.now_ns()  # stamp before parsing: the arrival, not the parse
            for ev in decoder.feed(chunk, t):
                if ev.data.strip() == "[DONE]":
                    yield Done(ev.t_ns, finish)
                    return
                try:
                    data = json.loads(ev.data)
                except ValueError:
                    yield Failed(ev.t_ns, f"malformed SSE data: {ev.data[:80]!r}")
                    return
                for choice in data.get("choices") or []:
                    content = (choice.get("delta") or {}).get("content") or ""
                    yield Delta(ev.t_ns, content=content)
                    finish = choice.get("finish_reason") or finish
        yield Failed(self.clock.now_ns(), "the stream ended before [DONE]")
