"""The OpenAI Agents SDK's voice pipeline spans of one reply, mapped onto voicelat's milestones
(``--mapping openai-agents``).

Pure (no I/O). The SDK traces to its own processors, not to OpenTelemetry; an OTel bridge (a
``TracingProcessor`` that opens an OTel span per SDK span) makes OTLP of them. The span data
are the SDK's (src/agents/tracing/span_data.py; docs/PRODUCTION.md cites the commits):

* ``transcription`` (``TranscriptionSpanData``; voice/models/openai_stt.py): a single-turn
  pipeline's (``AudioInput``) is the one STT request over the whole recorded utterance; a
  streamed session's (``StreamedAudioInput``) opens when the previous transcript completed and
  ends when this turn's did (the server's VAD and turn detection inside it, unstamped).
* ``speech_group`` (``SpeechGroupSpanData``; voice/result.py ``_start_turn``): one reply, opened
  when the workflow's first text reached the voice pipeline.
* ``speech`` (``SpeechSpanData``; voice/result.py ``_stream_audio``): one sentence's TTS,
  a child of the ``speech_group``; ``first_content_at`` (ISO 8601) is its first audio chunk.
* the workflow's agent run beside them: ``agent`` / ``response`` / ``generation`` spans.

Bridges name a span by its data's ``type`` (openinference-instrumentation-openai-agents,
``_get_span_name``; opentelemetry-instrumentation-openai-agents-v2, whose operation name for these
is the type), and neither copies ``first_content_at`` onto the OTel span: a bridge that does
(any attribute whose key ends in ``first_content_at``) gives the TTS's first byte; without it
the end is the first sentence's synthesis done, an upper bound, flagged ``trace_no_ttfb``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from voicelat.core.traces.agent_trace import (
    FLAG_NO_TTFB,
    FLAG_PARTIAL,
    AgentSpan,
    TurnTiming,
    span_role,
)
from voicelat.core.traces.trace_checks import Finding

__all__ = [
    "END_LABELS",
    "T0_LABELS",
    "check_spans",
    "claim_transcriptions",
    "first_content_ns",
    "role",
    "streamed",
    "timing",
]

GROUP = "speech_group"
TRANSCRIPTION = "transcription"
SPEECH = "speech"

T0_LABELS: Mapping[str, str] = {
    "openai_audio_in": "a single-turn pipeline's audio input handed over (the transcription "
    "span's start: the whole utterance at once); the app's own endpointing before it is not in "
    "e2e, endpointing is 0",
    "openai_transcript_ready": "a streamed session's transcript ready (the transcription span's "
    "end): the server's VAD, turn detection and transcription before it are not in e2e; "
    "endpointing and stt are 0",
}

END_LABELS: Mapping[str, str] = {
    "openai_first_speech_done": "the first sentence's synthesis finished (the speech span's "
    "end: the bridge dropped first_content_at): later than the first audio by its synthesis, "
    "not the ear",
}


def role(span: AgentSpan) -> str | None:
    """``span``'s link in the SDK's chain: stt (transcription), llm, tts (speech), or None."""
    return span_role(span, "openai-agents")


def claim_transcriptions(spans: Sequence[AgentSpan]) -> dict[str, AgentSpan]:
    """The ``transcription`` each ``speech_group`` (by span id) answers in one conversation: the
    last one ended before the group opened and after the previous group did (one user turn, one
    reply). A group with none is the workflow's own (its ``on_start`` greeting)."""
    heard = sorted((s for s in spans if s.name == TRANSCRIPTION), key=lambda s: s.end_ns)
    groups = sorted((s for s in spans if s.name == GROUP), key=lambda s: s.start_ns)
    out: dict[str, AgentSpan] = {}
    taken: set[str] = set()
    previous = -1
    for group in groups:
        found = [
            t for t in heard if previous < t.end_ns <= group.start_ns and t.span_id not in taken
        ]
        if found:
            out[group.span_id] = found[-1]
            taken.add(found[-1].span_id)
        previous = group.start_ns
    return out


