"""The names voicelat's OTLP spans use, in one place: the OTel GenAI conventions and their
voice proposals, which are drafts (docs/EXPORT.md has the reading, per attribute).

Read from open-telemetry/semantic-conventions-genai (December 2026): everything GenAI is
*development* status; the voice parts are open pull requests, not merged:

* PR #390 (open): the ``speech_to_text`` and ``text_to_speech`` operations and their client
  spans under an ``invoke_agent`` turn container; ``gen_ai.speech.voice``,
  ``gen_ai.speech.input.language``; a turn's end reason (``complete`` / ``interrupted`` /
  ``session_closed``; its description says ``gen_ai.agent.invocation.end_reason``, its
  voice-agents page ``gen_ai.conversation.turn.end_reason``: the page's name is used). It
  maps a realtime model's response to an inference span.
* PR #394 (open): a realtime generation as its own client span, ``generate_live_content``
  (a reviewer asked for a vendor-neutral name such as ``realtime_inference``), anchored at
  the end of the user's speech or the first output, correlated by ``gen_ai.conversation.id``.
* Merged (development): ``invoke_agent``, ``chat``, ``gen_ai.operation.name``,
  ``gen_ai.provider.name``, ``gen_ai.request.model``, ``gen_ai.agent.name``,
  ``gen_ai.output.type`` (``speech``), ``gen_ai.response.time_to_first_chunk`` (seconds),
  ``gen_ai.usage.input_tokens`` / ``output_tokens`` and the audio breakdown
  ``gen_ai.usage.audio.input_tokens`` / ``output_tokens`` (PR #390 proposed
  ``gen_ai.usage.input_audio_tokens``: the merged spelling is used). ``error.type`` is core.
* openinference#3418 (open): five distinct "first response" moments, each with an explicit
  clock origin. It names the moments, not event names: the event names are voicelat's.

When a proposal merges under other names, this module is the one place to change (and the
attribute table in docs/EXPORT.md, which a test holds to :data:`ATTRIBUTES`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "ATTRIBUTES",
    "CLOCK",
    "FIRST_RESPONSE",
    "OP_CHAT",
    "OP_INVOKE_AGENT",
    "OP_REALTIME",
    "OP_STT",
    "OP_TTS",
    "Attribute",
    "FirstResponse",
    "first_response_moments",
    "provider_name",
    "span_name",
]

MERGED = "merged, development status"
PR390 = "proposed: semantic-conventions-genai PR #390 (open)"
PR394 = "proposed: semantic-conventions-genai PR #394 (open)"
CORE = "core semantic conventions, stable"
OWN = "voicelat's own (no convention names it)"

OP_INVOKE_AGENT = "invoke_agent"
OP_CHAT = "chat"
OP_STT = "speech_to_text"
OP_TTS = "text_to_speech"
OP_REALTIME = "generate_live_content"

OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
AGENT_NAME = "gen_ai.agent.name"
OUTPUT_TYPE = "gen_ai.output.type"
VOICE = "gen_ai.speech.voice"
INPUT_LANGUAGE = "gen_ai.speech.input.language"
END_REASON = "gen_ai.conversation.turn.end_reason"
TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
AUDIO_INPUT_TOKENS = "gen_ai.usage.audio.input_tokens"
AUDIO_OUTPUT_TOKENS = "gen_ai.usage.audio.output_tokens"
ERROR_TYPE = "error.type"


@dataclass(frozen=True, slots=True)
class Attribute:
    """One attribute voicelat sets from a convention: where it sits and the convention's status."""

    name: str
    status: str
    on: str
    value: str


#: Every convention attribute and operation name voicelat's spans carry (docs/EXPORT.md).
ATTRIBUTES: tuple[Attribute, ...] = (
    Attribute(OPERATION, MERGED, "every span", "the operation (the values below)"),
    Attribute(OP_INVOKE_AGENT, MERGED, "turn", "the turn container, any kind of turn"),
    Attribute(OP_CHAT, MERGED, "cascade LLM", "the LLM stage"),
    Attribute(OP_STT, PR390, "cascade STT", "the STT stage"),
    Attribute(OP_TTS, PR390, "cascade TTS", "the TTS stage"),
    Attribute(OP_REALTIME, PR394, "realtime model", "the realtime model's generation"),
    Attribute(AGENT_NAME, MERGED, "turn", "the pipeline's name"),
    Attribute(PROVIDER, MERGED, "stage, model", "from the stage name (openai, gcp.gemini, ...)"),
    Attribute(REQUEST_MODEL, MERGED, "stage, model", "the stage's `model` option"),
    Attribute(OUTPUT_TYPE, MERGED, "TTS, model", "`speech`"),
    Attribute(VOICE, PR390, "TTS, model", "the stage's `voice` option"),
    Attribute(INPUT_LANGUAGE, PR390, "STT", "the stage's `language` option"),
    Attribute(END_REASON, PR390, "turn, model", "`complete` or `interrupted` (not on a failure)"),
    Attribute(TIME_TO_FIRST_CHUNK, MERGED, "LLM, model", "seconds: request to first chunk"),
    Attribute(INPUT_TOKENS, MERGED, "LLM, model", "the provider's usage"),
    Attribute(OUTPUT_TOKENS, MERGED, "LLM, model", "the provider's usage"),
    Attribute(AUDIO_INPUT_TOKENS, MERGED, "model", "the provider's audio usage"),
    Attribute(AUDIO_OUTPUT_TOKENS, MERGED, "model", "the provider's audio usage"),
    Attribute(ERROR_TYPE, CORE, "failed spans", "the failing stage's reason, its first word"),
)

