"""The metric contract (DESIGN §2): milestone names, the contiguous segments of the critical path.

Names here are part of the public results schema.
"""

from __future__ import annotations

MILESTONES: tuple[str, ...] = (
    "speech_start",
    "speech_end",
    "endpoint",
    "stt_first_partial",
    "stt_final",
    "llm_request",
    "llm_first_delta",
    "llm_first_token",
    "llm_first_speakable",
    "llm_done",
    "tts_request",
    "tts_first_byte",
    "tts_first_audible",
    "tts_done",
    "output_first_audible",
)

#: The critical path, in order. Consecutive pairs bound the segments, so they sum exactly to
#: ``e2e = output_first_audible - speech_end``.
CRITICAL_PATH: tuple[str, ...] = (
    "speech_end",
    "endpoint",
    "stt_final",
    "llm_request",
    "llm_first_token",
    "tts_request",
    "tts_first_byte",
    "tts_first_audible",
    "output_first_audible",
)

SEGMENTS: tuple[str, ...] = (
    "endpointing",
    "stt",
    "handoff",
    "llm_ttft",
    "aggregation",
    "tts_ttfb",
    "leading_silence",
    "playout",
)

#: segment name -> (from milestone, to milestone)
SEGMENT_BOUNDS: dict[str, tuple[str, str]] = {
    name: (CRITICAL_PATH[i], CRITICAL_PATH[i + 1]) for i, name in enumerate(SEGMENTS)
}

#: Orders that must hold whatever the provider does (a violation means a bug, not a quirk).
STRICT_ORDER: tuple[tuple[str, str], ...] = (
    ("speech_start", "speech_end"),
    ("llm_request", "llm_first_delta"),
    ("llm_first_delta", "llm_first_token"),
    ("llm_first_token", "llm_done"),
    ("llm_first_token", "llm_first_speakable"),
    ("llm_first_speakable", "tts_request"),
    ("tts_request", "tts_first_byte"),
    ("tts_first_byte", "tts_first_audible"),
    ("tts_first_byte", "tts_done"),
    ("tts_first_audible", "output_first_audible"),
)

#: Everything a per-turn figure or a budget may name besides segments.
E2E = "e2e"
