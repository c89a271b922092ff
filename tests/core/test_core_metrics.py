"""Pure figures: critical segments, LLM and TTS figures, first audible, order checks."""

from __future__ import annotations

import pytest

from voicelat.core.base.contract import CRITICAL_PATH, SEGMENTS, STRICT_ORDER
from voicelat.core.measure.events import Audio, Delta
from voicelat.core.measure.metrics import (
    critical_segments,
    first_audible_ns,
    llm_figures,
    order_violations,
    tts_figures,
)

MS = 1_000_000
RATE = 16_000


def pcm_ms(ms: int, rate: int = RATE) -> bytes:
    return b"\x00\x00" * (rate * ms // 1000)


def path(*times_ms: int) -> dict[str, int]:
    return {m: t * MS for m, t in zip(CRITICAL_PATH, times_ms, strict=True)}


# -- critical segments -------------------------------------------------------------------------
def test_segments_are_the_differences_along_the_path() -> None:
    segs, e2e, flags = critical_segments(path(0, 10, 30, 60, 100, 150, 210, 280, 360))
    assert segs == dict(
        zip(SEGMENTS, [d * MS for d in (10, 20, 30, 40, 50, 60, 70, 80)], strict=True)
    )
    assert e2e == 360 * MS
    assert flags == []


def test_missing_milestone_gives_nothing() -> None:
    m = path(0, 10, 30, 60, 100, 150, 210, 280, 360)
    del m["tts_first_byte"]
    assert critical_segments(m) == ({}, None, [])


def test_several_reorderings_clamp_and_telescope() -> None:
    # stt_final before endpoint, and tts_request before llm_first_token
    m = path(1000, 1500, 1200, 1600, 1700, 1650, 1800, 1800, 1900)
    segs, e2e, flags = critical_segments(m)
    assert e2e == 900 * MS
    assert sum(segs.values()) == e2e
    assert segs["stt"] == 0 and segs["aggregation"] == 0
    assert segs["handoff"] == 100 * MS  # 1500 -> 1600
    assert segs["tts_ttfb"] == 100 * MS  # 1700 -> 1800
    assert flags == ["clamped:stt", "clamped:aggregation"]
    assert min(segs.values()) >= 0


def test_a_milestone_after_the_output_is_capped_at_the_total() -> None:
    m = path(0, 10, 20, 30, 40, 50, 60, 500, 100)  # tts_first_audible after output
    segs, e2e, flags = critical_segments(m)
    assert e2e == 100 * MS
    assert sum(segs.values()) == e2e
    assert segs["leading_silence"] == 40 * MS
    assert segs["playout"] == 0
    assert "clamped:playout" in flags


def test_output_before_speech_end() -> None:
    segs, e2e, flags = critical_segments(path(100, 10, 20, 30, 40, 50, 60, 70, 90))
    assert segs == {} and e2e is None
    assert flags == ["order:output_first_audible<speech_end"]


def test_order_violations() -> None:
    m = {"llm_request": 5, "llm_first_delta": 3, "llm_first_token": 4, "tts_request": 9}
    assert order_violations(m, STRICT_ORDER) == ["order:llm_request>llm_first_delta"]
    assert order_violations({"speech_start": 2, "speech_end": 2}, STRICT_ORDER) == []


# -- LLM -------------------------------------------------------------------------------------
def stream(*items: tuple[int, str, str]) -> list[Delta]:
    return [Delta(t * MS, content=c, reasoning=r) for t, c, r in items]


def test_llm_figures_with_usage() -> None:
    deltas = stream((5, "", ""), (20, "", "hmm"), (50, "Hi", ""), (60, " there", ""), (90, ".", ""))
    f = llm_figures(0, deltas, 100 * MS, {"completion_tokens": 9, "prompt_tokens": 30})
    assert f["llm_ttfd_ns"] == 20 * MS
    assert f["llm_ttft_ns"] == 50 * MS
    assert f["llm_chunks"] == 3
    assert f["llm_chunk_gap_p50_ns"] == 20 * MS  # gaps 10, 30 -> median 20
    assert f["llm_chunk_gap_max_ns"] == 30 * MS
    assert f["llm_tokens"] == 9 and f["llm_prompt_tokens"] == 30
    assert f["llm_total_ns"] == 100 * MS
    # 9 tokens, the first at 50 ms, the last at 90 ms: 8 token intervals in 40 ms
    assert f["llm_tokens_per_s"] == pytest.approx(8 / 0.040)
    assert f["llm_itl_ns"] == 5 * MS


def test_llm_figures_without_usage_count_chunks_and_give_no_itl() -> None:
    deltas = stream((50, "a", ""), (60, "b", ""), (70, "c", ""), (80, "d", ""), (130, "e", ""))
    f = llm_figures(10 * MS, deltas, 140 * MS, {})
    assert f["llm_tokens"] is None
    assert f["llm_itl_ns"] is None
    assert f["llm_tokens_per_s"] == pytest.approx(4 / 0.080)
    assert f["llm_ttft_ns"] == 40 * MS
    assert f["llm_ttfd_ns"] == 40 * MS
    assert f["llm_chunk_gap_p50_ns"] == 10 * MS  # gaps 10, 10, 10, 50
    assert f["llm_chunk_gap_max_ns"] == 50 * MS


def test_llm_figures_single_chunk_or_no_done() -> None:
    f = llm_figures(0, stream((30, "Hello.", "")), 40 * MS, {})
    assert f["llm_tokens_per_s"] is None
    assert f["llm_chunk_gap_p50_ns"] is None
    assert f["llm_total_ns"] == 40 * MS
    g = llm_figures(0, stream((30, "a", ""), (40, "b", "")), None, {})
    assert g["llm_total_ns"] is None and g["llm_tokens_per_s"] is None
    assert g["llm_chunk_gap_max_ns"] == 10 * MS


def test_llm_figures_without_request_keep_only_counts() -> None:
    f = llm_figures(None, stream((30, "a", "")), 40 * MS, {"completion_tokens": 1})
    assert f["llm_ttft_ns"] is None and f["llm_total_ns"] is None
    assert f["llm_chunks"] == 1 and f["llm_tokens"] == 1


def test_reasoning_only_stream_has_ttfd_but_no_ttft() -> None:
    f = llm_figures(0, stream((10, "", "x"), (20, "", "y")), 30 * MS, {})
    assert f["llm_ttfd_ns"] == 10 * MS
    assert f["llm_ttft_ns"] is None
    assert f["llm_chunks"] == 0


# -- TTS -------------------------------------------------------------------------------------
def test_tts_no_stall_when_audio_arrives_before_the_buffer_runs_dry() -> None:
    audio = [
        Audio(100 * MS, pcm_ms(100), RATE),
        Audio(150 * MS, pcm_ms(100), RATE),
        Audio(300 * MS, pcm_ms(100), RATE),  # buffer runs dry at 300 ms exactly
    ]
    f = tts_figures(0, audio, 400 * MS)
    assert f["tts_stalls"] == 0 and f["tts_stall_total_ns"] == 0
    assert f["tts_audio_ns"] == 300 * MS
    assert f["tts_rtf"] == pytest.approx(400 / 300)
    assert f["tts_chunks"] == 3


def test_tts_stalls_counted_with_total_and_max() -> None:
    audio = [
        Audio(100 * MS, b"", RATE),  # an empty payload is not audio
        Audio(100 * MS, pcm_ms(100), RATE),  # plays 100..200
        Audio(260 * MS, pcm_ms(100), RATE),  # 60 ms gap -> stall; plays 260..360
        Audio(370 * MS, pcm_ms(50), RATE),  # 10 ms gap: under the threshold; plays 370..420
        Audio(400 * MS, pcm_ms(50), RATE),  # queued; plays 420..470
        Audio(600 * MS, pcm_ms(100), RATE),  # 130 ms gap -> stall
    ]
    f = tts_figures(50 * MS, audio, 700 * MS)
    assert f["tts_chunks"] == 5
    assert f["tts_stalls"] == 2
    assert f["tts_stall_total_ns"] == 190 * MS
    assert f["tts_stall_max_ns"] == 130 * MS
    assert f["tts_audio_ns"] == 400 * MS


def test_tts_stall_threshold_is_configurable() -> None:
    audio = [Audio(0, pcm_ms(100), RATE), Audio(110 * MS, pcm_ms(100), RATE)]
    assert tts_figures(0, audio, None)["tts_stalls"] == 0
    strict = tts_figures(0, audio, None, stall_threshold_ns=5 * MS)
    assert strict["tts_stalls"] == 1 and strict["tts_stall_total_ns"] == 10 * MS
    assert strict["tts_rtf"] is None


def test_tts_figures_without_audio() -> None:
    f = tts_figures(0, [Audio(5, b"", RATE)], 10)
    assert f["tts_chunks"] == 0 and f["tts_audio_ns"] == 0 and f["tts_rtf"] is None


# -- first audible ---------------------------------------------------------------------------
def test_first_audible_ns_cases() -> None:
    first = Audio(1000 * MS, pcm_ms(100), RATE)
    assert first_audible_ns([first], 0) == 1000 * MS
    assert first_audible_ns([first], 160) == 1010 * MS  # 10 ms of leading silence
    late = Audio(1500 * MS, pcm_ms(100), RATE)
    assert first_audible_ns([first, late], 1700) == 1500 * MS  # arrives after it would play
    early = Audio(1020 * MS, pcm_ms(100), RATE)
    assert first_audible_ns([first, early], 1700) == 1000 * MS + 1700 * 1_000_000_000 // RATE
    assert first_audible_ns([first], 1600) is None
    assert first_audible_ns([Audio(0, b"", RATE), first], 0) == 1000 * MS
    assert first_audible_ns([], 0) is None
