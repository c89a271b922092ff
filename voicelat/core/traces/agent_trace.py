"""An agent's own spans for one turn, mapped onto voicelat's agent-side milestones.

A black-box agent (docs/AGENT-TRACES.md) may export its OpenTelemetry spans to voicelat's
receiver (:mod:`voicelat.engine.trace_receiver`), which places them on voicelat's monotonic
clock. This module is the pure half: given the spans that overlap one turn's window, it finds
the agent's own view of the turn and returns the milestones voicelat's recorder splits the
black-box total with:

``agent_endpoint``
    the agent's end of user speech (its VAD / turn stop),
``agent_stt_final``
    its transcript ready,
``agent_llm_first_token``
    its first LLM token (the LLM span's start + its time to first token),
``agent_tts_first_byte``
    its first synthesized audio (the TTS span's start + its time to first byte),

plus the agent's OWN reported figures (``agent_reported_*_ms``) for reports to show beside
voicelat's, and flags for what the trace did not say. Ordering and clamping of the milestones
against voicelat's own (``speech_end``, ``first_audio``) is the recorder's job, not this one's.

Four mappings (the first two documented in docs/AGENT-TRACES.md, all four in docs/PRODUCTION.md):

``"pipecat"``
    Pipecat 1.14's span tree (``conversation`` > ``turn`` > ``stt`` / ``llm`` / ``tts``,
    ``metrics.ttfb`` in seconds; pipecat/utils/tracing/ of the installed package).
``"genai"``
    the OpenTelemetry GenAI semantic conventions, for other frameworks: ``invoke_agent``
    containers, ``speech_to_text`` / ``chat`` / ``text_to_speech`` operations,
    ``gen_ai.response.time_to_first_chunk`` in seconds, the realtime ``user_speech`` span.
``"livekit"``
    LiveKit Agents 1.x (``agent_turn`` > ``llm_node`` / ``tts_node`` / ``agent_speaking``, the
    ``user_turn`` beside it): :mod:`voicelat.core.traces.livekit_trace`.
``"openai-agents"``
    the OpenAI Agents SDK's voice pipeline as an OTel bridge exports it (``speech_group`` >
    ``speech``, ``transcription`` beside it): :mod:`voicelat.core.traces.openai_agents_trace`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from voicelat.core.base.contract import AGENT_TRACE_MILESTONES
from voicelat.core.base.errors import ConfigError
from voicelat.core.base.turn import HANGOVER_UNSTATED

__all__ = [
    "LLM_EMPTY_REASON",
    "MAPPINGS",
    "SPLIT_MILESTONES",
    "AgentSpan",
    "AttrValue",
    "TraceSplit",
    "TurnTiming",
    "is_turn_container",
    "seconds_ns",
    "span_role",
    "split_from_spans",
    "stated_vad_stop_ns",
    "suggest_mapping",
    "ttfb_key",
    "turn_complete",
    "user_bot_latency_key",
]

AttrValue = str | int | float | bool

#: The milestones a split may carry, in causal order (the contract's trace milestones, of
#: which ``agent_tts_request`` is the TTS span's start: the text reaching the agent's TTS).
SPLIT_MILESTONES = AGENT_TRACE_MILESTONES

#: Flags a split may carry.
FLAG_PARTIAL = "trace_partial"  # a span of the chain (turn container, stt, llm, tts) is missing
FLAG_MULTIPLE_TURNS = "trace_multiple_turns"  # the window holds more than one agent turn
FLAG_NO_TTFB = "trace_no_ttfb"  # an llm/tts/stt span came without its time to first byte
FLAG_STT_INCOMPLETE = "trace_stt_incomplete"  # Pipecat closed the stt span with no final text
FLAG_INTERRUPTED = "trace_interrupted"  # the agent says its reply was interrupted
FLAG_LLM_EMPTY = "trace_llm_empty"  # the agent's LLM answered with no text (so nothing to say)
#: The Pipecat mapping placed the agent's endpoint at its end of speech: its trace states no
#: VAD stop_secs (:data:`VAD_STOP_ATTR`, or a ``*.stop_secs`` attribute of Pipecat's own), so
#: the VAD's hangover is counted in ``stt``, not in ``endpointing`` (issue #30).
FLAG_HANGOVER_UNSTATED = HANGOVER_UNSTATED

#: The failure reason of a turn without reply audio whose trace shows an LLM with no output:
#: what the caller heard (silence) explained by what the agent did.
LLM_EMPTY_REASON = "the LLM answered with no text"

MAPPINGS = ("pipecat", "genai", "livekit", "openai-agents")

#: The mappings whose frameworks time a turn their own way (a module each, not a _Rules chain).
FRAMEWORK_MAPPINGS = frozenset({"livekit", "openai-agents"})

#: An attribute the agent may put on any span of its trace (Pipecat: ``PipelineWorker(...,
#: additional_span_attributes={VAD_STOP_ATTR: vad.params.stop_secs})``, which lands on the
#: conversation span): its VAD's stop_secs, seconds. With it, the Pipecat mapping's
#: ``agent_endpoint`` is the VAD's decision (end of speech + stop_secs), as voicelat's own
#: endpointing segment means; without it, the end of speech the agent placed.
VAD_STOP_ATTR = "voicelat.vad_stop_secs"

_NS_PER_S = 1_000_000_000


@dataclass(frozen=True)
class AgentSpan:
    """One span the agent exported, its times already on voicelat's monotonic clock (ns)."""

    name: str
    start_ns: int
    end_ns: int
    trace_id: str  # hex
    span_id: str  # hex
    parent_id: str | None
    attributes: Mapping[str, AttrValue]
    #: Who exported it (its resource's ``service.name``, ``service.instance.id``, ``host.name``):
    #: spans of one trace from two exporters may sit on two clocks (core/traces/trace_checks.py).
    resource: str = ""
    #: What placing the span added to its exported (unix-epoch) times, ns: 0 for spans read as
    #: exported (``voicelat import``), the receiver's wall-to-monotonic translation otherwise.
    #: An attribute holding a wall time (LiveKit's TTSMetrics ``timestamp``) is placed with it.
    placed_offset_ns: int = 0