#: The clock every event time is on, said on every first-response event.
CLOCK = "CLOCK_MONOTONIC (time.perf_counter_ns), placed on wall time by the run's anchor"


@dataclass(frozen=True, slots=True)
class FirstResponse:
    """One of openinference#3418's first-response moments: its event name and, per kind of
    turn, the milestone that observes it (absent: not observed for that kind)."""

    event: str
    moment: str
    milestones: Mapping[str, str]
    observed_at: str


#: The five moments, in the order a reply passes them. Kinds: cascade, s2s, agent.
FIRST_RESPONSE: tuple[FirstResponse, ...] = (
    FirstResponse(
        "voicelat.first_response.created", "response created",
        {"cascade": "llm_first_delta", "s2s": "response_start"},
        "client: the first delta (cascade) or response.created (realtime) arriving",
    ),
    FirstResponse(
        "voicelat.first_response.text", "first text",
        {"cascade": "llm_first_token", "s2s": "first_text", "agent": "agent_llm_first_token"},
        "client; an agent's from its traces, placed on voicelat's clock",
    ),
    FirstResponse(
        "voicelat.first_response.audio_received", "first audio generated / received",
        {"cascade": "tts_first_byte", "s2s": "first_audio", "agent": "first_audio"},
        "client: the first non-empty audio payload arriving",
    ),
    FirstResponse(
        "voicelat.first_response.audio_submitted", "first audio submitted to the transport",
        {"cascade": "playout_started", "s2s": "playout_started", "agent": "agent_tts_first_byte"},
        "client: audio handed to the output sink (an agent: its TTS's first byte, traced)",
    ),
    FirstResponse(
        "voicelat.first_response.audio_audible", "first audio audible",
        {"cascade": "output_first_audible", "s2s": "output_first_audible",
         "agent": "output_first_audible"},
        "client: the first sample above the onset threshold at the sink (the listener)",
    ),
)  # fmt: skip

#: The origin every first-response event's offset is measured from.
ORIGIN = "speech_end"
#: The span above a call's turn spans (a run of whole calls): voicelat's own name, no
#: proposal has one; its ``gen_ai.conversation.id`` is the call id.
CALL_SPAN = "voicelat.call"


def first_response_moments(
    kind: str, milestones: Mapping[str, int], extra: Mapping[str, object]
) -> list[tuple[FirstResponse, str, int]]:
    """``(moment, milestone, t_ns after t0)`` for each moment the turn observed."""
    found: dict[str, int] = dict(milestones)
    started = extra.get("playout_started_ns")
    if isinstance(started, int) and not isinstance(started, bool):
        found["playout_started"] = started
    raw = extra.get("agent_trace_raw_ns")
    out = []
    for m in FIRST_RESPONSE:
        name = m.milestones.get(kind)
        if name is None or name not in found:
            continue
        if name.startswith("agent_") and isinstance(raw, Mapping) and name not in raw:
            continue  # filled in by the recorder, not given by the agent's spans
        out.append((m, name, found[name]))
    return out


#: Stage name prefixes -> ``gen_ai.provider.name`` (well-known values where the conventions
#: list one; the vendor's name otherwise, as they allow).
_PROVIDERS: tuple[tuple[str, str], ...] = (
    ("openai", "openai"), ("gemini", "gcp.gemini"), ("deepgram", "deepgram"),
    ("elevenlabs", "elevenlabs"), ("cartesia", "cartesia"), ("assemblyai", "assemblyai"),
    ("inworld", "inworld"),
)  # fmt: skip


def provider_name(stage: str) -> str | None:
    """``gen_ai.provider.name`` of a stage (None: a local engine, no provider)."""
    return next((p for prefix, p in _PROVIDERS if stage.startswith(prefix)), None)


def span_name(operation: str, target: str | None) -> str:
    """``{operation} {model}`` (``{operation} {agent name}`` for a turn), as the conventions
    name spans; the bare operation when there is no model."""
    return f"{operation} {target}" if target else operation
