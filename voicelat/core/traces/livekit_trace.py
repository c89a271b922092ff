"""LiveKit Agents' own spans of one reply, mapped onto voicelat's milestones (``--mapping livekit``).

Pure (no I/O). The span and attribute names are LiveKit's, read from livekit-agents' source
(docs/PRODUCTION.md cites the files and commits; the same names in 1.7.0 and 1.8.9):

* ``agent_turn`` (voice/agent_activity.py, ``_pipeline_reply_task``): one reply, a child of
  ``agent_session``; ``lk.e2e_latency`` (s) = its playback start - the user's
  ``stopped_speaking_at``, set once the reply has played; ``lk.interrupted``;
  ``lk.pii.user_input`` on a reply to user input.
* ``llm_node`` (voice/generation.py): ``lk.response.ttft`` (s from the node's start);
  ``lk.pii.response.text``. Under it ``llm_request`` with ``lk.llm_metrics`` (JSON LLMMetrics:
  ``ttft``, ``timestamp``, ``duration``).
* ``tts_node`` (voice/generation.py): ``lk.response.ttfb`` (s from the text first sent to the
  provider, NOT from the node's start, which opens with the reply). Under it ``tts_request``
  (tts/tts.py) with ``lk.tts_metrics`` (JSON TTSMetrics: ``ttfb`` from the first text pushed,
  ``duration`` from then to ``timestamp``, wall seconds; ``ttfb`` -1 when no audio came).
* ``agent_speaking`` (voice/agent_session.py, ``_update_agent_state``): a child of the
  ``agent_turn``, started at ``started_speaking_at``: the audio output's first frame as LiveKit's
  output reports it (RoomIO: self-reported when the frame is pushed to the track).
* ``user_turn`` (voice/audio_recognition.py): a sibling under ``agent_session``, from the user's
  speech start to the turn's commit; ``lk.end_of_turn_delay`` (s, commit - the VAD's end of
  speech) and ``lk.transcription_delay`` (s, the final transcript - the end of speech), both
  written 0 when LiveKit could not compute them; under it ``eou_detection`` with
  ``lk.eou.endpointing_delay``. LiveKit's end of speech is its VAD's END_OF_SPEECH moved back by
  the silence the VAD waited (``time.time() - ev.silence_duration - ev.inference_duration``):
  the hangover is the framework's own, already taken out.

The mapping (docs/PRODUCTION.md has the table): t=0 the user's end of speech (``agent_speaking``
start - ``lk.e2e_latency``, else ``user_turn`` end - ``lk.end_of_turn_delay``); endpointing to the
``user_turn``'s commit; stt to the final transcript when it came after the commit (else 0: LiveKit
commits on a final transcript); llm_ttft to the ``llm_node``'s first token; aggregation to the
first text pushed to the TTS; tts_ttfb to its first audio; transport to ``agent_speaking``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence

from voicelat.core.traces.agent_trace import (
    FLAG_INTERRUPTED,
    FLAG_LLM_EMPTY,
    FLAG_NO_TTFB,
    FLAG_PARTIAL,
    LLM_EMPTY_REASON,
    AgentSpan,
    TurnTiming,
    seconds_ns,
)
from voicelat.core.traces.trace_checks import Finding

__all__ = [
    "END_LABELS",
    "FLAG_EOU_UNMEASURED",
    "T0_LABELS",
    "check_spans",
    "claim_user_turns",
    "is_reply",
    "role",
    "timing",
]

TURN = "agent_turn"
USER_TURN = "user_turn"
_ROLES = {"llm_node": "llm", "tts_node": "tts", USER_TURN: "endpoint"}
#: The span stating the endpointing delay LiveKit waited: ``eou_detection`` (with a turn
#: detector model; 1.7) or ``eou_wait`` (1.8).
_EOU_SPANS = ("eou_wait", "eou_detection")

#: LiveKit wrote 0 for its end-of-turn delay (it could not compute it: no VAD end of speech, a
#: stale anchor, LiveKit issue #6093): t=0 is the turn's commit, endpointing 0.
FLAG_EOU_UNMEASURED = "trace_eou_unmeasured"

T0_LABELS: Mapping[str, str] = {
    "livekit_end_of_speech": "LiveKit's end of user speech (its VAD's end of speech, the "
    "silence it waited already taken out by LiveKit): agent_speaking start - lk.e2e_latency, "
    "or user_turn end - lk.end_of_turn_delay; endpointing is its whole turn decision",
    "livekit_turn_commit": "LiveKit's commit of the user turn (the user_turn span's end): its "
    "end-of-turn delay was written 0 (not measured), so endpointing is 0 and the time from the "
    "end of speech to the commit is not in e2e",
    "livekit_text_input": "a text turn (no user_turn: session.run / generate_reply with user "
    "input): the agent_turn's start; no endpointing, no STT",
}

END_LABELS: Mapping[str, str] = {
    "livekit_agent_speaking": "LiveKit's agent_speaking start: its audio output's first frame "
    "as the output reports it (RoomIO: when the frame is pushed to the track, self-reported), "
    "not the ear",
}

_NS_PER_S = 1_000_000_000


def role(span: AgentSpan) -> str | None:
    """``span``'s link in LiveKit's chain: endpoint (``user_turn``), llm, tts, or None."""
    return _ROLES.get(span.name)


def is_reply(span: AgentSpan) -> bool:
    """Whether ``span`` is a LiveKit reply container (``agent_turn``)."""
    return span.name == TURN


def _text_input(turn: AgentSpan) -> bool:
    return "lk.pii.user_input" in turn.attributes or "lk.user_input" in turn.attributes


def _anchor(turn: AgentSpan, members: Sequence[AgentSpan]) -> int:
    """When the reply was first heard by LiveKit's account (its playback start), else its end."""
    speaking = _first(members, "agent_speaking", turn.span_id)
    return speaking.start_ns if speaking is not None else turn.end_ns