@dataclass(frozen=True)
class TraceSplit:
    """What one turn's spans say: agent-side milestones, the agent's own figures, flags."""

    milestones: Mapping[str, int]  # a subset of SPLIT_MILESTONES, on voicelat's clock
    reported: Mapping[str, float]  # agent_reported_{stt,llm,tts}_ttfb_ms, ...
    flags: tuple[str, ...] = ()
    #: What the trace says went wrong when the agent did not answer (:data:`LLM_EMPTY_REASON`),
    #: for the failure reason of a turn without reply audio; None when it says nothing.
    diagnosis: str | None = None


@dataclass(frozen=True)
class TurnTiming:
    """A turn's t=0, end and raw agent milestones (absolute ns, the agent's clock), with the
    labels saying what t=0 and the end are (:mod:`voicelat.core.traces.traced`)."""

    t0: int | None
    end: int | None
    raw: dict[str, int]
    t0_label: str
    end_label: str
    hangover_ns: int | None
    flags: tuple[str, ...]
    reported: Mapping[str, float]
    hangover_source: str | None = None  # "trace" | "option" | "framework" | None (none known)
    diagnosis: str | None = None  # as TraceSplit.diagnosis


@dataclass(frozen=True)
class _Rules:
    """How one framework names a turn and the spans of its chain."""

    is_turn: Callable[[AgentSpan], bool]
    role: Callable[[AgentSpan], str | None]  # "endpoint" | "stt" | "llm" | "tts" | None
    ttfb_key: str  # the attribute holding a span's time to first byte/token, seconds
    # Pipecat has no endpoint span: its STT TTFB runs from its own end-of-speech estimate.
    endpoint_from_stt_ttfb: bool
    incomplete_key: str | None  # a bool attribute saying an stt span has no final transcript
    latency_key: str | None  # a turn attribute with the agent's user->bot latency, seconds
    #: The llm span's attribute holding its reply text (set only when there was some).
    output_key: str | None = None


def _pipecat_role(span: AgentSpan) -> str | None:
    return span.name if span.name in ("stt", "llm", "tts") else None


_GENAI_ROLES = {
    "speech_to_text": "stt",
    "chat": "llm",
    "generate_content": "llm",
    "text_completion": "llm",
    "text_to_speech": "tts",
    "user_speech": "endpoint",
}


def _genai_op(span: AgentSpan) -> str | None:
    op = span.attributes.get("gen_ai.operation.name")
    return op if isinstance(op, str) else None


def _genai_role(span: AgentSpan) -> str | None:
    op = _genai_op(span)
    if op is None and span.name == "user_speech":
        op = "user_speech"  # the realtime conventions' opt-in span, by its name
    return _GENAI_ROLES.get(op or "")


_OPENAI_LLM_NAMES = frozenset({"response", "generation"})
_OPENAI_LLM_OPS = frozenset({"chat", "text_completion", "generate_content"})


