"""The turns of the frameworks that time a reply their own way: LiveKit Agents and the OpenAI
Agents SDK's voice pipeline (:data:`~voicelat.core.traces.agent_trace.FRAMEWORK_MAPPINGS`).

Pure. Both put the user's side of a turn BESIDE the reply's container, linked by time only
(LiveKit's ``user_turn`` next to its ``agent_turn``; the SDK's ``transcription`` next to its
``speech_group``): :func:`related` finds it for each container of a conversation, with the spans
that go with it (its descendants; for the SDK the agent run's LLM spans in between), and
:func:`timing_of` / :func:`check_of` hand the turn to the framework's module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from voicelat.core.traces import livekit_trace, openai_agents_trace
from voicelat.core.traces.agent_trace import (
    FLAG_MULTIPLE_TURNS,
    AgentSpan,
    TraceSplit,
    TurnTiming,
    is_turn_container,
)
from voicelat.core.traces.trace_checks import Finding

__all__ = [
    "Related",
    "check_of",
    "related",
    "split_window",
    "timing_of",
    "turn_timings",
    "unprompted",
]


@dataclass(frozen=True)
class Related:
    """The user's side of one reply: its span (None: nobody spoke first) and the spans with it."""

    span: AgentSpan | None
    spans: tuple[AgentSpan, ...] = ()
    #: The OpenAI Agents SDK's: a streamed session's turn (several transcriptions in it).
    streamed: bool = False


def _descendants(root: AgentSpan, children: Mapping[str, Sequence[AgentSpan]]) -> list[AgentSpan]:
    out: list[AgentSpan] = []
    seen = {root.span_id}
    stack = list(children.get(root.span_id, ()))
    while stack:  # a span id cycle cannot loop: each id is seen once
        span = stack.pop()
        if span.span_id in seen:
            continue
        seen.add(span.span_id)
        out.append(span)
        stack.extend(children.get(span.span_id, ()))
    return out


def related(spans: Sequence[AgentSpan], mapping: str) -> dict[str, Related]:
    """Each container's (by span id) user side in one conversation's ``spans``."""
    children: dict[str, list[AgentSpan]] = {}
    for span in spans:
        if span.parent_id is not None:
            children.setdefault(span.parent_id, []).append(span)
    containers = [s for s in spans if is_turn_container(s, mapping)]
    out: dict[str, Related] = {}
    if mapping == "livekit":
        below = {c.span_id: _descendants(c, children) for c in containers}
        for turn_id, user in livekit_trace.claim_user_turns(spans, below).items():
            out[turn_id] = Related(user, (user, *_descendants(user, children)))
    else:
        for group_id, heard in openai_agents_trace.claim_transcriptions(spans).items():
            group = next(c for c in containers if c.span_id == group_id)
            # The agent run's LLM spans between the transcript and the reply (siblings, not
            # descendants, of the speech_group): read by the checks, named in the turn.
            llm = [
                s
                for s in spans
                if openai_agents_trace.role(s) == "llm"
                and heard.end_ns <= s.start_ns <= group.start_ns
            ]
            out[group_id] = Related(
                heard,
                (heard, *_descendants(heard, children), *llm),
                openai_agents_trace.streamed(heard, spans),
            )
    return out


def unprompted(container: AgentSpan, side: Related | None, mapping: str) -> bool:
    """A reply nobody asked for (a greeting: no user turn and, for LiveKit, no user input):
    counted, not timed."""
    if side is not None and side.span is not None:
        return False
    if mapping == "livekit":
        return not (
            "lk.pii.user_input" in container.attributes or "lk.user_input" in container.attributes
        )
    return True


def timing_of(
    mapping: str, container: AgentSpan, members: Sequence[AgentSpan], side: Related | None
) -> TurnTiming | None:
    """The framework's timing of one reply (``members``: the container, its descendants, its
    ancestors and the related spans)."""
    user = None if side is None else side.span
    if mapping == "livekit":
        return livekit_trace.timing(container, members, user)
    return openai_agents_trace.timing(container, members, user, side is not None and side.streamed)


def check_of(
    mapping: str,
    conversation: str,
    container: AgentSpan,
    members: Sequence[AgentSpan],
    side: Related | None,
) -> list[Finding]:
    """The framework's own checks of one reply's spans."""
    if mapping == "livekit":
        return livekit_trace.check_spans(
            conversation, container, members, None if side is None else side.span
        )
    return openai_agents_trace.check_spans(conversation, members)


def turn_timings(spans: Sequence[AgentSpan], mapping: str) -> list[TurnTiming]:
    """Every timed reply in ``spans`` (grouped by trace), by the container's start."""
    by_trace: dict[str, list[AgentSpan]] = {}
    for span in spans:
        by_trace.setdefault(span.trace_id, []).append(span)
    out: list[tuple[int, TurnTiming]] = []
    for members in by_trace.values():
        sides = related(members, mapping)
        children: dict[str, list[AgentSpan]] = {}
        for span in members:
            if span.parent_id is not None:
                children.setdefault(span.parent_id, []).append(span)
        for container in (s for s in members if is_turn_container(s, mapping)):
            side = sides.get(container.span_id)
            mine = [container, *_descendants(container, children), *(side.spans if side else ())]
            timed = timing_of(mapping, container, mine, side)
            if timed is not None:
                out.append((container.start_ns, timed))
    return [t for _, t in sorted(out, key=lambda kv: kv[0])]


def split_window(
    spans: Sequence[AgentSpan], window: tuple[int, int], mapping: str
) -> TraceSplit | None:
    """A LiveKit or OpenAI Agents turn in ``window`` as a played agent's split (what
    :func:`voicelat.core.traces.agent_trace.split_from_spans` is for the chain mappings): the first
    reply that spoke, ``trace_multiple_turns`` when the window holds several."""
    lo, hi = window
    timed = turn_timings([s for s in spans if s.end_ns >= lo and s.start_ns <= hi], mapping)
    if not timed:
        return None
    chosen = next((t for t in timed if t.end is not None), timed[0])
    flags = [FLAG_MULTIPLE_TURNS] if len(timed) > 1 else []
    return TraceSplit(
        milestones=dict(chosen.raw),
        reported=dict(chosen.reported),
        flags=tuple(dict.fromkeys([*flags, *chosen.flags])),
        diagnosis=chosen.diagnosis,
    )