def claim_user_turns(
    spans: Sequence[AgentSpan], members: Mapping[str, Sequence[AgentSpan]]
) -> dict[str, AgentSpan]:
    """The ``user_turn`` each ``agent_turn`` (by span id) answers, in one conversation.

    LiveKit puts the two side by side under ``agent_session``, linked by nothing but time: an
    ``agent_turn`` answers the last ``user_turn`` committed before its playback started and
    after the previous reply's (so one user turn feeds one reply; with preemptive generation
    the reply may start before the commit). ``members``: each agent_turn's descendants.
    """
    users = sorted((s for s in spans if s.name == USER_TURN), key=lambda s: s.end_ns)
    turns = sorted((s for s in spans if s.name == TURN), key=lambda s: s.start_ns)
    out: dict[str, AgentSpan] = {}
    taken: set[str] = set()
    previous = -1
    for turn in turns:
        anchor = _anchor(turn, members.get(turn.span_id, ()))
        found = [u for u in users if previous < u.end_ns <= anchor and u.span_id not in taken]
        if found:
            out[turn.span_id] = found[-1]
            taken.add(found[-1].span_id)
        previous = max(previous, anchor)
    return out


def _first(members: Sequence[AgentSpan], name: str, under: str | None = None) -> AgentSpan | None:
    found = [s for s in members if s.name == name and (under is None or s.parent_id == under)]
    return min(found, key=lambda s: (s.start_ns, s.end_ns)) if found else None


def _metrics(span: AgentSpan | None, key: str) -> dict[str, float]:
    """The numbers of a LiveKit metrics attribute (JSON), the unparseable left out."""
    raw = None if span is None else span.attributes.get(key)
    if not isinstance(raw, str):
        return {}
    try:
        doc = json.loads(raw)
    except ValueError:
        return {}
    if not isinstance(doc, dict):
        return {}
    return {
        k: float(v)
        for k, v in doc.items()
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    }


def _tts_times(members: Sequence[AgentSpan]) -> tuple[int, int] | None:
    """(first text pushed to the TTS, its first audio), wall ns, from the first ``tts_request``'s
    TTSMetrics: ``timestamp - duration`` is when its clock started (the first text pushed), on
    the spans' clock (the wall ``timestamp`` placed as the span was)."""
    requests = sorted((s for s in members if s.name == "tts_request"), key=lambda s: s.start_ns)
    for request in requests:
        m = _metrics(request, "lk.tts_metrics")
        ttfb = seconds_ns(m.get("ttfb"))  # -1 (no audio) is not a duration: None
        stamp, duration = m.get("timestamp"), seconds_ns(m.get("duration"))
        if ttfb is None or stamp is None or duration is None:
            continue
        # The metrics' timestamp is the agent's wall clock: placed as the span's times were.
        pushed = round(stamp * _NS_PER_S) + request.placed_offset_ns - duration
        return pushed, pushed + ttfb
    return None