def _openai_role(span: AgentSpan) -> str | None:
    """The OpenAI Agents SDK's links, by the names bridges give them (the span data's type):
    ``transcription`` stt, ``speech`` tts; an LLM span by name, GenAI operation or
    openinference kind."""
    if span.name == "transcription":
        return "stt"
    if span.name == "speech":
        return "tts"
    op = span.attributes.get("gen_ai.operation.name")
    kind = span.attributes.get("openinference.span.kind")
    if span.name in _OPENAI_LLM_NAMES or op in _OPENAI_LLM_OPS or kind == "LLM":
        return "llm"
    return None


_RULES: dict[str, _Rules] = {
    "pipecat": _Rules(
        is_turn=lambda s: s.name == "turn",
        role=_pipecat_role,
        ttfb_key="metrics.ttfb",
        endpoint_from_stt_ttfb=True,
        incomplete_key="stt.incomplete",
        latency_key="turn.user_bot_latency_seconds",
        # Pipecat 1.14 sets "output" on the llm span only when the LLM streamed text
        # (pipecat/utils/tracing/service_decorators.py, traced_llm).
        output_key="output",
    ),
    "genai": _Rules(
        is_turn=lambda s: _genai_op(s) == "invoke_agent",
        role=_genai_role,
        ttfb_key="gen_ai.response.time_to_first_chunk",
        endpoint_from_stt_ttfb=False,
        incomplete_key=None,
        latency_key=None,
    ),
    # Containers and roles only (for the receiver, watch and the checks); the timing is the
    # framework module's (core/traces/framework_turns.py; split_from_spans refuses them).
    "livekit": _Rules(
        is_turn=lambda s: s.name == "agent_turn",
        role=lambda s: {"llm_node": "llm", "tts_node": "tts", "user_turn": "endpoint"}.get(s.name),
        ttfb_key="lk.response.ttft",
        endpoint_from_stt_ttfb=False,
        incomplete_key=None,
        latency_key=None,
    ),
    "openai-agents": _Rules(
        is_turn=lambda s: s.name == "speech_group",
        role=_openai_role,
        ttfb_key="first_content_at",
        endpoint_from_stt_ttfb=False,
        incomplete_key=None,
        latency_key=None,
    ),
}


def split_from_spans(
    spans: Sequence[AgentSpan], window: tuple[int, int], mapping: str = "pipecat"
) -> TraceSplit | None:
    """Map the agent's spans of ONE turn onto agent-side milestones; None when nothing maps.

    ``window`` is (turn start, turn end) on voicelat's clock: the spans overlapping it are the
    turn's. When they hold several agent turns, the first that produced speech (a TTS span) is
    taken and the split is flagged ``trace_multiple_turns``; a missing link of the chain is
    ``trace_partial``.
    """
    rules = _RULES.get(mapping)
    if rules is None:
        raise ConfigError(f"unknown trace mapping {mapping!r}: use one of {', '.join(MAPPINGS)}")
    if mapping in FRAMEWORK_MAPPINGS:
        # Their timing lives above this module (core/traces/framework_turns.py imports it).
        raise ConfigError(
            f"the {mapping} mapping splits a window with voicelat.core.traces.framework_turns.split_window"
        )
    lo, hi = window
    inside = [s for s in spans if s.end_ns >= lo and s.start_ns <= hi]
    by_id = {s.span_id: s for s in spans}
    groups: dict[str, list[AgentSpan]] = {}
    for span in inside:
        if rules.role(span) is not None:
            groups.setdefault(_turn_key(span, by_id, rules), []).append(span)
    if not groups:
        return None
    ordered = sorted(groups.items(), key=lambda kv: min(s.start_ns for s in kv[1]))
    flags: list[str] = [FLAG_MULTIPLE_TURNS] if len(ordered) > 1 else []
    key, members = next(
        (kv for kv in ordered if any(rules.role(s) == "tts" for s in kv[1])), ordered[0]
    )
    turn = by_id.get(key)
    if turn is None or not rules.is_turn(turn):
        flags.append(FLAG_PARTIAL)
        turn = None
    stated = stated_vad_stop_ns(spans, members[0].trace_id) if rules.endpoint_from_stt_ttfb else 0
    if stated is None:
        flags.append(FLAG_HANGOVER_UNSTATED)
    stop_ns = stated or 0
    milestones, reported, chain_flags = _chain(members, rules, stop_ns)
    if rules.latency_key is not None and turn is not None:
        latency = _seconds(turn.attributes.get(rules.latency_key))
        if latency is not None:
            reported["agent_reported_user_bot_latency_ms"] = latency / 1e6
    flags.extend(f for f in chain_flags if f not in flags)
    diagnosis = _empty_llm(members, rules)
    if diagnosis is not None:
        flags.append(FLAG_LLM_EMPTY)
    if not milestones and not reported and diagnosis is None:
        return None
    return TraceSplit(
        milestones=milestones, reported=reported, flags=tuple(flags), diagnosis=diagnosis
    )


