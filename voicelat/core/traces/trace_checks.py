"""Conformance checks on an agent's own spans: is its tracing telling the truth?

Pure (plain integers, no I/O). ``voicelat import`` runs them on every turn it reads
(docs/PRODUCTION.md); ``voicelat import --check`` prints only what they find, a linter for a
team's tracing. Each finding names its check, the span and what is wrong, in one line:

``ttfb_zero``
    a time to first byte of exactly 0: not measured (Pipecat without
    ``enable_metrics=True`` reports 0 on some services; pipecat#2592, #4627);
``ttfb_missing``
    an llm or tts span (or Pipecat's stt span) without its time to first byte: Pipecat's first
    turn often has no STT TTFB; without ``enable_metrics`` none has one;
``ttfb_exceeds_span``
    a time to first byte longer than its own span: the first byte would come after the span
    ended (a TTFB clock started elsewhere, or stopped late);
``first_byte_before_request``
    a first byte before its request: a negative TTFB, or the reply's first TTS byte before the
    LLM was asked;
``overlapping_turns``
    two turns of one conversation overlapping in time (a turn container not closed, two
    pipelines writing one conversation id);
``playback_before_audio``
    the agent's "bot started speaking" stamped before its first synthesized audio existed:
    the playback time cannot be right;
``delay_zero``
    a stated delay of exactly 0 that cannot be: LiveKit writes ``lk.end_of_turn_delay`` 0 on a
    ``user_turn`` when it could not measure it (no VAD end of speech, a stale anchor);
``clock_jump``
    a span outside its parent's time by more than :data:`CLOCK_TOLERANCE_NS` where the two
    come from different exporters (resources): their clocks disagree.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from voicelat.core.traces.agent_trace import AgentSpan, span_role, ttfb_key

__all__ = [
    "CHECKS",
    "CLOCK_TOLERANCE_NS",
    "Finding",
    "check_clocks",
    "check_overlaps",
    "check_playback",
    "check_ttfb",
]

#: Every check, with what it means (the summary's ``traced.checks`` and ``--check``'s help).
CHECKS: Mapping[str, str] = {
    "ttfb_zero": "a time to first byte of exactly 0: not measured",
    "ttfb_missing": "an llm or tts span (or Pipecat's stt span) without its time to first byte",
    "ttfb_exceeds_span": "a time to first byte longer than its own span",
    "first_byte_before_request": "a first byte before its request (negative TTFB, or TTS "
    "audio before the LLM was asked)",
    "overlapping_turns": "two turns of one conversation overlap in time",
    "playback_before_audio": "playback stamped before the first synthesized audio existed",
    "clock_jump": "a span outside its parent's time where the two exporters' clocks disagree",
    "delay_zero": "a stated delay of exactly 0 that cannot be (LiveKit's end-of-turn delay when "
    "it could not measure it)",
}

#: How far a child span may stick out of a parent from another exporter before the clocks are
#: said to disagree: same-host clocks agree to microseconds, NTP-synced hosts to ~1 ms.
CLOCK_TOLERANCE_NS = 1_000_000

_NS_PER_S = 1_000_000_000


@dataclass(frozen=True)
class Finding:
    """One thing a check found: which check, where (conversation, span) and what, one line."""

    check: str
    conversation: str
    span_id: str | None
    detail: str

    def line(self) -> str:
        """The finding as ``--check`` prints it."""
        where = f"conversation {self.conversation}" + (
            f" span {self.span_id}" if self.span_id else ""
        )
        return f"{self.check}: {where}: {self.detail}"


def _ms(ns: int | float) -> str:
    return f"{ns / 1e6:.1f} ms"


def _raw_seconds(value: object) -> float | None:
    """A TTFB attribute as a float, sign kept (the mapping drops negatives; a check reports them)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return None
    return float(value)


