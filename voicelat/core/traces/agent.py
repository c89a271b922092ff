"""The recorder of an agent turn: a running voice agent, seen from outside, answers the user.

Sans-I/O like :class:`~voicelat.core.traces.s2s.S2SRecorder`, whose interface it keeps (the engine
marks, the stage reports its events under ``"agent"``). Black-box milestones
(``contract.AGENT_MILESTONES``): ``first_audio`` is the first non-empty ``Audio`` (the first
reply byte at voicelat), ``first_audible`` first audio + the reply's leading silence (from the
onset the engine found), ``response_done`` the stage's ``Done``. Its segments are
``contract.AGENT_SEGMENTS`` (``agent_response``, ``leading_silence``, ``playout``).

With the agent's traces (:meth:`AgentRecorder.add_trace`), the agent's own milestones
(``agent_endpoint`` ... ``agent_tts_first_byte``, ``agent_tts_request`` when the mapping sees
it) split ``agent_response`` open into the cascade's names plus ``transport`` (``contract.AGENT_TRACED_SEGMENTS``). Trace milestones are
placed inside ``[speech_end, first_audio]`` and made monotonic (a clock offset or a missing span
must not make a segment negative); a moved value flags the turn ``trace_clamped`` and the raw
values stay in ``extra["agent_trace_raw_ns"]``; a missing one takes the next known boundary
(the segment ending at it holds the time, the next one is 0) and flags
``trace_partial:<milestone>``. Whatever
the path, the black-box total is kept as the figure ``agent_response_ns`` (speech_end -> first
reply byte) and the agent's own reported figures as ``agent_reported_*_ms``.
"""

from __future__ import annotations

from voicelat.core.base.contract import (
    AGENT_CRITICAL_PATH,
    AGENT_KIND,
    AGENT_MILESTONES,
    AGENT_OPTIONAL_TRACE_MILESTONES,
    AGENT_SEGMENTS,
    AGENT_STRICT_ORDER,
    AGENT_TRACE_MILESTONES,
    AGENT_TRACED_PATH,
    AGENT_TRACED_SEGMENTS,
)
from voicelat.core.base.turn import Turn
from voicelat.core.measure.events import Audio, Delta, Done, Final, Interrupted, StageEvent
from voicelat.core.measure.metrics import first_audible_ns, tts_figures
from voicelat.core.measure.recorder import TurnRecorder
from voicelat.core.traces.agent_trace import TraceSplit

__all__ = [
    "AGENT_RUNNER_MILESTONES",
    "AgentRecorder",
    "describe_event",
    "is_agent",
    "place_trace",
]

#: What the engine observes itself on an agent turn.
AGENT_RUNNER_MILESTONES = frozenset(
    {"speech_start", "speech_end", "first_audible", "output_first_audible"}
)

#: The flag of an agent turn without a usable trace (black-box segments only).
UNTRACED = "untraced"
TRACE_CLAMPED = "trace_clamped"


def is_agent(turn: Turn) -> bool:
    """Whether ``turn`` went through a black-box agent."""
    return turn.extra.get("kind") == AGENT_KIND


def place_trace(raw: dict[str, int], lo: int, hi: int) -> tuple[dict[str, int], list[str]]:
    """The agent milestones of ``raw`` placed monotonically inside ``[lo, hi]``, in path order,
    and the flags saying what moved (``trace_clamped``) or was missing
    (``trace_partial:<name>``).

    A missing milestone takes the next known boundary (``hi`` after the last): the time up
    to there stays in the segment that ends at the missing milestone, the agent's own work,
    rather than being pushed into the next one (a missing TTS span must not turn the agent's
    synthesis time into ``transport``). An optional one
    (:data:`~voicelat.core.base.contract.AGENT_OPTIONAL_TRACE_MILESTONES`) takes the previous
    boundary, unflagged: its segment is 0."""
    filled: dict[str, int] = {}
    after = hi
    for name in reversed(AGENT_TRACE_MILESTONES):
        value = raw.get(name)
        if value is None and name in AGENT_OPTIONAL_TRACE_MILESTONES:
            continue
        filled[name] = after = after if value is None else value
    flags = [
        f"trace_partial:{name}"
        for name in AGENT_TRACE_MILESTONES
        if name not in raw and name not in AGENT_OPTIONAL_TRACE_MILESTONES
    ]
    placed: dict[str, int] = {}
    prev = lo
    for name in AGENT_TRACE_MILESTONES:
        value = min(max(filled.get(name, prev), prev), hi)
        if name in raw and value != raw[name] and TRACE_CLAMPED not in flags:
            flags.append(TRACE_CLAMPED)
        placed[name] = prev = value
    return placed, flags


def describe_event(event: StageEvent) -> str:
    """A short name for a stage event (what a timeout reports as the last thing seen)."""
    return type(event).__name__


