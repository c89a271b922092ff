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

#: Every segment name of any kind, in display order (the cascade's; ``model``, then an agent's
#: ``agent_response`` and ``transport`` before the leading silence).
ALL_SEGMENTS: tuple[str, ...] = (
    *SEGMENTS[:-2], "model", "agent_response", "transport", *SEGMENTS[-2:]
)  # fmt: skip

S2S_STRICT_ORDER: tuple[tuple[str, str], ...] = (
    ("speech_start", "speech_end"),
    ("response_start", "first_audio"),
    ("first_audio", "first_audible"),
    ("first_audible", "output_first_audible"),
    ("first_audio", "response_done"),
)

#: ``Turn.extra["kind"]`` of an S2S turn (a cascade turn has no ``kind``).
S2S_KIND = "s2s"


# -- black-box agents (issue #13, docs/AGENTS.md) ----------------------------------------------
#: Milestones of a turn through a running voice agent seen from outside (its own transport).
#: ``first_audio`` is the first reply byte at voicelat, ``first_audible`` the first audible
#: sample of the reply; the ``agent_*`` four are the agent's own, from its traces, placed on
#: voicelat's clock (present only on a traced turn).
AGENT_MILESTONES: tuple[str, ...] = (
    "speech_start",
    "speech_end",
    "agent_endpoint",
    "agent_stt_final",
    "agent_llm_first_token",
    "agent_tts_request",
    "agent_tts_first_byte",
    "first_audio",
    "first_audible",
    "response_done",
    "output_first_audible",
)

#: The agent's trace milestones, in the order the traced path visits them.
AGENT_TRACE_MILESTONES: tuple[str, ...] = AGENT_MILESTONES[2:7]

#: Trace milestones a mapping may not see: ``agent_tts_request`` (the text reaching the
#: agent's TTS: Pipecat's tts span start). Without it ``aggregation`` is 0 and ``tts_ttfb``
#: holds the wait for the first speakable text, unflagged.
AGENT_OPTIONAL_TRACE_MILESTONES: frozenset[str] = frozenset({"agent_tts_request"})

#: The black-box critical path: all voicelat sees without the agent's traces.
AGENT_CRITICAL_PATH: tuple[str, ...] = (
    "speech_end",
    "first_audio",
    "first_audible",
    "output_first_audible",
)

#: ``agent_response`` (speech_end -> first reply byte) is everything the agent and its
#: transport did, both ways; the other two are shared with every kind.
AGENT_SEGMENTS: tuple[str, ...] = ("agent_response", "leading_silence", "playout")

AGENT_SEGMENT_BOUNDS: dict[str, tuple[str, str]] = {
    name: (AGENT_CRITICAL_PATH[i], AGENT_CRITICAL_PATH[i + 1])
    for i, name in enumerate(AGENT_SEGMENTS)
}

#: The traced critical path: the agent's own milestones split ``agent_response`` open.
AGENT_TRACED_PATH: tuple[str, ...] = (
    "speech_end",
    *AGENT_TRACE_MILESTONES,
    "first_audio",
    "first_audible",
    "output_first_audible",
)

#: The cascade's names where the meaning is the cascade's (so ``voicelat compare`` ranks an
#: agent against voicelat's own cascade segment by segment); ``transport`` is the agent's first
#: TTS byte -> the first reply byte at voicelat (outbound serializer, resampling, buffering,
#: network). The inbound half (voicelat's send -> the agent hearing it) is inside
#: ``endpointing``.
AGENT_TRACED_SEGMENTS: tuple[str, ...] = (
    "endpointing",
    "stt",
    "llm_ttft",
    "aggregation",
    "tts_ttfb",
    "transport",
    "leading_silence",
    "playout",
)

AGENT_TRACED_SEGMENT_BOUNDS: dict[str, tuple[str, str]] = {
    name: (AGENT_TRACED_PATH[i], AGENT_TRACED_PATH[i + 1])
    for i, name in enumerate(AGENT_TRACED_SEGMENTS)
}

AGENT_STRICT_ORDER: tuple[tuple[str, str], ...] = (
    ("speech_start", "speech_end"),
    ("first_audio", "first_audible"),
    ("first_audible", "output_first_audible"),
    ("first_audio", "response_done"),
)

#: ``Turn.extra["kind"]`` of an agent turn.
AGENT_KIND = "agent"

# -- traced turns (issue #27, docs/PRODUCTION.md) ---------------------------------------------
#: ``Turn.extra["kind"]`` of a turn read from an agent's exported traces alone (``voicelat
#: import``): no voicelat caller, no ground truth. Its t=0 (``speech_end``) is the agent's own
#: end of speech, its end (``first_audio``) the agent's own first audio out: not the ear.
TRACED_KIND = "traced"

#: The critical path of a traced turn: the agent's own milestones, nothing voicelat heard.
TRACED_PATH: tuple[str, ...] = ("speech_end", *AGENT_TRACE_MILESTONES, "first_audio")

#: The traced agent turn's names (``voicelat compare`` ranks an import beside a played agent);
#: ``transport`` is only the agent's side of it here: first TTS byte -> its transport starting
#: to send (Pipecat's ``BotStartedSpeakingFrame``).
TRACED_SEGMENTS: tuple[str, ...] = AGENT_TRACED_SEGMENTS[:-2]

TRACED_SEGMENT_BOUNDS: dict[str, tuple[str, str]] = {
    name: (TRACED_PATH[i], TRACED_PATH[i + 1]) for i, name in enumerate(TRACED_SEGMENTS)
}

#: Each kind of turn's segments, and the one segment only that kind has (how a report tells
#: which kinds a set of segments holds).
_KIND_SEGMENTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("model", S2S_SEGMENTS),
    ("agent_response", AGENT_SEGMENTS),
    ("transport", AGENT_TRACED_SEGMENTS),
)


def milestone_names(kind: object) -> tuple[str, ...]:
    """The milestones a turn of ``kind`` (``Turn.extra["kind"]``; None: a cascade) can have."""
    if kind in (AGENT_KIND, TRACED_KIND):
        return AGENT_MILESTONES
    return S2S_MILESTONES if kind == S2S_KIND else MILESTONES


def segment_names(seen: set[str] | frozenset[str]) -> tuple[str, ...]:
    """The segments a summary of turns with segments ``seen`` lists: always the cascade's (so
    a cascade summary is unchanged), plus ``model`` when an S2S turn has it and
    ``agent_response`` / ``transport`` when an agent turn has them."""
    return tuple(s for s in ALL_SEGMENTS if s in SEGMENTS or s in seen)


def display_segments(with_data: set[str] | frozenset[str]) -> tuple[str, ...]:
    """The segments a report shows, given those that hold data: the cascade's, an S2S path's,
    an agent's (black-box or traced), or the union of the kinds present (a comparison or a
    mixed run) in :data:`ALL_SEGMENTS` order."""
    kinds = [segs for marker, segs in _KIND_SEGMENTS if marker in with_data]
    if not kinds:
        return SEGMENTS
    others = {s for segs in kinds for s in segs}
    if with_data - others:
        kinds.append(SEGMENTS)  # segments only a cascade turn has: a cascade is there too
    shown = {s for segs in kinds for s in segs}
    return tuple(s for s in ALL_SEGMENTS if s in shown)
