"""OpenAI-compatible LLM stage: ``/v1/chat/completions`` or ``/v1/completions`` over SSE (httpx).

Every raw read of the response body is stamped on arrival, before parsing; the SSE decoder hands
each event the stamp of the read that completed it. Network sub-spans come from httpcore's
``trace`` extension (connect, TLS, request sent, response headers) and a missing ``connect_tcp``
marks a warm (reused) connection.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import httpx

from voicelat.core.base import jsontext
from voicelat.core.base.secrets import excerpt
from voicelat.core.calls.conversation import Conversation, prompt_text
from voicelat.core.measure.events import (
    Delta,
    Done,
    Failed,
    ProviderTiming,
    RequestSent,
    ServerTiming,
    StageEvent,
    StageName,
)
from voicelat.core.measure.provider_clock import llama_timings_ms
from voicelat.core.measure.sse import SSEDecoder
from voicelat.stages.http import (
    HttpOptions,
    HttpStage,
    drain_body,
    network_reason,
    stream_error,
)
from voicelat.stages.options import parse_options

__all__ = ["OpenAILLM", "OpenAILLMOptions"]

_REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_text")
_DEFAULT_TEMPLATE = (
    "The following is a conversation with a friendly voice assistant.\nUser: {text}\nAssistant:"
)


@dataclass(frozen=True, kw_only=True)
class OpenAILLMOptions(HttpOptions):
    """``[llm]`` of ``openai``: the request body and the endpoint it goes to."""

    endpoint: Literal["chat", "completions"] = field(
        default="chat", metadata={"expect": "'chat' or 'completions'"}
    )
    model: str = "default"
    max_tokens: int = 64
    temperature: float = 0.0
    stop: tuple[str, ...] = ()
    system: str | None = None
    prompt_template: str = _DEFAULT_TEMPLATE
    include_usage: bool = True
    seed: int | None = None
    extra_body: Mapping[str, Any] = field(default_factory=dict)


class OpenAILLM(HttpStage):
    """Streams a completion from any OpenAI-compatible server (OpenAI, vLLM, llama.cpp, ...)."""

    kind: ClassVar[StageName] = "llm"
    stage_name: ClassVar[str] = "LLM"
    #: The option a ``stack = "local"`` pipeline fills with the embedded server's address.
    stack_url_option: ClassVar[str] = "base_url"

    def __init__(self, options: Mapping[str, Any], *, table: str = "llm") -> None:
        o = self.options = parse_options(OpenAILLMOptions, table, options)
        super().__init__(table, o)
        self.endpoint = o.endpoint
        self.model = o.model
        self.max_tokens = o.max_tokens
        self.extra_body: dict[str, Any] = dict(o.extra_body)
        self._headers = {"Accept": "text/event-stream", "Accept-Encoding": "identity", **self._auth}
        self._server_info: dict[str, Any] = {}

    def _warmed(self, response: httpx.Response) -> None:
        try:
            data = jsontext.loads(response.content).get("data") or []
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
    def _body(self, prompt: str | Conversation) -> tuple[str, dict[str, Any]]:
        o = self.options
        body: dict[str, Any] = {
            "model": self.model,
            "stream": True,
            "max_tokens": self.max_tokens,
            "temperature": o.temperature,
        }
        if o.stop:
            body["stop"] = list(o.stop)
        if o.seed is not None:
            body["seed"] = o.seed
        if o.include_usage:
            body["stream_options"] = {"include_usage": True}
        if self.endpoint == "chat":
            messages = []
            if o.system:
                messages.append({"role": "system", "content": o.system})
            if isinstance(prompt, Conversation):
                messages += prompt.messages()  # a call's turn: the conversation so far
            else:
                messages.append({"role": "user", "content": prompt})
            body["messages"] = messages
            path = "/chat/completions"
        else:
            body["prompt"] = prompt_text(o.prompt_template, prompt)
            path = "/completions"
        body.update(self.extra_body)
        return f"{self.base_url}{path}", body

    async def complete(self, text: str | Conversation) -> AsyncIterator[StageEvent]:
        """The reply to ``text`` (a transcript, or a call's :class:`Conversation`)."""
        assert self._client is not None, "use the stage as an async context manager"
        url, body = self._body(text)
        trace = self._trace()
        request = self._client.build_request(
            "POST",
            url,
            content=json.dumps(body).encode(),
            headers={**self._headers, "Content-Type": "application/json"},
            extensions={"trace": trace},
        )
        t_request = self.clock.now_ns()
        yield RequestSent(t_request, "completion")
        events, response = await self._send_traced(request, url, trace, t_request)
        for event in events:
            yield event
        if response is None:
            return
        try:
            async for event in self._read(response, t_request):
                yield event
        finally:
            await response.aclose()
            self._last_use_ns = self.clock.now_ns()

    async def _read(self, response: httpx.Response, t_request: int) -> AsyncIterator[StageEvent]:
        decoder = SSEDecoder()
        reply = _Reply(t_request)
        raw = response.aiter_raw()
        while True:
            try:
                chunk, t = await self._read_raw(raw)
            except httpx.HTTPError as exc:
                yield self._failed(network_reason(exc, self.base_url, self.timeout_s))
                return
            if chunk is None:
                break
            for ev in decoder.feed(chunk, t):
                if ev.data.startswith("[DONE]"):
                    # Read the end of the chunked body before reporting: a response closed
                    # unread costs the pooled connection, and the next turn would be cold.
                    await drain_body(raw)
                    yield Done(ev.t_ns, reply.finish, reply.usage)
                    return
                events = reply.feed(ev.data, ev.t_ns)
                for event in events:
                    yield event
                if events and isinstance(events[-1], Failed):
                    return
        t_end = self.clock.now_ns()
        if reply.finish is not None:
            # Closed after a finish_reason but without [DONE]: truncated but complete.
            yield Done(t_end, reply.finish, reply.usage)
        else:
            yield Failed(t_end, "stream ended before [DONE] and without a finish_reason")


class _Reply:
    """Sans-I/O: the data of each SSE event of a completion in, stage events out; keeps the
    finish reason and the usage for the ``Done``. ``t_request`` starts the span llama.cpp's
    ``timings`` (prompt + generation) are held against: the request to the chunk carrying them."""

    def __init__(self, t_request: int) -> None:
        self.t_request = t_request
        self.finish: str | None = None
        self.usage: dict[str, int] = {}

    def feed(self, text: str, t: int) -> list[StageEvent]:
        try:
            data = jsontext.loads(text)
        except ValueError:
            return [Failed(t, f"malformed SSE data: {excerpt(text, 80, quoted=True)}")]
        if not isinstance(data, dict):
            return []
        error = stream_error(data)
        if error is not None:
            return [Failed(t, f"error event mid-stream: {error}")]
        events: list[StageEvent] = []
        if isinstance(data.get("usage"), dict):
            self.usage = {k: int(v) for k, v in data["usage"].items() if isinstance(v, int)}
            # Prompt-cache hits are billed apart (core/judge/cost.py): keep the one nested count.
            details = data["usage"].get("prompt_tokens_details")
            cached = details.get("cached_tokens") if isinstance(details, dict) else None
            if isinstance(cached, int) and not isinstance(cached, bool):
                self.usage["cached_tokens"] = cached
        if isinstance(data.get("timings"), dict):
            timings = data["timings"].items()
            values = {k: float(v) for k, v in timings if isinstance(v, int | float)}
            events.append(ServerTiming(t, values))
            spent = llama_timings_ms(data["timings"])
            if spent is not None:
                events.append(ProviderTiming(t, "llama.timings", spent, self.t_request))
        for choice in data.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            content, reasoning = _choice_text(choice)
            events.append(Delta(t, content, reasoning))
            if choice.get("finish_reason"):
                self.finish = str(choice["finish_reason"])
        return events


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
