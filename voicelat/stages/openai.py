"""OpenAI-compatible LLM stage: ``/v1/chat/completions`` or ``/v1/completions`` over SSE (httpx).

Every raw read of the response body is stamped on arrival, before parsing; the SSE decoder hands
each event the stamp of the read that completed it. Network sub-spans come from httpcore's
``trace`` extension (connect, TLS, request sent, response headers) and a missing ``connect_tcp``
marks a warm (reused) connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any, ClassVar

import httpx

from voicelat.core.errors import StageError
from voicelat.core.events import (
    Delta,
    Done,
    Failed,
    RequestSent,
    ServerTiming,
    StageEvent,
    StageName,
)
from voicelat.core.sse import SSEDecoder
from voicelat.stages.base import Options
from voicelat.stages.http import (
    HttpStage,
    Trace,
    auth_header,
    network_reason,
    stream_error,
)

_REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_text")
_ALLOWED = {
    "base_url",
    "endpoint",
    "model",
    "max_tokens",
    "temperature",
    "stop",
    "system",
    "prompt_template",
    "api_key_env",
    "auth",
    "timeout_s",
    "keepalive",
    "include_usage",
    "seed",
    "extra_body",
}
_DEFAULT_TEMPLATE = (
    "The following is a conversation with a friendly voice assistant.\nUser: {text}\nAssistant:"
)


class OpenAILLM(HttpStage):
    """Streams a completion from any OpenAI-compatible server (OpenAI, vLLM, llama.cpp, ...)."""

    kind: ClassVar[StageName] = "llm"
    stage_name: ClassVar[str] = "LLM"
    #: The option a ``stack = "local"`` pipeline fills with the embedded server's address.
    stack_url_option: ClassVar[str] = "base_url"

    def __init__(self, options: Mapping[str, Any], *, table: str = "llm") -> None:
        o = Options(table, options, _ALLOWED)
        self.base_url = o.text("base_url").rstrip("/")
        self.endpoint = o.text("endpoint", "chat")
        if self.endpoint not in ("chat", "completions"):
            raise StageError(
                f"[{table}] endpoint must be 'chat' or 'completions', not {self.endpoint!r}"
            )
        self.model = o.text("model", "default")
        self.max_tokens = o.integer("max_tokens", 64)
        self.temperature = o.number("temperature", 0.0)
        self.stop = o.text_list("stop", [])
        self.system = o.opt_text("system")
        self.template = o.text("prompt_template", _DEFAULT_TEMPLATE)
        self.timeout_s = o.number("timeout_s", 30.0)
        self.keepalive = o.flag("keepalive", True)
        self.include_usage = o.flag("include_usage", True)
        self.seed = self._seed(o)
        extra = o.values.get("extra_body", {})
        if not isinstance(extra, dict):
            raise StageError(f"[{table}] extra_body must be a table")
        self.extra_body: dict[str, Any] = extra
        super().__init__()
        self._auth = auth_header(o, table, "bearer")
        self._headers = {"Accept": "text/event-stream", "Accept-Encoding": "identity", **self._auth}
        self._server_info: dict[str, Any] = {}

    @staticmethod
    def _seed(o: Options) -> int | None:
        v = o.values.get("seed")
        if v is None:
            return None
        return o.integer("seed", 0)

    def _warmed(self, response: httpx.Response) -> None:
        try:
            data = response.json().get("data") or []
            self._server_info = {"models": [m.get("id") for m in data][:5]}
        except (ValueError, AttributeError):
            self._server_info = {}
        self._server_info["server"] = self._server

    def describe(self) -> dict[str, Any]:
        return {
            "stage": "openai",
            "base_url": self.base_url,
            "endpoint": self.endpoint,
            "model": self.model,
            "max_tokens": self.max_tokens,
            **self._server_info,
        }

    # -- the turn ----------------------------------------------------------------------------
    def _body(self, text: str) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {
            "model": self.model,
            "stream": True,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
        }
        if self.stop:
            body["stop"] = self.stop
        if self.seed is not None:
            body["seed"] = self.seed
        if self.include_usage:
            body["stream_options"] = {"include_usage": True}
        if self.endpoint == "chat":
            messages = []
            if self.system:
                messages.append({"role": "system", "content": self.system})
            messages.append({"role": "user", "content": text})
            body["messages"] = messages
            path = "/chat/completions"
        else:
            body["prompt"] = self.template.replace("{text}", text)
            path = "/completions"
        body.update(self.extra_body)
        return f"{self.base_url}{path}", body

    async def complete(self, text: str) -> AsyncIterator[StageEvent]:
        assert self._client is not None, "use the stage as an async context manager"
        url, body = self._body(text)
        trace = Trace()
        request = self._client.build_request(
            "POST",
            url,
            content=json.dumps(body).encode(),
            headers={**self._headers, "Content-Type": "application/json"},
            extensions={"trace": trace},
        )
        t_request = time.perf_counter_ns()
        yield RequestSent(t_request, "completion")
        events, response = await self._send_traced(request, url, trace, t_request)
        for event in events:
            yield event
        if response is None:
            return
        try:
            async for event in self._read(response):
                yield event
        finally:
            await response.aclose()
            self._last_use_ns = time.perf_counter_ns()

    async def _read(self, response: httpx.Response) -> AsyncIterator[StageEvent]:
        decoder = SSEDecoder()
        finish: str | None = None
        usage: dict[str, int] = {}
        raw = response.aiter_raw()
        while True:
            try:
                chunk = await anext(raw)
            except StopAsyncIteration:
                break
            except httpx.HTTPError as exc:
                yield Failed(
                    time.perf_counter_ns(), network_reason(exc, self.base_url, self.timeout_s)
                )
                return
            t = time.perf_counter_ns()
            for ev in decoder.feed(chunk, t):
                if ev.data.startswith("[DONE]"):
                    # Read the end of the chunked body before reporting: a response closed
                    # unread costs the pooled connection, and the next turn would be cold.
                    await _drain(raw)
                    yield Done(ev.t_ns, finish, usage)
                    return
                try:
                    data = json.loads(ev.data)
                except ValueError:
                    yield Failed(ev.t_ns, f"malformed SSE data: {ev.data[:80]!r}")
                    return
                if not isinstance(data, dict):
                    continue
                error = stream_error(data)
                if error is not None:
                    yield Failed(ev.t_ns, f"error event mid-stream: {error}")
                    return
                if isinstance(data.get("usage"), dict):
                    usage = {k: int(v) for k, v in data["usage"].items() if isinstance(v, int)}
                if isinstance(data.get("timings"), dict):
                    yield ServerTiming(
                        ev.t_ns,
                        {
                            k: float(v)
                            for k, v in data["timings"].items()
                            if isinstance(v, int | float)
                        },
                    )
                for choice in data.get("choices") or []:
                    if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                        continue
                    content, reasoning = _choice_text(choice)
                    yield Delta(ev.t_ns, content, reasoning)
                    if choice.get("finish_reason"):
                        finish = str(choice["finish_reason"])
        t_end = time.perf_counter_ns()
        if finish is not None:
            # Closed after a finish_reason but without [DONE]: truncated but complete.
            yield Done(t_end, finish, usage)
        else:
            yield Failed(t_end, "stream ended before [DONE] and without a finish_reason")


async def _drain(raw: AsyncIterator[bytes], timeout_s: float = 1.0) -> None:
    async def consume() -> None:
        async for _ in raw:
            pass

    with contextlib.suppress(httpx.HTTPError, TimeoutError):
        await asyncio.wait_for(consume(), timeout_s)


def _choice_text(choice: Mapping[str, Any]) -> tuple[str, str]:
    delta = choice.get("delta")
    if isinstance(delta, dict):
        content = delta.get("content") or ""
        reasoning = ""
        for field in _REASONING_FIELDS:
            value = delta.get(field)
            if isinstance(value, str) and value:
                reasoning = value
                break
        return (content if isinstance(content, str) else ""), reasoning
    text = choice.get("text")
    return (text if isinstance(text, str) else ""), ""