def _delay(turn: AgentSpan, user: AgentSpan, key: str) -> int | None:
    """A user-side delay (s) as ns, from the user_turn, else the agent_turn (1.8 copies
    ``lk.end_of_turn_delay`` and ``lk.transcription_delay`` onto it); 0 stays 0 (unmeasured)."""
    value = seconds_ns(user.attributes.get(key))
    return seconds_ns(turn.attributes.get(key)) if value is None else value


def _user_side(
    turn: AgentSpan,
    members: Sequence[AgentSpan],
    user: AgentSpan,
    t0: int | None,
    raw: dict[str, int],
    reported: dict[str, float],
    flags: list[str],
) -> tuple[int, str]:
    """t=0, its label and the endpoint / transcript milestones of a voice turn.

    LiveKit commits a user turn (the ``user_turn`` span's end) once its endpointing delay has
    passed since the end of speech AND the final transcript is in. The endpoint is the end of
    that delay (``lk.eou.endpointing_delay`` of its ``eou_wait`` / ``eou_detection`` span, at
    most the commit); the transcript is the end of speech + ``lk.transcription_delay`` (at
    least the endpoint: what held the commit past the delay is STT's); the rest up to the LLM's
    first token (the commit, ``on_user_turn_completed``, the request) is llm_ttft's."""
    eot = _delay(turn, user, "lk.end_of_turn_delay")
    label = "livekit_end_of_speech"
    if eot:  # LiveKit writes 0 when it could not compute it
        reported["agent_reported_end_of_turn_delay_ms"] = eot / 1e6
        t0 = user.end_ns - eot if t0 is None else t0
    elif t0 is None:
        flags.append(FLAG_EOU_UNMEASURED)
        t0, label = user.end_ns, "livekit_turn_commit"
    eou = next(
        (_first(members, n, user.span_id) for n in _EOU_SPANS if _first(members, n, user.span_id)),
        None,
    )
    delay = None if eou is None else seconds_ns(eou.attributes.get("lk.eou.endpointing_delay"))
    if delay is not None:
        reported["agent_reported_endpointing_delay_ms"] = delay / 1e6
    endpoint = user.end_ns if delay is None or label != "livekit_end_of_speech" else t0 + delay
    raw["agent_endpoint"] = endpoint = min(max(endpoint, t0), user.end_ns)
    stt = _delay(turn, user, "lk.transcription_delay")
    if stt and label == "livekit_end_of_speech":
        reported["agent_reported_transcription_delay_ms"] = stt / 1e6
        raw["agent_stt_final"] = min(max(endpoint, t0 + stt), max(user.end_ns, endpoint))
    else:
        raw["agent_stt_final"] = user.end_ns
    return t0, label


