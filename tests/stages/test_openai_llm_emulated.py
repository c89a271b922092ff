"""The ``openai`` LLM stage against the OpenAI and Inworld emulators: exact injected delays
come back out of its measurements, presets (reasoning, Inworld Router) work, every fault is
one clear Failed line within a bounded time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from voicelat.core.base.errors import StageError
from voicelat.core.measure.events import Delta, Done, Failed, RequestSent, Span, StageEvent
from voicelat.emulate import Emulators, emulator_class
from voicelat.stages.openai import OpenAILLM

KEY_ENV = "VOICELAT_TEST_EMULATOR_KEY"
EXACT = {"latency": {"headers": 10, "ttft": 120, "token": 20}}


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "test-key-123")


async def _collect(events: AsyncIterator[StageEvent], limit_s: float = 5.0) -> list[StageEvent]:
    async def run() -> list[StageEvent]:
        return [e async for e in events]

    return await asyncio.wait_for(run(), limit_s)


def _llm(base_url: str, **extra: Any) -> OpenAILLM:
    return OpenAILLM(
        {"base_url": base_url, "model": "gpt-4o-mini", "api_key_env": KEY_ENV, **extra}
    )


async def test_measured_ttft_and_itl_match_the_ground_truth() -> None:
    async with (
        Emulators(["openai"], profile={"openai": EXACT}, seed=1) as em,
        _llm(em.url("openai")) as llm,
    ):
        runs = []
        for _ in range(3):
            events = await _collect(llm.complete("What's the weather like?"))
            runs.append((events, em.truth.last("openai", "chat")))
    for events, ex in runs:
        request = next(e for e in events if isinstance(e, RequestSent))
        deltas = [e for e in events if isinstance(e, Delta) and e.content]
        assert isinstance(events[-1], Done) and events[-1].finish_reason == "stop"
        measured_ttft = (deltas[0].t_ns - request.t_ns) / 1e6
        truth_ttft = ex.between_ms("request_received", "first_content_written")
        assert ex.injected_ms("ttft") == 120.0
        assert truth_ttft is not None and truth_ttft >= 120.0
        assert abs(measured_ttft - truth_ttft) < 2.0
        # Each delta arrived within 2 ms of the write that carried it (ITL truth).
        written = ex.all("token_written")
        assert len(written) == len(deltas)
        assert all(0 <= d.t_ns - w < 2_000_000 for d, w in zip(deltas, written, strict=True))
        headers = next(s for s in events if isinstance(s, Span) and s.name == "response_headers")
        assert 0 <= headers.end_ns - ex.marks["headers_written"] < 2_000_000
        # Headers are not the first token: TTFB and TTFT stay apart.
        assert (deltas[0].t_ns - headers.end_ns) / 1e6 > 100


async def test_reasoning_model_first_delta_vs_first_content() -> None:
    async with Emulators(["openai"], profile={"openai": EXACT}, seed=1) as em:
        async with _llm(em.url("openai"), model="deepseek-reasoner", max_tokens=4096) as llm:
            events = await _collect(llm.complete("hi"))
        ex = em.truth.last("openai", "chat")
    deltas = [e for e in events if isinstance(e, Delta) and (e.content or e.reasoning)]
    first_any = deltas[0]
    first_content = next(d for d in deltas if d.content)
    assert first_any.reasoning and not first_any.content
    n_reasoning = sum(1 for d in deltas if d.reasoning)
    assert n_reasoning == len(str(emulator_class("openai").CONTENT["reasoning"]).split())
    # The think phase is TTFD -> TTFT: one 20 ms token step per reasoning token.
    assert abs((first_content.t_ns - first_any.t_ns) / 1e6 - n_reasoning * 20) < 5
    assert 0 <= first_any.t_ns - ex.marks["first_reasoning_written"] < 2_000_000
    assert 0 <= first_content.t_ns - ex.marks["first_content_written"] < 2_000_000


async def test_reasoning_model_with_a_small_budget_says_nothing() -> None:
    async with (
        Emulators(["openai"], profile={"openai": EXACT}, seed=1) as em,
        _llm(em.url("openai"), model="deepseek-reasoner", max_tokens=8) as llm,
    ):
        events = await _collect(llm.complete("hi"))
    assert not any(isinstance(e, Delta) and e.content for e in events)
    assert isinstance(events[-1], Done) and events[-1].finish_reason == "length"


async def test_inworld_router_preset_uses_basic_auth() -> None:
    async with Emulators(["inworld"], profile={"inworld": EXACT}, seed=1) as em:
        async with _llm(em.url("inworld") + "/v1", auth="basic", model="openai/gpt-5") as llm:
            events = await _collect(llm.complete("hi"))
        assert isinstance(events[-1], Done)
        assert em.truth.last("inworld", "chat").model == "openai/gpt-5"
        with pytest.raises(StageError) as err:
            async with _llm(em.url("inworld") + "/v1", auth="bearer"):
                pass
    assert "refused the API key (HTTP 401)" in str(err.value)
    assert "test-key-123" not in str(err.value)


async def test_a_pinned_key_mismatch_is_a_startup_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOICELAT_TEST_PINNED", "the-right-one")
    profile = {"openai": {"api_key_env": "VOICELAT_TEST_PINNED"}}
    async with Emulators(["openai"], profile=profile, seed=1) as em:
        with pytest.raises(StageError) as err:
            async with _llm(em.url("openai")):
                pass
    assert "HTTP 401" in str(err.value) and "api_key_env" in str(err.value)


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ({"http_429": 1.0}, "HTTP 429 from"),
        ({"http_500": 1.0}, "HTTP 500 from"),
        (
            {"error_event": {"p": 1.0, "after": 2}},
            "error event mid-stream: The server had an error",
        ),
        ({"stall": {"p": 1.0, "after": 2, "seconds": 3}}, "(read timeout): the server stalled"),
        ({"truncate": {"p": 1.0, "after": 2}}, "broke the response off"),
        ({"truncate": {"p": 1.0, "after": 2, "mode": "eof"}}, "stream ended before [DONE]"),
        ({"refuse": {"p": 1.0, "seconds": 0.2}}, "the connection"),
    ],
)
async def test_every_fault_is_one_failed_line_within_a_bounded_time(
    fault: dict[str, Any], expected: str
) -> None:
    profile = {"openai": {"latency": {"headers": 2, "ttft": 10, "token": 5}, "faults": fault}}
    async with Emulators(["openai"], profile=profile, seed=1) as em:
        async with _llm(em.url("openai"), timeout_s=0.5) as llm:
            t0 = time.perf_counter()
            events = await _collect(llm.complete("hi"))
            elapsed = time.perf_counter() - t0
        assert em.truth.last("openai", "chat").fault == next(iter(fault))
    failed = [e for e in events if isinstance(e, Failed)]
    assert len(failed) == 1 and events[-1] is failed[0]
    assert expected in failed[0].reason
    assert "\n" not in failed[0].reason and "test-key-123" not in failed[0].reason
    assert elapsed < 2.0
