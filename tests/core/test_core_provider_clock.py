"""The provider's own clock: header and timings parsers on literal values, the split."""

from __future__ import annotations

from voicelat.core.measure.events import ProviderTiming, RequestSent, TextSent
from voicelat.core.measure.provider_clock import (
    llama_timings_ms,
    over_measured,
    parse_processing_ms,
    parse_server_timing,
    provider_ms_from_headers,
    split,
    split_figures,
    stage_split,
)
from voicelat.core.measure.recorder import TurnRecorder
from voicelat.core.summaries.summary import figure_distributions


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


# -- a stage's reports -> one split per turn, figures, summary ----------------------------------
MS = 1_000_000


def test_the_first_requests_widest_report_is_kept() -> None:
    events = [
        RequestSent(100 * MS),
        # The header at the response headers, llama.cpp's timings at the end of one request.
        ProviderTiming(130 * MS, "openai-processing-ms", 12.0, 100 * MS),
        ProviderTiming(400 * MS, "llama.timings", 280.5, 100 * MS),
    ]
    s = stage_split("llm", events)
    assert s is not None and (s.source, s.measured_ns, s.provider_ns) == (
        "llama.timings",
        300 * MS,
        280_500_000,
    )
    assert split_figures(s) == {
        "llm_provider_ns": 280_500_000,
        "llm_overhead_ns": 19_500_000,
        "llm_provider_span_ns": 300 * MS,
    }


def test_a_later_request_of_the_stage_does_not_replace_the_first() -> None:
    # An HTTP TTS stage sends one request per text piece: the first is on the critical path.
    events = [
        TextSent(100 * MS, "Sure."),
        ProviderTiming(150 * MS, "openai-processing-ms", 40.0, 100 * MS),
        TextSent(300 * MS, " It is sunny."),
        ProviderTiming(900 * MS, "openai-processing-ms", 590.0, 300 * MS),
    ]
    s = stage_split("tts", events)
    assert s is not None and (s.measured_ns, s.provider_ns) == (50 * MS, 40 * MS)


def test_a_report_without_a_start_counts_from_the_stages_first_request() -> None:
    events = [TextSent(100 * MS, "Hi."), ProviderTiming(180 * MS, "cartesia.step_time", 60.0)]
    s = stage_split("tts", events)
    assert s is not None and (s.measured_ns, s.rest_ns) == (80 * MS, 20 * MS)
    # Without a request there is nothing to hold it against; none at all: no split.
    assert stage_split("tts", [ProviderTiming(180 * MS, "cartesia.step_time", 60.0)]) is None
    assert stage_split("tts", [TextSent(100 * MS, "Hi.")]) is None


def test_more_than_measured_beyond_a_millisecond_is_over_measured() -> None:
    # Whole-ms headers round up by < 1 ms: not a contradiction.
    assert not over_measured(split("llm", "openai-processing-ms", 20_400_000, 21))
    assert over_measured(split("llm", "openai-processing-ms", 20_400_000, 25))


def test_the_recorder_turns_reports_into_figures_flags_and_the_source() -> None:
    rec = TurnRecorder(index=0, fixture="f", t0_ns=0)
    rec.on_event("llm", RequestSent(100 * MS))
    rec.on_event("llm", ProviderTiming(130 * MS, "openai-processing-ms", 25.0, 100 * MS))
    rec.on_event("tts", TextSent(200 * MS, "Hi."))
    rec.on_event("tts", ProviderTiming(210 * MS, "cartesia.step_time", 30.0))
    turn = rec.finish()
    assert turn.figures["llm_provider_ns"] == 25 * MS
    assert turn.figures["llm_overhead_ns"] == 5 * MS
    assert turn.figures["tts_overhead_ns"] == -20 * MS  # kept as reported, and flagged
    assert "stt_provider_ns" not in turn.figures  # a stage without a report has no figure
    assert "provider_clock:tts>measured" in turn.flags
    assert "provider_clock:llm>measured" not in turn.flags
    assert turn.extra["llm_provider_source"] == "openai-processing-ms"


def test_the_summary_has_percentiles_of_the_split() -> None:
    turns = []
    for i, provider in enumerate((20.0, 30.0, 40.0)):
        rec = TurnRecorder(index=i, fixture="f", t0_ns=0)
        rec.on_event("llm", RequestSent(100 * MS))
        rec.on_event("llm", ProviderTiming(150 * MS, "openai-processing-ms", provider, 100 * MS))
        turns.append(rec.finish())
    dists = figure_distributions(turns)
    assert dists["llm_provider_ns"].p50 == 30 * MS
    assert dists["llm_overhead_ns"].p50 == 20 * MS
    assert dists["llm_provider_span_ns"].p50 == 50 * MS
