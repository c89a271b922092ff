"""The metric contract: names of the public schema and segments that tile the critical path."""

from __future__ import annotations

import dataclasses

import pytest

from voicelat.core.base.contract import (
    CRITICAL_PATH,
    MILESTONES,
    SEGMENT_BOUNDS,
    SEGMENTS,
    STRICT_ORDER,
)
from voicelat.core.measure.events import Audio, Delta, Done


def test_milestone_names_are_the_documented_schema() -> None:
    assert MILESTONES == (
        "speech_start", "speech_end", "endpoint", "stt_first_partial", "stt_final",
        "llm_request", "llm_first_delta", "llm_first_token", "llm_first_speakable", "llm_done",
        "tts_request", "tts_first_byte", "tts_first_audible", "tts_done", "output_first_audible",
    )  # fmt: skip


def test_segments_tile_the_critical_path() -> None:
    assert SEGMENT_BOUNDS == {
        "endpointing": ("speech_end", "endpoint"),
        "stt": ("endpoint", "stt_final"),
        "handoff": ("stt_final", "llm_request"),
        "llm_ttft": ("llm_request", "llm_first_token"),
        "aggregation": ("llm_first_token", "tts_request"),
        "tts_ttfb": ("tts_request", "tts_first_byte"),
        "leading_silence": ("tts_first_byte", "tts_first_audible"),
        "playout": ("tts_first_audible", "output_first_audible"),
    }
    assert tuple(SEGMENT_BOUNDS) == SEGMENTS
    assert set(CRITICAL_PATH) <= set(MILESTONES)
    # the path follows the contract order of the milestones
    assert list(CRITICAL_PATH) == [m for m in MILESTONES if m in CRITICAL_PATH]


def test_strict_order_names_known_milestones() -> None:
    for a, b in STRICT_ORDER:
        assert a in MILESTONES and b in MILESTONES
        assert MILESTONES.index(a) < MILESTONES.index(b)


def test_events_are_frozen_and_audio_counts_samples() -> None:
    audio = Audio(5, b"\x00\x01" * 3 + b"\x00", 16_000)
    assert audio.n_samples == 3  # a trailing odd byte is not a sample
    with pytest.raises(dataclasses.FrozenInstanceError):
        audio.t_ns = 6  # type: ignore[misc]
    assert Delta(1) == Delta(1, content="", reasoning="")
    assert Done(1).usage == {} and Done(1).usage is not Done(2).usage
