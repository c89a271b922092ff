"""Turns read from an agent's exported traces alone: production calls as voicelat turns.

Pure (no I/O): ``voicelat import`` (docs/PRODUCTION.md) reads the spans from files and hands
them here. No voicelat caller played these calls, so there is no ground truth: each turn is
timed by the agent's own account, on the agent's own clock (unix-epoch ns of its host).

* **Conversations**: a trace's conversation is the ``conversation.id`` /
  ``gen_ai.conversation.id`` any of its spans names (Pipecat's worker puts it on the
  ``conversation`` and ``turn`` spans); a trace naming none is its own conversation.
* **Turns**: each turn container of the mapping (Pipecat ``turn``, GenAI ``invoke_agent``),
  with its descendants and ancestors, split by :func:`~voicelat.core.traces.agent_trace.split_from_spans`
  (the same mapping that splits a played agent turn). A container with no stt, llm or tts span
  under it (the user spoke, the bot never answered; a call cut off) is counted, not a turn.
* **t=0** (``speech_end``): the agent's own end of user speech: its endpoint (Pipecat: the STT
  span's end - its TTFB + the stated ``voicelat.vad_stop_secs``; GenAI: the ``user_speech``
  span's end) moved back by the VAD hangover the agent states (``voicelat.vad_stop_secs``).
  Labels (``extra["t0"]``): ``end_of_speech`` when the hangover is known (``endpointing`` is
  it), ``vad_stop`` when it is not (``endpointing`` is 0 and the hangover is inside the next
  segment: Pipecat's STT TTFB already runs from its VAD stop - stop_secs, so there t=0 is still
  the end of speech, labelled ``pipecat_end_of_speech``).
* **The end** (``first_audio``): the agent's first audio out, NOT the ear: Pipecat's
  ``BotStartedSpeakingFrame`` (t=0 + ``turn.user_bot_latency_seconds``, label
  ``bot_started_speaking``), else the first TTS byte (``tts_first_byte``). What the caller's
  network, jitter buffer and device add is left out.
* **Segments**: ``endpointing``, ``stt``, ``llm_ttft``, ``aggregation``, ``tts_ttfb``,
  ``transport`` (:data:`~voicelat.core.base.contract.TRACED_SEGMENTS`), placed monotonically inside
  [t=0, end] as for a played agent (:func:`~voicelat.core.traces.agent.place_trace`), so they sum
  exactly to e2e; a moved value flags ``trace_clamped``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from voicelat.core.base.contract import TRACED_KIND, TRACED_PATH, TRACED_SEGMENTS
from voicelat.core.base.turn import Turn
from voicelat.core.traces import framework_turns, livekit_trace, openai_agents_trace
from voicelat.core.traces.agent import place_trace
from voicelat.core.traces.agent_trace import (
    FRAMEWORK_MAPPINGS,
    AgentSpan,
    TurnTiming,
    is_turn_container,
    seconds_ns,
    span_role,
    split_from_spans,
    stated_vad_stop_ns,
    ttfb_key,
    user_bot_latency_key,
)
from voicelat.core.traces.trace_checks import (
    CHECKS,
    Finding,
    check_clocks,
    check_overlaps,
    check_playback,
    check_ttfb,
)

__all__ = [
    "CONVERSATION_KEYS",
    "END_LABELS",
    "LEFT_OUT",
    "T0_LABELS",
    "TracedImport",
    "TurnSpans",
    "conversations",
    "find_turns",
    "import_spans",
    "traced_section",
]

#: Span attributes naming the conversation (call) a trace belongs to: Pipecat's, GenAI's.
CONVERSATION_KEYS = ("conversation.id", "gen_ai.conversation.id")

#: What a traced turn's t=0 is (``extra["t0"]``), in words (the summary carries them).
T0_LABELS: Mapping[str, str] = {
    "end_of_speech": "the agent's end of user speech: its VAD stop moved back by its hangover, "
    "as its trace states it (voicelat.vad_stop_secs) or --hangover-ms gave it "
    "(extra.hangover_source); endpointing is that hangover",
    "pipecat_end_of_speech": "Pipecat's end of user speech (its VAD stop - its stop_secs, the "
    "origin of its STT TTFB); the hangover is not stated, so it is inside stt, not endpointing",
    "pipecat_latency_origin": "the first TTS byte - Pipecat's user-bot latency (its STT TTFB "
    "is missing): its end of speech if its output transport took no time (transport is 0)",
    "vad_stop": "the agent's VAD stop (the user_speech span's end); the hangover is not stated, "
    "so t=0 is late by it and endpointing is 0",
    **livekit_trace.T0_LABELS,
    **openai_agents_trace.T0_LABELS,
}

#: What a traced turn's end is (``extra["end"]``): the agent's first audio out, not the ear.
END_LABELS: Mapping[str, str] = {
    "bot_started_speaking": "the agent's first audio out (Pipecat's BotStartedSpeakingFrame: "
    "t=0 + turn.user_bot_latency_seconds), not the ear",
    "tts_first_byte": "the agent's first synthesized audio byte (no playback time in the "
    "trace), not the ear",
    **livekit_trace.END_LABELS,
    **openai_agents_trace.END_LABELS,
}


@dataclass(frozen=True)
class TurnSpans:
    """One turn container of a conversation with its ancestors and descendants."""

    conversation: str
    container: AgentSpan
    spans: tuple[AgentSpan, ...]  # container, descendants and ancestors
    descendants: frozenset[str] = frozenset()  # span ids under the container
    #: LiveKit's user_turn / the OpenAI Agents SDK's transcription beside the container
    #: (:mod:`voicelat.core.traces.framework_turns`); None for the chain mappings.
    related: framework_turns.Related | None = None


@dataclass(frozen=True)
class TracedImport:
    """What :func:`import_spans` made of a set of spans."""

    turns: tuple[Turn, ...]
    findings: tuple[Finding, ...]  # every finding, those on a turn and those outside any
    conversations: int  # with at least one turn container (a health check's trace is not one)
    spans: int
    #: Span names outside every turn of the mapping (counted, named, left out).
    unmapped: Mapping[str, int] = field(default_factory=dict)
    #: Turn containers with no stt, llm or tts span under them (no reply to time).
    no_reply: int = 0
    #: Replies nobody asked for (LiveKit's and the OpenAI Agents SDK's greetings: no user turn
    #: before them): counted, not timed.
    unprompted: int = 0


def conversations(spans: Sequence[AgentSpan]) -> dict[str, list[AgentSpan]]:
    """The spans by conversation (:data:`CONVERSATION_KEYS`, else the trace), by start time."""
    by_trace: dict[str, list[AgentSpan]] = {}
    for span in spans:
        by_trace.setdefault(span.trace_id, []).append(span)
    out: dict[str, list[AgentSpan]] = {}
    for trace_id, members in by_trace.items():
        named = (
            str(value)
            for s in members
            for k in CONVERSATION_KEYS
            if (value := s.attributes.get(k)) not in (None, "")
        )
        out.setdefault(next(named, f"trace:{trace_id}"), []).extend(members)
    for members in out.values():
        members.sort(key=lambda s: (s.start_ns, s.end_ns))
    return out


def find_turns(conversation: str, spans: Sequence[AgentSpan], mapping: str) -> list[TurnSpans]:
    """The turn containers of one conversation's spans, each with its ancestors and
    descendants (the spans the split and the checks read)."""
    by_id = {s.span_id: s for s in spans}
    children: dict[str, list[AgentSpan]] = {}
    for span in spans:
        if span.parent_id is not None:
            children.setdefault(span.parent_id, []).append(span)
    out: list[TurnSpans] = []
    sides = framework_turns.related(spans, mapping) if mapping in FRAMEWORK_MAPPINGS else {}
    for container in (s for s in spans if is_turn_container(s, mapping)):
        members = [container]
        stack = list(children.get(container.span_id, []))
        while stack:  # descendants (a span id cycle cannot loop: each id is seen once)
            span = stack.pop()
            if span in members:
                continue
            members.append(span)
            stack.extend(children.get(span.span_id, []))
        below = frozenset(s.span_id for s in members[1:])
        parent, seen = by_id.get(container.parent_id or ""), {container.span_id}
        while parent is not None and parent.span_id not in seen:
            seen.add(parent.span_id)
            members.append(parent)
            parent = by_id.get(parent.parent_id or "")
        side = sides.get(container.span_id)
        if side is not None:
            members.extend(s for s in side.spans if s not in members)
        members.sort(key=lambda s: (s.start_ns, s.end_ns))
        out.append(TurnSpans(conversation, container, tuple(members), below, side))
    return out


def _first(spans: Sequence[AgentSpan], role: str, mapping: str) -> AgentSpan | None:
    return next((s for s in spans if span_role(s, mapping) == role), None)


#: A turn's t=0, end and raw agent milestones (absolute, the agent's clock).
_Timing = TurnTiming


def _timing(ts: TurnSpans, mapping: str, hangover_ns: int | None = None) -> _Timing | None:
    """The turn's timing, or None when nothing of the chain is there (no reply).
    ``hangover_ns``: the VAD hangover to assume when the trace states none."""
    if mapping in FRAMEWORK_MAPPINGS:
        return framework_turns.timing_of(mapping, ts.container, ts.spans, ts.related)
    window = (min(s.start_ns for s in ts.spans), max(s.end_ns for s in ts.spans))
    split = split_from_spans(ts.spans, window, mapping)
    if split is None or not any(span_role(s, mapping) is not None for s in ts.spans):
        return None
    raw = dict(split.milestones)
    hangover = stated = stated_vad_stop_ns(ts.spans, ts.container.trace_id)
    if hangover is None and hangover_ns is not None:
        hangover = hangover_ns
        if mapping == "pipecat" and "agent_endpoint" in raw:
            # The split put Pipecat's endpoint at its end of speech (no stated stop): the
            # VAD decided the hangover later.
            raw["agent_endpoint"] += hangover_ns
    endpoint = raw.get("agent_endpoint")
    t0 = None if endpoint is None else endpoint - (hangover or 0)
    if hangover is not None:
        t0_label = "end_of_speech"
    else:
        t0_label = "pipecat_end_of_speech" if mapping == "pipecat" else "vad_stop"
    latency_key = user_bot_latency_key(mapping)
    latency = None if latency_key is None else seconds_ns(ts.container.attributes.get(latency_key))
    end: int | None = raw.get("agent_tts_first_byte")
    end_label = "tts_first_byte"
    if t0 is None and latency is not None and end is not None:
        # No STT TTFB (Pipecat's first turn often has none): its user-bot latency and first
        # TTS byte still place its end of speech, if its output took no time (transport 0).
        t0, t0_label = end - latency, "pipecat_latency_origin"
        raw["agent_endpoint"] = t0 + (hangover or 0)
    if t0 is not None and latency is not None:
        end, end_label = t0 + latency, "bot_started_speaking"
    source = "trace" if stated is not None else "option" if hangover is not None else None
    return _Timing(
        t0,
        end,
        raw,
        t0_label,
        end_label,
        hangover,
        tuple(split.flags),
        dict(split.reported),
        source,
    )


def _findings_of(ts: TurnSpans, timing: _Timing | None, mapping: str) -> list[Finding]:
    """The per-turn checks: TTFBs of its spans, playback vs first TTS byte, clocks."""
    if mapping in FRAMEWORK_MAPPINGS:
        return _framework_findings(ts, timing, mapping)
    chain = [s for s in ts.spans if s.span_id != ts.container.span_id]
    found = check_ttfb(chain, ts.conversation, mapping)
    llm = _first(ts.spans, "llm", mapping)
    tts = _first(ts.spans, "tts", mapping)
    first_byte = None
    if tts is not None:
        ttfb = seconds_ns(tts.attributes.get(ttfb_key(mapping)))
        first_byte = None if ttfb is None else tts.start_ns + ttfb
    end = timing.end if timing is not None and timing.end_label != "tts_first_byte" else None
    found += check_playback(
        ts.conversation,
        ts.container.span_id,
        end,
        first_byte,
        None if llm is None else llm.start_ns,
    )
    return found


def _framework_findings(ts: TurnSpans, timing: _Timing | None, mapping: str) -> list[Finding]:
    """A LiveKit / OpenAI Agents turn's checks: the framework's own, then playback vs its
    first TTS byte (LiveKit's agent_speaking is a stated playback time; the SDK has none)."""
    found = framework_turns.check_of(mapping, ts.conversation, ts.container, ts.spans, ts.related)
    if timing is None:
        return found
    llm = _first(ts.spans, "llm", mapping)
    played = timing.end if timing.end_label == "livekit_agent_speaking" else None
    found += check_playback(
        ts.conversation,
        ts.container.span_id,
        played,
        timing.raw.get("agent_tts_first_byte"),
        None if llm is None else llm.start_ns,
    )
    return found


def _turn(index: int, ts: TurnSpans, timing: _Timing, findings: Sequence[Finding]) -> Turn:
    """One traced turn: milestones relative to t=0, segments summing to e2e."""
    extra: dict[str, Any] = {
        "kind": TRACED_KIND,
        "conversation": ts.conversation,
        "trace_id": ts.container.trace_id,
        "turn_span_id": ts.container.span_id,
        "t0": timing.t0_label,
        "end": timing.end_label,
        "not_the_ear": True,
        "hangover_ns": timing.hangover_ns,
        "hangover_source": timing.hangover_source,
        "findings": [
            {"check": f.check, "span_id": f.span_id, "detail": f.detail} for f in findings
        ],
    }
    number = ts.container.attributes.get("turn.number")
    if isinstance(number, int) and not isinstance(number, bool):
        extra["turn_number"] = number
    flags = list(dict.fromkeys([*timing.flags, *(f"finding:{f.check}" for f in findings)]))
    figures: dict[str, float | int | None] = dict(sorted(timing.reported.items()))
    if timing.t0 is None or timing.end is None or timing.end < timing.t0:
        why = (
            "no end of user speech in the trace (no stt TTFB or user_speech span)"
            if timing.t0 is None
            else "no first audio out in the trace (no tts TTFB, no user-bot latency)"
            if timing.end is None
            else "the first audio out comes before the end of speech"
        )
        return Turn(
            index=index,
            fixture=ts.conversation,
            t0_ns=timing.t0 or ts.container.start_ns,
            milestones={},
            segments={},
            e2e_ns=None,
            figures=figures,
            failed=True,
            failure_stage="trace",
            failure_reason=why,
            flags=tuple(flags),
            wall_time_ns=timing.t0 or ts.container.start_ns,
            extra=extra,
        )
    t0, end = timing.t0, timing.end
    placed, place_flags = place_trace(timing.raw, t0, end)
    flags.extend(f for f in place_flags if f not in flags)
    extra["trace_raw_ns"] = {m: v - t0 for m, v in timing.raw.items()}
    absolute = {"speech_end": t0, **placed, "first_audio": end}
    path = [absolute[m] for m in TRACED_PATH]
    segments = {
        name: path[i + 1] - path[i] for i, name in enumerate(TRACED_SEGMENTS)
    }  # monotonic by place_trace: they telescope to end - t0
    return Turn(
        index=index,
        fixture=ts.conversation,
        t0_ns=t0,
        milestones={m: v - t0 for m, v in absolute.items()},
        segments=segments,
        e2e_ns=end - t0,
        figures=figures,
        flags=tuple(flags),
        wall_time_ns=t0,
        extra=extra,
    )


def import_spans(
    spans: Sequence[AgentSpan], mapping: str = "pipecat", hangover_ns: int | None = None
) -> TracedImport:
    """Every turn of ``spans`` under ``mapping``, each with its findings; the findings outside
    any turn (overlaps are the later turn's; clock jumps the turn holding the child).
    ``hangover_ns``: the agent's VAD hangover where its trace does not state one (the turn's
    ``extra["hangover_source"]`` says which was used)."""
    turns: list[Turn] = []
    findings: list[Finding] = []
    unmapped: Counter[str] = Counter()
    no_reply = unprompted = 0
    convs = conversations(spans)
    with_turns = 0
    for conv, members in sorted(convs.items(), key=lambda kv: kv[1][0].start_ns):
        found = find_turns(conv, members, mapping)
        with_turns += bool(found)
        in_turns = {s.span_id for ts in found for s in ts.spans}
        unmapped.update(s.name for s in members if s.span_id not in in_turns)
        loose = check_overlaps([ts.container for ts in found], conv)
        loose += check_clocks(members, conv)
        for ts in found:
            if mapping in FRAMEWORK_MAPPINGS and framework_turns.unprompted(
                ts.container, ts.related, mapping
            ):
                unprompted += 1  # a greeting: no user turn to time it from
                continue
            timing = _timing(ts, mapping, hangover_ns)
            own = _findings_of(ts, timing, mapping)
            own += [
                f for f in loose if f.span_id == ts.container.span_id or f.span_id in ts.descendants
            ]
            findings.extend(own)
            if timing is None:
                no_reply += 1
                continue
            turns.append(_turn(len(turns), ts, timing, own))
        attached = {id(f) for f in findings}
        findings.extend(f for f in loose if id(f) not in attached)
    return TracedImport(
        turns=tuple(turns),
        findings=tuple(dict.fromkeys(findings)),
        conversations=with_turns,
        spans=len(spans),
        unmapped=dict(unmapped.most_common()),
        no_reply=no_reply,
        unprompted=unprompted,
    )


#: What trace-only e2e leaves out (the summary says it; docs/PRODUCTION.md measures it).
LEFT_OUT = (
    "e2e here runs from the agent's own end of speech to its own first audio out: the "
    "caller's uplink (network, the agent's input buffering) before t=0 and the downlink "
    "(network, jitter buffer, device) after the end are not in it, nor the agent's stamping "
    "lag (its event loop)"
)


def traced_section(
    imported: TracedImport, mapping: str, sources: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The summary's ``traced`` section: what t=0 and the end are, what the import read and
    left out, and the findings by check (the summary counts them; each turn carries its own)."""
    t0 = Counter(str(t.extra.get("t0")) for t in imported.turns)
    end = Counter(str(t.extra.get("end")) for t in imported.turns)
    by_check = Counter(f.check for f in imported.findings)
    return {
        "kind": TRACED_KIND,
        "mapping": mapping,
        "t0": {k: {"turns": n, "means": T0_LABELS.get(k, k)} for k, n in t0.most_common()},
        "end": {k: {"turns": n, "means": END_LABELS.get(k, k)} for k, n in end.most_common()},
        "not_the_ear": True,
        "left_out": LEFT_OUT,
        "ground_truth": None,
        "conversations": imported.conversations,
        "spans": imported.spans,
        "turns_without_reply": imported.no_reply,
        "unprompted_replies": imported.unprompted,
        "unmapped_spans": dict(imported.unmapped),
        "findings": {k: by_check.get(k, 0) for k in CHECKS},
        "findings_total": len(imported.findings),
        "sources": [dict(s) for s in sources],
    }
