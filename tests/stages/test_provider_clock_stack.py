"""The provider's own clock on the embedded stack's real LLM server (llama-cpp-python's
``llama_cpp.server``): it sends ``openai-processing-ms`` (its route handler's time,
llama_cpp/server/errors.py) and no llama.cpp ``timings`` block (that is the C++ llama-server's).
For a streamed completion the handler returns the response object before the model runs,
so the figure is its request handling only, well inside the measured request -> headers span.
"""

from __future__ import annotations

from typing import Any

import pytest

from voicelat.core.measure.events import Delta, Done, ProviderTiming, RequestSent, Span
from voicelat.core.measure.provider_clock import TOLERANCE_NS, stage_split
from voicelat.stages.openai import OpenAILLM

pytestmark = pytest.mark.stack


async def test_the_local_llm_reports_its_processing_time_within_the_measured_span(
    local_stack: dict[str, Any],
) -> None:
    url = f"{local_stack['config'].llm_url}/v1"
    opts = {"base_url": url, "endpoint": "chat", "max_tokens": 8, "seed": 1}
    async with OpenAILLM(opts) as llm:
        runs = []
        for _ in range(2):
            await llm.prepare()
            runs.append([e async for e in llm.complete("Say hello.")])
    for events in runs:
        assert isinstance(events[-1], Done), events[-1]
        reports = [e for e in events if isinstance(e, ProviderTiming)]
        assert reports, "llama_cpp.server sent no openai-processing-ms header"
        s = stage_split("llm", events)
        assert s is not None and s.source == "openai-processing-ms"
        headers = next(e for e in events if isinstance(e, Span) and e.name == "response_headers")
        assert s.measured_ns == headers.end_ns - headers.start_ns
        # llm_provider <= the measured span (whole ms: up to 1 ms over is rounding).
        assert 0 <= s.provider_ns <= s.measured_ns + TOLERANCE_NS, s
        # Streamed: handled before the model ran, so it is no more than the time to the first
        # token, which the server's generation fills.
        request = next(e for e in events if isinstance(e, RequestSent))
        first = next(e for e in events if isinstance(e, Delta) and (e.content or e.reasoning))
        assert s.provider_ns <= first.t_ns - request.t_ns
