"""The provider's own clock: header and timings parsers on literal values, the split."""

from __future__ import annotations

from voicelat.core.provider_clock import (
    llama_timings_ms,
    parse_processing_ms,
    parse_server_timing,
    provider_ms_from_headers,
    split,
)


def test_server_timing_entries_with_quoted_separators() -> None:
    value = 'db;dur=53.2, app;desc="render, page; x";dur=47.1, cache;desc="hit", miss;dur=x'
    assert parse_server_timing(value) == {"db": 53.2, "app": 47.1}
    assert parse_server_timing("") == {}
    assert parse_server_timing("a;dur=-1, b;DUR=2") == {"b": 2.0}


def test_processing_ms() -> None:
    assert parse_processing_ms(" 231 ") == 231.0
    assert parse_processing_ms(None) is None
    assert parse_processing_ms("soon") is None
    assert parse_processing_ms("-3") is None


def test_llama_timings() -> None:
    block = {"prompt_n": 12, "prompt_ms": 40.5, "predicted_n": 20, "predicted_ms": 310.0}
    assert llama_timings_ms(block) == 350.5
    assert llama_timings_ms({"predicted_ms": True}) is None
    assert llama_timings_ms(None) is None


def test_headers_prefer_processing_ms_then_total_then_sum() -> None:
    assert provider_ms_from_headers(
        {"OpenAI-Processing-Ms": "120", "server-timing": "t;dur=9"}
    ) == (
        120.0,
        "openai-processing-ms",
    )
    assert provider_ms_from_headers({"Server-Timing": "q;dur=5, total;dur=30"}) == (
        30.0,
        "server-timing:total",
    )
    assert provider_ms_from_headers({"server-timing": "q;dur=5, gen;dur=20"}) == (
        25.0,
        "server-timing:q+gen",
    )
    assert provider_ms_from_headers({"content-type": "text/event-stream"}) is None


def test_split_rest_and_inconsistency() -> None:
    s = split("llm", "openai-processing-ms", 250_000_000, 180.25)
    assert (s.provider_ns, s.rest_ns, s.inconsistent) == (180_250_000, 69_750_000, False)
    assert split("llm", "x", 100, 1.0).inconsistent