def check_ttfb(spans: Sequence[AgentSpan], conversation: str, mapping: str) -> list[Finding]:
    """``ttfb_zero``, ``ttfb_missing``
        an llm or tts span (or Pipecat's stt span) without its time to first byte: Pipecat's first
        turn often has no STT TTFB; without ``enable_metrics`` none has one;
    ``ttfb_exceeds_span`` and a negative TTFB on the stt, llm and tts spans."""
    key = ttfb_key(mapping)
    out: list[Finding] = []
    for span in spans:
        role = span_role(span, mapping)
        if role not in ("stt", "llm", "tts"):
            continue
        ttfb = _raw_seconds(span.attributes.get(key))
        if ttfb is None:
            if role != "stt" or mapping == "pipecat":  # elsewhere an stt TTFB is a bonus
                detail = f"{span.name} has no {key}"
                out.append(Finding("ttfb_missing", conversation, span.span_id, detail))
            continue
        duration = span.end_ns - span.start_ns
        if ttfb == 0:
            out.append(Finding("ttfb_zero", conversation, span.span_id, f"{span.name} {key} is 0"))
        elif ttfb < 0:
            out.append(
                Finding(
                    "first_byte_before_request",
                    conversation,
                    span.span_id,
                    f"{span.name} {key} is negative ({ttfb:.3f} s)",
                )
            )
        elif ttfb * _NS_PER_S > duration and role != "stt":
            # Not Pipecat's stt: its TTFB runs from the end of speech, which may precede the
            # span (a streaming STT opens it on the first transcript).
            out.append(
                Finding(
                    "ttfb_exceeds_span",
                    conversation,
                    span.span_id,
                    f"{span.name} {key} {_ms(ttfb * _NS_PER_S)} > its span {_ms(duration)}",
                )
            )
    return out


def check_overlaps(turns: Sequence[AgentSpan], conversation: str) -> list[Finding]:
    """``overlapping_turns``: each turn container starting before the previous one ended."""
    out: list[Finding] = []
    ordered = sorted(turns, key=lambda s: (s.start_ns, s.end_ns))
    for prev, cur in itertools.pairwise(ordered):
        if cur.start_ns < prev.end_ns:
            out.append(
                Finding(
                    "overlapping_turns",
                    conversation,
                    cur.span_id,
                    f"turn {cur.span_id} starts {_ms(prev.end_ns - cur.start_ns)} before "
                    f"turn {prev.span_id} ends",
                )
            )
    return out


def check_playback(
    conversation: str,
    turn_span_id: str,
    first_audio_ns: int | None,
    tts_first_byte_ns: int | None,
    llm_start_ns: int | None,
) -> list[Finding]:
    """``playback_before_audio`` (the stated first audio out before the first TTS byte) and
    ``first_byte_before_request`` (the first TTS byte before the LLM span began)."""
    out: list[Finding] = []
    if (
        first_audio_ns is not None
        and tts_first_byte_ns is not None
        and first_audio_ns < tts_first_byte_ns
    ):
        out.append(
            Finding(
                "playback_before_audio",
                conversation,
                turn_span_id,
                f"the bot started speaking {_ms(tts_first_byte_ns - first_audio_ns)} "
                "before its TTS's first byte",
            )
        )
    if (
        llm_start_ns is not None
        and tts_first_byte_ns is not None
        and tts_first_byte_ns < llm_start_ns
    ):
        out.append(
            Finding(
                "first_byte_before_request",
                conversation,
                turn_span_id,
                f"the TTS's first byte comes {_ms(llm_start_ns - tts_first_byte_ns)} "
                "before the LLM was asked",
            )
        )
    return out


def check_clocks(spans: Sequence[AgentSpan], conversation: str) -> list[Finding]:
    """``clock_jump``: a child from another exporter than its parent's, outside its parent's
    extent by more than :data:`CLOCK_TOLERANCE_NS` (one finding per pair of exporters)."""
    by_id = {s.span_id: s for s in spans}
    out: list[Finding] = []
    seen: set[tuple[str, str]] = set()
    for span in spans:
        parent = by_id.get(span.parent_id or "")
        if parent is None or parent.resource == span.resource:
            continue
        early = parent.start_ns - span.start_ns
        late = span.end_ns - parent.end_ns
        off = max(early, late)
        pair = (parent.resource, span.resource)
        if off <= CLOCK_TOLERANCE_NS or pair in seen:
            continue
        seen.add(pair)
        side = "starts before" if early >= late else "ends after"
        out.append(
            Finding(
                "clock_jump",
                conversation,
                span.span_id,
                f"{span.name} from {span.resource or 'an unnamed exporter'} {side} its parent "
                f"{parent.name} from {parent.resource or 'an unnamed exporter'} by {_ms(off)}",
            )
        )
    return out