def _empty_llm(members: Sequence[AgentSpan], rules: _Rules) -> str | None:
    """:data:`LLM_EMPTY_REASON` when the turn's LLM spans all ended without text and no TTS
    span followed (the agent had nothing to say); None otherwise or when the mapping cannot
    tell (no output attribute in its conventions)."""
    if rules.output_key is None or any(rules.role(s) == "tts" for s in members):
        return None
    llm = [s for s in members if rules.role(s) == "llm"]
    if not llm:
        return None
    texts = [s.attributes.get(rules.output_key) for s in llm]
    if any(isinstance(t, str) and t.strip() for t in texts):
        return None
    return LLM_EMPTY_REASON


def turn_complete(spans: Sequence[AgentSpan], mapping: str = "pipecat") -> bool:
    """Whether ``spans`` hold a whole agent turn that spoke: a received turn container with a
    TTS span under it (a container ends after its children, so they are there too).

    What the trace receiver waits for besides every span having its parent: a trace's spans can
    look whole long before the turn's arrive (the real Pipecat bot's WebRTC calls put the
    ``POST /api/offer`` span, over before the turn starts, at the root of the whole call).
    """
    rules = _RULES.get(mapping)
    if rules is None:
        raise ConfigError(f"unknown trace mapping {mapping!r}: use one of {', '.join(MAPPINGS)}")
    by_id = {s.span_id: s for s in spans}
    for span in spans:
        if rules.role(span) == "tts":
            container = by_id.get(_turn_key(span, by_id, rules))
            if container is not None and rules.is_turn(container):
                return True
    return False


def suggest_mapping(spans: Sequence[AgentSpan], besides: str) -> str | None:
    """The mapping other than ``besides`` whose turn containers ``spans`` hold the most of (the
    frameworks' own before the generic GenAI one, which LiveKit 1.8's ``invoke_agent`` spans
    also match); None when none has any."""
    order = ("pipecat", "livekit", "openai-agents", "genai")
    counts = {m: sum(_RULES[m].is_turn(s) for s in spans) for m in order if m != besides}
    best = max(counts.values(), default=0)
    return next((m for m, n in counts.items() if n == best), None) if best else None


def is_turn_container(span: AgentSpan, mapping: str = "pipecat") -> bool:
    """Whether ``span`` is a turn container of ``mapping`` (Pipecat ``turn``, GenAI
    ``invoke_agent``)."""
    return _rules(mapping).is_turn(span)


def span_role(span: AgentSpan, mapping: str = "pipecat") -> str | None:
    """``span``'s link in the chain under ``mapping``: endpoint, stt, llm, tts, or None."""
    return _rules(mapping).role(span)


def ttfb_key(mapping: str = "pipecat") -> str:
    """The attribute holding a span's time to first byte/token (seconds) under ``mapping``."""
    return _rules(mapping).ttfb_key


def user_bot_latency_key(mapping: str = "pipecat") -> str | None:
    """The turn attribute with the agent's own end of speech -> first audio out (seconds)."""
    return _rules(mapping).latency_key


def _rules(mapping: str) -> _Rules:
    rules = _RULES.get(mapping)
    if rules is None:
        raise ConfigError(f"unknown trace mapping {mapping!r}: use one of {', '.join(MAPPINGS)}")
    return rules


def _turn_key(span: AgentSpan, by_id: Mapping[str, AgentSpan], rules: _Rules) -> str:
    """The span id of the turn containing ``span``: its nearest turn-container ancestor.

    When the chain breaks (an ancestor not received) the missing ancestor's id stands in, so
    siblings still group together; a root reached with no container groups by trace.
    """
    seen: set[str] = set()
    current = span
    while current.parent_id is not None and current.parent_id not in seen:
        seen.add(current.parent_id)
        parent = by_id.get(current.parent_id)
        if parent is None:
            return current.parent_id
        if rules.is_turn(parent):
            return parent.span_id
        current = parent
    return f"trace:{span.trace_id}"


def stated_vad_stop_ns(spans: Sequence[AgentSpan], trace_id: str) -> int | None:
    """The agent's stated VAD stop_secs in that trace, as ns: voicelat's :data:`VAD_STOP_ATTR`,
    else an attribute of the agent's own ending in ``stop_secs`` (``vad.stop_secs``,
    ``params.stop_secs``); None when no span of the trace states it (or states nonsense)."""
    own: int | None = None
    for span in spans:
        if span.trace_id != trace_id:
            continue
        if VAD_STOP_ATTR in span.attributes:
            return _seconds(span.attributes[VAD_STOP_ATTR])
        for key, value in span.attributes.items():
            if own is None and key.endswith("stop_secs"):
                own = _seconds(value)
    return own