def timing(
    turn: AgentSpan, members: Sequence[AgentSpan], user: AgentSpan | None
) -> TurnTiming | None:
    """The reply's t=0, end and raw milestones; None for a reply to no one (a greeting: no
    ``user_turn`` and no user input) or one that never spoke (no ``agent_speaking``, no TTS)."""
    if user is None and not _text_input(turn):
        return None
    flags: list[str] = []
    reported: dict[str, float] = {}
    raw: dict[str, int] = {}
    speaking = _first(members, "agent_speaking", turn.span_id)
    e2e = seconds_ns(turn.attributes.get("lk.e2e_latency"))
    t0: int | None = None
    t0_label = "livekit_end_of_speech"
    if e2e is not None:
        reported["agent_reported_e2e_latency_ms"] = e2e / 1e6
    if speaking is not None and e2e is not None:
        t0 = speaking.start_ns - e2e
    if user is not None:
        t0, t0_label = _user_side(turn, members, user, t0, raw, reported, flags)
    else:
        t0, t0_label = turn.start_ns, "livekit_text_input"
        raw["agent_endpoint"] = raw["agent_stt_final"] = t0
    llm = _first(members, "llm_node")
    if llm is not None:
        ttft = seconds_ns(llm.attributes.get("lk.response.ttft"))
        if ttft is None:  # the request's own metrics (-1 when no token came)
            request = _first([s for s in members if s.start_ns >= llm.start_ns], "llm_request")
            ttft = seconds_ns(_metrics(request, "lk.llm_metrics").get("ttft"))
            start = llm.start_ns if request is None else request.start_ns
        else:
            start = llm.start_ns
        if ttft is None:
            flags.append(FLAG_NO_TTFB)
        else:
            raw["agent_llm_first_token"] = start + ttft
            reported["agent_reported_llm_ttfb_ms"] = ttft / 1e6
    tts = _tts_times(members)
    tts_node = _first(members, "tts_node")
    node_ttfb = (
        None if tts_node is None else seconds_ns(tts_node.attributes.get("lk.response.ttfb"))
    )
    if node_ttfb is not None:
        reported["agent_reported_tts_ttfb_ms"] = node_ttfb / 1e6
    if tts is not None:
        raw["agent_tts_request"], raw["agent_tts_first_byte"] = tts
        reported.setdefault("agent_reported_tts_ttfb_ms", (tts[1] - tts[0]) / 1e6)
    elif tts_node is not None:
        flags.append(FLAG_NO_TTFB)
    if llm is None or tts_node is None:
        flags.append(FLAG_PARTIAL)
    if turn.attributes.get("lk.interrupted") is True:
        flags.append(FLAG_INTERRUPTED)
    diagnosis = None
    if tts_node is None and llm is not None:
        text = llm.attributes.get("lk.pii.response.text", llm.attributes.get("lk.response.text"))
        if isinstance(text, str) and not text.strip():
            diagnosis = LLM_EMPTY_REASON
            flags.append(FLAG_LLM_EMPTY)
    end: int | None
    if speaking is not None:
        end, end_label = speaking.start_ns, "livekit_agent_speaking"
    else:
        end, end_label = raw.get("agent_tts_first_byte"), "tts_first_byte"
    if end is None and not raw.keys() - {"agent_endpoint", "agent_stt_final"} and diagnosis is None:
        return None  # nothing of a reply: no LLM token, no audio
    return TurnTiming(
        t0=t0,
        end=end,
        raw=raw,
        t0_label=t0_label,
        end_label=end_label,
        # LiveKit's end of speech already has its VAD's silence taken out: endpointing holds it.
        hangover_ns=None,
        flags=tuple(dict.fromkeys(flags)),
        reported=reported,
        hangover_source="framework" if t0_label == "livekit_end_of_speech" else None,
        diagnosis=diagnosis,
    )


def check_spans(
    conversation: str, turn: AgentSpan, members: Sequence[AgentSpan], user: AgentSpan | None
) -> list[Finding]:
    """LiveKit's own figures checked against its spans: ``ttfb_missing`` (an llm_node without
    ``lk.response.ttft``, a tts_node without ``lk.response.ttfb``, a tts_request whose metrics
    say -1), ``ttfb_zero``, ``ttfb_exceeds_span`` (a TTFB longer than its node), and
    ``playback_before_audio`` (``agent_speaking`` before the TTS's first byte is checked by the
    caller with the timing)."""
    out: list[Finding] = []
    for span in members:
        key = {"llm_node": "lk.response.ttft", "tts_node": "lk.response.ttfb"}.get(span.name)
        if key is None:
            if span.name == "tts_request" and "lk.tts_metrics" in span.attributes:
                ttfb = _metrics(span, "lk.tts_metrics").get("ttfb")
                if ttfb is None or ttfb == -1:
                    why = "is -1 (no audio came)" if ttfb == -1 else "is missing or unreadable"
                    detail = f"tts_request's lk.tts_metrics ttfb {why}"
                    out.append(Finding("ttfb_missing", conversation, span.span_id, detail))
            continue
        value = span.attributes.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            out.append(
                Finding("ttfb_missing", conversation, span.span_id, f"{span.name} has no {key}")
            )
            continue
        if value == 0:
            out.append(Finding("ttfb_zero", conversation, span.span_id, f"{span.name} {key} is 0"))
        elif value < 0:
            detail = f"{span.name} {key} is negative ({value:.3f} s)"
            out.append(Finding("first_byte_before_request", conversation, span.span_id, detail))
        elif value * _NS_PER_S > span.end_ns - span.start_ns:
            detail = (
                f"{span.name} {key} {value * 1e3:.1f} ms > its span "
                f"{(span.end_ns - span.start_ns) / 1e6:.1f} ms"
            )
            out.append(Finding("ttfb_exceeds_span", conversation, span.span_id, detail))
    if user is not None:
        eot = user.attributes.get("lk.end_of_turn_delay")
        if eot == 0:
            detail = "user_turn lk.end_of_turn_delay is 0 (LiveKit could not measure it)"
            out.append(Finding("delay_zero", conversation, user.span_id, detail))
    return out