def first_content_ns(span: AgentSpan) -> int | None:
    """A speech span's first audio chunk, wall ns: an attribute whose key ends in
    ``first_content_at`` (the SDK writes ISO 8601; integer ns or float unix seconds are read
    too); None when absent or unreadable."""
    value = next((v for k, v in span.attributes.items() if k.endswith("first_content_at")), None)
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int) and value > 10**15:
        return value
    if isinstance(value, int | float):
        return round(value * 1e9) if value > 0 else None
    try:
        stamp = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)  # the SDK's time_iso() is UTC
    # integer arithmetic: a float of unix seconds loses sub-microsecond precision
    delta = stamp - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


def streamed(transcription: AgentSpan, conversation: Sequence[AgentSpan]) -> bool:
    """Whether the transcription is a streamed session's turn: a bridge that copies the span's
    model_config says so (``turn_detection``); else several transcriptions in the conversation
    (a single-turn pipeline's trace holds one)."""
    if any("turn_detection" in k for k in transcription.attributes):
        return True
    return sum(s.name == TRANSCRIPTION for s in conversation) > 1


def timing(
    group: AgentSpan,
    members: Sequence[AgentSpan],
    transcription: AgentSpan | None,
    is_streamed: bool,
) -> TurnTiming | None:
    """The reply's t=0, end and raw milestones; None for a reply to no transcription (the
    workflow's greeting). ``is_streamed``: :func:`streamed` of its conversation."""
    if transcription is None:
        return None
    flags: list[str] = []
    reported: dict[str, float] = {}
    reported["agent_reported_stt_span_ms"] = (transcription.end_ns - transcription.start_ns) / 1e6
    if is_streamed:
        t0, t0_label = transcription.end_ns, "openai_transcript_ready"
    else:
        t0, t0_label = transcription.start_ns, "openai_audio_in"
    raw = {"agent_endpoint": t0, "agent_stt_final": transcription.end_ns}
    # The group opens when the workflow's first text reaches the voice pipeline: the first
    # token as the pipeline saw it (the SDK's spans state no time to first token).
    raw["agent_llm_first_token"] = group.start_ns
    speeches = sorted(
        (s for s in members if s.name == SPEECH and s.parent_id == group.span_id),
        key=lambda s: s.start_ns,
    )
    if not speeches:
        flags.append(FLAG_PARTIAL)
        return TurnTiming(t0, None, raw, t0_label, "tts_first_byte", None, tuple(flags), reported)
    first = speeches[0]
    raw["agent_tts_request"] = first.start_ns
    byte = first_content_ns(first)
    if byte is not None:
        raw["agent_tts_first_byte"] = byte
        reported["agent_reported_tts_ttfb_ms"] = (byte - first.start_ns) / 1e6
        end, end_label = byte, "tts_first_byte"
    else:
        flags.append(FLAG_NO_TTFB)
        end, end_label = first.end_ns, "openai_first_speech_done"
    return TurnTiming(t0, end, raw, t0_label, end_label, None, tuple(flags), reported)


def check_spans(conversation: str, members: Sequence[AgentSpan]) -> list[Finding]:
    """Each ``speech`` span's first audio checked against the span: ``ttfb_missing`` (no
    ``first_content_at``), ``first_byte_before_request`` (before the span began),
    ``ttfb_exceeds_span`` (after it ended)."""
    out: list[Finding] = []
    for span in members:
        if span.name != SPEECH:
            continue
        byte = first_content_ns(span)
        if byte is None:
            detail = "speech has no first_content_at (the bridge did not copy it)"
            out.append(Finding("ttfb_missing", conversation, span.span_id, detail))
        elif byte < span.start_ns:
            detail = (
                f"speech first_content_at {(span.start_ns - byte) / 1e6:.1f} ms before its span"
            )
            out.append(Finding("first_byte_before_request", conversation, span.span_id, detail))
        elif byte > span.end_ns:
            detail = f"speech first_content_at {(byte - span.end_ns) / 1e6:.1f} ms after its span"
            out.append(Finding("ttfb_exceeds_span", conversation, span.span_id, detail))
    return out
