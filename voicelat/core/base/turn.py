"""A finished turn: its milestones, the segments that sum to e2e, per-stage figures and sub-spans."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from voicelat.core.base.contract import ALL_SEGMENTS, CRITICAL_PATH, MILESTONES, SEGMENTS
from voicelat.core.base.secrets import scrub_json, scrub_secrets

#: Flag of a live turn the user talked over (barge-in): its reply was cut short, so it is kept
#: apart from the headline statistics even when its e2e was measured.
INTERRUPTED = "interrupted"
#: Flag of an agent turn whose trace states no VAD hangover: it is counted in ``stt``, not in
#: ``endpointing`` (the summary counts such turns: ``counts.hangover_unstated``).
HANGOVER_UNSTATED = "trace_hangover_unstated"


@dataclass(frozen=True, slots=True)
class SpanRecord:
    """A network phase of one stage's request, in ns relative to the turn's ``t0_ns``."""

    stage: str
    name: str
    start_ns: int
    end_ns: int

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(frozen=True)
class Turn:
    """One speech-to-speech turn. All times are integer ns; milestones are relative to ``t0_ns``.

    ``t0_ns`` is the monotonic time of the first sample of the turn's input audio.
    """

    index: int
    fixture: str
    t0_ns: int
    milestones: dict[str, int]
    segments: dict[str, int]
    e2e_ns: int | None
    figures: dict[str, float | int | None] = field(default_factory=dict)
    spans: tuple[SpanRecord, ...] = ()
    repeat: int = 0
    warmup: bool = False
    cold: bool = False
    cold_stages: tuple[str, ...] = ()
    failed: bool = False
    failure_stage: str | None = None
    failure_reason: str | None = None
    flags: tuple[str, ...] = ()
    transcript: str | None = None
    expected: str | None = None
    reply: str | None = None
    wall_time_ns: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Every turn passes here on its way to any output (turns.jsonl, turns.csv, OTLP, the
        # reports, the TUI): the texts a server sent (a transcript, a reply, a call id in
        # ``extra``) are scrubbed of every registered key, as failure reasons already are.
        # (Each call returns at once while no key is registered.)
        for name in ("failure_reason", "transcript", "reply"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, scrub_secrets(value))
        object.__setattr__(self, "flags", tuple(scrub_secrets(f) for f in self.flags))
        object.__setattr__(self, "extra", scrub_json(self.extra))

    @property
    def ok(self) -> bool:
        """A complete, measured turn: not failed and with an e2e."""
        return not self.failed and self.e2e_ns is not None

    @property
    def interrupted(self) -> bool:
        """A live turn the user talked over (barge-in)."""
        return INTERRUPTED in self.flags

    @property
    def headline(self) -> bool:
        """Counts in the headline statistics: ok, warm, not a warm-up turn, not interrupted."""
        return self.ok and not self.cold and not self.warmup and not self.interrupted

    def since_speech_end(self, milestone: str) -> int | None:
        """A milestone on the timeline that starts at ``speech_end`` (ns)."""
        t = self.milestones.get(milestone)
        end = self.milestones.get("speech_end")
        return None if t is None or end is None else t - end

    def largest_segment(self) -> tuple[str, int] | None:
        if not self.segments:
            return None
        name = max(ALL_SEGMENTS, key=lambda s: self.segments.get(s, -1))
        return name, self.segments[name]

    def spans_of(self, stage: str) -> dict[str, int]:
        """Durations (ns) of a stage's network phases; repeated names keep the first occurrence."""
        out: dict[str, int] = {}
        for s in self.spans:
            if s.stage == stage and s.name not in out:
                out[s.name] = s.duration_ns
        return out


__all__ = ["CRITICAL_PATH", "INTERRUPTED", "MILESTONES", "SEGMENTS", "SpanRecord", "Turn"]
