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

# -- speech-to-speech turns (issue #12, docs/S2S.md) -----------------------------------------
#: Milestones of a turn through one realtime speech-to-speech model (OpenAI Realtime, Gemini
#: Live). ``speech_start``, ``speech_end``, ``endpoint`` and ``output_first_audible`` mean what
#: they mean for the cascade; the rest replace the STT, LLM and TTS milestones.
S2S_MILESTONES: tuple[str, ...] = (
    "speech_start",
    "speech_end",
    "server_speech_start",
    "endpoint",
    "response_start",
    "first_text",
    "first_audio",
    "first_audible",
    "response_done",
    "output_first_audible",
)

#: The critical path of an S2S turn. Its segments sum exactly to the same
#: ``e2e = output_first_audible - speech_end`` as the cascade's.
S2S_CRITICAL_PATH: tuple[str, ...] = (
    "speech_end",
    "endpoint",
    "first_audio",
    "first_audible",
    "output_first_audible",
)

#: ``model`` (endpoint -> first audio) stands for the cascade's stt ... tts_ttfb; the other
#: three are shared with the cascade, so one comparison ranks both kinds of turn.
S2S_SEGMENTS: tuple[str, ...] = ("endpointing", "model", "leading_silence", "playout")

S2S_SEGMENT_BOUNDS: dict[str, tuple[str, str]] = {
    name: (S2S_CRITICAL_PATH[i], S2S_CRITICAL_PATH[i + 1]) for i, name in enumerate(S2S_SEGMENTS)
}

#: Segments both kinds of turn have, with the same bounds' meaning.
SHARED_SEGMENTS: tuple[str, ...] = ("endpointing", "leading_silence", "playout")

#: Every segment name of either kind, in display order (the cascade's, ``model`` before the
#: leading silence).
ALL_SEGMENTS: tuple[str, ...] = (*SEGMENTS[:-2], "model", *SEGMENTS[-2:])

S2S_STRICT_ORDER: tuple[tuple[str, str], ...] = (
    ("speech_start", "speech_end"),
    ("response_start", "first_audio"),
    ("first_audio", "first_audible"),
    ("first_audible", "output_first_audible"),
    ("first_audio", "response_done"),
)

#: ``Turn.extra["kind"]`` of an S2S turn (a cascade turn has no ``kind``).
S2S_KIND = "s2s"


def segment_names(seen: set[str] | frozenset[str]) -> tuple[str, ...]:
    """The segments a summary of turns with segments ``seen`` lists: always the cascade's (so
    a cascade summary is unchanged), plus ``model`` when an S2S turn has it."""
    return tuple(s for s in ALL_SEGMENTS if s in SEGMENTS or s in seen)


def display_segments(with_data: set[str] | frozenset[str]) -> tuple[str, ...]:
    """The segments a report shows, given those that hold data: the cascade's, the S2S path's,
    or both kinds' (a comparison or a mixed run) in :data:`ALL_SEGMENTS` order."""
    if "model" not in with_data:
        return SEGMENTS
    if with_data - set(S2S_SEGMENTS):
        return ALL_SEGMENTS
    return S2S_SEGMENTS