def seconds_ns(value: object) -> int | None:
    """A duration attribute in seconds as integer ns (None unless finite, >= 0, <= 1 h)."""
    return _seconds(value)


def _chain(
    members: Sequence[AgentSpan], rules: _Rules, stop_ns: int
) -> tuple[dict[str, int], dict[str, float], list[str]]:
    """Milestones, reported figures and flags of one turn's stt -> llm -> tts chain."""
    by_role: dict[str, list[AgentSpan]] = {}
    for span in sorted(members, key=lambda s: (s.start_ns, s.end_ns)):
        by_role.setdefault(rules.role(span) or "", []).append(span)
    llm = next(iter(by_role.get("llm", [])), None)
    tts = next(iter(by_role.get("tts", [])), None)
    # The transcript (and the end of speech) that fed the reply: the last before the LLM began.
    cutoff = llm.start_ns if llm is not None else None
    stt = _last_before(by_role.get("stt", []), cutoff)
    endpoint = _last_before(by_role.get("endpoint", []), cutoff)
    milestones: dict[str, int] = {}
    reported: dict[str, float] = {}
    flags: list[str] = []
    if stt is None or llm is None or tts is None:
        flags.append(FLAG_PARTIAL)
    if endpoint is not None:
        milestones["agent_endpoint"] = endpoint.end_ns
    if stt is not None:
        _stt_milestones(stt, rules, stop_ns, milestones, reported, flags)
    timed: tuple[tuple[AgentSpan | None, str, str], ...] = (
        (llm, "agent_llm_first_token", "agent_reported_llm_ttfb_ms"),
        (tts, "agent_tts_first_byte", "agent_reported_tts_ttfb_ms"),
    )
    for timed_span, name, figure in timed:
        if timed_span is None:
            continue
        ttfb = _seconds(timed_span.attributes.get(rules.ttfb_key))
        if ttfb is None:
            flags.append(FLAG_NO_TTFB)
            continue
        milestones[name] = timed_span.start_ns + ttfb
        reported[figure] = ttfb / 1e6
    if tts is not None:
        # The text reached the agent's TTS: splits aggregation from tts_ttfb as in the cascade.
        milestones["agent_tts_request"] = tts.start_ns
    if tts is not None and tts.attributes.get("tts.interrupted") is True:
        flags.append(FLAG_INTERRUPTED)
    return milestones, reported, list(dict.fromkeys(flags))


def _stt_milestones(
    stt: AgentSpan,
    rules: _Rules,
    stop_ns: int,
    milestones: dict[str, int],
    reported: dict[str, float],
    flags: list[str],
) -> None:
    ttfb = _seconds(stt.attributes.get(rules.ttfb_key))
    incomplete = rules.incomplete_key is not None and stt.attributes.get(rules.incomplete_key)
    if incomplete is True:
        # Pipecat closed the span at the user's turn stop without a final transcript.
        flags.append(FLAG_STT_INCOMPLETE)
    else:
        milestones["agent_stt_final"] = stt.end_ns
    if ttfb is None:
        if rules.endpoint_from_stt_ttfb:  # elsewhere an stt TTFB is a bonus, not a link
            flags.append(FLAG_NO_TTFB)
        return
    reported["agent_reported_stt_ttfb_ms"] = ttfb / 1e6
    if rules.endpoint_from_stt_ttfb and incomplete is not True:
        # Pipecat's STT TTFB runs from its end of speech (VAD stop time - stop_secs) to the
        # final transcript, so the span's end minus it is where the agent put the end of speech;
        # plus the VAD's stop_secs when the agent states it, the moment its VAD decided.
        milestones.setdefault("agent_endpoint", stt.end_ns - ttfb + stop_ns)


def _last_before(spans: Sequence[AgentSpan], cutoff: int | None) -> AgentSpan | None:
    """The span ending last at or before ``cutoff`` (any span when none does)."""
    if not spans:
        return None
    before = [s for s in spans if cutoff is None or s.end_ns <= cutoff]
    return max(before or spans[:1], key=lambda s: s.end_ns)


def _seconds(value: object) -> int | None:
    """A duration attribute in seconds, as integer ns; None unless a finite, non-negative number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or value < 0 or value > 3600:
        return None
    return round(value * _NS_PER_S)