class AgentRecorder(TurnRecorder):
    """Collects one agent turn's events (stage ``"agent"``); :meth:`finish` builds the Turn."""

    path = AGENT_CRITICAL_PATH
    segment_names = AGENT_SEGMENTS
    strict_order = AGENT_STRICT_ORDER
    runner_milestones = AGENT_RUNNER_MILESTONES

    _split: TraceSplit | None = None
    #: The trace milestones as placed on the path (empty: black-box).
    _placed: dict[str, int] = {}  # noqa: RUF012 (replaced, never mutated)

    def add_trace(self, split: TraceSplit | None) -> None:
        """The agent's own account of this turn (None: its spans did not arrive or map)."""
        self._split = split

    def flag(self, flag: str) -> None:
        # The S2S machinery flags a server VAD that never spoke; an agent endpoints unseen by
        # design (its endpoint is a trace milestone or nothing), so that flag says nothing.
        if flag != "endpoint:not_detected":
            super().flag(flag)

    def last_event(self) -> str:
        """The last event the stage reported this turn, for a timeout's reason."""
        events = self._events["agent"]
        return describe_event(events[-1]) if events else "none (nothing since the turn started)"

    def finish(self) -> Turn:
        self.extra("kind", AGENT_KIND)
        black_box = self.milestones()
        self._explain_silence(black_box)
        self._placed = self._traced(black_box)
        if self._placed:
            self.path, self.segment_names = AGENT_TRACED_PATH, AGENT_TRACED_SEGMENTS
            return super().finish()
        # Flagged for this build of the turn only: a call's turn is built once before its
        # trace is read (for the call's own bookkeeping) and again after.
        fresh = UNTRACED not in self._flags
        self.flag(UNTRACED)
        try:
            return super().finish()
        finally:
            if fresh:
                self._flags.remove(UNTRACED)

    def _explain_silence(self, found: dict[str, int]) -> None:
        """A turn with no reply audio fails with what the agent's trace says went wrong (its
        LLM answered with no text) rather than only "no first_audio" or a timeout: the reason
        names the cause, the earlier one (if any) follows it."""
        diagnosis = None if self._split is None else self._split.diagnosis
        if diagnosis is None or "first_audio" in found:
            return
        if self._failure is None:
            self._failure = ("agent", f"{diagnosis}: the agent sent no reply audio")
        else:
            stage, reason = self._failure
            self._failure = ("agent", f"{diagnosis} ({stage}: {reason})")

    def _traced(self, found: dict[str, int]) -> dict[str, int]:
        """The placed trace milestones (empty: the turn stays black-box); records the split's
        flags, reported figures and raw values on the way."""
        split = self._split
        if split is None:
            return {}
        for flag in split.flags:
            self.flag(flag)
        for name, value in sorted(split.reported.items()):
            self.figure(name, value)
        raw = {m: int(split.milestones[m]) for m in AGENT_TRACE_MILESTONES if m in split.milestones}
        if not raw:
            return {}
        self.extra("agent_trace_raw_ns", {m: v - self.t0_ns for m, v in raw.items()})
        lo, hi = found.get("speech_end"), found.get("first_audio")
        if lo is None or hi is None or hi < lo:
            return {}  # nothing to place them between: the turn failed before the reply
        placed, flags = place_trace(raw, lo, hi)
        for flag in flags:
            self.flag(flag)
        return placed

    def milestones(self) -> dict[str, int]:
        found = dict(self._marks)
        ev = self._events["agent"]
        audio = [e for e in ev if isinstance(e, Audio) and e.pcm]
        if audio:
            found["first_audio"] = audio[0].t_ns
        done = next((e for e in ev if isinstance(e, Done)), None)
        if done is not None:
            found["response_done"] = done.t_ns
        if "first_audible" not in found and self._onset_sample is not None:
            audible = first_audible_ns(audio, self._onset_sample)
            if audible is not None:
                found["first_audible"] = audible
        found.update(self._placed)
        return {m: found[m] for m in AGENT_MILESTONES if m in found}

    def transcript(self) -> str | None:
        """What the agent heard, when its transport reports it (most do not)."""
        finals = [e.text.strip() for e in self._events["agent"] if isinstance(e, Final)]
        return " ".join(t for t in finals if t) or None

    def reply(self) -> str | None:
        """The reply's text, when the transport carries it."""
        deltas = [e.content for e in self._events["agent"] if isinstance(e, Delta)]
        return "".join(deltas).strip() or None

    def _stage_figures(self, absolute: dict[str, int]) -> dict[str, float | int | None]:
        ev = self._events["agent"]
        audio = [e for e in ev if isinstance(e, Audio)]
        # The reply's length, the gaps a caller hears in it and its delivery's real-time factor.
        tts = tts_figures(absolute.get("first_audio"), audio, absolute.get("response_done"))
        out: dict[str, float | int | None] = {
            "agent" + k[3:]: v for k, v in tts.items() if k.startswith("tts_")
        }
        out["agent_interrupted"] = int(any(isinstance(e, Interrupted) for e in ev))
        end, first = absolute.get("speech_end"), absolute.get("first_audio")
        # The measured black-box total, beside the traced split on a traced turn.
        out["agent_response_ns"] = first - end if end is not None and first is not None else None
        return out
